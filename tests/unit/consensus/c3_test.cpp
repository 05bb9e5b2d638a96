#include "lib/consensus/c3.hpp"

#include <gtest/gtest.h>

#include <random>

#include "tests/unit/test_seed.hpp"

namespace scout {
namespace {

C3Result exact(std::vector<std::uint64_t> v) {
  return c3_exact(v);
}
C3Result stat(std::vector<double> v, StatisticalOptions o = {}) {
  return c3_statistical(v, o);
}
std::vector<bool> only(std::size_t n, std::vector<std::size_t> idx) {
  std::vector<bool> out(n, false);
  for (auto i : idx) out[i] = true;
  return out;
}

TEST(C3Exact, AttributesStrictMinority) {
  auto r = exact({5, 5, 5, 7});
  EXPECT_EQ(r.status, C3Status::attributed);
  EXPECT_EQ(r.outliers, only(4, {3}));
  EXPECT_EQ(r.majority_count, 3);
}

TEST(C3Exact, TieIsInconclusive) {
  auto r = exact({5, 5, 7, 7});
  EXPECT_EQ(r.status, C3Status::inconclusive);
  EXPECT_EQ(r.outlier_count(), 0);
  EXPECT_EQ(exact({1, 2, 3}).status, C3Status::inconclusive);
  EXPECT_EQ(exact({1, 1, 2, 2, 3}).status, C3Status::inconclusive);
}

TEST(C3Exact, UnanimousAgrees) {
  EXPECT_EQ(exact({5, 5, 5, 5}).status, C3Status::agree);
  EXPECT_EQ(exact({9}).status, C3Status::agree);
}

TEST(C3Exact, PairThatDisagreesIsInconclusive) {
  EXPECT_EQ(exact({1, 2}).status, C3Status::inconclusive);
}

TEST(C3Exact, EmptyIsInconclusive) {
  auto r = exact({});
  EXPECT_EQ(r.status, C3Status::inconclusive);
  EXPECT_EQ(r.reason, C3Reason::too_few_peers);
}

TEST(C3Exact, RandomMinorityAlwaysFound) {
  unsigned seed = test_support::test_seed32();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  for (int trial = 0; trial < 200; ++trial) {
    std::size_t n = 3 + rng() % 200;
    std::size_t bad = 1 + rng() % ((n - 1) / 2);  // strict minority
    std::vector<std::uint64_t> v(n, 42);
    std::vector<bool> expect(n, false);
    for (std::size_t k = 0; k < bad;) {
      std::size_t i = rng() % n;
      if (expect[i]) continue;
      expect[i] = true;
      v[i] = 43 + rng() % 5;
      ++k;
    }
    auto r = c3_exact(v);
    ASSERT_EQ(r.status, C3Status::attributed) << "n=" << n << " bad=" << bad;
    EXPECT_EQ(r.outliers, expect);
  }
}

TEST(C3Exact, GenericValues) {
  std::vector<std::string> v = {"a", "b", "a"};
  auto r = c3_exact_values<std::string>(v);
  EXPECT_EQ(r.status, C3Status::attributed);
  EXPECT_EQ(r.outliers, only(3, {1}));
}

TEST(C3Statistical, FarValueAboveTightClusterIsAttributed) {
  auto r = stat({100, 101, 99, 100, 100.5, 250});
  EXPECT_EQ(r.status, C3Status::attributed);
  EXPECT_EQ(r.outliers, only(6, {5}));
  EXPECT_GT(r.scores[5], 3.5);
}

TEST(C3Statistical, MicrosecondJitterIsHealthy) {
  auto r = stat({0.100000, 0.100001, 0.100003, 0.099998, 0.100002, 0.100004});
  EXPECT_EQ(r.status, C3Status::agree);
  EXPECT_EQ(r.outlier_count(), 0);
}

TEST(C3Statistical, BimodalSplitIsInconclusive) {
  auto r = stat({1, 1, 100, 100});
  EXPECT_EQ(r.status, C3Status::inconclusive);
  EXPECT_EQ(r.reason, C3Reason::bimodal);
  EXPECT_EQ(stat({1, 1, 1, 100, 100, 100}).status, C3Status::inconclusive);
}

TEST(C3Statistical, MinorityClusterIsAttributed) {
  // Robust scores break down at 40% contamination; the split still decides.
  auto r = stat({1, 1, 1, 100, 100});
  EXPECT_EQ(r.status, C3Status::attributed);
  EXPECT_EQ(r.outliers, only(5, {3, 4}));
}

TEST(C3Statistical, NoDispersionAgrees) {
  EXPECT_EQ(stat({3, 3, 3, 3}).status, C3Status::agree);
  EXPECT_EQ(stat({3}).status, C3Status::agree);
}

TEST(C3Statistical, PairThatDisagreesIsInconclusive) {
  EXPECT_EQ(stat({1, 50}).status, C3Status::inconclusive);
}

TEST(C3Statistical, ScaleFallbacks) {
  auto mad = stat({10, 11, 12, 13, 14});
  EXPECT_EQ(mad.scale_source, "mad");
  EXPECT_DOUBLE_EQ(mad.scale, 1.4826 * 1.0);
  auto iqr = stat({5, 5, 5, 5, 5, 6, 8, 9});  // MAD 0, IQR > 0
  EXPECT_EQ(iqr.scale_source, "iqr");
  auto floor = stat({5, 5, 5, 5, 5, 5, 5, 50});  // MAD 0, IQR 0
  EXPECT_EQ(floor.scale_source, "floor");
  EXPECT_EQ(floor.status, C3Status::attributed);
  EXPECT_EQ(floor.outliers, only(8, {7}));
}

TEST(C3Statistical, TrueMedianForEvenCounts) {
  auto r = stat({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(r.median, 2.5);
}

TEST(C3Statistical, MinimumEffectSuppressesTinyDeviations) {
  StatisticalOptions o;
  o.min_relative = 0.0;
  o.min_absolute = 1.0;  // deviations under 1 unit never count
  auto r = stat({10, 10, 10, 10, 10.5}, o);
  EXPECT_EQ(r.status, C3Status::agree);
  o.min_absolute = 0.1;
  EXPECT_EQ(stat({10, 10, 10, 10, 10.5}, o).status, C3Status::attributed);
}

TEST(C3Statistical, DirectionFilters) {
  StatisticalOptions high;
  high.direction = Direction::high;
  EXPECT_EQ(stat({100, 100, 101, 99, 10}, high).status, C3Status::agree);
  EXPECT_EQ(stat({100, 100, 101, 99, 300}, high).status, C3Status::attributed);
}

TEST(C3Statistical, RandomStragglersFoundWithoutFalsePositives) {
  unsigned seed = test_support::test_seed32();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::normal_distribution<double> jitter(0.0, 0.002);
  for (int trial = 0; trial < 200; ++trial) {
    std::size_t n = 5 + rng() % 100;
    std::vector<double> v(n);
    for (auto& x : v) x = 1.0 + jitter(rng);
    auto clean = c3_statistical(v);
    EXPECT_EQ(clean.status, C3Status::agree) << "n=" << n;
    std::size_t slow = rng() % n;
    v[slow] = 1.5 + jitter(rng);
    auto r = c3_statistical(v);
    ASSERT_EQ(r.status, C3Status::attributed) << "n=" << n;
    EXPECT_EQ(r.outliers, only(n, {slow}));
  }
}

}  // namespace
}  // namespace scout
