#include "lib/checkpoint/ledger.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

namespace scout::checkpoint {
namespace {

ReplayCycle cycle(std::int64_t n, ReplayOutcome outcome, bool full = false) {
  ReplayCycle c;
  c.cycle = n;
  c.outcome = outcome;
  c.full_sweep = full;
  c.source = "cycle" + std::to_string(n) + ".json";
  return c;
}

std::string id(const LedgerCheckpoint* c) {
  return c ? c->id : "none";
}

TEST(Ledger, CheckpointIsVerifiedAfterTwoConsecutiveCleanCycles) {
  Ledger l;
  l.job = "j";
  ledger_add_checkpoint(l, "/c/1", CheckpointState::pending, "ok", "t");
  EXPECT_EQ(id(l.latest()), "/c/1");
  EXPECT_EQ(id(l.candidate()), "/c/1");
  EXPECT_EQ(id(l.verified()), "none");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(1, ReplayOutcome::clean), "t").ok());
  EXPECT_EQ(id(l.verified()), "none");
  auto ch = ledger_apply_replay(l, cycle(2, ReplayOutcome::clean), "t");
  ASSERT_TRUE(ch.ok());
  EXPECT_EQ(ch->verified, std::vector<std::string>{"/c/1"});
  EXPECT_EQ(id(l.verified()), "/c/1");
  EXPECT_EQ(id(l.candidate()), "none");
}

TEST(Ledger, CycleBeforeTheCheckpointDoesNotCount) {
  Ledger l;
  ASSERT_TRUE(ledger_apply_replay(l, cycle(1, ReplayOutcome::clean), "t").ok());
  ledger_add_checkpoint(l, "/c/1", CheckpointState::pending, "ok", "t");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(2, ReplayOutcome::clean), "t").ok());
  EXPECT_EQ(id(l.verified()), "none");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(3, ReplayOutcome::clean), "t").ok());
  EXPECT_EQ(id(l.verified()), "/c/1");
}

TEST(Ledger, CycleCountsOnlyForCheckpointsSavedBeforeItBegan) {
  Ledger l;
  ledger_add_checkpoint(l, "/c/step_1", CheckpointState::pending, "ok", "t");
  ledger_add_checkpoint(l, "/c/step_2", CheckpointState::pending, "ok", "t");
  auto c1 = cycle(1, ReplayOutcome::clean);
  c1.after = "step_1";  // the cycle began before step_2 was saved
  ASSERT_TRUE(ledger_apply_replay(l, c1, "t").ok());
  auto c2 = cycle(2, ReplayOutcome::clean);
  c2.after = "/c/step_2";
  ASSERT_TRUE(ledger_apply_replay(l, c2, "t").ok());
  EXPECT_EQ(id(l.verified()), "/c/step_1");
  EXPECT_EQ(l.checkpoints[1].clean_cycles, 1);
  EXPECT_EQ(id(l.candidate()), "/c/step_2");
}

TEST(Ledger, UnclearCycleOrGapRestartsTheRun) {
  Ledger l;
  ledger_add_checkpoint(l, "/c/1", CheckpointState::pending, "ok", "t");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(1, ReplayOutcome::clean), "t").ok());
  ASSERT_TRUE(ledger_apply_replay(l, cycle(2, ReplayOutcome::unclear), "t").ok());
  ASSERT_TRUE(ledger_apply_replay(l, cycle(3, ReplayOutcome::clean), "t").ok());
  EXPECT_EQ(id(l.verified()), "none");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(5, ReplayOutcome::clean), "t").ok());  // cycle 4 unseen
  EXPECT_EQ(id(l.verified()), "none");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(6, ReplayOutcome::clean), "t").ok());
  EXPECT_EQ(id(l.verified()), "/c/1");
}

TEST(Ledger, SdcRejectsEveryUnverifiedCheckpointAndKeepsVerified) {
  Ledger l;
  ledger_add_checkpoint(l, "/c/1", CheckpointState::pending, "ok", "t");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(1, ReplayOutcome::clean), "t").ok());
  ASSERT_TRUE(ledger_apply_replay(l, cycle(2, ReplayOutcome::clean), "t").ok());
  ledger_add_checkpoint(l, "/c/2", CheckpointState::pending, "ok", "t");
  ledger_add_checkpoint(l, "/c/3", CheckpointState::pending, "ok", "t");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(3, ReplayOutcome::clean), "t").ok());
  auto ch = ledger_apply_replay(l, cycle(4, ReplayOutcome::sdc), "t");
  ASSERT_TRUE(ch.ok());
  EXPECT_EQ(ch->rejected, (std::vector<std::string>{"/c/2", "/c/3"}));
  EXPECT_EQ(id(l.verified()), "/c/1");
  EXPECT_EQ(id(l.latest()), "/c/1");
  EXPECT_EQ(id(l.candidate()), "none");
}

TEST(Ledger, NewerCheckpointSupersedesVerified) {
  Ledger l;
  ledger_add_checkpoint(l, "/c/1", CheckpointState::pending, "ok", "t");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(1, ReplayOutcome::clean), "t").ok());
  ledger_add_checkpoint(l, "/c/2", CheckpointState::pending, "ok", "t");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(2, ReplayOutcome::clean), "t").ok());
  EXPECT_EQ(id(l.verified()), "/c/1");
  EXPECT_EQ(id(l.candidate()), "/c/2");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(3, ReplayOutcome::clean), "t").ok());
  EXPECT_EQ(id(l.verified()), "/c/2");
  EXPECT_EQ(l.checkpoints[0].state, CheckpointState::superseded);
}

TEST(Ledger, CorruptCheckpointIsNeverLatest) {
  Ledger l;
  ledger_add_checkpoint(l, "/c/1", CheckpointState::pending, "ok", "t");
  ledger_add_checkpoint(l, "/c/2", CheckpointState::corrupt, "bad", "t");
  EXPECT_EQ(id(l.latest()), "/c/1");
  EXPECT_FALSE(ledger_add_checkpoint(l, "/c/2", CheckpointState::pending, "again", "t").changed);
}

TEST(Ledger, StaleCycleIsBadInputAndRepeatIsNoOp) {
  Ledger l;
  ASSERT_TRUE(ledger_apply_replay(l, cycle(5, ReplayOutcome::clean), "t").ok());
  auto again = ledger_apply_replay(l, cycle(5, ReplayOutcome::clean), "t");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed);
  auto stale = ledger_apply_replay(l, cycle(4, ReplayOutcome::clean), "t");
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, ExitCode::bad_input);
}

TEST(Ledger, SelectionFollowsTheRetrievalRules) {
  Ledger l;
  ledger_add_checkpoint(l, "/c/1", CheckpointState::pending, "ok", "t");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(1, ReplayOutcome::clean), "t").ok());
  ASSERT_TRUE(ledger_apply_replay(l, cycle(2, ReplayOutcome::clean), "t").ok());
  ledger_add_checkpoint(l, "/c/2", CheckpointState::pending, "ok", "t");
  EXPECT_EQ(id(select_checkpoint(l, FailureKind::sdc, {}).checkpoint), "/c/1");
  EXPECT_EQ(id(select_checkpoint(l, FailureKind::machine_lost, {}).checkpoint), "/c/1");
  EXPECT_EQ(id(select_checkpoint(l, FailureKind::straggler, {}).checkpoint), "/c/2");
  EXPECT_EQ(id(select_checkpoint(l, FailureKind::hang, {}).checkpoint), "/c/1");  // no sweep yet
  EXPECT_EQ(id(select_checkpoint(l, FailureKind::unknown, cycle(3, ReplayOutcome::clean, true)).checkpoint), "/c/2");
  EXPECT_EQ(id(select_checkpoint(l, FailureKind::hang, cycle(3, ReplayOutcome::sdc, true)).checkpoint), "/c/1");
  // A recorded full sweep after the latest checkpoint counts.
  ASSERT_TRUE(ledger_apply_replay(l, cycle(3, ReplayOutcome::clean, true), "t").ok());
  auto s = select_checkpoint(l, FailureKind::hang, {});
  EXPECT_EQ(id(s.checkpoint), "/c/2");
  EXPECT_EQ(s.rule, "clean_full_sweep_use_latest");
}

TEST(Ledger, JsonRoundTripAndStrictReader) {
  Ledger l;
  l.job = "j";
  ledger_add_checkpoint(l, "/c/1", CheckpointState::pending, "ok", "t");
  ASSERT_TRUE(ledger_apply_replay(l, cycle(1, ReplayOutcome::clean, true), "t").ok());
  auto j = nlohmann::json::parse(ledger_to_json(l).dump());
  auto back = ledger_from_json(j, "x");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(nlohmann::json(ledger_to_json(*back)), j);
  j["checkpoints"][0]["state"] = "bogus";
  auto bad = ledger_from_json(j, "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what.find("checkpoints[0].state"), std::string::npos);
}

TEST(Ledger, ReplayVerdictFieldsAreValidated) {
  nlohmann::json v = {
      {"schema", "scout.verdict"}, {"schema_version", "1.0"},
      {"command", "replay"},       {"job", "j"},
      {"status", "healthy"},       {"details", {{"cycle", 3}, {"checkpoint", "step_100"}, {"sweep", "full"}}}};
  auto r = parse_replay_verdict(v, "f", "j");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cycle, 3);
  EXPECT_TRUE(r->full_sweep);
  EXPECT_EQ(r->after, "step_100");
  EXPECT_FALSE(parse_replay_verdict(v, "f", "other").ok());
  v["command"] = "consensus";
  EXPECT_FALSE(parse_replay_verdict(v, "f", "j").ok());
  v["command"] = "replay";
  v["details"]["cycle"] = -1;
  EXPECT_FALSE(parse_replay_verdict(v, "f", "j").ok());
}

// Algorithm 3 withholds promotion for SDC and hangs only: a cycle that named
// a slow peer (status attributed) but whose numbers all agreed is clean.
TEST(Ledger, ReplayNumericsDecideTheOutcome) {
  auto verdict = [](const char* status, const char* numerics) {
    nlohmann::json v = {{"schema", "scout.verdict"}, {"schema_version", "1.0"},  {"command", "replay"}, {"job", "j"},
                        {"status", status},          {"details", {{"cycle", 1}}}};
    if (numerics) v["details"]["numerics"] = numerics;
    return parse_replay_verdict(v, "f", "j");
  };
  struct Case {
    const char* status;
    const char* numerics;
    ReplayOutcome want;
  };
  for (const Case& c :
       {Case{"attributed", "clean", ReplayOutcome::clean}, Case{"attributed", "sdc", ReplayOutcome::sdc},
        Case{"healthy", "clean", ReplayOutcome::clean}, Case{"inconclusive", "unclear", ReplayOutcome::unclear},
        Case{"inconclusive", "sdc", ReplayOutcome::sdc}, Case{"group_stall", "clean", ReplayOutcome::unclear},
        Case{"attributed", nullptr, ReplayOutcome::sdc}, Case{"healthy", nullptr, ReplayOutcome::clean}}) {
    auto r = verdict(c.status, c.numerics);
    ASSERT_TRUE(r.ok()) << c.status << " " << (c.numerics ? c.numerics : "-") << ": " << r.error().message();
    EXPECT_EQ(r->outcome, c.want) << c.status << " " << (c.numerics ? c.numerics : "-");
  }
  for (auto [status, numerics] :
       {std::pair{"healthy", "sdc"}, {"healthy", "unclear"}, {"attributed", "unclear"}, {"healthy", "fine"}}) {
    auto r = verdict(status, numerics);
    ASSERT_FALSE(r.ok()) << status << " " << numerics;
    EXPECT_EQ(r.error().code, ExitCode::bad_input);
  }
  // Two straggler-only cycles after a pending checkpoint verify it.
  Ledger l;
  l.job = "j";
  ledger_add_checkpoint(l, "/c/1", CheckpointState::pending, "ok", "t");
  for (std::int64_t n : {1, 2}) {
    auto c = verdict("attributed", "clean");
    ASSERT_TRUE(c.ok());
    c->cycle = n;
    ASSERT_TRUE(ledger_apply_replay(l, *c, "t").ok());
  }
  ASSERT_NE(l.verified(), nullptr);
  EXPECT_EQ(l.verified()->id, "/c/1");
}

// Found by fuzzing (fuzz/corpus/{ledger,replay_verdict}/regress-*): a field of
// another type made json::value() throw out of the reader (exit 70, not 4).
TEST(Ledger, FieldsOfAnotherTypeAreBadInputNotAThrow) {
  Ledger l;
  l.job = "j";
  ledger_add_checkpoint(l, "/c/1", CheckpointState::pending, "ok", "t");
  auto j = nlohmann::json::parse(ledger_to_json(l).dump());
  for (const char* field : {"updated_at", "schema"}) {
    auto k = j;
    k[field] = 5;
    auto r = ledger_from_json(k, "x");
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.error().code, ExitCode::bad_input);
  }
  auto k = j;
  k["checkpoints"][0]["summary"] = nlohmann::json::array();
  EXPECT_FALSE(ledger_from_json(k, "x").ok());
  nlohmann::json v = {{"schema", 5}, {"command", 7}};
  auto r = parse_replay_verdict(v, "f", "j");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ExitCode::bad_input);
  v = {{"schema", "scout.verdict"}, {"schema_version", "1.0"}, {"command", 7}};
  EXPECT_FALSE(parse_replay_verdict(v, "f", "j").ok());
}

TEST(LedgerStore, ConcurrentUpdatesAreSerialized) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("scout_ledger_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  LedgerStore store((dir / "j.ledger.json").string(), std::chrono::seconds(30));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        auto r = store.update("j", [&](Ledger& l) -> Result<bool> {
          return ledger_add_checkpoint(l, "/c/" + std::to_string(t) + "_" + std::to_string(i), CheckpointState::pending,
                                       "", "t")
              .changed;
        });
        ASSERT_TRUE(r.ok()) << r.error().message();
      }
    });
  for (auto& th : threads) th.join();
  auto l = store.load("j", false);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->checkpoints.size(), 40u);  // no lost update
  EXPECT_EQ(l->revision, 40);
  EXPECT_FALSE(store.load("other", false).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace scout::checkpoint
