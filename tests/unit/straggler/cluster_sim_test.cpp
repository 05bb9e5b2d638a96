// The GPU-cluster timing simulator (bench/cluster_sim.hpp) at 128 ranks: its own invariants (a group's calls
// end together; the member that arrives last waits least; a slow GPU arrives last at its calls and waits least
// of its groups), and the straggler decision on its output (a 1.5x slow GPU is named, alone; a clean run names
// no one). Several seeds per case drawn from a base seed; random per run, SCOUT_TEST_SEED=<seed> repeats a run
// (the base seed is printed; each case's seed is in its trace).
#include "bench/cluster_sim.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>

#include "lib/straggler/decide.hpp"

namespace scout::bench::cluster {
namespace {

std::uint64_t base_seed() {
  static const std::uint64_t seed = [] {
    std::uint64_t s = std::random_device{}();
    if (const char* env = std::getenv("SCOUT_TEST_SEED")) s = std::strtoull(env, nullptr, 10);
    std::printf("cluster_sim_test: SCOUT_TEST_SEED=%llu\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

// Seeds of one test: drawn from the base seed and the test's own salt.
std::vector<std::uint64_t> seeds(std::uint64_t salt, int n = 3) {
  std::mt19937_64 rng(base_seed() ^ salt);
  std::vector<std::uint64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(rng());
  return out;
}

const char* const k_meshes[] = {"dp=16,tp=8", "dp=8,pp=2,tp=8"};

Spec spec_for(std::uint64_t seed) {
  Spec s;
  s.mesh = k_meshes[seed % 2];
  s.seed = seed;
  return s;
}

struct Member {
  std::int64_t rank;
  std::int64_t enter, exit;
};

// Every call of one read, by (group id, group sequence): its members' times.
std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<Member>> calls_of(const straggler::RoundEvidence& r) {
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<Member>> out;
  for (const auto& re : r.ranks)
    for (const auto& e : re.events)
      out[{e.fingerprint.group, e.fingerprint.group_seq}].push_back({re.rank, e.enter_ns, e.exit_ns});
  return out;
}

TEST(ClusterSim, GroupCallsEndTogetherAndTheLastToArriveWaitsLeast) {
  for (auto seed : seeds(0x11)) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    Spec s = spec_for(seed);
    auto run = simulate(s);
    ASSERT_TRUE(run.ok()) << run.error().message();
    std::map<std::uint64_t, std::size_t> size_of;
    for (const auto& g : run->groups) size_of[g.id] = g.members.size();
    const auto skew = static_cast<std::int64_t>(s.noise.exit_skew_ns) + 1;
    std::size_t checked = 0;
    for (const auto& r : run->evidence)
      for (const auto& [key, members] : calls_of(r)) {
        if (members.size() != size_of.at(key.first)) continue;  // a call only partly in this read's rings
        std::int64_t lo = members[0].exit, hi = lo, last_enter = members[0].enter, least_wait = lo - last_enter;
        std::int64_t last_wait = least_wait;
        for (const auto& m : members) {
          lo = std::min(lo, m.exit);
          hi = std::max(hi, m.exit);
          least_wait = std::min(least_wait, m.exit - m.enter);
          if (m.enter > last_enter) {
            last_enter = m.enter;
            last_wait = m.exit - m.enter;
          }
          ASSERT_GE(m.exit, m.enter);
        }
        ASSERT_LE(hi - lo, skew) << "group " << key.first << " call " << key.second;
        ASSERT_LE(last_wait, least_wait + skew) << "group " << key.first << " call " << key.second;
        ++checked;
      }
    EXPECT_GT(checked, 100u);
  }
}

TEST(ClusterSim, ASlowGpuArrivesLastAndWaitsLeastInItsGroups) {
  for (auto seed : seeds(0x22)) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    Spec s = spec_for(seed);
    s.fault = {FaultKind::slow_gpu, static_cast<std::int64_t>(seed % 128), 1.5};
    auto run = simulate(s);
    ASSERT_TRUE(run.ok()) << run.error().message();
    std::map<std::uint64_t, std::size_t> size_of;
    for (const auto& g : run->groups) size_of[g.id] = g.members.size();
    std::size_t calls = 0, last = 0, least = 0;
    for (const auto& r : run->evidence) {
      if (r.baseline) continue;
      for (const auto& [key, members] : calls_of(r)) {
        if (members.size() != size_of.at(key.first)) continue;
        const Member* victim = nullptr;
        std::int64_t latest = 0, least_wait = INT64_MAX;
        for (const auto& m : members) {
          if (m.rank == s.fault.rank) victim = &m;
          latest = std::max(latest, m.enter);
          least_wait = std::min(least_wait, m.exit - m.enter);
        }
        if (!victim) continue;
        ++calls;
        last += victim->enter == latest ? 1 : 0;
        least += victim->exit - victim->enter == least_wait ? 1 : 0;
      }
    }
    ASSERT_GT(calls, 50u);
    // Every call's kernels before it run 1.5x longer on the slow GPU; host noise spikes on a peer are rare.
    EXPECT_GE(last, calls * 9 / 10) << last << " of " << calls;
    EXPECT_GE(least, calls * 9 / 10) << least << " of " << calls;
  }
}

std::vector<std::int64_t> compute_suspects(const straggler::Decision& d) {
  std::vector<std::int64_t> out;
  for (const auto& s : d.suspects)
    if (s.reason == "compute") out.push_back(s.rank);
  return out;
}

TEST(ClusterSim, TheDecisionNamesASlowGpuAndNoOneOnACleanRun) {
  for (auto seed : seeds(0x33)) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    Spec slow = spec_for(seed);
    const std::int64_t victim = static_cast<std::int64_t>((seed >> 8) % 128);
    slow.fault = {FaultKind::slow_gpu, victim, 1.5};
    auto run = simulate(slow);
    ASSERT_TRUE(run.ok()) << run.error().message();
    auto a = straggler::analyse(run->evidence, run->mesh, straggler::DecideOptions{});
    EXPECT_EQ(compute_suspects(a.decision), std::vector<std::int64_t>{victim});
    EXPECT_TRUE(a.decision.slow_groups.empty());

    Spec clean = spec_for(seed);
    auto quiet = simulate(clean);
    ASSERT_TRUE(quiet.ok()) << quiet.error().message();
    auto b = straggler::analyse(quiet->evidence, quiet->mesh, straggler::DecideOptions{});
    EXPECT_TRUE(b.decision.enough_data);
    EXPECT_TRUE(compute_suspects(b.decision).empty());
    EXPECT_TRUE(b.decision.slow_groups.empty());
  }
}

TEST(ClusterSim, ASpecOutOfRangeIsAnError) {
  Spec s;
  s.fault = {FaultKind::slow_gpu, 128, 1.5};  // dp=16,tp=8 has ranks 0-127
  EXPECT_FALSE(simulate(s).ok());
  s.fault = {FaultKind::slow_gpu, 3, 0.5};
  EXPECT_FALSE(simulate(s).ok());
  s = Spec{};
  s.mesh = "dp=banana";
  EXPECT_FALSE(simulate(s).ok());
  s = Spec{};
  s.noise.kernel_sigma = -1;
  EXPECT_FALSE(simulate(s).ok());
}

}  // namespace
}  // namespace scout::bench::cluster
