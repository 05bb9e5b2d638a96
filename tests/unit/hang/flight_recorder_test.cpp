// Flight Recorder dumps in both of torch 2.15's forms (the pickled
// dump-on-timeout file and its JSON twin, written by one process from one
// recorder state: fuzz/corpus/flight_recorder/seed-*) give the same snapshot.
#include "lib/hang/flight_recorder.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "lib/hang/probe.hpp"
#include "lib/report/verdict.hpp"
#include "lib/topology/mesh.hpp"

using namespace scout;

namespace {

std::string slurp(const std::string& name) {
  std::ifstream in(std::string(SCOUT_SOURCE_DIR) + "/fuzz/corpus/flight_recorder/" + name, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace

TEST(FlightRecorder, PickledAndJsonDumpsGiveOneSnapshot) {
  const std::string pick = slurp("seed-pickle"), js = slurp("seed-json");
  ASSERT_FALSE(pick.empty());
  ASSERT_EQ(static_cast<unsigned char>(pick[0]), 0x80);  // a pickle, not JSON
  auto a = hang::snapshot_from_flight_recorder(pick, 0, "job");
  auto b = hang::snapshot_from_flight_recorder(js, 0, "job");
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(a->op_seq, b->op_seq);
  EXPECT_GE(a->recent.size(), 5u);  // all_reduce, broadcast, all_gather, barrier, sub-group all_reduce
  ASSERT_EQ(a->recent.size(), b->recent.size());
  for (std::size_t i = 0; i < a->recent.size(); ++i) {
    EXPECT_EQ(a->recent[i].fingerprint.type, b->recent[i].fingerprint.type) << i;
    EXPECT_EQ(a->recent[i].fingerprint.group, b->recent[i].fingerprint.group) << i;
    EXPECT_EQ(a->recent[i].fingerprint.group_seq, b->recent[i].fingerprint.group_seq) << i;
    EXPECT_EQ(a->recent[i].fingerprint.count, b->recent[i].fingerprint.count) << i;
    EXPECT_EQ(a->recent[i].fingerprint.dtype, b->recent[i].fingerprint.dtype) << i;
    EXPECT_EQ(a->recent[i].enter_ns, b->recent[i].enter_ns) << i;
  }
  EXPECT_EQ(a->pending.count, 6u);  // the last call: a 2x3 all_reduce
  EXPECT_EQ(a->collective_state, b->collective_state);
}

TEST(FlightRecorder, APickleNamingAClassIsRefusedByName) {
  // GLOBAL os.system, then a call: a dump never holds a class, and nothing is ever executed.
  const std::string evil(
      "\x80\x02"
      "cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03.",
      33);
  auto r = hang::snapshot_from_flight_recorder(evil, 0, "job");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ExitCode::bad_input);
  EXPECT_NE(r.error().message().find("os.system"), std::string::npos) << r.error().message();
}

TEST(FlightRecorder, MalformedDumpsAreBadInput) {
  for (std::string bad : {std::string("\x80\x02}q\x00(X\x07\x00\x00\x00"
                                      "entries",
                                      18),
                          std::string("{not json"), std::string("\x80\x02]q\x00.", 6),
                          std::string(R"({"entries": [{"profiling_name": 7}]})"), std::string(R"({"entries": 3})"),
                          std::string(R"({"entries": [], "pg_config": {"0": {"ranks": ["a"]}}})")}) {
    auto r = hang::snapshot_from_flight_recorder(bad, 0, "job");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ExitCode::bad_input) << bad;
  }
}

// Real dumps of tests/integration/trainers/fr_mesh_job.py (4 ranks, gloo, torch 2.15; dp=2 x tp=2 as
// new_group pgs or a DeviceMesh): tests/unit/hang/flight_recorder_dumps/<case>/{json,pickle}.
namespace {

std::string dumps(const std::string& name) {
  return std::string(SCOUT_SOURCE_DIR) + "/tests/unit/hang/flight_recorder_dumps/" + name;
}

}  // namespace

TEST(FlightRecorderDir, ACleanJobsLastBarrierIsDoneInBothForms) {
  // Every rank's newest entry is the closing barrier, retired with no completion time (gloo's way for a
  // completed op and a timed-out one alike): every member made it, so it completed.
  for (const char* form : {"json", "pickle"}) {
    auto reads = hang::read_flight_recorder_dir(dumps("clean_groups/") + form, "job");
    ASSERT_TRUE(reads.ok()) << reads.error().message();
    ASSERT_EQ(reads->size(), 4u);
    for (const auto& r : *reads) {
      EXPECT_EQ(r.snapshot->pending.type, records::CollectiveType::barrier) << form;
      EXPECT_EQ(r.snapshot->collective_state, records::CollectiveState::done) << form << " rank " << r.snapshot->rank;
    }
  }
}

TEST(FlightRecorderDir, RanksAreReplicasOnlyWhereTheDumpsSaySo) {
  // DeviceMesh pgs name their dims (mesh_dp, mesh_tp): rank = dp * 2 + tp.
  auto mesh = hang::read_flight_recorder_dir(dumps("clean_mesh/json"), "job");
  ASSERT_TRUE(mesh.ok()) << mesh.error().message();
  for (const auto& r : *mesh) {
    const auto& c = r.snapshot->coords;
    EXPECT_EQ(c[static_cast<int>(Dim::dp)], r.snapshot->rank / 2) << r.snapshot->rank;
    EXPECT_EQ(c[static_cast<int>(Dim::tp)], r.snapshot->rank % 2) << r.snapshot->rank;
  }
  // new_group pgs name nothing: two families, neither taken for replicas (no dp coordinate), and no two
  // ranks at one coordinate.
  auto groups = hang::read_flight_recorder_dir(dumps("clean_groups/json"), "job");
  ASSERT_TRUE(groups.ok()) << groups.error().message();
  std::set<std::array<std::int64_t, k_dim_count>> seen;
  for (const auto& r : *groups) {
    EXPECT_EQ(r.snapshot->coords[static_cast<int>(Dim::dp)], 0) << r.snapshot->rank;
    EXPECT_TRUE(seen.insert(r.snapshot->coords).second) << r.snapshot->rank;
  }
  // A dump missing (rank 1 exited): the pgs it was in cannot be told, so every rank stands alone.
  auto exited = hang::read_flight_recorder_dir(dumps("exit_rank1_mesh/json"), "job");
  ASSERT_TRUE(exited.ok()) << exited.error().message();
  ASSERT_EQ(exited->size(), 3u);
  for (const auto& r : *exited) EXPECT_EQ(r.snapshot->coords[static_cast<int>(Dim::pp)], r.snapshot->rank);
}

TEST(FlightRecorderDir, TruncatedDumpsAreBadInputNamingTheFile) {
  const std::string src = dumps("clean_groups/");
  const std::string dir = ::testing::TempDir() + "/scout_fr_truncated";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* name : {"pickle/rank_0", "json/rank_0.json"}) {
    std::ifstream in(src + name, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string whole = buf.str();
    ASSERT_GT(whole.size(), 100u);
    for (std::size_t cut : {std::size_t{1}, whole.size() / 2, whole.size() - 1}) {
      const std::string path = dir + "/rank_0";
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
      std::ofstream(path, std::ios::binary) << whole.substr(0, cut);
      auto r = hang::read_flight_recorder_dir(dir, "job");
      ASSERT_FALSE(r.ok()) << name << " cut at " << cut;
      EXPECT_EQ(r.error().code, ExitCode::bad_input) << name << " cut at " << cut;
      EXPECT_NE(r.error().message().find("rank_0"), std::string::npos) << r.error().message();
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorderDir, AWorldNoJobHasIsBadInputNotAnAllocation) {
  const std::string dir = ::testing::TempDir() + "/scout_fr_world";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/rank_0.json") << R"({"entries": [], "pg_config": {"x": {"ranks": "[0, 99999999]"}}})";
  auto r = hang::read_flight_recorder_dir(dir, "job");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ExitCode::bad_input) << r.error().message();
  std::filesystem::remove_all(dir);
}

// Synthetic gloo dumps of a 4-rank job whose world all_reduces are all it does: gloo's pg_config keeps one
// entry keyed by "" (the ranks of the last pg registered, here a pair), so the dumps name no world size.
namespace {

// Writes rank `rank`'s JSON dump into `dir`: `calls` world all_reduces of 16 floats (the newest of
// `newest_count`), the newest retired or not, then (`barrier`) the closing barrier, retired.
void write_gloo_dump(const std::string& dir, std::int64_t rank, int calls, bool newest_retired, bool barrier,
                     std::int64_t newest_count = 16) {
  nlohmann::json entries = nlohmann::json::array();
  const std::int64_t t0 = 1'700'000'000'000'000'000;  // long ago: every rank is silent past any threshold
  int id = 0;
  auto entry = [&](const char* name, std::int64_t seq, nlohmann::json sizes, bool retired) {
    entries.push_back({{"record_id", id},
                       {"pg_id", 0},
                       {"process_group", {"0", "default_pg"}},
                       {"collective_seq_id", seq},
                       {"p2p_seq_id", 0},
                       {"op_id", seq},
                       {"profiling_name", name},
                       {"input_sizes", sizes},
                       {"input_dtypes", sizes.empty() ? nlohmann::json::array() : nlohmann::json::array({"Float"})},
                       {"output_sizes", sizes},
                       {"output_dtypes", sizes.empty() ? nlohmann::json::array() : nlohmann::json::array({"Float"})},
                       {"is_p2p", false},
                       {"retired", retired},
                       {"state", "scheduled"},
                       {"time_created_ns", t0 + id * 1'000'000},
                       {"time_discovered_started_ns", 0},
                       {"time_discovered_completed_ns", 0},
                       {"timeout_ms", 6000}});
    ++id;
  };
  for (int c = 1; c <= calls; ++c)
    entry("gloo:all_reduce", c, nlohmann::json::array({nlohmann::json::array({c < calls ? 16 : newest_count})}),
          c < calls || newest_retired);
  if (barrier) entry("gloo:barrier", calls + 1, nlohmann::json::array(), true);
  nlohmann::json doc = {{"version", "2.10"},
                        {"entries", entries},
                        {"pg_config", {{"", {{"name", ""}, {"desc", ""}, {"ranks", "[0, 1]"}}}}},
                        {"pg_status", nlohmann::json::object()}};
  std::ofstream(dir + "/rank_" + std::to_string(rank) + ".json") << doc.dump();
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The probe's verdict on the dumps in `dir` read with `world`.
Verdict probe_dumps(const std::string& dir, std::optional<std::int64_t> world) {
  auto reads = hang::read_flight_recorder_dir(dir, "job", world);
  EXPECT_TRUE(reads.ok()) << reads.error().message();
  hang::ProbeOptions o;
  o.job = "job";
  o.threshold = std::chrono::milliseconds(1000);
  auto v = hang::run_probe(o, [&]() -> Result<std::vector<records::RecordRead>> { return *reads; });
  EXPECT_TRUE(v.ok()) << v.error().message();
  return *v;
}

std::vector<std::int64_t> suspect_ranks(const Verdict& v) {
  std::vector<std::int64_t> out;
  for (const auto& s : v.suspects) out.push_back(s.rank);
  return out;
}

}  // namespace

TEST(FlightRecorderWorld, TheLastRanksAbsentDumpIsNamedOnlyWhenTheWorldIsKnown) {
  // Rank 3 exited before its third all_reduce; ranks 0-2 wait inside it (their dumps taken on the failure,
  // or on the timeout, which gloo marks retired like a completion).
  const std::string dir = fresh_dir("scout_fr_last_rank");
  for (bool timed_out : {true, false}) {
    for (std::int64_t r = 0; r < 3; ++r) write_gloo_dump(dir, r, 3, timed_out, false);
    // The world given (--world 4, --mesh dp=2,tp=2): rank 3 is missing and every other rank waits for it.
    auto reads = hang::read_flight_recorder_dir(dir, "job", 4);
    ASSERT_TRUE(reads.ok()) << reads.error().message();
    for (const auto& r : *reads) EXPECT_EQ(r.snapshot->world_size, 4) << r.snapshot->rank;
    Verdict known = probe_dumps(dir, 4);
    EXPECT_EQ(known.status, VerdictStatus::attributed) << timed_out << to_json(known).dump(2);
    EXPECT_EQ(suspect_ranks(known), std::vector<std::int64_t>{3}) << timed_out << to_json(known).dump(2);
    EXPECT_EQ(known.details["missing_ranks"], nlohmann::json::array({3}));
  }
  // Unknown: the dumps name three ranks; nothing tells rank 3 exists, so nobody is named.
  Verdict unknown = probe_dumps(dir, std::nullopt);
  EXPECT_TRUE(unknown.suspects.empty()) << to_json(unknown).dump(2);
  EXPECT_NE(unknown.status, VerdictStatus::attributed) << to_json(unknown).dump(2);
  EXPECT_NE(unknown.status, VerdictStatus::healthy) << to_json(unknown).dump(2);
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorderWorld, AnAbsentDumpNobodyWaitsForNamesNobody) {
  // Rank 3 left no dump, but ranks 0-2 disagree (rank 2 is a call behind): inconclusive, never an innocent.
  const std::string dir = fresh_dir("scout_fr_disagree");
  write_gloo_dump(dir, 0, 3, false, false);
  write_gloo_dump(dir, 1, 3, false, false);
  write_gloo_dump(dir, 2, 2, false, false);
  Verdict v = probe_dumps(dir, 4);
  for (auto r : suspect_ranks(v)) EXPECT_EQ(r, 2) << to_json(v).dump(2);  // rank 2 is behind; 0, 1 and 3 never
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorderWorld, EveryDumpOfTheGivenWorldCleanIsHealthy) {
  const std::string dir = fresh_dir("scout_fr_clean_world");
  for (std::int64_t r = 0; r < 4; ++r) write_gloo_dump(dir, r, 3, true, true);
  Verdict v = probe_dumps(dir, 4);
  EXPECT_EQ(v.status, VerdictStatus::healthy) << to_json(v).dump(2);
  EXPECT_TRUE(v.suspects.empty());
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorderWorld, ADumpBeyondTheGivenWorldIsBadInputNamingIt) {
  const std::string dir = fresh_dir("scout_fr_beyond");
  for (std::int64_t r = 0; r < 4; ++r) write_gloo_dump(dir, r, 3, true, true);
  auto r = hang::read_flight_recorder_dir(dir, "job", 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ExitCode::bad_input);
  EXPECT_NE(r.error().message().find("rank_3.json"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("world of 3"), std::string::npos) << r.error().message();
  // A pg_config naming a rank beyond it too (NCCL's lists the world).
  std::filesystem::remove(dir + "/rank_3.json");
  std::ofstream(dir + "/rank_0.json") << R"({"entries": [], "pg_config": {"0": {"ranks": "[0, 1, 2, 3]"}}})";
  auto p = hang::read_flight_recorder_dir(dir, "job", 3);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ExitCode::bad_input);
  EXPECT_NE(p.error().message().find("names rank 3"), std::string::npos) << p.error().message();
  for (std::int64_t w : {0, -1}) EXPECT_FALSE(hang::read_flight_recorder_dir(dir, "job", w).ok()) << w;
  std::filesystem::remove_all(dir);
}

namespace {

// Marks the newest entry of `path` (a JSON dump) not retired, as gloo's recorder leaves a call it has not
// yet retired (it retires a call after it returns, on another thread).
void unretire_newest(const std::string& path) {
  nlohmann::json doc;
  {
    std::ifstream in(path);
    in >> doc;
  }
  doc["entries"].back()["retired"] = false;
  std::ofstream(path) << doc.dump();
}

}  // namespace

TEST(FlightRecorderDir, ACleanJobsBarrierSomeRanksHadNotRetiredYetIsDone) {
  // Real dumps of a clean DDP job (bench/fr_vs_frtrace.py, layout ddp, torch 2.15, gloo), each taken just
  // after the closing barrier returned: ranks 1 and 3 hold it unretired, ranks 0 and 2 retired. Every
  // member of the world (--world 4) holds the same barrier, so it completed: the job reads healthy, not as a
  // group stall.
  const std::string dir = dumps("clean_ddp_unretired_barrier/json");
  auto reads = hang::read_flight_recorder_dir(dir, "job", 4);
  ASSERT_TRUE(reads.ok()) << reads.error().message();
  ASSERT_EQ(reads->size(), 4u);
  for (const auto& r : *reads) {
    EXPECT_EQ(r.snapshot->pending.type, records::CollectiveType::barrier) << r.snapshot->rank;
    EXPECT_EQ(r.snapshot->collective_state, records::CollectiveState::done) << r.snapshot->rank;
  }
  Verdict v = probe_dumps(dir, 4);
  EXPECT_EQ(v.status, VerdictStatus::healthy) << to_json(v).dump(2);
  EXPECT_TRUE(v.suspects.empty());
  // Without --world, DDP's first call (an all_gather of every rank's parameter count on the default pg,
  // output [4, 1]) tells the world: every member holds the barrier, so it reads healthy too.
  hang::DumpsWorld told;
  ASSERT_TRUE(hang::read_flight_recorder_dir(dir, "job", std::nullopt, &told).ok());
  EXPECT_EQ(told.world, 4);
  EXPECT_EQ(told.told_by, "collective_sizes");
  EXPECT_EQ(hang::untold_world_note(told), "");
  EXPECT_EQ(probe_dumps(dir, std::nullopt).status, VerdictStatus::healthy);
  // Without that call either, the pg's members are only the ranks that dumped: survivors of a last rank that
  // stopped look the same, so the unretired barrier stays inside (a stall, nobody named).
  const std::string bare = fresh_dir("scout_fr_ddp_no_gather");
  for (int r = 0; r < 4; ++r) {
    nlohmann::json doc;
    {
      std::ifstream in(dir + "/rank_" + std::to_string(r) + ".json");
      in >> doc;
    }
    auto& es = doc["entries"];
    es.erase(std::remove_if(es.begin(), es.end(),
                            [](const nlohmann::json& e) { return e["profiling_name"] == "gloo:all_gather"; }),
             es.end());
    std::ofstream(bare + "/rank_" + std::to_string(r) + ".json") << doc.dump();
  }
  Verdict unknown = probe_dumps(bare, std::nullopt);
  EXPECT_NE(unknown.status, VerdictStatus::healthy) << to_json(unknown).dump(2);
  EXPECT_TRUE(unknown.suspects.empty()) << to_json(unknown).dump(2);
  std::filesystem::remove_all(bare);
}

TEST(FlightRecorderDir, TheLastRanksAbsentDumpIsNamedWhereTheDefaultPgsGatherTellsTheWorld) {
  // The real dumps of a clean DDP job (world 4) with rank 3's dump gone, as if it had stopped before the
  // closing barrier, and gloo's one pg_config entry listing a pair (the last pg registered, as in the groups
  // layout's dumps): only DDP's first all_gather on the default pg (output [4, 1]) says rank 3 exists.
  const std::string src = dumps("clean_ddp_unretired_barrier/json");
  const std::string dir = fresh_dir("scout_fr_ddp_last_missing");
  auto copy = [&](bool with_gather) {
    for (int r = 0; r < 3; ++r) {
      nlohmann::json doc;
      {
        std::ifstream in(src + "/rank_" + std::to_string(r) + ".json");
        in >> doc;
      }
      doc["pg_config"] = {{"", {{"name", ""}, {"desc", ""}, {"ranks", "[0, 1]"}}}};
      auto& es = doc["entries"];
      if (!with_gather)
        es.erase(std::remove_if(es.begin(), es.end(),
                                [](const nlohmann::json& e) { return e["profiling_name"] == "gloo:all_gather"; }),
                 es.end());
      std::ofstream(dir + "/rank_" + std::to_string(r) + ".json") << doc.dump();
    }
  };
  copy(true);
  hang::DumpsWorld told;
  auto reads = hang::read_flight_recorder_dir(dir, "job", std::nullopt, &told);
  ASSERT_TRUE(reads.ok()) << reads.error().message();
  EXPECT_EQ(told.world, 4);
  EXPECT_EQ(told.told_by, "collective_sizes");
  for (const auto& r : *reads) EXPECT_EQ(r.snapshot->world_size, 4) << r.snapshot->rank;
  Verdict v = probe_dumps(dir, std::nullopt);
  EXPECT_EQ(v.status, VerdictStatus::attributed) << to_json(v).dump(2);
  EXPECT_EQ(suspect_ranks(v), std::vector<std::int64_t>{3}) << to_json(v).dump(2);
  EXPECT_EQ(v.details["missing_ranks"], nlohmann::json::array({3})) << to_json(v).dump(2);
  // --world 4 says the same.
  EXPECT_EQ(suspect_ranks(probe_dumps(dir, 4)), std::vector<std::int64_t>{3});
  // Without the all_gather nothing tells rank 3 exists: nobody is named, never healthy, and the note says that
  // only --world shows a missing last rank.
  copy(false);
  ASSERT_TRUE(hang::read_flight_recorder_dir(dir, "job", std::nullopt, &told).ok());
  EXPECT_EQ(told.world, 3);
  EXPECT_EQ(told.told_by, "");
  EXPECT_NE(hang::untold_world_note(told).find("--world N"), std::string::npos) << hang::untold_world_note(told);
  Verdict unknown = probe_dumps(dir, std::nullopt);
  EXPECT_TRUE(unknown.suspects.empty()) << to_json(unknown).dump(2);
  EXPECT_NE(unknown.status, VerdictStatus::healthy) << to_json(unknown).dump(2);
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorderDir, SurvivorsOfAnExitedLastRankWithTheWorldUntoldNeverReadHealthy) {
  // Real dumps (bench/fr_vs_frtrace.py --seed 3901, groups/exit run 0, torch 2.15, gloo): dp=2 x tp=2 by
  // new_group, rank 3 exited before the world all_reduce seq 2 and left no dump; ranks 0-2 dumped when their
  // call failed. gloo names no world and the default pg made no all-gather: read as 3 ranks. Rank 3's tp pg
  // ("2") was called by rank 2 alone, its dp pg ("4") by rank 1 alone, beside pgs of two.
  const std::string src = dumps("exit_rank3_groups/json");
  hang::DumpsWorld told;
  auto reads = hang::read_flight_recorder_dir(src, "job", std::nullopt, &told);
  ASSERT_TRUE(reads.ok()) << reads.error().message();
  EXPECT_EQ(told.world, 3);
  EXPECT_EQ(told.told_by, "");
  EXPECT_EQ(told.short_pgs, (std::vector<std::string>{"pg 2 (called only by rank 2)", "pg 4 (called only by rank 1)"}));
  EXPECT_NE(hang::untold_world_note(told).find("pg 2 (called only by rank 2)"), std::string::npos)
      << hang::untold_world_note(told);
  // As dumped, rank 0's call unretired; then as torch 2.12 and 2.14 dumped it in most runs: every survivor's
  // failed call retired (gloo retires a failed call like a finished one), which read healthy before.
  const std::string dir = fresh_dir("scout_fr_exit_rank3_groups");
  for (bool all_retired : {false, true}) {
    for (int r = 0; r < 3; ++r) {
      nlohmann::json doc;
      {
        std::ifstream in(src + "/rank_" + std::to_string(r) + ".json");
        in >> doc;
      }
      if (all_retired) {
        doc["entries"].back()["retired"] = true;
        for (auto& [pg, st] : doc["pg_status"].items())
          st["last_completed_collective"] = st["last_enqueued_collective"];
      }
      std::ofstream(dir + "/rank_" + std::to_string(r) + ".json") << doc.dump();
    }
    Verdict v = probe_dumps(dir, std::nullopt);
    EXPECT_NE(v.status, VerdictStatus::healthy) << all_retired << to_json(v).dump(2);
    EXPECT_TRUE(v.suspects.empty()) << all_retired << to_json(v).dump(2);  // rank 3's existence a guess
    // What the command says: inconclusive (not a fabric stall), naming the pgs and --world.
    ASSERT_TRUE(hang::read_flight_recorder_dir(dir, "job", std::nullopt, &told).ok());
    hang::qualify_verdict(told, v);
    EXPECT_EQ(v.status, VerdictStatus::inconclusive) << all_retired << to_json(v).dump(2);
    EXPECT_EQ(v.details["kind"], "inconclusive") << all_retired;
    EXPECT_NE(v.summary.find("pg 4 (called only by rank 1)"), std::string::npos) << v.summary;
    EXPECT_NE(v.summary.find("--world N"), std::string::npos) << v.summary;
    // --world 4: rank 3 is missing and every survivor waits for it.
    Verdict known = probe_dumps(dir, 4);
    EXPECT_EQ(known.status, VerdictStatus::attributed) << all_retired << to_json(known).dump(2);
    EXPECT_EQ(suspect_ranks(known), std::vector<std::int64_t>{3}) << all_retired << to_json(known).dump(2);
  }
  std::filesystem::remove_all(dir);
  // The clean job's dumps (every pg of two called by both members) show no such pg and read healthy.
  for (const char* form : {"json", "pickle"}) {
    ASSERT_TRUE(hang::read_flight_recorder_dir(dumps("clean_groups/") + form, "job", std::nullopt, &told).ok());
    EXPECT_TRUE(told.short_pgs.empty()) << form;
    Verdict clean = probe_dumps(dumps("clean_groups/") + form, std::nullopt);
    hang::qualify_verdict(told, clean);
    EXPECT_EQ(clean.status, VerdictStatus::healthy) << form << to_json(clean).dump(2);
  }
}

namespace {

// Puts a retired all_reduce on pg `pg` (a new_group's: unnamed, numbered) first in the JSON dump at `path`.
void add_subgroup_call(const std::string& path, const std::string& pg) {
  nlohmann::json doc;
  {
    std::ifstream in(path);
    in >> doc;
  }
  nlohmann::json e = doc["entries"].front();
  e["process_group"] = {pg, "undefined"};
  e["collective_seq_id"] = 1;
  e["retired"] = true;
  for (auto& x : doc["entries"]) x["record_id"] = x["record_id"].get<std::int64_t>() + 1;
  e["record_id"] = 0;
  doc["entries"].insert(doc["entries"].begin(), e);
  std::ofstream(path) << doc.dump();
}

}  // namespace

TEST(FlightRecorderDir, OnlyAFamilyOfUnevenPgsShowsAMemberBeyondTheDumps) {
  // A clean 4-rank job (every rank's closing barrier retired), the world untold. Its new_group pgs, by the
  // ranks that called them: an even family is no sign of a rank without a dump, and it reads healthy.
  const std::string dir = fresh_dir("scout_fr_families");
  auto job = [&](const std::vector<std::vector<std::int64_t>>& pgs) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    for (std::int64_t r = 0; r < 4; ++r) write_gloo_dump(dir, r, 3, true, true);
    for (std::size_t i = 0; i < pgs.size(); ++i)
      for (auto r : pgs[i]) add_subgroup_call(dir + "/rank_" + std::to_string(r) + ".json", std::to_string(i + 1));
    hang::DumpsWorld told;
    EXPECT_TRUE(hang::read_flight_recorder_dir(dir, "job", std::nullopt, &told).ok());
    Verdict v = probe_dumps(dir, std::nullopt);
    hang::qualify_verdict(told, v);
    EXPECT_TRUE(v.suspects.empty()) << to_json(v).dump(2);
    return std::pair{told.short_pgs, v.status};
  };
  // Pairs (tp 2), singletons (a dim of 1), and the world's twin: healthy.
  for (const auto& pgs : {std::vector<std::vector<std::int64_t>>{{0, 1}, {2, 3}},
                          std::vector<std::vector<std::int64_t>>{{0}, {1}, {2}, {3}},
                          std::vector<std::vector<std::int64_t>>{{0, 1, 2, 3}}}) {
    auto [short_pgs, status] = job(pgs);
    EXPECT_TRUE(short_pgs.empty()) << pgs.size();
    EXPECT_EQ(status, VerdictStatus::healthy) << pgs.size();
  }
  // A family of three and one: the one's other members may be ranks without a dump. Never healthy, nobody
  // named (the price: a job that made such uneven pgs on purpose reads inconclusive).
  auto [short_pgs, status] = job({{0, 1, 2}, {3}});
  EXPECT_EQ(short_pgs, (std::vector<std::string>{"pg 2 (called only by rank 3)"}));
  EXPECT_EQ(status, VerdictStatus::inconclusive);
  // Given the world, the same dumps are a clean job.
  EXPECT_EQ(probe_dumps(dir, 4).status, VerdictStatus::healthy);
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorderWorld, AnUnretiredGlooCallIsDoneOnlyWhereEveryToldMemberHoldsItAndOneRetiredIt) {
  const std::string dir = fresh_dir("scout_fr_unretired");
  // Every rank's closing barrier, two of them unretired: done (healthy).
  for (std::int64_t r = 0; r < 4; ++r) write_gloo_dump(dir, r, 3, true, true);
  unretire_newest(dir + "/rank_1.json");
  unretire_newest(dir + "/rank_2.json");
  EXPECT_EQ(probe_dumps(dir, 4).status, VerdictStatus::healthy);
  EXPECT_NE(probe_dumps(dir, std::nullopt).status, VerdictStatus::healthy);  // the members a guess
  // Nobody retired it: every rank may still be inside it (a stall), never healthy.
  for (std::int64_t r = 0; r < 4; ++r) write_gloo_dump(dir, r, 3, false, false);
  Verdict none = probe_dumps(dir, 4);
  EXPECT_NE(none.status, VerdictStatus::healthy) << to_json(none).dump(2);
  EXPECT_TRUE(none.suspects.empty()) << to_json(none).dump(2);
  // A member without a dump (rank 3 exited before the call): the others' call is not done, retired or not,
  // and rank 3 is named where the world is known.
  std::filesystem::remove(dir + "/rank_3.json");
  for (std::int64_t r = 0; r < 3; ++r) write_gloo_dump(dir, r, 3, r != 1, false);
  Verdict exited = probe_dumps(dir, 4);
  EXPECT_EQ(exited.status, VerdictStatus::attributed) << to_json(exited).dump(2);
  EXPECT_EQ(suspect_ranks(exited), std::vector<std::int64_t>{3}) << to_json(exited).dump(2);
  // A member holds another call in its place (rank 2 a call behind, its newest retired): not done.
  for (std::int64_t r = 0; r < 4; ++r) write_gloo_dump(dir, r, r == 2 ? 2 : 3, r != 0, false);
  Verdict behind = probe_dumps(dir, 4);
  EXPECT_NE(behind.status, VerdictStatus::healthy) << to_json(behind).dump(2);
  for (auto r : suspect_ranks(behind)) EXPECT_EQ(r, 2) << to_json(behind).dump(2);
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorderDir, AWrongShapeWhoseVictimLeftNoDumpNamesTheRankWhoseShapeDiffers) {
  // Real dumps of bench/fr_vs_frtrace.py, groups layout, wrong-shape at rank 1 step 1 (seed 39): rank 1
  // issued the world all_reduce with 24 floats; gloo aborted rank 0, the peer that received the wrong size,
  // before it could dump; ranks 2 (its call unretired) and 3 (retired) issued 16. Rank 0 left no record, so
  // it does not vote: ranks 2 and 3 are a strict majority of the dumps and half the pg (rank 0 could at
  // most tie them), so rank 1 is named, alone, with and without the world.
  const std::string dir = dumps("wrong_shape_rank1_groups/json");
  for (std::optional<std::int64_t> world : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{4}}) {
    Verdict v = probe_dumps(dir, world);
    EXPECT_EQ(v.status, VerdictStatus::attributed) << to_json(v).dump(2);
    EXPECT_EQ(suspect_ranks(v), std::vector<std::int64_t>{1}) << to_json(v).dump(2);
    EXPECT_EQ(v.details["kind"], "argument_divergence") << to_json(v).dump(2);
    EXPECT_EQ(v.details["missing_ranks"], nlohmann::json::array({0})) << to_json(v).dump(2);
  }
}

namespace {

// Adds to the JSON dump at `path` a first call (record_id -1) on new_group pg `pg` (gloo names no
// pg in pg_config): with a dump missing, its members cannot be told, so every rank stands alone and
// only the world's calls compare ranks.
void add_new_group_call(const std::string& path, const std::string& pg) {
  nlohmann::json doc;
  {
    std::ifstream in(path);
    in >> doc;
  }
  nlohmann::json e = doc["entries"][0];
  e["record_id"] = -1;
  e["process_group"] = {pg, "undefined"};
  e["collective_seq_id"] = 1;
  doc["entries"].insert(doc["entries"].begin(), e);
  std::ofstream(path) << doc.dump();
}

std::string measure_of(const Verdict& v) {
  return v.suspects.empty() ? std::string() : v.suspects[0].evidence.value("measure", std::string());
}

}  // namespace

TEST(FlightRecorderWorld, AShapeOnlyTheDumpsThatAgreeCanOutvoteNamesTheRankWhoseShapeDiffers) {
  const std::string dir = fresh_dir("scout_fr_wrong_shape");
  // Rank 0 left no dump; rank 2's newest world all_reduce has 24 floats, ranks 1 and 3's 16; each first
  // called its tp pair's pg ("1": 0 and 1, "2": 2 and 3), so the dumps cannot tell the layout.
  auto write = [&](std::int64_t rank, bool retired, std::int64_t count) {
    write_gloo_dump(dir, rank, 3, retired, false, count);
    add_new_group_call(dir + "/rank_" + std::to_string(rank) + ".json", rank < 2 ? "1" : "2");
  };
  write(1, false, 16);
  write(2, false, 24);
  write(3, true, 16);
  for (std::optional<std::int64_t> world : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{4}}) {
    Verdict v = probe_dumps(dir, world);
    EXPECT_EQ(suspect_ranks(v), std::vector<std::int64_t>{2}) << to_json(v).dump(2);
    EXPECT_EQ(v.details["kind"], "argument_divergence") << to_json(v).dump(2);
    EXPECT_EQ(measure_of(v), "call_arguments") << to_json(v).dump(2);
    EXPECT_EQ(v.details["mesh"], "pp=4") << to_json(v).dump(2);
  }
  // Two ranks without a dump in a world of 5: the two that agree are under half the world, and the absent
  // ranks could outnumber them: no measure names anyone (the whole histories named rank 2 from 2 dumps
  // against 1), and the dumps that agree are no innocents to name.
  Verdict five = probe_dumps(dir, 5);
  EXPECT_TRUE(suspect_ranks(five).empty()) << to_json(five).dump(2);
  EXPECT_NE(five.status, VerdictStatus::healthy) << to_json(five).dump(2);
  // Every rank dumped and they split 2:2: no majority, nobody named.
  write(0, false, 24);
  Verdict split = probe_dumps(dir, 4);
  EXPECT_TRUE(suspect_ranks(split).empty()) << to_json(split).dump(2);
  EXPECT_NE(split.status, VerdictStatus::healthy) << to_json(split).dump(2);
  // Only two dumps, one of each shape: too few to outvote anyone.
  std::filesystem::remove(dir + "/rank_0.json");
  std::filesystem::remove(dir + "/rank_3.json");
  Verdict two = probe_dumps(dir, 4);
  for (auto r : suspect_ranks(two)) EXPECT_TRUE(r != 1 && r != 2) << to_json(two).dump(2);
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorderWorld, AnEarlierCallOnlyTheDumpsThatAgreeCanOutvoteNamesTheRankWhoseHistoryDiffers) {
  // Rank 0 left no dump; ranks 1-3 wait in their third world all_reduce, the same call, but rank 2 made the
  // second with 24 floats where ranks 1 and 3 made it with 16: only the whole histories tell (call_arguments
  // compares the calls ranks are in).
  const std::string dir = fresh_dir("scout_fr_history_missing");
  for (std::int64_t r = 1; r < 4; ++r) {
    write_gloo_dump(dir, r, 3, false, false);
    if (r != 2) continue;
    const std::string path = dir + "/rank_2.json";
    nlohmann::json doc;
    {
      std::ifstream in(path);
      in >> doc;
    }
    for (auto& e : doc["entries"])
      if (e["collective_seq_id"] == 2) e["input_sizes"] = e["output_sizes"] = nlohmann::json::array({{24}});
    std::ofstream(path) << doc.dump();
  }
  // World 4: ranks 1 and 3 are a strict majority of the dumps and half the world (rank 0 could at most tie
  // them): rank 2 is named, alone.
  Verdict four = probe_dumps(dir, 4);
  EXPECT_EQ(suspect_ranks(four), std::vector<std::int64_t>{2}) << to_json(four).dump(2);
  EXPECT_EQ(measure_of(four), "history") << to_json(four).dump(2);
  // World 5, ranks 0 and 4 without a dump: 2 dumps against 1 are under half the world, and the absent ranks
  // could outnumber them: the histories name nobody. Every rank that dumped waits in one call for the two
  // that left none, so those are where the waits end; ranks 1 to 3 are never named.
  Verdict five = probe_dumps(dir, 5);
  EXPECT_NE(five.status, VerdictStatus::healthy) << to_json(five).dump(2);
  EXPECT_NE(measure_of(five), "history") << to_json(five).dump(2);
  for (auto r : suspect_ranks(five)) EXPECT_TRUE(r == 0 || r == 4) << to_json(five).dump(2);
  std::filesystem::remove_all(dir);
}

// Other torch releases' real dumps (bench/fr_vs_frtrace.py under torch 2.8.0 and 2.11.0, seed 3901:
// bench/fr_versions_result.txt): format "2.9" (2.8.0) and "2.10" (2.11.0) hold the fields 2.15's do, and
// decide alike. tests/unit/hang/flight_recorder_dumps/torch-<version>/<fault>_rank<N>_<layout>/{json,pickle}.
TEST(FlightRecorderVersions, EachReleasesDumpsNameTheirCulpritInBothForms) {
  const std::string root = dumps("");
  int cases = 0;
  for (const auto& v : std::filesystem::directory_iterator(root)) {
    if (!v.path().filename().string().starts_with("torch-")) continue;
    for (const auto& c : std::filesystem::directory_iterator(v.path())) {
      const std::string name = c.path().filename().string();
      for (const char* form : {"json", "pickle"}) {
        const std::string dir = c.path().string() + "/" + form;
        if (!std::filesystem::is_directory(dir)) continue;
        ++cases;
        Verdict verdict = probe_dumps(dir, std::nullopt);
        if (name.starts_with("clean_")) {
          EXPECT_EQ(verdict.status, VerdictStatus::healthy) << dir << to_json(verdict).dump(2);
          continue;
        }
        const auto at = name.find("_rank");
        ASSERT_NE(at, std::string::npos) << dir;
        const std::int64_t culprit = std::stoll(name.substr(at + 5));
        EXPECT_EQ(suspect_ranks(verdict), std::vector<std::int64_t>{culprit}) << dir << to_json(verdict).dump(2);
      }
    }
  }
  EXPECT_GE(cases, 4);
}

TEST(FlightRecorderVersions, OtherFormatsPartialAndEmptyDumpsAreRefusedSayingWhy) {
  auto refused = [](const std::string& text, const std::string& says) {
    auto r = hang::snapshot_from_flight_recorder(text, 0, "job");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.error().code, ExitCode::bad_input) << text;
    EXPECT_NE(r.error().message().find(says), std::string::npos) << r.error().message();
  };
  refused(R"({"version": "3.0", "entries": []})", "format version \"3.0\"");
  refused(R"({"version": 2.9, "entries": []})", "\"version\"");
  refused(R"({"version": "2.9", "entries": [{"record_id": 4, "profiling_name": "gloo:all_reduce",
              "process_group": ["0", "default_pg"]}]})",
          "(record_id 4) without \"collective_seq_id\"");
  refused(R"({"version": "2.10", "entries": [{"record_id": 1, "profiling_name": "gloo:send", "is_p2p": true,
              "process_group": ["0", "default_pg"], "collective_seq_id": 0}]})",
          "without \"p2p_seq_id\"");
  refused("", "empty");
  refused(R"({"version": "2.10", "entries": [{"record_id": 1, "profil)", "truncated");
  // torch 2.7.1's dumps of a gloo job (_dump_nccl_trace, format 2.4), and torch 2.8.0's with TORCH_FR_BUFFER_SIZE
  // unset: nothing recorded, refused saying why (read, they made a hung job healthy, "starting up").
  for (const auto& [name, says] : {std::pair<std::string, std::string>{"empty_torch-2.7.1/", "format version 2.4"},
                                   {"empty_torch-2.8.0-buffer-off/", "TORCH_FR_BUFFER_SIZE"}}) {
    for (const char* form : {"json", "pickle"}) {
      auto r = hang::read_flight_recorder_dir(dumps(name) + form, "job");
      ASSERT_FALSE(r.ok()) << name << form;
      EXPECT_EQ(r.error().code, ExitCode::bad_input) << name << form;
      EXPECT_NE(r.error().message().find(says), std::string::npos) << r.error().message();
    }
  }
}
