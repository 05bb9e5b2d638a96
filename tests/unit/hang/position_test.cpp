// The two-phase hang gather's first phase: node positions, and the rule that
// lets positions alone call a job healthy. The property that matters: whenever
// the positions prove the job healthy, decide() over the full evidence says
// healthy too (randomized worlds, placements and faults; seed printed), and a
// clean, progressing job does take the short path.
#include "lib/hang/position.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "lib/hang/probe.hpp"
#include "tests/unit/test_seed.hpp"

namespace scout::hang {
namespace {

constexpr std::int64_t k_s = 1'000'000'000;
constexpr std::int64_t k_now = 1'800'000'000 * k_s;
constexpr std::int64_t k_threshold = 5 * k_s;

RankEvidence rank_at(std::int64_t r, std::int64_t world, std::int64_t age_ns) {
  RankEvidence e;
  auto& s = e.snapshot;
  s.job = "j";
  s.attempt = "0";
  s.rank = r;
  s.world_size = world;
  s.coords = {r, 0, 0, 0, 0, 0};
  s.host = "h";
  s.pid = 1000 + r;
  s.start_ns = k_now - 100 * k_s;
  s.step = 5;
  s.op_seq = 120;
  s.phase = records::Phase::collective;
  s.pending = {7, records::CollectiveType::all_reduce, 7, 1024, 0, 20};
  s.collective_state = records::CollectiveState::inside;
  s.heartbeat_ns = k_now - age_ns;
  s.progress_ns = k_now - age_ns;
  s.recent.push_back(
      {{7, records::CollectiveType::all_reduce, 7, 1024, 0, 19}, 119, k_now - age_ns - k_s, k_now - age_ns - 1});
  e.writer_alive = true;
  e.process.state = ProcessState::alive;
  e.process.raw_state = 'S';
  return e;
}

TEST(NodePosition, RoundTripsAndRefusesWhatItDidNotWrite) {
  NodeEvidence n;
  n.observer = 3;
  n.collected_ns = k_now;
  for (std::int64_t r = 4; r < 8; ++r) n.ranks.push_back(rank_at(r, 16, k_s));
  const auto bytes = encode_node_position(n);
  ASSERT_EQ(bytes.size(), k_node_position_bytes);
  auto p = decode_node_position(bytes);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->observer, 3);
  EXPECT_EQ(p->collected_ns, k_now);
  EXPECT_EQ(p->newest_progress_ns, k_now - k_s);
  EXPECT_EQ(p->world_size, 16);
  EXPECT_EQ(p->ranks, 4);
  EXPECT_EQ(p->rank_sum, 4 + 5 + 6 + 7);
  EXPECT_TRUE(p->clean);
  auto shorter = bytes;
  shorter.pop_back();
  EXPECT_FALSE(decode_node_position(shorter));
  for (std::size_t at : {0, 4, 6}) {  // magic, version, unknown flags
    auto bad = bytes;
    bad[at] ^= 0x40;
    EXPECT_FALSE(decode_node_position(bad)) << at;
  }
}

class PositionsProveHealthy : public ::testing::Test {
 protected:
  void SetUp() override {
    seed = test_support::test_seed();
    rng.seed(seed);
    std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  }
  std::int64_t pick(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  }
  std::uint64_t seed = 0;
  std::mt19937_64 rng;
};

// Faults a position must notice (or that decide() must not see as healthy).
enum class Fault {
  none,
  dead,
  stopped,
  disk_sleep,
  writer_gone,
  failed_call,
  comm_error,
  stale_record,
  missing_rank,
  duplicate_rank,
  absent_observer,
  other_world,
  silent,
  count
};

TEST_F(PositionsProveHealthy, OnlyWhereDecideSaysHealthyAndAlwaysForACleanProgressingJob) {
  int shortcut = 0, cases = 2000;
  for (int c = 0; c < cases; ++c) {
    const std::int64_t world = pick(1, 24);
    const std::int64_t nodes = pick(1, world);
    const auto fault = static_cast<Fault>(c % 2 == 0 ? 0 : pick(1, static_cast<int>(Fault::count) - 1));
    SCOPED_TRACE(
        fmt::format("seed {} case {} world {} nodes {} fault {}", seed, c, world, nodes, static_cast<int>(fault)));
    // Ranks dealt to nodes in a random order, every node at least one.
    std::vector<std::int64_t> order(static_cast<std::size_t>(world));
    for (std::int64_t r = 0; r < world; ++r) order[r] = r;
    std::shuffle(order.begin(), order.end(), rng);
    DecisionInput in;
    in.job = "j";
    in.now_ns = k_now;
    in.threshold_ns = k_threshold;
    in.nodes.assign(static_cast<std::size_t>(nodes), NodeEvidence{});
    for (std::int64_t o = 0; o < nodes; ++o) {
      in.nodes[o]->observer = o;
      in.nodes[o]->node = fmt::format("node{}", o);
      in.nodes[o]->job = "j";
      in.nodes[o]->attempt = "0";
      in.nodes[o]->collected_ns = k_now - pick(0, k_s / 2);
    }
    for (std::int64_t i = 0; i < world; ++i) {
      const std::int64_t o = i < nodes ? i : pick(0, nodes - 1);
      in.nodes[o]->ranks.push_back(rank_at(order[i], world, pick(0, k_threshold - k_s)));
    }
    auto& victim_node = *in.nodes[pick(0, nodes - 1)];
    auto& victim = victim_node.ranks[static_cast<std::size_t>(pick(0, victim_node.ranks.size() - 1))];
    switch (fault) {
      case Fault::dead:
        victim.process = {ProcessState::exited, 'Z', static_cast<int>(pick(0, 1)), 0, false, "exited"};
        break;
      case Fault::stopped:
        victim.process.state = ProcessState::stopped;
        break;
      case Fault::disk_sleep:
        victim.process.state = ProcessState::disk_sleep;
        break;
      case Fault::writer_gone:
        victim.writer_alive = false;
        break;
      case Fault::failed_call:
        victim.snapshot.collective_state = records::CollectiveState::failed;
        break;
      case Fault::comm_error:
        victim.snapshot.phase = records::Phase::comm_error;
        break;
      case Fault::stale_record: {
        RecordIssue issue;
        issue.segment = "scout.j.x";
        issue.problem = "stale";
        issue.attempt = "old";
        victim_node.issues.push_back(issue);
        break;
      }
      case Fault::missing_rank:
        if (victim_node.ranks.size() > 1)
          victim_node.ranks.erase(victim_node.ranks.begin());
        else
          victim.snapshot.rank = world;  // out of range: a rank of no world
        break;
      case Fault::duplicate_rank:
        victim.snapshot.rank = (victim.snapshot.rank + 1) % std::max<std::int64_t>(world, 2);
        break;
      case Fault::absent_observer:
        in.nodes[pick(0, nodes - 1)] = std::nullopt;
        break;
      case Fault::other_world:
        victim.snapshot.world_size = world + 1;
        break;
      case Fault::silent:
        for (auto& n : in.nodes)
          for (auto& r : n->ranks)
            r.snapshot.progress_ns = r.snapshot.heartbeat_ns = k_now - k_threshold - k_s - pick(0, k_s);
        break;
      default:
        break;
    }
    std::vector<std::optional<NodePosition>> positions;
    for (const auto& n : in.nodes)
      positions.push_back(n ? decode_node_position(encode_node_position(*n)) : std::nullopt);
    in.now_ns = agreed_now(in.nodes);
    const bool proved = positions_prove_healthy(positions, k_threshold);
    if (proved) {
      ++shortcut;
      const Verdict full = decide(in);
      EXPECT_EQ(full.status, VerdictStatus::healthy) << full.summary;
      std::vector<NodePosition> ps;
      for (const auto& p : positions) ps.push_back(*p);
      const Verdict quick = healthy_from_positions(in, ps);
      EXPECT_EQ(quick.status, VerdictStatus::healthy);
      EXPECT_EQ(quick.summary, full.summary);
      EXPECT_EQ(quick.details["silent_s"], full.details["silent_s"]);
      EXPECT_EQ(quick.details["ranks_listed"], "positions");
    }
    // Every fault but a duplicate that happens to be a no-op must leave the short path.
    if (fault == Fault::none)
      EXPECT_TRUE(proved) << "a clean, progressing job must not need its evidence gathered";
    else if (!(fault == Fault::duplicate_rank && world == 1))
      EXPECT_FALSE(proved);
  }
  std::printf("%d of %d cases decided on positions alone\n", shortcut, cases);
  EXPECT_GE(shortcut, cases / 2);
}

TEST(PositionRanks, NamesAPositionsRanksWhereTheyAreOneRunAndNothingElse) {
  auto position_of = [](std::vector<std::int64_t> ranks) {
    NodeEvidence n;
    n.observer = 1;
    n.collected_ns = k_now;
    for (auto r : ranks) n.ranks.push_back(rank_at(r, 16, k_s));
    return node_position(n);
  };
  EXPECT_EQ(position_ranks(position_of({4, 5, 6, 7})), (std::vector<std::int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(position_ranks(position_of({0})), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(position_ranks(position_of({3, 4, 6, 7})), std::nullopt);  // no run has that sum
  EXPECT_EQ(position_ranks(position_of({1, 3, 5})), std::nullopt);     // the sum of 2..4: the mixes differ
  EXPECT_EQ(position_ranks(position_of({})), std::nullopt);
}

TEST(SelectEvidence, EveryNodeUnlessThePositionsProveHealthy) {
  session::PositionTable t;
  t.position_bytes = k_node_position_bytes;
  for (std::int64_t o = 0; o < 3; ++o) {
    NodeEvidence n;
    n.observer = o;
    n.collected_ns = k_now;
    for (std::int64_t r = 2 * o; r < 2 * o + 2; ++r) n.ranks.push_back(rank_at(r, 6, k_s));
    t.positions.push_back(encode_node_position(n));
  }
  EXPECT_TRUE(select_evidence(t, k_threshold).empty());
  t.positions[1] = std::nullopt;  // an observer absent, lost or refused: the full path
  EXPECT_EQ(select_evidence(t, k_threshold), (std::vector<std::int64_t>{0, 1, 2}));
}

}  // namespace
}  // namespace scout::hang
