#include "lib/straggler/timing.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

TEST(StragglerLeaveOneOut, LargeGroupsEqualTheOthersMedianMinAndMax) {
  // Peer groups of a thousand members and more (1600 at 100k ranks): the few places LeaveOneOut keeps of the sorted
  // values, found by selection, are those a sort gives.
  const std::uint64_t seed = test_support::test_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0, 1);
  for (int trial = 0; trial < 4; ++trial) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << " trial " << trial);
    const std::size_t n = 1000 + rng() % 700;
    std::vector<double> v(n);
    for (auto& x : v) x = trial % 2 == 0 ? static_cast<double>(rng() % 5) : u01(rng);
    std::vector<bool> counted;
    if (trial >= 2) {
      counted.resize(n);
      for (std::size_t i = 0; i < n; ++i) counted[i] = rng() % 8 != 0;
    }
    const LeaveOneOut loo(v, counted);
    for (std::size_t i = 0; i < n; ++i) {
      const Brute b = brute_without(v, counted, i);
      ASSERT_EQ(loo.count_without(i), b.count) << "member " << i;
      ASSERT_EQ(loo.median_without(i), b.median) << "member " << i;
      ASSERT_EQ(loo.min_without(i, 1e300), b.min) << "member " << i;
      ASSERT_EQ(loo.max_without(i, -1e300), b.max) << "member " << i;
    }
  }
}

TEST(StragglerLeaveOneOut, LargeGroupsOfManyShapesEqualTheBruteForce) {
  // A group of 1024 counted values or more takes its two least and two largest in one pass and its middle places
  // among the values a sample puts about the middle (issue 40): the same figures as the brute force for groups with
  // ties, sorted or reversed values, far values on one side, every value equal, half of them 0, some not counted.
  const std::uint64_t seed = test_support::test_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> around(6e6, 6e4);
  for (int trial = 0; trial < 24; ++trial) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << " trial " << trial);
    const std::size_t n = 1024 + rng() % 2000;
    std::vector<double> v(n);
    for (auto& x : v) x = std::round(around(rng));
    switch (trial % 8) {
      case 1:
        for (auto& x : v) x = static_cast<double>(rng() % 3);
        break;
      case 2:
        std::sort(v.begin(), v.end());
        break;
      case 3:
        std::sort(v.rbegin(), v.rend());
        break;
      case 4:
        for (std::size_t i = 0; i < n / 2 - 1; ++i) v[i] = 1e9;
        break;
      case 5:
        std::fill(v.begin(), v.end(), 7.0);
        break;
      case 6:
        for (std::size_t i = 0; i < n; i += 2) v[i] = 0;
        break;
      default:
        break;
    }
    std::vector<bool> counted;
    if (trial >= 16) {
      counted.resize(n);
      for (std::size_t i = 0; i < n; ++i) counted[i] = rng() % 16 != 0;
    }
    const LeaveOneOut loo(v, counted);
    // Members spread over the group, and those with its least and largest values.
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < n; i += n / 29) members.push_back(i);
    members.push_back(static_cast<std::size_t>(std::min_element(v.begin(), v.end()) - v.begin()));
    members.push_back(static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin()));
    for (const std::size_t i : members) {
      const Brute b = brute_without(v, counted, i);
      ASSERT_EQ(loo.count_without(i), b.count) << "member " << i;
      ASSERT_EQ(loo.median_without(i), b.median) << "member " << i;
      ASSERT_EQ(loo.min_without(i, 1e300), b.min) << "member " << i;
      ASSERT_EQ(loo.max_without(i, -1e300), b.max) << "member " << i;
    }
  }
}

TEST(StragglerMedian, LargeRowsEqualTheSortedMiddle) {
  // median_in_place on a peer group's row (1600 members at 100k ranks) selects among the values a sample puts about
  // the middle (issue 40): the same median as the sorted row's middle values, averaged alike, for rows with ties,
  // sorted or reversed rows, far values on one side, every value equal; the row left a reordering of itself.
  const std::uint64_t seed = test_support::test_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> around(6e6, 6e4);
  for (int trial = 0; trial < 64; ++trial) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << " trial " << trial);
    const std::size_t n = 1000 + rng() % 2000;
    std::vector<double> v(n);
    for (auto& x : v) x = std::round(around(rng));
    switch (trial % 8) {
      case 1:
        for (auto& x : v) x = static_cast<double>(rng() % 3);
        break;
      case 2:
        std::sort(v.begin(), v.end());
        break;
      case 3:
        std::sort(v.rbegin(), v.rend());
        break;
      case 4:
        for (std::size_t i = 0; i < n / 2 - 1; ++i) v[i] = 1e9;
        break;  // the middle among the far values
      case 5:
        std::fill(v.begin(), v.end(), 7.0);
        break;
      case 6:
        for (std::size_t i = 0; i < n; i += 2) v[i] = 0;
        break;
      default:
        break;
    }
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const double expect = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    ASSERT_EQ(median_in_place(v.data(), v.data() + v.size()), expect);
    std::sort(v.begin(), v.end());
    ASSERT_EQ(v, sorted);
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

// The scan build_table did before latest_completed_before, O(E^2): of the calls before i, every completion at or
// before i's enter taken in turn where it is >= the latest so far (so of equal ones the later call wins).
std::ptrdiff_t brute_latest(const std::vector<records::CollectiveEvent>& ev, std::size_t i) {
  std::int64_t prev = 0;
  std::ptrdiff_t chosen = -1;
  for (std::size_t j = 0; j < i; ++j)
    if (ev[j].exit_ns > 0 && ev[j].exit_ns <= ev[i].enter_ns && ev[j].exit_ns >= prev) {
      prev = ev[j].exit_ns;
      chosen = static_cast<std::ptrdiff_t>(j);
    }
  return chosen;
}

TEST(StragglerLatestCompleted, EqualsTheScanOnRandomCalls) {
  const std::uint64_t seed = test_support::test_seed();
  std::printf("straggler latest-completed test seed=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::vector<std::ptrdiff_t> got;
  for (int trial = 0; trial < 3000; ++trial) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << " trial " << trial);
    const std::size_t n = rng() % 80;
    // A small range of times, so that exits tie each other and enters; some calls still inside (exit 0), some
    // times out of order, some not positive.
    const std::int64_t span = 1 + static_cast<std::int64_t>(rng() % (trial % 3 == 0 ? 8 : 200));
    std::vector<records::CollectiveEvent> ev(n);
    for (std::size_t i = 0; i < n; ++i) {
      auto& e = ev[i];
      e.op_seq = i + 1;
      e.enter_ns = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(span + 2)) - 1;
      const auto draw = rng() % 10;
      e.exit_ns = draw == 0   ? 0
                  : draw == 1 ? -static_cast<std::int64_t>(rng() % 3)
                              : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(span + 2)) - 1;
      e.exit_kind = static_cast<records::ExitKind>(rng() % 5);
    }
    latest_completed_before(ev, got);
    ASSERT_EQ(got.size(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::ptrdiff_t want = brute_latest(ev, i);
      ASSERT_EQ(got[i], want) << "call " << i;
      if (want >= 0) {  // the same completion, so the same timed flag
        EXPECT_EQ(ev[static_cast<std::size_t>(got[i])].exit_ns, ev[static_cast<std::size_t>(want)].exit_ns);
        EXPECT_EQ(ev[static_cast<std::size_t>(got[i])].exit_kind, ev[static_cast<std::size_t>(want)].exit_kind);
      }
    }
  }
}

TEST(StragglerLatestCompleted, TiesGoToTheLaterCall) {
  // Calls 0 and 1 both completed at 10; call 2 entered at 10: the later of the two (1) is its predecessor, even
  // where 1 is only an upper bound. Call 3 entered at 9: nothing had completed. Call 4, still inside, at 20: call 2's
  // 15 is the latest (call 3's exit 30 is after 20).
  std::vector<records::CollectiveEvent> ev(5);
  const std::int64_t enter[] = {1, 2, 10, 9, 20}, exit_[] = {10, 10, 15, 30, 0};
  for (std::size_t i = 0; i < ev.size(); ++i) {
    ev[i].op_seq = i + 1;
    ev[i].enter_ns = enter[i];
    ev[i].exit_ns = exit_[i];
  }
  ev[1].exit_kind = records::ExitKind::ordered;
  std::vector<std::ptrdiff_t> got;
  latest_completed_before(ev, got);
  EXPECT_EQ(got, (std::vector<std::ptrdiff_t>{-1, -1, 1, -1, 2}));
}

}  // namespace
}  // namespace scout::straggler
