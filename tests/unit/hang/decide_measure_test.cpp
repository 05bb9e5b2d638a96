// Every suspect of the hang decision says which named measure (and which stage
// of the decision) named it: evidence.measure and evidence.stage. The world and
// the faulty rank are drawn at random (seed printed; SCOUT_TEST_SEED repeats it).
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "lib/hang/decide.hpp"
#include "tests/unit/test_seed.hpp"

namespace scout::hang {
namespace {

using records::CollectiveState;
using records::CollectiveType;

constexpr std::int64_t k_s = 1'000'000'000;
constexpr std::int64_t k_now = 1'800'000'000 * k_s;

// `n` ranks inside all-reduce `seq` of one group, silent for 10 s, `per_node` ranks per observer.
DecisionInput stalled_world(std::int64_t n, const std::function<void(std::int64_t, RankEvidence&)>& change,
                            std::int64_t per_node = 0, std::int64_t drop_observer = -1) {
  if (per_node <= 0) per_node = n;
  DecisionInput in;
  in.job = "j";
  in.now_ns = k_now;
  in.threshold_ns = 5 * k_s;
  const std::uint64_t seq = 20;
  for (std::int64_t o = 0; o * per_node < n; ++o) {
    if (o == drop_observer) {
      in.nodes.push_back(std::nullopt);
      continue;
    }
    NodeEvidence node;
    node.observer = o;
    node.node = "node" + std::to_string(o);
    node.job = "j";
    node.collected_ns = k_now;
    for (std::int64_t r = o * per_node; r < std::min(n, (o + 1) * per_node); ++r) {
      RankEvidence e;
      auto& s = e.snapshot;
      s.job = "j";
      s.rank = r;
      s.world_size = n;
      s.coords = {r, 0, 0, 0, 0, 0};
      s.host = node.node;
      s.pid = 1000 + r;
      s.start_ns = k_now - 100 * k_s;
      s.step = 5;
      s.op_seq = 100 + seq;
      s.phase = records::Phase::collective;
      s.pending = {7, CollectiveType::all_reduce, 7, 1024, 0, seq};
      s.collective_state = CollectiveState::inside;
      s.heartbeat_ns = k_now - 10 * k_s;
      s.progress_ns = k_now - 10 * k_s;
      s.recent.push_back(
          {{7, CollectiveType::all_reduce, 7, 1024, 0, seq - 1}, 99 + seq, k_now - 11 * k_s, k_now - 10 * k_s - 1});
      e.writer_alive = true;
      e.process.state = ProcessState::alive;
      e.process.raw_state = 'S';
      change(r, e);
      node.ranks.push_back(std::move(e));
    }
    in.nodes.push_back(std::move(node));
  }
  return in;
}

class DecideMeasureTest : public ::testing::Test {
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

void expect_named_by(const Verdict& v, std::int64_t rank, const char* measure, const char* stage) {
  ASSERT_EQ(v.suspects.size(), 1u) << v.summary;
  EXPECT_EQ(v.suspects[0].rank, rank);
  EXPECT_EQ(v.suspects[0].evidence.value("measure", ""), measure) << v.suspects[0].evidence.dump();
  EXPECT_EQ(v.suspects[0].evidence.value("stage", ""), stage) << v.suspects[0].evidence.dump();
}

TEST_F(DecideMeasureTest, AStoppedRankBehindItsPeersIsNamedByThePositionMeasure) {
  const std::int64_t n = pick(3, 16), bad = pick(0, n - 1);
  SCOPED_TRACE(testing::Message() << "world " << n << " rank " << bad << " seed " << seed);
  Verdict v = decide(stalled_world(n, [&](std::int64_t r, RankEvidence& e) {
    if (r != bad) return;
    e.snapshot.pending.group_seq -= 1;
    e.snapshot.collective_state = CollectiveState::done;
    e.snapshot.phase = records::Phase::forward;
    e.process = {ProcessState::stopped, 'T', -1, 0, false, "stopped"};
  }));
  expect_named_by(v, bad, "position", "compare_groups");
}

TEST_F(DecideMeasureTest, AStoppedRankAtItsPeersPositionIsNamedByTheStoppedRule) {
  const std::int64_t n = pick(3, 16), bad = pick(0, n - 1);
  SCOPED_TRACE(testing::Message() << "world " << n << " rank " << bad << " seed " << seed);
  Verdict v = decide(stalled_world(n, [&](std::int64_t r, RankEvidence& e) {
    if (r == bad) e.process = {ProcessState::stopped, 'T', -1, 0, false, "stopped"};
  }));
  expect_named_by(v, bad, "process_stopped", "explain");
}

TEST_F(DecideMeasureTest, ACallWithOtherArgumentsIsNamedByThePositionMeasure) {
  const std::int64_t n = pick(3, 16), bad = pick(0, n - 1);
  SCOPED_TRACE(testing::Message() << "world " << n << " rank " << bad << " seed " << seed);
  Verdict v = decide(stalled_world(n, [&](std::int64_t r, RankEvidence& e) {
    if (r == bad) e.snapshot.pending.count = 2048;
  }));
  expect_named_by(v, bad, "position", "compare_groups");
  EXPECT_EQ(v.suspects[0].reason, "collective_arguments_differ");
}

TEST_F(DecideMeasureTest, AnUnreachableNodeIsNamedByTheConcludeStage) {
  const std::int64_t per_node = pick(1, 3), nodes = pick(3, 6), n = per_node * nodes, lost = pick(0, nodes - 1);
  SCOPED_TRACE(testing::Message() << "world " << n << " lost observer " << lost << " seed " << seed);
  Verdict v = decide(stalled_world(
      n, [](std::int64_t, RankEvidence&) {}, per_node, lost));
  ASSERT_EQ(v.suspects.size(), 1u) << v.summary;
  EXPECT_EQ(v.suspects[0].reason, "node_unreachable");
  EXPECT_EQ(v.suspects[0].evidence.value("measure", ""), "unreachable_observer");
  EXPECT_EQ(v.suspects[0].evidence.value("stage", ""), "conclude");
}

}  // namespace
}  // namespace scout::hang
