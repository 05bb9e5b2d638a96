#include "lib/consensus/c3.hpp"

#include <algorithm>
#include <cmath>

namespace scout {

std::string_view c3_status_name(C3Status status) {
  switch (status) {
    case C3Status::agree:
      return "agree";
    case C3Status::attributed:
      return "attributed";
    case C3Status::inconclusive:
      return "inconclusive";
  }
  return "inconclusive";
}

std::string_view c3_mode_name(C3Mode mode) {
  return mode == C3Mode::exact ? "exact" : "statistical";
}

std::string_view c3_reason_name(C3Reason reason) {
  switch (reason) {
    case C3Reason::unanimous:
      return "unanimous";
    case C3Reason::no_dispersion:
      return "no_dispersion";
    case C3Reason::strict_minority:
      return "strict_minority";
    case C3Reason::tie:
      return "no_strict_majority";
    case C3Reason::majority_flagged:
      return "majority_flagged";
    case C3Reason::bimodal:
      return "bimodal";
    case C3Reason::too_few_peers:
      return "too_few_peers";
  }
  return "unknown";
}

std::int64_t C3Result::outlier_count() const {
  return std::count(outliers.begin(), outliers.end(), true);
}

C3Result c3_exact(std::span<const std::uint64_t> keys) {
  C3Result r;
  const std::size_t n = keys.size();
  r.outliers.assign(n, false);
  if (n == 0) return r;
  // Sorting a copy is O(n log n) with no hashing: 100k keys well under a millisecond or so.
  std::vector<std::uint64_t> sorted(keys.begin(), keys.end());
  std::sort(sorted.begin(), sorted.end());
  std::uint64_t best = sorted[0];
  std::size_t best_count = 0, second_count = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && sorted[j] == sorted[i]) ++j;
    std::size_t c = j - i;
    if (c > best_count) {
      second_count = best_count;
      best_count = c;
      best = sorted[i];
    } else if (c > second_count) {
      second_count = c;
    }
    i = j;
  }
  r.majority_count = static_cast<std::int64_t>(best_count);
  if (best_count == n) {
    r.status = C3Status::agree;
    r.reason = C3Reason::unanimous;
    r.majority_peer = 0;
    return r;
  }
  if (2 * best_count <= n) {  // never guess a tie
    r.status = C3Status::inconclusive;
    r.reason = C3Reason::tie;
    r.majority_count = 0;
    return r;
  }
  r.status = C3Status::attributed;
  r.reason = C3Reason::strict_minority;
  for (std::size_t i = 0; i < n; ++i) {
    r.outliers[i] = keys[i] != best;
    if (!r.outliers[i] && r.majority_peer < 0) r.majority_peer = static_cast<std::int64_t>(i);
  }
  return r;
}

namespace {

// Median of a sorted range: mean of the two middle values for even sizes.
double sorted_median(std::span<const double> s) {
  const std::size_t n = s.size();
  if (n == 0) return 0;
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

// Quantile of a sorted range by linear interpolation between order statistics.
double sorted_quantile(std::span<const double> s, double q) {
  if (s.empty()) return 0;
  double pos = q * static_cast<double>(s.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(pos));
  std::size_t hi = std::min(lo + 1, s.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return s[lo] + frac * (s[hi] - s[lo]);
}

// Median of |x - centre| over a range, in O(n) with nth_element.
double median_abs_dev(std::span<const double> xs, double centre, std::vector<double>& scratch) {
  scratch.resize(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) scratch[i] = std::fabs(xs[i] - centre);
  const std::size_t n = scratch.size();
  if (n == 0) return 0;
  auto mid = scratch.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(scratch.begin(), mid, scratch.end());
  double upper = *mid;
  if (n % 2) return upper;
  double lower = *std::max_element(scratch.begin(), mid);
  return 0.5 * (lower + upper);
}

double min_effect(double median, const StatisticalOptions& o) {
  return std::max(o.min_absolute, o.min_relative * std::fabs(median));
}

bool counts(double signed_dev, Direction d) {
  if (d == Direction::high) return signed_dev > 0;
  if (d == Direction::low) return signed_dev < 0;
  return true;
}

}  // namespace

double c3_floor_scale(double median, const StatisticalOptions& options) {
  double kappa = options.kappa > 0 ? options.kappa : 3.5;
  return std::max(min_effect(median, options) / kappa, 1e-12);
}

C3Result c3_statistical(std::span<const double> values, const StatisticalOptions& options) {
  C3Result r;
  const std::size_t n = values.size();
  r.outliers.assign(n, false);
  r.scores.assign(n, 0.0);
  if (n == 0) return r;

  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> scratch;
  r.median = sorted_median(sorted);
  double mad = median_abs_dev(sorted, r.median, scratch);
  if (mad > 0) {
    r.scale = 1.4826 * mad;
    r.scale_source = "mad";
  } else {
    double iqr = sorted_quantile(sorted, 0.75) - sorted_quantile(sorted, 0.25);
    if (iqr > 0) {
      r.scale = iqr / 1.349;
      r.scale_source = "iqr";
    } else {
      r.scale = c3_floor_scale(r.median, options);
      r.scale_source = "floor";
    }
  }
  const double effect = min_effect(r.median, options);
  for (std::size_t i = 0; i < n; ++i) {
    double dev = values[i] - r.median;
    r.scores[i] = dev / r.scale;
    r.outliers[i] = std::fabs(r.scores[i]) > options.kappa && std::fabs(dev) > effect && counts(dev, options.direction);
  }

  // Two clusters separated by a practically significant gap that dwarfs the
  // spread inside each cluster: robust scores break down here (e.g. 1,1,100,100
  // has MAD 49.5), so decide on the split itself.
  if (n >= 2) {
    std::size_t cut = 0;
    double gap = -1;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      double g = sorted[i + 1] - sorted[i];
      if (g > gap) {
        gap = g;
        cut = i + 1;  // left cluster is sorted[0, cut)
      }
    }
    std::span<const double> left(sorted.data(), cut), right(sorted.data() + cut, n - cut);
    double lm = sorted_median(left), rm = sorted_median(right);
    scratch.clear();
    for (double x : left) scratch.push_back(std::fabs(x - lm));
    for (double x : right) scratch.push_back(std::fabs(x - rm));
    std::sort(scratch.begin(), scratch.end());
    double within = 1.4826 * sorted_median(scratch);
    if (within <= 0) within = c3_floor_scale(r.median, options);
    if (gap > effect && gap > options.kappa * within &&
        gap > min_effect(std::min(std::fabs(lm), std::fabs(rm)), options)) {
      if (left.size() == right.size()) {
        r.status = C3Status::inconclusive;
        r.reason = C3Reason::bimodal;
        std::fill(r.outliers.begin(), r.outliers.end(), false);
        return r;
      }
      // The smaller cluster is a strict minority: its members deviate from the majority.
      const bool minority_high = right.size() < left.size();
      const double boundary = minority_high ? sorted[cut] : sorted[cut - 1];
      for (std::size_t i = 0; i < n; ++i) {
        bool in_minority = minority_high ? values[i] >= boundary : values[i] <= boundary;
        if (in_minority && counts(values[i] - r.median, options.direction)) r.outliers[i] = true;
      }
    }
  }

  const std::int64_t flagged = r.outlier_count();
  if (flagged == 0) {
    r.status = C3Status::agree;
    r.reason = C3Reason::no_dispersion;
  } else if (2 * flagged >= static_cast<std::int64_t>(n)) {
    r.status = C3Status::inconclusive;
    r.reason = C3Reason::majority_flagged;
    std::fill(r.outliers.begin(), r.outliers.end(), false);
  } else {
    r.status = C3Status::attributed;
    r.reason = C3Reason::strict_minority;
  }
  return r;
}

}  // namespace scout
