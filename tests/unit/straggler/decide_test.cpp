#include "lib/straggler/decide.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>

#include "lib/straggler/evidence.hpp"
#include "tests/unit/straggler/sim.hpp"
#include "tests/unit/test_seed.hpp"

namespace scout::straggler {
namespace {

std::uint64_t fresh_seed() {
  std::uint64_t s = test_support::test_seed();
  std::printf("straggler test seed=%llu\n", static_cast<unsigned long long>(s));
  return s;
}

Analysis simulate(const sim::Spec& s, DecideOptions o = {}) {
  return analyse(sim::run(s), s.mesh, o);
}

std::vector<std::int64_t> compute_suspects(const Decision& d) {
  std::vector<std::int64_t> out;
  for (const auto& s : d.suspects)
    if (s.reason == "compute") out.push_back(s.rank);
  std::sort(out.begin(), out.end());
  return out;
}

bool any_suspect(const Decision& d) {
  return !d.suspects.empty() || !d.slow_groups.empty();
}

TEST(StragglerTiming, MeshGroupsListEveryKindAndTheWorld) {
  auto g = mesh_groups(*Mesh::parse("dp=2,tp=2"));
  ASSERT_EQ(g.size(), 5u);  // dp groups, tp groups, the world
  int dp = 0, tp = 0, world = 0;
  for (auto& x : g) (x.kind == "dp" ? dp : x.kind == "tp" ? tp : world)++;
  EXPECT_EQ(dp, 2);
  EXPECT_EQ(tp, 2);
  EXPECT_EQ(world, 1);
  // dp=world: the dp group is the world group, listed once.
  EXPECT_EQ(mesh_groups(*Mesh::parse("dp=4")).size(), 1u);
}

// One all-reduce of group 7 in a rank's ring.
records::CollectiveEvent all_reduce_event(std::uint64_t op, std::uint64_t seq, std::int64_t in, std::int64_t out,
                                          records::ExitKind kind) {
  records::CollectiveEvent e;
  e.op_seq = op;
  e.fingerprint.group = 7;
  e.fingerprint.group_seq = seq;
  e.fingerprint.type = records::CollectiveType::all_reduce;
  e.enter_ns = in;
  e.exit_ns = out;
  e.exit_kind = kind;
  return e;
}

// A round of one rank (rank 0 of world 1) whose ring holds `events`.
RoundEvidence one_rank_round(std::vector<records::CollectiveEvent> events) {
  RoundEvidence r;
  r.world = 1;
  RankEvents re;
  re.rank = 0;
  re.events = std::move(events);
  r.ranks.push_back(std::move(re));
  return r;
}

TEST(StragglerTiming, ComputeIsTheGapSinceTheLastCompletionAndWaitTheTimeInside) {
  auto ev = [](std::uint64_t op, std::uint64_t seq, std::int64_t in, std::int64_t out) {
    return all_reduce_event(op, seq, in, out, records::ExitKind::completed);
  };
  const auto r = one_rank_round({ev(1, 1, 100, 200), ev(2, 2, 500, 650), ev(3, 3, 600, 0), ev(4, 4, 900, 1000)});
  auto t = build_table(r, {}, nullptr);
  const auto& calls = t.ranks.at(0);
  ASSERT_EQ(calls.size(), 2u);  // the oldest has no predecessor; the one still inside has no exit
  auto kind = t.groups.at(0).kind;
  EXPECT_EQ(calls.at(t.key(kind, 2)).compute_ns, 300);
  EXPECT_EQ(calls.at(t.key(kind, 2)).wait_ns, 150);
  EXPECT_EQ(calls.at(t.key(kind, 4)).compute_ns, 250);
}

TEST(StragglerTiming, AnExitThatIsOnlyAnUpperBoundTimesNeitherItsWaitNorTheComputeAfterIt) {
  const auto ev = all_reduce_event;
  using K = records::ExitKind;
  const auto r = one_rank_round({ev(1, 1, 100, 200, K::completed), ev(2, 2, 300, 700, K::ordered),
                                 ev(3, 3, 800, 900, K::completed), ev(4, 4, 1000, 1100, K::waited)});
  const auto t = build_table(r, {}, nullptr);
  const auto& calls = t.ranks.at(0);
  const auto kind = t.groups.at(0).kind;
  EXPECT_EQ(calls.count(t.key(kind, 2)), 0u);  // its wait is an upper bound
  EXPECT_EQ(calls.count(t.key(kind, 3)), 0u);  // what it computed after call 2 is unknown
  ASSERT_EQ(calls.count(t.key(kind, 4)), 1u);
  EXPECT_EQ(calls.at(t.key(kind, 4)).compute_ns, 100);
  EXPECT_EQ(calls.at(t.key(kind, 4)).wait_ns, 100);
  // Round evidence carries the kind through its JSON form.
  auto parsed = decode_round(encode_round(r, "j", 0), "j", 0);
  ASSERT_TRUE(parsed) << parsed.error().message();
  ASSERT_EQ(parsed->ranks.at(0).events.size(), 4u);
  EXPECT_EQ(parsed->ranks.at(0).events[1].exit_kind, K::ordered);
  EXPECT_EQ(parsed->ranks.at(0).events[3].exit_kind, K::waited);
}

TEST(StragglerTiming, AWaitedExitBoundsTheWaitAndTimesTheComputeAfterIt) {
  // gloo's sends and receives on torch 2.x: the exit is the trainer's wait() returning (ExitKind::waited),
  // which may come long after the call completed. Its wait is an upper bound; the compute after it is exact.
  const auto ev = all_reduce_event;
  using K = records::ExitKind;
  const auto r = one_rank_round(
      {ev(1, 1, 100, 200, K::completed), ev(2, 2, 300, 900, K::waited), ev(3, 3, 1000, 1100, K::completed)});
  const auto t = build_table(r, {}, nullptr);
  const auto& calls = t.ranks.at(0);
  const auto kind = t.groups.at(0).kind;
  ASSERT_EQ(calls.count(t.key(kind, 2)), 1u);
  EXPECT_FALSE(calls.at(t.key(kind, 2)).wait_exact);
  EXPECT_EQ(calls.at(t.key(kind, 2)).wait_ns, 600);  // the bound
  EXPECT_EQ(calls.at(t.key(kind, 2)).compute_ns, 100);
  ASSERT_EQ(calls.count(t.key(kind, 3)), 1u);
  EXPECT_TRUE(calls.at(t.key(kind, 3)).wait_exact);
  EXPECT_EQ(calls.at(t.key(kind, 3)).compute_ns, 100);  // from the wait's return: the rank resumed its work there
}

// Marks every call of the groups `pick` selects as exited by the trainer's wait() (ExitKind::waited).
void mark_waited(std::vector<RoundEvidence>& ev, const Mesh& mesh, const std::function<bool(const GroupInfo&)>& pick) {
  std::set<std::uint64_t> ids;
  for (const auto& g : mesh_groups(mesh))
    if (pick(g)) ids.insert(g.id);
  for (auto& round : ev)
    for (auto& r : round.ranks)
      for (auto& e : r.events)
        if (ids.count(e.fingerprint.group)) e.exit_kind = records::ExitKind::waited;
}

TEST(StragglerDecide, WaitsThatEndWithTheTrainersWaitAreNoEvidenceOfASlowLink) {
  // One tp group's members issue their calls, do 8x the link's time of other work, then wait: the recorded
  // exits (waited) are that late on every call. Timed as completions, the group is a slow intra-node link.
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=4,tp=2");
  s.ranks_per_node = 2;
  s.seed = seed;
  const std::int64_t node = static_cast<std::int64_t>(rng() % 4);
  const auto late = [node](const GroupInfo& g) { return g.kind == "tp" && g.members[0] == 2 * node; };
  s.link_factor = [late](const GroupInfo& g) { return late(g) ? 8.0 : 1.0; };
  auto ev = sim::run(s);
  auto completed = ev;
  mark_waited(completed, s.mesh, [](const GroupInfo&) { return false; });
  EXPECT_EQ(analyse(completed, s.mesh, {}).decision.diagnosis, Diagnosis::intra_node_link) << "seed " << seed;
  mark_waited(ev, s.mesh, late);
  auto a = analyse(ev, s.mesh, {});
  EXPECT_TRUE(a.decision.slow_groups.empty()) << "seed " << seed;
  EXPECT_EQ(a.decision.diagnosis, Diagnosis::none) << "seed " << seed;
  EXPECT_FALSE(any_suspect(a.decision)) << "seed " << seed;
  // The other kinds' exact calls still decide: a slow dp group there is found.
  s.link_factor = [late](const GroupInfo& g) {
    return late(g) ? 8.0 : g.kind == "dp" && g.members[0] == 0 ? 8.0 : 1.0;
  };
  ev = sim::run(s);
  mark_waited(ev, s.mesh, late);
  a = analyse(ev, s.mesh, {});
  ASSERT_EQ(a.decision.slow_groups.size(), 1u) << "seed " << seed;
  EXPECT_EQ(a.decision.slow_groups[0].group.kind, "dp");
}

TEST(StragglerTiming, CallsByRankWalksTheRanksAscendingWhateverTheOrderTheyCameIn) {
  // The table's blocks of calls walked as the std::map of per-rank arrays it replaced (issue 40): ranks ascending,
  // a rank read again replaces its calls (the last of a repeated key counts), a rank without calls still listed.
  CallsByRank t;
  std::vector<std::uint32_t> scratch;
  const auto call = [](std::int64_t compute) {
    CallTiming c;
    c.compute_ns = compute;
    return c;
  };
  using E = RankCalls::Entry;
  t.assign(2, {E{{0, 2}, call(22)}, E{{0, 1}, call(21)}}, scratch);
  t.assign(5, {}, scratch);
  t.assign(1, {E{{1, 1}, call(11)}}, scratch);                       // below the last rank
  t.assign(2, {E{{0, 3}, call(23)}, E{{0, 3}, call(24)}}, scratch);  // read again
  t.set(7, {0, 1}, call(71));
  t.set(1, {0, 9}, call(19));  // a run not at the array's end
  std::vector<std::int64_t> ranks;
  for (const auto& [r, calls] : t) ranks.push_back(r);
  EXPECT_EQ(ranks, (std::vector<std::int64_t>{1, 2, 5, 7}));
  EXPECT_TRUE(t.at(5).empty());
  ASSERT_EQ(t.at(2).size(), 1u);
  EXPECT_EQ(t.at(2).at({0, 3}).compute_ns, 24);
  ASSERT_EQ(t.at(1).size(), 2u);
  EXPECT_EQ(t.at(1).begin()->first, (CallKey{0, 9}));  // in key order
  t.erase({0, 3});  // runs out of rank order in the blocks (a rank read again, set one by one)
  EXPECT_TRUE(t.at(2).empty());
  EXPECT_EQ(t.at(1).at({1, 1}).compute_ns, 11);
  EXPECT_EQ(t.at(1).at({0, 9}).compute_ns, 19);
  EXPECT_EQ(t.at(7).at({0, 1}).compute_ns, 71);
  EXPECT_EQ(t.count(3), 0u);
  EXPECT_THROW(t.at(3), std::out_of_range);
  t.erase({0, 1});
  EXPECT_TRUE(t.at(7).empty());
  EXPECT_EQ(t.at(1).size(), 2u);
  EXPECT_EQ(t.size(), 4u);
}

TEST(StragglerTiming, CallsByRankNotesRanksWithTheKeysOfTheRankBefore) {
  // same_keys_as_before: true only where a rank's keys are the rank before's (UsedCalls::add and KeySets take the
  // rank before's key set there without reading the calls again, issue 40); a rank added between, or one call set,
  // leaves it false (not known), a key erased from every rank keeps it.
  CallsByRank t;
  std::vector<std::uint32_t> scratch;
  const auto call = [](std::int64_t compute) {
    CallTiming c;
    c.compute_ns = compute;
    return c;
  };
  using E = RankCalls::Entry;
  const std::vector<E> two{E{{0, 1}, call(1)}, E{{0, 2}, call(2)}};
  t.assign(0, two, scratch);
  t.assign(2, {E{{0, 2}, call(5)}, E{{0, 1}, call(6)}}, scratch);  // the same keys, out of order
  t.assign(3, two, scratch);
  t.assign(4, {E{{0, 1}, call(1)}}, scratch);
  t.assign(5, {}, scratch);
  t.assign(6, {}, scratch);
  EXPECT_FALSE(t.same_keys_as_before(0));
  EXPECT_TRUE(t.same_keys_as_before(1));
  EXPECT_TRUE(t.same_keys_as_before(2));
  EXPECT_FALSE(t.same_keys_as_before(3));
  EXPECT_FALSE(t.same_keys_as_before(4));
  EXPECT_TRUE(t.same_keys_as_before(5));  // both without calls
  t.assign(1, two, scratch);              // between ranks 0 and 2
  ASSERT_EQ(t.rank_of(1), 1);
  EXPECT_TRUE(t.same_keys_as_before(1));
  EXPECT_FALSE(t.same_keys_as_before(2));  // not known: compared before rank 1 came
  t.set(3, {0, 3}, call(3));
  EXPECT_FALSE(t.same_keys_as_before(3));
  EXPECT_FALSE(t.same_keys_as_before(4));
  t.erase({0, 2});
  EXPECT_TRUE(t.same_keys_as_before(1));
  EXPECT_EQ(t.calls_of(1).size(), 1u);
}

TEST(StragglerTiming, CallsRanksDisagreeOnAreDropped) {
  sim::Spec s;
  s.rounds = 1;
  auto ev = sim::run(s);
  auto& e = ev[0].ranks[2].events[10];
  e.fingerprint.count = 5;
  auto t = build_table(ev[0], mesh_groups(s.mesh), nullptr);
  EXPECT_EQ(t.misaligned, 1);
  for (const auto& [r, calls] : t.ranks) EXPECT_FALSE(calls.count(t.key("dp", e.fingerprint.group_seq)));
}

TEST(StragglerDecide, CleanMeshesNameNoOne) {
  for (int i = 0; i < 12; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    const char* meshes[] = {"dp=4", "dp=8", "dp=4,tp=2", "dp=3,tp=4", "dp=8,tp=2", "dp=2,tp=2,pp=2"};
    sim::Spec s;
    s.mesh = *Mesh::parse(meshes[rng() % 6]);
    s.ranks_per_node = s.mesh.size(Dim::tp);
    s.seed = seed;
    auto a = simulate(s);
    EXPECT_TRUE(a.decision.enough_data) << s.mesh.spec();
    EXPECT_FALSE(any_suspect(a.decision)) << "seed " << seed << " mesh " << s.mesh.spec();
    EXPECT_EQ(a.decision.diagnosis, Diagnosis::none);
    auto v = make_verdict("straggler", "j", a.decision, a.rounds, a.tables, s.mesh, "test");
    EXPECT_EQ(v.status, VerdictStatus::healthy) << v.summary;
  }
}

TEST(StragglerDecide, ARandomComputeStragglerIsNamedWithReasonCompute) {
  for (int i = 0; i < 12; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    const char* meshes[] = {"dp=4", "dp=8", "dp=4,tp=2", "dp=3,tp=4", "dp=8,tp=2"};
    sim::Spec s;
    s.mesh = *Mesh::parse(meshes[rng() % 5]);
    s.ranks_per_node = s.mesh.size(Dim::tp);
    s.seed = seed;
    const std::int64_t victim = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(s.mesh.world_size()));
    const double factor = std::uniform_real_distribution<double>(1.3, 3.0)(rng);
    s.compute_factor[victim] = factor;
    auto a = simulate(s);
    EXPECT_EQ(compute_suspects(a.decision), std::vector<std::int64_t>{victim})
        << "seed " << seed << " mesh " << s.mesh.spec() << " factor " << factor;
    EXPECT_TRUE(a.decision.slow_groups.empty()) << "seed " << seed;
    EXPECT_EQ(a.decision.diagnosis, Diagnosis::compute);
    ASSERT_FALSE(a.decision.suspects.empty());
    EXPECT_NEAR(a.decision.suspects[0].ratio, factor, 0.15 * factor);
    auto v = make_verdict("straggler", "j", a.decision, a.rounds, a.tables, s.mesh, "test");
    EXPECT_EQ(v.status, VerdictStatus::attributed);
    EXPECT_EQ(v.scope, Scope::rank);
  }
}

TEST(StragglerDecide, A13xStragglerIsFoundWithinThreeRounds) {
  const auto seed = fresh_seed();
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=8");
  s.rounds = 3;
  s.seed = seed;
  s.compute_factor[5] = 1.3;
  auto a = simulate(s);
  EXPECT_EQ(compute_suspects(a.decision), std::vector<std::int64_t>{5}) << "seed " << seed;
}

// A peer group of two (a two-rank job; the replicas of dp=2 x tp): no strict minority, but the slow one of a
// synchronous pair computes longer and its partner waits for it. Before, such groups were never decided
// ("0 of 3 rounds had 3 or more calls every peer completed" on a clean two-rank job with 63 calls a round).
TEST(StragglerDecide, InPeerGroupsOfTwoTheRankItsPartnerWaitsForIsNamedAndCleanPairsNameNoOne) {
  for (int i = 0; i < 16; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    const char* meshes[] = {"dp=2", "dp=2,tp=2", "dp=2,tp=4"};
    sim::Spec s;
    s.mesh = *Mesh::parse(meshes[rng() % 3]);
    s.ranks_per_node = s.mesh.size(Dim::tp);
    s.seed = seed;
    const bool clean = i % 2 == 0;
    const std::int64_t victim = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(s.mesh.world_size()));
    const double factor = std::uniform_real_distribution<double>(1.3, 3.0)(rng);
    if (!clean) s.compute_factor[victim] = factor;
    auto a = simulate(s);
    EXPECT_TRUE(a.decision.enough_data) << "seed " << seed << " mesh " << s.mesh.spec();
    EXPECT_TRUE(a.decision.slow_groups.empty()) << "seed " << seed;
    EXPECT_EQ(compute_suspects(a.decision), clean ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{victim})
        << "seed " << seed << " mesh " << s.mesh.spec() << (clean ? " clean" : " factor ") << factor;
  }
}

// In a pair, a rank that computes longer while its partner does not wait for it (the partner arrives later
// still, e.g. delayed by its own other group) is not named: the asymmetry must be the pair's.
TEST(StragglerDecide, InAPairLongerComputeThePartnerDoesNotWaitForIsNoStraggler) {
  const auto seed = fresh_seed();
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=2");
  s.seed = seed;
  s.jitter = 0.02;
  auto a = simulate(s);
  ASSERT_TRUE(a.decision.enough_data);
  // The same evidence, with rank 0 made to compute 1.5x as long and rank 1 to wait 0.1 ms per call longer
  // than rank 0: rank 0 computes longer and waits less (what names a rank of a larger group), but its
  // partner waits far less than its excess (about 1 ms per call).
  auto evidence = sim::run(s);
  for (auto& round : evidence) {
    ASSERT_EQ(round.ranks.size(), 2u);
    auto& r0 = round.ranks[0].rank == 0 ? round.ranks[0] : round.ranks[1];
    auto& r1 = round.ranks[0].rank == 0 ? round.ranks[1] : round.ranks[0];
    ASSERT_EQ(r0.events.size(), r1.events.size());
    std::vector<std::int64_t> gap(r0.events.size(), 0);
    for (std::size_t k = 1; k < r0.events.size(); ++k) gap[k] = r0.events[k].enter_ns - r0.events[k - 1].exit_ns;
    std::int64_t shift = 0;
    for (std::size_t k = 1; k < r0.events.size(); ++k) {
      shift += gap[k] / 2;
      r0.events[k].enter_ns += shift;
      if (r0.events[k].exit_ns) r0.events[k].exit_ns += shift;
    }
    for (std::size_t k = 0; k < r1.events.size(); ++k)
      if (r0.events[k].exit_ns && r1.events[k].exit_ns)
        r1.events[k].exit_ns = r1.events[k].enter_ns + (r0.events[k].exit_ns - r0.events[k].enter_ns) + 100'000;
  }
  auto b = analyse(evidence, s.mesh, {});
  ASSERT_TRUE(b.decision.enough_data);
  EXPECT_TRUE(compute_suspects(b.decision).empty()) << "seed " << seed;
  // And where rank 1 waits for it (1.5 ms more per call: more than half its excess), rank 0 is named.
  for (auto& round : evidence) {
    auto& r0 = round.ranks[0].rank == 0 ? round.ranks[0] : round.ranks[1];
    auto& r1 = round.ranks[0].rank == 0 ? round.ranks[1] : round.ranks[0];
    for (std::size_t k = 0; k < r1.events.size(); ++k)
      if (r0.events[k].exit_ns && r1.events[k].exit_ns) r1.events[k].exit_ns += 1'500'000;
  }
  auto c = analyse(evidence, s.mesh, {});
  EXPECT_EQ(compute_suspects(c.decision), std::vector<std::int64_t>{0}) << "seed " << seed;
}

TEST(StragglerDecide, TwoStragglersInDifferentPeerGroupsAreBothNamed) {
  const auto seed = fresh_seed();
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=4,tp=2");  // peer groups {0,2,4,6} and {1,3,5,7}
  s.ranks_per_node = 2;
  s.seed = seed;
  s.compute_factor[2] = 1.6;
  s.compute_factor[7] = 2.2;
  auto a = simulate(s);
  EXPECT_EQ(compute_suspects(a.decision), (std::vector<std::int64_t>{2, 7})) << "seed " << seed;
  EXPECT_TRUE(a.decision.slow_groups.empty());
}

// A rank whose extra time falls in one gap of a step of several calls (a slow data loader: here before the
// first of the step's 3 calls, tp then dp then world, on a dp=4 x tp=2 mesh) computes longer at one call in
// three: the per-call median sees nothing, the step does. Named with its step's ratio; clean runs and a loaded
// host's random spikes (2% of calls, 4x a call's compute) name no one.
TEST(StragglerDecide, AStallInOneGapOfTheStepIsNamedByTheStep) {
  for (int i = 0; i < 12; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    sim::Spec s;
    s.mesh = *Mesh::parse("dp=4,tp=2");
    s.seed = seed;
    const double c = s.compute_ns;
    s.extra_ns = [c](std::int64_t, std::uint64_t, std::mt19937_64& g) {
      return std::uniform_real_distribution<double>(0, 1)(g) < 0.02 ? 4 * c : 0.0;
    };
    const bool clean = i % 4 == 3;
    const auto victim = static_cast<std::int64_t>(rng() % 8);
    const double factor = std::uniform_real_distribution<double>(1.3, 3.0)(rng);
    if (!clean) s.stall_ns[victim] = (factor - 1) * 3 * c;  // the step's 3 calls' compute, once
    auto a = simulate(s);
    if (clean) {
      EXPECT_TRUE(compute_suspects(a.decision).empty()) << "seed " << seed;
      continue;
    }
    ASSERT_EQ(compute_suspects(a.decision), std::vector<std::int64_t>{victim})
        << "seed " << seed << " factor " << factor;
    EXPECT_NEAR(a.decision.suspects[0].ratio, factor, 0.1 * factor) << "seed " << seed;
  }
}

TEST(StragglerDecide, FlaggedInOneRoundOfThreeIsNotNamed) {
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=6");
  s.seed = fresh_seed();
  auto ev = sim::run(s);
  sim::Spec slow = s;
  slow.compute_factor[3] = 2.0;
  slow.rounds = 1;
  ev[1] = sim::run(slow)[0];
  for (auto& r : ev[1].ranks)
    for (auto& e : r.events) e.fingerprint.group_seq += 50000, e.op_seq += 50000;
  auto a = analyse(ev, s.mesh, {});
  EXPECT_EQ(a.decision.rounds_with_data, 3);
  EXPECT_TRUE(compute_suspects(a.decision).empty());
  // Two of three rounds: named.
  ev[2] = ev[1];
  for (auto& r : ev[2].ranks)
    for (auto& e : r.events) e.fingerprint.group_seq += 50000, e.op_seq += 50000;
  a = analyse(ev, s.mesh, {});
  EXPECT_EQ(compute_suspects(a.decision), std::vector<std::int64_t>{3});
}

// A loaded host: every rank is descheduled now and then for up to 8 calls' worth of compute, and the rank
// hosting the job's TCPStore does a few percent more on top. Neither is a straggler.
TEST(StragglerDecide, OrdinaryJitterAndTheStoreHostsExtraWorkNameNoOne) {
  for (int i = 0; i < 12; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    const char* meshes[] = {"dp=4", "dp=8", "dp=4,tp=2"};
    sim::Spec s;
    s.mesh = *Mesh::parse(meshes[rng() % 3]);
    s.ranks_per_node = s.mesh.size(Dim::tp);
    s.seed = seed;
    s.jitter = 0.15;
    s.compute_factor[0] = 1.06;  // the store host
    const double c = s.compute_ns;
    s.extra_ns = [c](std::int64_t, std::uint64_t, std::mt19937_64& g) {
      return std::uniform_real_distribution<double>(0, 1)(g) < 0.02
                 ? std::uniform_real_distribution<double>(1, 8)(g) * c
                 : 0.0;
    };
    auto a = simulate(s);
    EXPECT_TRUE(a.decision.enough_data);
    EXPECT_FALSE(any_suspect(a.decision)) << "seed " << seed << " mesh " << s.mesh.spec();
  }
}

// Machine-wide load: every rank slowed alike, with descheduling bursts that hit all ranks at the same call.
TEST(StragglerDecide, EveryRankSlowedAlikeIsNoStraggler) {
  const auto seed = fresh_seed();
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=6");
  s.seed = seed;
  s.fleet_factor = [](std::int64_t round) { return 1.0 + round; };
  const double c = s.compute_ns;
  s.extra_ns = [c](std::int64_t, std::uint64_t step, std::mt19937_64&) { return step % 4 == 0 ? 3 * c : 0.0; };
  auto a = simulate(s);
  EXPECT_FALSE(any_suspect(a.decision)) << "seed " << seed;
}

// A 1.3x straggler on a noisy host (6% jitter and descheduling spikes on every rank) is found in 3 rounds.
// (At 10% uniform jitter per call it was missed about once in 180 draws: the rule needs the effect above
// the other peers' spread, and 3 rounds of 20 steps leave that spread wide.)
// A miss is a statistical property of the rule, so the test asserts what must always hold (never an innocent
// rank) on every draw, and a detection rate over 200 draws (at most 6 misses), printing missed seeds. Measured:
// 43 and 51 misses in 10,000 draws (with 2% and 6% as contended_min_step_share: about 1 in 200; e.g. seeds
// 10437757634195368322, 16283173979124360572 and 6828131335284135983, all three in one CI run of the 40 draws this test
// took before, where it allowed 2: that failed about once in 1,000 runs). With 1 in 200, more than 6 misses in 200
// draws happen about once in 10^4 runs.
TEST(StragglerDecide, A13xStragglerIsFoundWithinThreeRoundsOnANoisyHost) {
  int found = 0;
  const int draws = 200;
  for (int i = 0; i < draws; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    sim::Spec s;
    s.mesh = *Mesh::parse("dp=4");
    s.rounds = 3;
    s.seed = seed;
    s.jitter = 0.06;
    const std::int64_t victim = static_cast<std::int64_t>(rng() % 4);
    s.compute_factor[victim] = 1.3;
    const double c = s.compute_ns;
    s.extra_ns = [c](std::int64_t, std::uint64_t, std::mt19937_64& g) {
      return std::uniform_real_distribution<double>(0, 1)(g) < 0.02 ? 4 * c : 0.0;
    };
    auto a = simulate(s);
    const auto named = compute_suspects(a.decision);
    EXPECT_TRUE(named.empty() || named == std::vector<std::int64_t>{victim}) << "innocent rank named, seed " << seed;
    if (named == std::vector<std::int64_t>{victim})
      ++found;
    else
      std::printf("A13xStraggler: missed at seed %llu\n", static_cast<unsigned long long>(seed));
  }
  EXPECT_GE(found, draws - 6);
}

// A host with more runnable threads than CPUs: every rank waits for a CPU (60% of its compute time here),
// one innocent rank's compute time is 1.25x its peers' from that waiting alone, and the CPU used per call
// is alike. The scheduler counters keep it from being named; without them time alone would name it.
TEST(StragglerDecide, OnAContendedHostWaitingForACpuIsNoStraggler) {
  for (int i = 0; i < 8; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    sim::Spec s;
    s.mesh = *Mesh::parse(i % 2 ? "dp=4" : "dp=6");
    s.rounds = 4;
    s.baseline = true;
    s.seed = seed;
    const auto innocent = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(s.mesh.world_size()));
    s.compute_factor[innocent] = 1.25;  // its time, not its work: the extra is time waiting for a CPU
    s.runq_share = 0.6;
    s.runq_extra_ns[innocent] = 0.25 * s.compute_ns;
    s.cpu_per_call = [](std::int64_t, std::int64_t, std::mt19937_64& g) {
      return 8e5 * (1 + 0.03 * std::uniform_real_distribution<double>(-1, 1)(g));
    };
    auto a = simulate(s);
    EXPECT_EQ(a.rounds.size(), 3u) << "the baseline read is not a round";
    EXPECT_TRUE(compute_suspects(a.decision).empty()) << "innocent rank " << innocent << " named, seed " << seed;
    ASSERT_FALSE(a.rounds.empty());
    ASSERT_FALSE(a.rounds.back().peers.empty());
    EXPECT_TRUE(a.rounds.back().peers[0].contended) << "seed " << seed;
    // The same times without the counters: the time measure decides, and names the waiting rank.
    auto evidence = sim::run(s);
    for (auto& r : evidence)
      for (auto& x : r.ranks) x.cpu_ns = x.runq_ns = -1;
    EXPECT_EQ(compute_suspects(analyse(evidence, s.mesh, {}).decision), std::vector<std::int64_t>{innocent})
        << "seed " << seed;
  }
}

// On a contended host a rank doing more work shows in the CPU it uses per call, even where its
// compute time does not stand out: it is longer by the extra CPU of its main thread and no more (the
// peers' waits leave it the CPUs), 1.11x at 1.3x the work here.
TEST(StragglerDecide, OnAContendedHostTheRankUsingMoreCpuPerCallIsNamed) {
  for (int i = 0; i < 10; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    sim::Spec s;
    s.mesh = *Mesh::parse(i % 2 ? "dp=4" : "dp=4,tp=2");
    s.ranks_per_node = s.mesh.size(Dim::tp);
    s.rounds = 4;
    s.baseline = true;
    s.seed = seed;
    const auto victim = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(s.mesh.world_size()));
    const double factor = std::uniform_real_distribution<double>(1.3, 3.0)(rng);
    s.runq_share = 0.5;
    s.compute_factor[victim] = 1 + 0.9 * 8e5 * (factor - 1) / s.compute_ns;  // its main thread's extra CPU
    s.cpu_per_call = [victim, factor](std::int64_t rank, std::int64_t, std::mt19937_64& g) {
      return 8e5 * (rank == victim ? factor : 1.0) * (1 + 0.03 * std::uniform_real_distribution<double>(-1, 1)(g));
    };
    auto a = simulate(s);
    EXPECT_EQ(compute_suspects(a.decision), std::vector<std::int64_t>{victim})
        << "seed " << seed << " factor " << factor;
    ASSERT_EQ(a.decision.suspects.size(), 1u) << "seed " << seed;
    EXPECT_EQ(a.decision.suspects[0].evidence["measure"], "cpu");
    EXPECT_NEAR(a.decision.suspects[0].ratio, factor, 0.1 * factor) << "seed " << seed;
  }
}

// Rounds from recorded per-call means of a dp=4 job (4 ranks, one peer group): per rank its compute and
// wait per call, and its CPU, CPU wait and main-thread CPU per call from the scheduler counters (ms).
struct RecordedRank {
  double compute_ms, wait_ms, cpu_ms, runq_ms, main_ms;
};

TimingTable recorded_round(const std::vector<RecordedRank>& ranks, std::uint64_t first_call, std::int64_t calls) {
  TimingTable t;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto rank = static_cast<std::int64_t>(r);
    sim::add_uniform_calls(t, rank, ranks[r].compute_ms, ranks[r].wait_ms, first_call, calls);
    CpuPerCall cpu;
    cpu.cpu_ns = ranks[r].cpu_ms * 1e6;
    cpu.runq_ns = ranks[r].runq_ms * 1e6;
    cpu.main_cpu_ns = ranks[r].main_ms * 1e6;
    cpu.calls = calls;
    cpu.window_ns = static_cast<std::int64_t>(1.5e9);
    t.cpu[rank] = cpu;
  }
  return t;
}

Decision decide_recorded(const std::vector<std::vector<RecordedRank>>& rounds, const std::vector<std::int64_t>& calls,
                         std::vector<RoundResult>* results = nullptr, const DecideOptions& o = {}) {
  const Mesh mesh = *Mesh::parse("dp=4");
  std::vector<TimingTable> tables;
  std::vector<RoundResult> out;
  std::uint64_t first = 1;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    tables.push_back(recorded_round(rounds[i], first, calls[i]));
    first += static_cast<std::uint64_t>(calls[i]);
    out.push_back(analyse_round(tables.back(), mesh, o));
  }
  auto d = decide(out, tables, mesh, o);
  if (results) *results = std::move(out);
  return d;
}

// The same on another mesh (rank r of each round is rank r of the mesh), each round's table first passed to `tweak`.
Decision decide_recorded_on(const std::string& mesh_text, const std::vector<std::vector<RecordedRank>>& rounds,
                            const std::vector<std::int64_t>& calls,
                            const std::function<void(TimingTable&)>& tweak = nullptr) {
  const Mesh mesh = *Mesh::parse(mesh_text);
  std::vector<TimingTable> tables;
  std::vector<RoundResult> out;
  std::uint64_t first = 1;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    tables.push_back(recorded_round(rounds[i], first, calls[i]));
    first += static_cast<std::uint64_t>(calls[i]);
    if (tweak) tweak(tables.back());
    out.push_back(analyse_round(tables.back(), mesh, {}));
  }
  return decide(out, tables, mesh, {});
}

Decision decide_recorded_pair(const std::vector<std::vector<RecordedRank>>& rounds,
                              const std::vector<std::int64_t>& calls) {
  return decide_recorded_on("dp=2", rounds, calls);
}

// A former innocent (a clean dp=2 x tp=2 job, torch 1.13, load 9.4 on 2 CPUs, seed 20266206; recorded run
// pair-clean-20266206): rank 1 used 1.21-1.31x its partner's CPU per call in all three rounds and kept it waiting,
// as a slower rank does; the other pair's ranks stood 1.15x and 0.87x apart pooled, so that much is this host's
// noise. With the other pair quiet, the same rank is named; with a straggler in each pair, both are.
TEST(StragglerDecide, APairsRankWithinTheOtherPairsNoiseIsNotNamed) {
  const std::vector<std::vector<RecordedRank>> seed20266206 = {{{19.088, 9.704, 7.561, 13.096, 6.918},
                                                                {19.227, 9.464, 8.834, 12.682, 7.880},
                                                                {13.577, 15.114, 5.848, 9.380, 5.243},
                                                                {17.497, 11.265, 6.749, 12.345, 6.115}},
                                                               {{12.753, 18.586, 5.855, 9.071, 5.049},
                                                                {25.658, 5.499, 8.986, 18.614, 8.424},
                                                                {14.819, 16.421, 5.633, 10.351, 5.151},
                                                                {20.792, 10.406, 7.419, 15.201, 6.693}},
                                                               {{24.276, 9.746, 8.632, 17.027, 8.015},
                                                                {27.143, 6.964, 9.413, 19.680, 8.468},
                                                                {22.604, 11.503, 7.828, 17.956, 7.036},
                                                                {19.798, 14.384, 7.620, 13.560, 6.956}}};
  const std::vector<std::int64_t> calls = {52, 48, 44};
  const auto run = [&](const std::vector<std::vector<RecordedRank>>& rounds) {
    return decide_recorded_on("dp=2,tp=2", rounds, calls);
  };
  auto d = run(seed20266206);
  EXPECT_TRUE(compute_suspects(d).empty());
  std::string all;
  for (const auto& n : d.notes) all += n + " | ";
  EXPECT_NE(all.find("rank 1 used 1.2"), std::string::npos) << all;
  EXPECT_NE(std::find(d.unconfirmed.begin(), d.unconfirmed.end(), 1), d.unconfirmed.end());  // overruled, listed
  EXPECT_EQ(all.find("rank 1 was flagged"), std::string::npos) << all;  // ... not as a minority of rounds
  auto quiet = seed20266206;  // rank 0 as rank 2: the other pair shows no noise
  for (auto& round : quiet) round[0] = round[2];
  EXPECT_EQ(compute_suspects(run(quiet)), std::vector<std::int64_t>{1});
  auto two = quiet;  // rank 0 slowed too, by 1.6x its partner's CPU: a straggler in each pair
  for (auto& round : two) {
    round[0].cpu_ms *= 1.6;
    round[0].main_ms *= 1.6;
    round[0].compute_ms += 10;
    round[0].wait_ms -= 5;
    round[2].wait_ms += 5;
  }
  EXPECT_EQ(compute_suspects(run(two)), (std::vector<std::int64_t>{0, 1}));
}

// A former miss (a dp=4 job on torch 2.15 at load ~6 on 2 CPUs, seed 1973658015; recorded run sleep-1973658015):
// rank 3 slept 1.54x its step in one gap of it. Its peers' run-queue wait accrued inside their collectives too, so
// no one's time off a CPU stood out and its compute per call was within the others'; but it waited 0.16-0.33x the
// least wait of any peer in every round: they waited for it. Named late, cause blocked (no more CPU, no longer
// wait for one). Where its peers did not wait for it (its wait as theirs), or it waited more than half the least
// of theirs, no one is named.
TEST(StragglerDecide, OnAContendedHostTheRankItsPeersWaitForIsNamedLate) {
  const std::vector<std::vector<RecordedRank>> seed1973658015 = {{{258.592, 110.001, 33.384, 115.950, 31.585},
                                                                  {124.505, 124.638, 31.134, 101.667, 29.969},
                                                                  {247.565, 113.454, 30.484, 111.326, 29.685},
                                                                  {220.761, 28.340, 32.678, 110.312, 30.857}},
                                                                 {{224.383, 124.711, 29.313, 120.970, 27.743},
                                                                  {313.645, 106.424, 31.068, 139.300, 29.341},
                                                                  {236.109, 111.722, 28.790, 132.005, 27.677},
                                                                  {312.266, 36.228, 35.278, 145.122, 33.366}},
                                                                 {{379.237, 174.287, 34.862, 131.279, 33.661},
                                                                  {205.349, 129.114, 35.417, 171.313, 34.119},
                                                                  {192.125, 141.499, 34.168, 159.162, 32.992},
                                                                  {313.780, 19.772, 35.813, 161.570, 33.730}}};
  const std::vector<std::int64_t> calls = {6, 5, 4};
  auto d = decide_recorded(seed1973658015, calls);
  ASSERT_EQ(compute_suspects(d), std::vector<std::int64_t>{3});
  EXPECT_EQ(d.suspects[0].evidence["measure"], "late");
  EXPECT_EQ(d.suspects[0].evidence["cause"], "blocked");
  auto waited_alike = seed1973658015;
  for (auto& round : waited_alike) round[3].wait_ms = round[2].wait_ms;
  EXPECT_TRUE(compute_suspects(decide_recorded(waited_alike, calls)).empty());
  auto less_late = seed1973658015;  // it waits 0.6x the least of its peers' waits: within contention's reshuffling
  for (auto& round : less_late) {
    double least = 1e300;
    for (std::size_t r = 0; r < 3; ++r) least = std::min(least, round[r].wait_ms);
    round[3].wait_ms = 0.6 * least;
  }
  EXPECT_TRUE(compute_suspects(decide_recorded(less_late, calls)).empty());
}

// A former miss (a two-rank job under a cgroup v1 quota of 0.42 CPU on rank 1, torch 1.13, load 5.5, seed
// 20273601; recorded run pair-quota-20273601): rank 1 computed about 2x its partner's time on 0.87-0.93x its CPU,
// its extra time spent throttled, and its partner waited for it. cpu_wait does not apply to a pair; its cgroup's
// throttled time does (measure throttled). The same rounds with the quota shared by both ranks, or unreadable
// counters, name no one.
TEST(StragglerDecide, InAPairTheRankItsCgroupThrottlesIsNamed) {
  const std::vector<std::vector<RecordedRank>> seed20273601 = {
      {{22.900, 25.253, 22.564, 0.913, 21.814}, {42.776, 5.281, 20.114, 22.589, 19.207}},
      {{21.600, 28.026, 22.338, 0.852, 21.451}, {45.572, 4.099, 20.790, 27.271, 19.866}},
      {{19.199, 20.657, 19.102, 0.681, 18.253}, {34.005, 5.834, 16.562, 19.315, 15.788}}};
  const std::vector<std::int64_t> calls = {32, 30, 38};
  const auto run = [&](double throttled0_ms, double throttled1_ms) {
    return decide_recorded_on("dp=2", seed20273601, calls, [&](TimingTable& t) {
      for (std::int64_t r = 0; r < 2; ++r) {
        auto& c = t.cpu[r];
        const double ms = r == 0 ? throttled0_ms : throttled1_ms;
        c.throttled_ns = ms < 0 ? -1 : ms * 1e6;
        c.nr_throttled = ms < 0 ? -1 : (ms > 0 ? 15 : 0);
        c.nr_periods = ms < 0 ? -1 : 15;
      }
    });
  };
  auto d = run(0, 25.4);
  ASSERT_EQ(compute_suspects(d), std::vector<std::int64_t>{1});
  EXPECT_EQ(d.suspects[0].evidence["measure"], "throttled");
  EXPECT_EQ(d.suspects[0].evidence["cause"], "cpu_quota");
  EXPECT_TRUE(compute_suspects(run(0, 0)).empty());        // not throttled: a pair's uneven CPU wait is no evidence
  EXPECT_TRUE(compute_suspects(run(25.4, 25.4)).empty());  // a quota both share
  EXPECT_TRUE(compute_suspects(run(-1, -1)).empty());      // counters unreadable
  EXPECT_TRUE(compute_suspects(run(0, 5)).empty());        // throttled for under half its excess
}

// What a verdict that names no one could not see (a two-rank job, torch 1.13, load 5.9 on 2 CPUs, seed 20268805;
// recorded run pair-noise-20268805): rank 1, slowed 1.42x by the trainer, computed 1.00x, 0.76x and 1.18x its
// partner's time, and its CPU per call was flagged in round 3 alone; both ranks waited for a CPU about half as
// long as they computed. No one is named; the decision lists rank 1 as unconfirmed and says the host is
// oversubscribed, with the ratio below which a straggler may go unnamed. The same pair with CPUs to spare and
// equal computes says neither.
TEST(StragglerDecide, AVerdictThatNamesNoOneSaysWhatItCouldNotSee) {
  const std::vector<std::vector<RecordedRank>> seed20268805 = {
      {{24.594, 6.294, 12.253, 13.729, 11.605}, {23.059, 7.829, 13.203, 11.675, 12.316}},
      {{29.761, 2.896, 14.342, 16.213, 13.966}, {22.998, 9.637, 13.833, 10.826, 13.315}},
      {{24.429, 8.943, 11.923, 12.799, 11.406}, {28.355, 5.034, 15.893, 14.678, 14.952}}};
  const std::vector<std::int64_t> calls = {50, 46, 45};
  auto d = decide_recorded_pair(seed20268805, calls);
  ASSERT_TRUE(d.enough_data);
  EXPECT_TRUE(compute_suspects(d).empty());
  EXPECT_EQ(d.unconfirmed, std::vector<std::int64_t>{1});
  EXPECT_TRUE(d.oversubscribed);
  EXPECT_NEAR(d.noise_cpu_wait_share, 0.5, 0.1);
  EXPECT_NEAR(d.noise_ratio, 14.952 / 11.406, 0.01);  // round 3: rank 1's main-thread CPU, the smaller of its two
  bool said = false;
  for (const auto& n : d.notes) said |= n.find("oversubscribed") != std::string::npos;
  EXPECT_TRUE(said);
  auto quiet = seed20268805;
  for (auto& round : quiet)
    for (auto& r : round) r = {16.0, 8.0, 12.0, 0.4, 11.5};
  d = decide_recorded_pair(quiet, calls);
  EXPECT_TRUE(compute_suspects(d).empty());
  EXPECT_TRUE(d.unconfirmed.empty());
  EXPECT_FALSE(d.oversubscribed);
  EXPECT_LT(d.noise_cpu_wait_share, 0.1);
}

// A former miss (a two-rank job, torch 1.13, load 4.5 on 2 CPUs, seed 500614964; recorded run
// pair-trainer-500614964): rank 1, slowed by the trainer, used 1.41x, 1.11x and 1.16x its partner's CPU per call
// (the cpu measure's floor is 1.2x: flagged in round 1 only), arrived late and kept its partner waiting in all
// three. CPU time per unit of work moves by itself on a loaded VM (two identical processes: 0.80-1.19x each
// other's per 1.5 s window); over the three rounds pooled it used 1.21x, and the cpu measure names it pooled.
TEST(StragglerDecide, InAContendedPairTheRoundsArePooledWhereOneRoundsCpuNoiseHidesTheStraggler) {
  std::vector<std::vector<RecordedRank>> seed500614964 = {
      {{41.125, 18.395, 24.6, 16.5, 23.6}, {54.698, 4.920, 34.7, 20.3, 33.6}},
      {{33.199, 10.639, 24.1, 10.5, 23.5}, {40.459, 3.228, 26.8, 15.1, 26.1}},
      {{38.742, 8.585, 23.9, 13.4, 23.1}, {41.254, 6.172, 27.8, 12.4, 26.9}}};
  const std::vector<std::int64_t> calls = {26, 34, 33};
  // As recorded (1.41, 1.11 and 1.16x its partner's CPU per call): under the cpu floor in two rounds, which clean
  // pairs on a loaded host reach too (pair_persistence_check): not named, and a note says why.
  auto recorded = decide_recorded_pair(seed500614964, calls);
  ASSERT_TRUE(recorded.enough_data);
  EXPECT_TRUE(compute_suspects(recorded).empty());
  EXPECT_TRUE(std::any_of(recorded.notes.begin(), recorded.notes.end(), [](const std::string& n) {
    return n.rfind("rank 1 used", 0) == 0 && n.find("in its least round") != std::string::npos;
  }));
  // Above the floor in every round (1.41, 1.25 and 1.25x): named.
  auto steady = seed500614964;
  for (std::size_t r = 1; r < steady.size(); ++r) {
    steady[r][1].cpu_ms = steady[r][0].cpu_ms * 1.25;
    steady[r][1].main_ms = steady[r][0].main_ms * 1.25;
  }
  auto d = decide_recorded_pair(steady, calls);
  ASSERT_TRUE(d.enough_data);
  ASSERT_EQ(compute_suspects(d), std::vector<std::int64_t>{1});
  EXPECT_EQ(d.suspects[0].evidence["measure"], "cpu");
  // The same CPU where it arrives with its partner (the same compute and wait): more CPU that keeps no one
  // waiting names no one.
  auto level = steady;
  for (auto& round : level) {
    round[1].compute_ms = round[0].compute_ms;
    round[1].wait_ms = round[0].wait_ms;
  }
  EXPECT_TRUE(compute_suspects(decide_recorded_pair(level, calls)).empty());
  // One round's outlier is not pooled into a straggler: 1.41x in round 1, then less CPU than its partner's.
  auto once = steady;
  once[1][1].cpu_ms = once[1][1].main_ms = 22.0;
  once[2][1].cpu_ms = once[2][1].main_ms = 22.0;
  EXPECT_TRUE(compute_suspects(decide_recorded_pair(once, calls)).empty());
  // Under the floor pooled (a clean pair's measured most, 1.15x): no one.
  auto clean = seed500614964;
  for (std::size_t r = 0; r < clean.size(); ++r) {
    clean[r][1].cpu_ms = clean[r][0].cpu_ms * 1.14;
    clean[r][1].main_ms = clean[r][0].main_ms * 1.14;
  }
  EXPECT_TRUE(compute_suspects(decide_recorded_pair(clean, calls)).empty());
}

// Campaign clean run seed 416 (bench/straggler_campaign.py, torch 1.13, 4 ranks on 2 loaded CPUs, nothing
// injected), its three rounds as recorded (--keep): rank 3 used 1.25-1.31x its peers' CPU per call, its main
// thread alike, and arrived late by as much: its compute time 7.5-18.9 ms per call above the median, its
// peers waiting 8.7-19.5 ms longer than it, against 8.4-10.6 ms of CPU excess. That is a slower rank, and
// the cpu measure names it (a 1.40x trainer-slowed rank, seed 9003, showed 1.29x, 1.19x and 1.34x). The
// same CPU with rank 3 arriving with its peers (their compute and wait) is more CPU the oversubscribed host
// absorbed: named only where it stands far outside the other peers' spread and no other rank is flagged.
TEST(StragglerDecide, OnAContendedHostMoreCpuPerCallNamesARankThatArrivesLateOrStandsFarOutsideItsPeers) {
  const std::vector<std::vector<RecordedRank>> seed416 = {{{56.645, 20.562, 31.825, 24.658, 30.343},
                                                           {59.456, 17.745, 32.687, 27.548, 30.953},
                                                           {57.189, 20.130, 32.515, 24.954, 30.476},
                                                           {65.790, 11.413, 41.661, 24.273, 40.238}},
                                                          {{63.995, 16.018, 32.718, 29.330, 31.155},
                                                           {55.126, 24.904, 33.288, 21.106, 31.162},
                                                           {59.578, 20.115, 32.733, 25.600, 30.892},
                                                           {71.573, 8.233, 41.387, 27.729, 40.166}},
                                                          {{64.749, 27.281, 34.564, 46.063, 32.989},
                                                           {64.970, 28.206, 34.123, 44.925, 33.005},
                                                           {67.230, 26.083, 34.463, 47.643, 33.653},
                                                           {85.007, 7.783, 45.142, 55.791, 44.098}}};
  const std::vector<std::int64_t> calls = {20, 19, 15};
  std::vector<RoundResult> rounds;
  auto d = decide_recorded(seed416, calls, &rounds);
  EXPECT_EQ(compute_suspects(d), std::vector<std::int64_t>{3});
  ASSERT_EQ(d.suspects.size(), 1u);
  EXPECT_EQ(d.suspects[0].evidence["measure"], "cpu");
  for (const auto& r : rounds) {
    ASSERT_EQ(r.peers.size(), 1u);
    EXPECT_TRUE(r.peers[0].contended);
  }
  // Rank 3 arriving with its peers: its compute and wait the median of theirs, its CPU as recorded.
  auto on_time = seed416;
  for (auto& round : on_time) {
    std::vector<double> c, w;
    for (std::size_t r = 0; r < 3; ++r) {
      c.push_back(round[r].compute_ms);
      w.push_back(round[r].wait_ms);
    }
    round[3].compute_ms = median(c);
    round[3].wait_ms = median(w);
  }
  // Its extra CPU absorbed (taken from time it would have waited for a CPU), it stands 1.27-1.31x its peers, far
  // outside their spread (at most 0.06): named all the same, as an absorbed CPU straggler.
  d = decide_recorded(on_time, calls, &rounds);
  EXPECT_EQ(compute_suspects(d), std::vector<std::int64_t>{3});
  // ... and a note says why the job's steps hardly show it.
  std::string notes;
  for (const auto& n : d.notes) notes += n + " | ";
  EXPECT_TRUE(std::any_of(d.notes.begin(), d.notes.end(), [](const std::string& n) {
    return n.find("rank 3 used") != std::string::npos && n.find("oversubscribed") != std::string::npos;
  })) << notes;
  for (const auto& r : rounds) {
    const auto& r3 = r.peers.at(0).ranks.at(3);
    EXPECT_TRUE(r3.flagged && r3.absorbed) << r3.cpu_ratio;
  }
  // Not where the other peers' CPU per call spreads over more than half its excess (ranks 0 and 2 at 1.08x and
  // 0.93x: that much is this round's noise): then it must arrive late.
  auto spread = on_time;
  for (auto& round : spread) {
    round[0].cpu_ms *= 1.08;
    round[0].main_ms *= 1.08;
    round[2].cpu_ms *= 0.93;
    round[2].main_ms *= 0.93;
  }
  d = decide_recorded(spread, calls, &rounds);
  EXPECT_TRUE(compute_suspects(d).empty());
  for (const auto& r : rounds)
    for (const auto& rr : r.peers.at(0).ranks) EXPECT_FALSE(rr.flagged) << "rank " << rr.rank << " by " << rr.measure;
  // Nor where another rank of its group is flagged that round (a rank stopped from outside: its peers burn CPU
  // waiting for it, unequally), nor in a pair (no other peers' spread to measure the noise by).
  d = decide_recorded_on("dp=4", on_time, calls, [](TimingTable& t) {
    StoppedWindow& st = t.stopped[1];
    st.samples = 100;
    st.stopped = 40;
    st.window_ns = 1'500'000'000;
    st.calls = 20;
    for (std::int64_t r : {0, 2, 3}) t.stopped[r] = {100, 0, 1'500'000'000, 20};
  });
  EXPECT_EQ(compute_suspects(d), std::vector<std::int64_t>{1});
  std::vector<std::vector<RecordedRank>> pair;
  for (const auto& round : on_time) pair.push_back({round[1], round[3]});
  EXPECT_TRUE(compute_suspects(decide_recorded_pair(pair, calls)).empty());
  // Without the check that it arrives late, nor that the other peers' spread is small, nor that its excess time is
  // material, its CPU alone names it in the spread case too.
  DecideOptions before;
  before.cpu_peers_wait_share = -1e9;
  before.min_step_share = 0;
  before.contended_min_step_share = 0;
  EXPECT_EQ(compute_suspects(decide_recorded(spread, calls, nullptr, before)), std::vector<std::int64_t>{3});
}

// Campaign stall run seed 20468000 (torch 2.x, dp=2 x tp=2 on 2 CPUs at load 5.5; rank 1 burning 0.33x its step's
// CPU in one gap), its three rounds as recorded (--keep; recorded run pair-stall2-20468000): rank 1 used 1.25-1.30x
// its partner's (rank 3) CPU per call, process and main thread, in every round, but took it from time it would
// have waited for a CPU: its compute time 0.92-0.98x its partner's, its partner waiting 0.4-1.5 ms per call longer.
// The other pair (ranks 0 and 2) stood within 0.01 of each other pooled. So quiet a mesh names it, its extra CPU
// absorbed; with the other pair as noisy as a clean loaded host's (rank 0 at 1.1x its partner's CPU), or its
// partner waiting less than it, no one is named.
TEST(StragglerDecide, APairsRankWhoseExtraCpuWasAbsorbedIsNamedWhereTheOtherPairsAreQuiet) {
  const std::vector<std::vector<RecordedRank>> seed20468000 = {{{15.27, 8.21, 8.03, 5.55, 6.99},
                                                                {13.49, 6.85, 10.80, 4.54, 9.44},
                                                                {12.68, 7.64, 8.27, 5.64, 7.12},
                                                                {13.05, 8.31, 8.34, 5.00, 7.30}},
                                                               {{11.73, 8.42, 8.10, 4.75, 7.01},
                                                                {12.80, 6.43, 10.19, 5.16, 9.01},
                                                                {17.52, 7.56, 8.08, 5.97, 7.03},
                                                                {13.59, 7.27, 8.15, 5.85, 6.98}},
                                                               {{13.65, 7.83, 8.54, 5.63, 7.62},
                                                                {13.28, 6.37, 10.95, 4.88, 9.88},
                                                                {15.24, 7.56, 8.40, 6.29, 7.38},
                                                                {16.15, 6.79, 8.59, 6.83, 7.65}}};
  const std::vector<std::int64_t> calls = {62, 62, 62};
  auto d = decide_recorded_on("dp=2,tp=2", seed20468000, calls);
  EXPECT_EQ(compute_suspects(d), std::vector<std::int64_t>{1});
  ASSERT_EQ(d.suspects.size(), 1u);
  EXPECT_EQ(d.suspects[0].evidence["measure"], "cpu");
  auto noisy = seed20468000;
  for (auto& round : noisy) {
    round[0].cpu_ms *= 1.1;
    round[0].main_ms *= 1.1;
  }
  EXPECT_TRUE(compute_suspects(decide_recorded_on("dp=2,tp=2", noisy, calls)).empty());
  auto waits = seed20468000;
  for (auto& round : waits) std::swap(round[1].wait_ms, round[3].wait_ms);
  EXPECT_TRUE(compute_suspects(decide_recorded_on("dp=2,tp=2", waits, calls)).empty());
}

// test_compute_straggler_under_cpu_contention, seed 30683001 (10 busy loops pinned with rank 2, load ~10 on 2
// CPUs), its three rounds as recorded (STRAGGLER_KEEP): round 1 rank 2 at 5.1x its peers' compute time and,
// cache-cold beside the loops, 1.40x their CPU per call, flagged by cpu and by cpu_wait; round 2 at 1.40x,
// by cpu_wait alone; round 3 at 1.09x (the host's load had moved onto its peers' CPU). Each measure that
// flags a round counts it: cpu_wait in 2 of 3 rounds names it. (Counted once, for cpu in round 1, it was
// flagged once by each measure and named by neither.)
TEST(StragglerDecide, ARoundCountsForEveryMeasureThatFlaggedIt) {
  const std::vector<std::vector<RecordedRank>> seed30683001 = {{{50.389, 171.993, 16.090, 40.009, 14.704},
                                                                {48.727, 173.565, 16.564, 36.298, 14.702},
                                                                {199.193, 22.801, 22.914, 215.510, 21.506},
                                                                {49.389, 173.020, 15.754, 38.355, 14.672}},
                                                               {{82.040, 88.517, 15.359, 74.834, 14.596},
                                                                {79.387, 91.516, 15.619, 72.278, 14.534},
                                                                {136.935, 34.060, 13.881, 117.500, 12.611},
                                                                {81.497, 89.306, 15.622, 72.863, 14.252}},
                                                               {{110.300, 49.940, 16.218, 94.164, 15.408},
                                                                {108.935, 51.164, 16.853, 92.726, 15.606},
                                                                {125.957, 34.046, 13.053, 112.670, 12.036},
                                                                {110.224, 49.775, 17.295, 96.579, 15.996}}};
  std::vector<RoundResult> rounds;
  auto d = decide_recorded(seed30683001, {10, 16, 16}, &rounds);
  ASSERT_EQ(rounds.size(), 3u);
  const auto& r1 = rounds[0].peers.at(0).ranks.at(2);
  EXPECT_EQ(r1.flagged_by.count("cpu"), 1u);
  EXPECT_EQ(r1.flagged_by.count("cpu_wait"), 1u);
  EXPECT_EQ(compute_suspects(d), std::vector<std::int64_t>{2});
  ASSERT_EQ(d.suspects.size(), 1u);
  EXPECT_EQ(d.suspects[0].evidence["measure"], "cpu_wait");
  EXPECT_EQ(d.suspects[0].flagged_rounds, 2);
}

// On a contended host a rank stopped from outside for part of the time (SIGSTOP duty cycle) uses the
// same CPU per call and waits for a CPU alike; its longer compute time is time off a CPU.
TEST(StragglerDecide, OnAContendedHostARankStoppedFromOutsideIsNamedByItsTimeOffTheCpu) {
  for (int i = 0; i < 10; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    sim::Spec s;
    s.mesh = *Mesh::parse(i % 2 ? "dp=4" : "dp=8");
    s.rounds = 4;
    s.baseline = true;
    s.seed = seed;
    const auto victim = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(s.mesh.world_size()));
    const double factor = std::uniform_real_distribution<double>(1.3, 3.0)(rng);
    s.compute_factor[victim] = factor;  // its time; its work and its wait for a CPU are its peers'
    s.runq_share = 0.5;
    s.cpu_per_call = [](std::int64_t, std::int64_t, std::mt19937_64& g) {
      return 8e5 * (1 + 0.03 * std::uniform_real_distribution<double>(-1, 1)(g));
    };
    auto a = simulate(s);
    EXPECT_EQ(compute_suspects(a.decision), std::vector<std::int64_t>{victim})
        << "seed " << seed << " factor " << factor;
    ASSERT_EQ(a.decision.suspects.size(), 1u) << "seed " << seed;
    EXPECT_EQ(a.decision.suspects[0].evidence["measure"], "off_cpu") << "seed " << seed;
    EXPECT_NEAR(a.decision.suspects[0].ratio, factor, 0.15 * factor) << "seed " << seed;
  }
}

TEST(StragglerTiming, CpuPerCallIsTheCountersDeltaOverTheCallsInBetween) {
  std::vector<RoundEvidence> ev(4);
  auto rank = [](std::int64_t r, std::uint64_t written, std::int64_t cpu, std::int64_t runq) {
    RankEvents e;
    e.rank = r;
    e.written = written;
    e.cpu_ns = cpu;
    e.runq_ns = runq;
    return e;
  };
  ev[0].ranks = {rank(0, 10, 1000, 100), rank(1, 10, 1000, 100)};
  ev[1].ranks = {rank(0, 20, 3000, 600), rank(1, 30, 5000, 100)};
  ev[2].ranks = {rank(0, 20, 3500, 600), rank(1, 40, 4000, 100)};  // rank 0: no call; rank 1: counters went back
  ev[3].ranks = {rank(0, 30, 4500, 700), rank(1, 50, -1, -1)};     // rank 1: no counters
  auto c = cpu_per_call(ev);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_TRUE(c[0].empty());
  ASSERT_EQ(c[1].size(), 2u);
  EXPECT_DOUBLE_EQ(c[1][0].cpu_ns, 200);
  EXPECT_DOUBLE_EQ(c[1][0].runq_ns, 50);
  EXPECT_DOUBLE_EQ(c[1][1].cpu_ns, 200);
  EXPECT_DOUBLE_EQ(c[1][1].runq_ns, 0);
  EXPECT_TRUE(c[2].empty());
  ASSERT_EQ(c[3].size(), 1u);
  EXPECT_DOUBLE_EQ(c[3].at(0).cpu_ns, 100);
}

TEST(StragglerDecide, OneSlowRankLinkIsMachineLocal) {
  // dp=4,tp=4, 4 ranks per node: rank r's communication is slow, so its tp group (inside its node) and its
  // dp group (across nodes) are slow; they meet in r and its node.
  for (int i = 0; i < 4; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    sim::Spec s;
    s.mesh = *Mesh::parse("dp=4,tp=4");
    s.ranks_per_node = 4;
    s.seed = seed;
    const std::int64_t victim = static_cast<std::int64_t>(rng() % 16);
    s.link_factor = [victim](const GroupInfo& g) {
      return g.kind != "world" && std::find(g.members.begin(), g.members.end(), victim) != g.members.end() ? 6.0 : 1.0;
    };
    auto a = simulate(s);
    EXPECT_EQ(a.decision.diagnosis, Diagnosis::machine_local) << "seed " << seed;
    ASSERT_EQ(a.decision.suspects.size(), 1u) << "seed " << seed;
    EXPECT_EQ(a.decision.suspects[0].rank, victim);
    EXPECT_EQ(a.decision.suspects[0].reason, "communication");
    EXPECT_EQ(a.decision.suspects[0].node, "node" + std::to_string(victim / 4));
    EXPECT_GT(a.decision.suspects[0].ratio, 3.0);
    auto v = make_verdict("straggler", "j", a.decision, a.rounds, a.tables, s.mesh, "test");
    EXPECT_EQ(v.action, "replace_node");
  }
}

TEST(StragglerDecide, OneSlowTpGroupIsAnIntraNodeLink) {
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=4,tp=2");
  s.ranks_per_node = 2;
  s.seed = seed;
  const std::int64_t node = static_cast<std::int64_t>(rng() % 4);
  s.link_factor = [node](const GroupInfo& g) { return g.kind == "tp" && g.members[0] == 2 * node ? 8.0 : 1.0; };
  auto a = simulate(s);
  EXPECT_EQ(a.decision.diagnosis, Diagnosis::intra_node_link) << "seed " << seed;
  ASSERT_EQ(a.decision.slow_groups.size(), 1u);
  EXPECT_TRUE(a.decision.slow_groups[0].intra_node);
  ASSERT_EQ(a.decision.suspects.size(), 1u);
  EXPECT_EQ(a.decision.suspects[0].rank, -1);
  EXPECT_EQ(a.decision.suspects[0].node, "node" + std::to_string(node));
  EXPECT_TRUE(compute_suspects(a.decision).empty());
}

// On an oversubscribed host a member descheduled inside its calls keeps its group inside longer: a tp group whose
// members waited far longer for a CPU than the other node's looks 12x slower without a slow link (seed 631963951:
// 11-15x, 5-6 ms per call more, its members' CPU wait 10.7-10.9 ms per call beyond the other group's). Its link
// with that wait taken out is not slow; a slow link on a host where every rank waits alike, or whose excess stands
// out of its members' extra CPU wait, is still named.
TEST(StragglerDecide, ALinkExcessWithinItsMembersExtraCpuWaitIsNoSlowLink) {
  for (int i = 0; i < 6; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    sim::Spec s;
    s.mesh = *Mesh::parse("dp=2,tp=2");
    s.ranks_per_node = 2;
    s.rounds = 4;
    s.baseline = true;
    s.seed = seed;
    s.runq_share = 0.5;
    s.cpu_per_call = [](std::int64_t, std::int64_t, std::mt19937_64& g) {
      return 8e5 * (1 + 0.03 * std::uniform_real_distribution<double>(-1, 1)(g));
    };
    const std::int64_t node = static_cast<std::int64_t>(rng() % 2);
    const auto on_node = [node](const GroupInfo& g) { return g.kind == "tp" && g.members[0] == 2 * node; };
    // The node's ranks wait 4 ms more per call for a CPU (8 ms per call together): its tp group 3.3 ms slower.
    s.link_factor = [on_node](const GroupInfo& g) { return on_node(g) ? 12.0 : 1.0; };
    s.runq_extra_ns = {{2 * node, 4e6}, {2 * node + 1, 4e6}};
    auto a = simulate(s);
    EXPECT_FALSE(any_suspect(a.decision)) << "seed " << seed;
    EXPECT_EQ(a.decision.diagnosis, Diagnosis::none) << "seed " << seed;
    // The same times without the counters: nothing says the members waited for a CPU, and the link is named.
    auto evidence = sim::run(s);
    for (auto& r : evidence)
      for (auto& x : r.ranks) x.cpu_ns = x.runq_ns = x.main_cpu_ns = -1;
    EXPECT_EQ(analyse(evidence, s.mesh, {}).decision.diagnosis, Diagnosis::intra_node_link) << "seed " << seed;
    // Every rank waiting alike for a CPU: the slow link is named.
    s.runq_extra_ns.clear();
    s.link_factor = [on_node](const GroupInfo& g) { return on_node(g) ? 8.0 : 1.0; };
    a = simulate(s);
    EXPECT_EQ(a.decision.diagnosis, Diagnosis::intra_node_link) << "seed " << seed;
    ASSERT_EQ(a.decision.suspects.size(), 1u) << "seed " << seed;
    EXPECT_EQ(a.decision.suspects[0].node, "node" + std::to_string(node));
    // A link 9 ms slower per call whose members waited 0.3 ms more per call for a CPU each.
    s.runq_extra_ns = {{2 * node, 3e5}, {2 * node + 1, 3e5}};
    s.link_factor = [on_node](const GroupInfo& g) { return on_node(g) ? 31.0 : 1.0; };
    a = simulate(s);
    EXPECT_EQ(a.decision.diagnosis, Diagnosis::intra_node_link) << "seed " << seed;
    ASSERT_EQ(a.decision.suspects.size(), 1u) << "seed " << seed;
    EXPECT_EQ(a.decision.suspects[0].node, "node" + std::to_string(node));
  }
}

TEST(StragglerDecide, OnlyInterNodeGroupsSlowIsTheNetwork) {
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=4,tp=4");
  s.ranks_per_node = 4;
  s.seed = seed;
  const std::int64_t t = static_cast<std::int64_t>(rng() % 4);
  s.link_factor = [t](const GroupInfo& g) { return g.kind == "dp" && g.members[0] == t ? 5.0 : 1.0; };
  auto a = simulate(s);
  EXPECT_EQ(a.decision.diagnosis, Diagnosis::inter_node_network) << "seed " << seed;
  ASSERT_EQ(a.decision.slow_groups.size(), 1u);
  EXPECT_FALSE(a.decision.slow_groups[0].intra_node);
  auto v = make_verdict("straggler", "j", a.decision, a.rounds, a.tables, s.mesh, "test");
  EXPECT_EQ(v.scope, Scope::group);
  EXPECT_EQ(v.action, "run_fabric_diagnostics");
}

TEST(StragglerDecide, AGroupFarLessSlowThanTheSlowestIsAConsequenceNotACause) {
  const auto seed = fresh_seed();
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=4,tp=4");
  s.ranks_per_node = 4;
  s.link_ns = 2e6;
  s.seed = seed;
  s.link_factor = [](const GroupInfo& g) {
    if (g.kind == "dp" && g.members[0] == 1) return 8.0;  // the cause: 14 ms more per call
    if (g.kind == "tp" && g.members[0] == 4) return 2.0;  // a knock-on: 2 ms more
    return 1.0;
  };
  auto a = simulate(s);
  ASSERT_EQ(a.decision.slow_groups.size(), 1u) << "seed " << seed;
  EXPECT_EQ(a.decision.slow_groups[0].group.kind, "dp");
  EXPECT_EQ(a.decision.diagnosis, Diagnosis::inter_node_network);
  EXPECT_FALSE(a.decision.notes.empty());
}

TEST(StragglerDecide, SlowGroupsOnManyNodesAreClusterWide) {
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=8,tp=2");
  s.ranks_per_node = 2;
  s.seed = seed;
  std::set<std::int64_t> nodes;
  while (nodes.size() < 3) nodes.insert(static_cast<std::int64_t>(rng() % 8));
  s.link_factor = [nodes](const GroupInfo& g) { return g.kind == "tp" && nodes.count(g.members[0] / 2) ? 8.0 : 1.0; };
  auto a = simulate(s);
  EXPECT_EQ(a.decision.diagnosis, Diagnosis::cluster_wide) << "seed " << seed;
  auto v = make_verdict("straggler", "j", a.decision, a.rounds, a.tables, s.mesh, "test");
  EXPECT_EQ(v.status, VerdictStatus::inconclusive);
  EXPECT_TRUE(v.suspects.empty());
}

TEST(StragglerDecide, TooFewCallsIsInconclusive) {
  sim::Spec s;
  s.steps_per_round = 1;
  s.rounds = 3;
  auto ev = sim::run(s);
  for (auto& r : ev)
    for (auto& re : r.ranks) re.events.resize(std::min<std::size_t>(re.events.size(), 2));
  auto a = analyse(ev, s.mesh, {});
  EXPECT_FALSE(a.decision.enough_data);
  auto v = make_verdict("straggler", "j", a.decision, a.rounds, a.tables, s.mesh, "test");
  EXPECT_EQ(v.status, VerdictStatus::inconclusive);
}

TEST(StragglerDecide, VerdictIdsAreStrings) {
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=4,tp=2");
  s.ranks_per_node = 2;
  s.link_factor = [](const GroupInfo& g) { return g.kind == "tp" && g.members[0] == 0 ? 8.0 : 1.0; };
  auto a = simulate(s);
  auto v = make_verdict("straggler", "j", a.decision, a.rounds, a.tables, s.mesh, "test");
  auto j = to_json(v);
  for (auto& g : j["details"]["straggler"]["slow_groups"]) EXPECT_TRUE(g["id"].is_string());
  for (auto& g : j["details"]["straggler"]["groups"]) EXPECT_TRUE(g["id"].is_string());
}

}  // namespace
}  // namespace scout::straggler
