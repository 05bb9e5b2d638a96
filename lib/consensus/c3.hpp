// C3, consensus over equivalent peers (docs/contracts.md "C3"): given one evidence
// value per peer, in peer order, decide whether the peers agree, whether a
// strict minority disagrees (and which peers), or whether no decision is
// possible. Pure functions: every participant that gathered the same evidence
// computes the same result.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace scout {

enum class C3Status { agree, attributed, inconclusive };
enum class C3Mode { exact, statistical };

std::string_view c3_status_name(C3Status status);
std::string_view c3_mode_name(C3Mode mode);

// Why a C3 run ended the way it did; stable strings for JSON.
enum class C3Reason {
  unanimous,         // exact: every value equal
  no_dispersion,     // statistical: nothing deviates beyond the thresholds
  strict_minority,   // a strict minority disagrees
  tie,               // exact: the most frequent value is not a strict majority
  majority_flagged,  // statistical: half or more of the peers would be flagged
  bimodal,           // statistical: two clusters, neither a strict majority
  too_few_peers,     // fewer than one peer
};
std::string_view c3_reason_name(C3Reason reason);

struct C3Result {
  C3Status status = C3Status::inconclusive;
  C3Reason reason = C3Reason::too_few_peers;
  std::vector<bool> outliers;  // one per peer, true when attributed to it
  // Exact mode: index of the first peer holding the majority value (when one exists) and its count.
  std::int64_t majority_peer = -1;
  std::int64_t majority_count = 0;
  // Statistical mode: centre, robust scale used, how the scale was obtained, and per-peer scores.
  double median = 0;
  double scale = 0;
  std::string_view scale_source;  // "mad", "iqr" or "floor"
  std::vector<double> scores;     // |x - median| / scale, signed by direction

  std::int64_t outlier_count() const;
};

// Exact C3 over opaque 64-bit evidence keys (hashes, interned fingerprints):
// the most frequent value must hold a strict majority (count > N/2), otherwise
// the result is inconclusive; every peer differing from it is an outlier.
C3Result c3_exact(std::span<const std::uint64_t> keys);

// Exact C3 over any equality-comparable, hashable values; interns them to keys.
template <typename T, typename Hash = std::hash<T>>
C3Result c3_exact_values(std::span<const T> values) {
  std::unordered_map<T, std::uint64_t, Hash> ids;
  std::vector<std::uint64_t> keys;
  keys.reserve(values.size());
  for (const T& v : values) keys.push_back(ids.try_emplace(v, ids.size()).first->second);
  return c3_exact(keys);
}

// Which deviations count in statistical mode.
enum class Direction { both, high, low };

struct StatisticalOptions {
  double kappa = 3.5;          // Iglewicz-Hoaglin cutoff on the robust z-score
  double min_relative = 0.10;  // a deviation must exceed this fraction of |median| ...
  double min_absolute = 0.0;   // ... and this absolute amount to count
  Direction direction = Direction::both;
};

// Statistical C3 over real-valued evidence (timings, counters). See
// docs/contracts.md "C3": true median, 1.4826*MAD -> IQR/1.349 -> floor, kappa cutoff plus
// minimum practical effect; more than N/2 flagged or a two-cluster split with
// no strict majority is inconclusive. Values must be finite.
C3Result c3_statistical(std::span<const double> values, const StatisticalOptions& options = {});

// The floor scale used when MAD and IQR are both zero: the smallest deviation
// that is practically significant, divided by kappa, so that "score > kappa"
// means "deviation > minimum effect" (never zero: 1e-12 at least).
double c3_floor_scale(double median, const StatisticalOptions& options);

}  // namespace scout
