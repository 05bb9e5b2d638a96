// The thresholds table (lib/straggler/thresholds.hpp) is the one source of the decision's defaults.
#include "lib/straggler/thresholds.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>

#include "lib/straggler/decide.hpp"
#include "tests/unit/straggler/sim.hpp"
#include "tests/unit/test_seed.hpp"

namespace scout::straggler {
namespace {

TEST(StragglerThresholds, EveryEntryIsNamedOnceWithAMeasureAndAReason) {
  std::set<std::string_view> names;
  for (const auto* t : thresholds::all) {
    EXPECT_TRUE(names.insert(t->name).second) << t->name;
    EXPECT_FALSE(t->measure.empty()) << t->name;
    EXPECT_GT(t->reason.size(), 40u) << t->name;
    EXPECT_GT(t->value, 0) << t->name;
  }
}

TEST(StragglerThresholds, DecideOptionsDefaultsComeFromTheTable) {
  const DecideOptions o;
  const std::map<std::string_view, double> fields = {
      {"kappa", o.kappa},
      {"quota_window_share", o.quota_window_share},
      {"cause_share", o.cause_share},
      {"contention_min_ratio", o.contention_min_ratio},
      {"min_relative", o.min_relative},
      {"pair_min_relative", o.pair_min_relative},
      {"min_absolute_ns", o.min_absolute_ns},
      {"min_step_share", o.min_step_share},
      {"contended_min_step_share", o.contended_min_step_share},
      {"spread_factor", o.spread_factor},
      {"oversubscribed_share", o.oversubscribed_share},
      {"contended_share", o.contended_share},
      {"contended_cpu_min_relative", o.contended_cpu_min_relative},
      {"cpu_peers_wait_share", o.cpu_peers_wait_share},
      {"pair_cpu_peers_wait_share", o.pair_cpu_peers_wait_share},
      {"pair_quiet_factor", o.pair_quiet_factor},
      {"contended_wait_min_relative", o.contended_wait_min_relative},
      {"absorbed_spread_factor", o.absorbed_spread_factor},
      {"more_work_min_relative", o.more_work_min_relative},
      {"more_work_wait_factor", o.more_work_wait_factor},
      {"stopped_min_share", o.stopped_min_share},
      {"stopped_min_samples", static_cast<double>(o.stopped_min_samples)},
      {"link_min_ratio", o.link_min_ratio},
      {"link_min_absolute_ns", o.link_min_absolute_ns},
      {"link_min_consistency", o.link_min_consistency},
      {"min_calls", static_cast<double>(o.min_calls)},
      {"cluster_wide_nodes", static_cast<double>(o.cluster_wide_nodes)}};
  std::size_t tunable = 0;
  for (const auto* t : thresholds::all) {
    if (!t->tunable) {
      EXPECT_FALSE(fields.count(t->name)) << t->name << " is a DecideOptions field but not marked tunable";
      continue;
    }
    ++tunable;
    ASSERT_TRUE(fields.count(t->name)) << t->name << " is marked tunable but is no DecideOptions field";
    EXPECT_EQ(fields.at(t->name), t->value) << t->name;
  }
  EXPECT_EQ(tunable, fields.size());
}

// measure_flags reports per round what each measure flagged; the named rank is the one a measure flagged in a
// strict majority of the rounds.
TEST(StragglerThresholds, MeasureFlagsSayWhichRanksEachMeasureFlaggedPerRound) {
  const std::uint64_t seed = test_support::test_seed();
  std::printf("straggler test seed=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=4");
  s.ranks_per_node = 1;
  s.seed = seed;
  const auto victim = static_cast<std::int64_t>(rng() % 4);
  s.compute_factor[victim] = 2.0;
  const auto a = analyse(sim::run(s), s.mesh, DecideOptions{});
  const auto f = measure_flags(a, DecideOptions{});
  ASSERT_EQ(f.flagged.size(), a.rounds.size());
  ASSERT_EQ(f.raised.size(), a.rounds.size());
  std::map<std::string, std::map<std::int64_t, std::int64_t>> rounds_of;  // measure -> rank -> flagged rounds
  for (std::size_t r = 0; r < f.flagged.size(); ++r)
    for (const auto& [m, ranks] : f.flagged[r]) {
      EXPECT_NE(std::find(measure_names.begin(), measure_names.end(), m), measure_names.end()) << m;
      for (auto rank : ranks) {
        ++rounds_of[m][rank];
        EXPECT_TRUE(f.raised[r].count(m) && f.raised[r].at(m).count(rank)) << "seed " << seed;
      }
    }
  ASSERT_EQ(a.decision.suspects.size(), 1u) << "seed " << seed;
  const auto& named = a.decision.suspects[0];
  EXPECT_EQ(named.rank, victim) << "seed " << seed;
  const auto measure = named.evidence.at("measure").get<std::string>();
  EXPECT_GT(2 * rounds_of[measure][victim], static_cast<std::int64_t>(a.rounds.size())) << "seed " << seed;
  for (const auto& [m, ranks] : rounds_of)
    for (const auto& [rank, n] : ranks)
      if (rank != victim) EXPECT_LE(2 * n, static_cast<std::int64_t>(a.rounds.size())) << m << " rank " << rank;
}

// Every suspect's evidence names the measure that flagged it; a communication suspect's is "link" (a node where slow
// groups meet, and each slow group of an inter-node network diagnosis).
TEST(StragglerThresholds, CommunicationSuspectsNameTheLinkMeasure) {
  const std::uint64_t seed = test_support::test_seed();
  std::printf("straggler test seed=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (const bool network : {false, true}) {
    sim::Spec s;
    s.mesh = *Mesh::parse("dp=4,tp=4");
    s.ranks_per_node = 4;
    s.seed = seed;
    const auto victim = static_cast<std::int64_t>(rng() % 16);
    const auto t = static_cast<std::int64_t>(rng() % 4);
    s.link_factor = [=](const GroupInfo& g) {
      if (network) return g.kind == "dp" && g.members[0] == t ? 5.0 : 1.0;
      return g.kind != "world" && std::find(g.members.begin(), g.members.end(), victim) != g.members.end() ? 6.0 : 1.0;
    };
    const auto a = analyse(sim::run(s), s.mesh, DecideOptions{});
    EXPECT_EQ(a.decision.diagnosis, network ? Diagnosis::inter_node_network : Diagnosis::machine_local)
        << "seed " << seed;
    const auto v = make_verdict("straggler", "j", a.decision, a.rounds, a.tables, s.mesh, "test");
    ASSERT_FALSE(v.suspects.empty()) << "seed " << seed;
    for (const auto& suspect : v.suspects) {
      EXPECT_EQ(suspect.reason, "communication");
      EXPECT_EQ(suspect.evidence.value("measure", ""), "link") << suspect.evidence.dump();
    }
    // The slow groups are what measure_flags reports for the link measure, round by round.
    const auto f = measure_flags(a, DecideOptions{});
    std::int64_t rounds_slow = 0;
    for (const auto& slow : f.slow_groups) rounds_slow += slow.empty() ? 0 : 1;
    EXPECT_GT(2 * rounds_slow, static_cast<std::int64_t>(a.rounds.size())) << "seed " << seed;
  }
}

}  // namespace
}  // namespace scout::straggler
