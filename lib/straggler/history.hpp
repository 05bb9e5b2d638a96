// The temporal baseline of a job (lib/straggler/README.md "Stragglers"): a small
// per-job JSON file (schemas/straggler-history.schema.json) holding, for each
// process group, the last few measurements of its median compute time per
// call, link time per call and step time. Spatial C3 cannot see a slowdown
// every peer shares; the group's own history can: a `fleet_slowdown` finding
// when a group's current value drifts beyond a robust threshold from its
// history, reported apart from any spatial attribution.
//
// Drift rule, per group and measure with at least `min_entries` past values
// h: base = median(h), spread = 1.4826 * MAD(h); drift when
// current > base * (1 + min_relative) and current - base > kappa * spread.
// The file is updated under an exclusive lock (FILE.lock) and replaced
// atomically, so concurrent probes never lose or tear it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/straggler/timing.hpp"

namespace scout::straggler {

inline constexpr std::string_view k_history_schema = "scout.straggler-history";
inline constexpr std::int64_t k_history_version = 1;

// One group's measurements now (absent measures are < 0).
struct GroupTimes {
  std::string key;  // "<kind>/<16 hex id>"
  std::string kind;
  double compute_ns = -1;  // median over members of compute per call
  double link_ns = -1;     // median link time per call
  double step_ns = -1;     // median over members of wall time per step between the first and last round
};

// Each group's measurements from the rounds' evidence and tables.
std::vector<GroupTimes> group_times(const std::vector<RoundEvidence>& evidence, const std::vector<TimingTable>& tables);

struct History {
  std::string job;
  // group key -> measure ("compute_ns", "link_ns", "step_ns") -> past values, oldest first
  std::map<std::string, std::map<std::string, std::vector<double>>> groups;
};

struct DriftOptions {
  double min_relative = 0.3;
  double kappa = 3.5;
  std::int64_t min_entries = 3;
  std::int64_t max_entries = 32;
};

struct Drift {
  std::string group;
  std::string measure;
  double current = 0;
  double baseline = 0;
  double ratio = 1;
  double threshold = 0;  // the value above which it counts as drift
};

struct TemporalResult {
  std::vector<Drift> drifts;       // fleet_slowdown findings
  std::int64_t groups = 0;         // groups measured now
  std::int64_t with_baseline = 0;  // of them, with min_entries past values
  std::string path;
};

// Parses a history document; bad input (with the path in the message) when malformed or of another job.
Result<History> parse_history(const std::string& text, const std::string& job, const std::string& path);
nlohmann::json history_json(const History& h);

// The drifts of `now` against `h`, then `now` appended (oldest dropped past max_entries).
std::vector<Drift> check_and_append(History& h, const std::vector<GroupTimes>& now, const DriftOptions& o,
                                    std::int64_t* with_baseline = nullptr);

// Locks PATH.lock, reads PATH (absent: empty history), checks, appends, writes it back atomically.
Result<TemporalResult> update_history(const std::string& path, const std::string& job,
                                      const std::vector<GroupTimes>& now, const DriftOptions& o,
                                      std::chrono::milliseconds lock_timeout);

}  // namespace scout::straggler
