#include "lib/straggler/timing.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

#include "tests/unit/test_seed.hpp"

namespace scout::straggler {
namespace {

// What the decision computed per member before LeaveOneOut: the others' values gathered, then median(), and a scan
// for the least and the largest.
struct Brute {
  double median, min, max;
  std::size_t count;
};

Brute brute_without(const std::vector<double>& v, const std::vector<bool>& counted, std::size_t i) {
  std::vector<double> others;
  double lo = 1e300, hi = -1e300;
  for (std::size_t j = 0; j < v.size(); ++j)
    if (j != i && (counted.empty() || counted[j])) {
      others.push_back(v[j]);
      lo = std::min(lo, v[j]);
      hi = std::max(hi, v[j]);
    }
  return {median(others), lo, hi, others.size()};
}

TEST(StragglerLeaveOneOut, EqualsTheOthersMedianMinAndMaxExactly) {
  const std::uint64_t seed = test_support::test_seed();
  std::printf("straggler leave-one-out test seed=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0, 1);
  for (int trial = 0; trial < 2000; ++trial) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << " trial " << trial);
    const std::size_t n = rng() % 41;
    // Half the trials draw from a few values, so that ties (equal middle values, the member's own value repeated)
    // are common; the others draw continuous values.
    const bool ties = trial % 2 == 0;
    std::vector<double> v(n);
    for (auto& x : v) x = ties ? static_cast<double>(rng() % 4) : 1e6 * u01(rng) - 1e5;
    std::vector<bool> counted;
    if (trial % 3 == 0) {
      counted.resize(n);
      for (std::size_t i = 0; i < n; ++i) counted[i] = rng() % 4 != 0;
    }
    const LeaveOneOut loo(v, counted);
    for (std::size_t i = 0; i < n; ++i) {
      const Brute b = brute_without(v, counted, i);
      EXPECT_EQ(loo.value(i), v[i]);
      EXPECT_EQ(loo.count_without(i), b.count) << "member " << i;
      EXPECT_EQ(loo.median_without(i), b.median) << "member " << i;
      EXPECT_EQ(loo.min_without(i, 1e300), b.min) << "member " << i;
      EXPECT_EQ(loo.max_without(i, -1e300), b.max) << "member " << i;
    }
  }
}

TEST(StragglerLeaveOneOut, SmallGroups) {
  // One member: no others (the median 0, as median() of nothing). Two: the partner's value. Three: the two others'
  // mean. An uncounted member sees every counted one; a counted member does not see the uncounted.
  EXPECT_EQ(LeaveOneOut({5}).median_without(0), 0);
  EXPECT_EQ(LeaveOneOut({5}).min_without(0, -7), -7);
  EXPECT_EQ(LeaveOneOut({5, 9}).median_without(0), 9);
  EXPECT_EQ(LeaveOneOut({5, 9}).median_without(1), 5);
  EXPECT_EQ(LeaveOneOut({1, 4, 10}).median_without(0), 7);
  EXPECT_EQ(LeaveOneOut({1, 4, 10}).median_without(1), 5.5);
  EXPECT_EQ(LeaveOneOut({1, 4, 10}).median_without(2), 2.5);
  const LeaveOneOut part({1, 100, 4, 10}, {true, false, true, true});
  EXPECT_EQ(part.median_without(1), 4);
  EXPECT_EQ(part.count_without(1), 3u);
  EXPECT_EQ(part.median_without(0), 7);
  EXPECT_EQ(part.max_without(0, 0), 10);
}

}  // namespace
}  // namespace scout::straggler
