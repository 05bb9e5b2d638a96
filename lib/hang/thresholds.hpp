// Every threshold and constant the hang decision uses, in one table: its name,
// its value, the stage that uses it (lib/hang/decide.hpp: gather views, find
// positions, compare per group, follow waits, explain, conclude, render) and
// its reason, stated as a model of the timing or of how faults occur, or, where
// the value bounds cost or output size, as that bound (and said so). The
// constants below are the values; hang_thresholds() is the table, with the
// reasons (thresholds.cpp), and lib/hang/README.md ("Hang decision: stages and
// thresholds") prints it (a unit test keeps the two in step).
#pragma once

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace scout::hang {

// find positions (the silence rule, lib/hang/silence.hpp): a job is stalled when
// no rank has made progress for this long (--threshold of probe-hang and observe).
inline constexpr std::chrono::milliseconds k_default_silence_threshold{10'000};
// The largest --threshold accepted, in seconds.
inline constexpr double k_max_silence_threshold_s = 86'400;

// compare per group, explain, conclude: more than half. C3's exact mode
// (lib/consensus) applies the same rule to a group's positions.
template <class T>
constexpr bool strict_majority(T count, T of) {
  return count * 2 > of;
}
// Less than half: the most ranks any rule may name.
template <class T>
constexpr bool strict_minority(T count, T of) {
  return count * 2 < of;
}

// compare per group: the fewest ranks among which a strict majority can
// outvote one member (history, call-argument and stage-argument measures).
inline constexpr std::size_t k_min_majority_group = 3;

// compare per group (history measure): beyond this many distinct call
// histories in a group, each is compared with the k_history_reference_classes
// largest only.
inline constexpr std::size_t k_history_class_limit = 64;
inline constexpr std::size_t k_history_reference_classes = 32;

// explain (first failure): the signals a peer's failure kills a rank with.
inline constexpr int k_cascade_signals[] = {SIGABRT, SIGTERM, SIGINT, SIGHUP};
// explain: the signal gloo's transport thread kills a victim with.
inline constexpr int k_victim_abort_signal = SIGABRT;

// render: up to this many ranks every rank has a row and every group lists a
// value per member; beyond, only the ranks and values that stand out.
inline constexpr std::int64_t k_max_rank_rows = 4096;
// compare per group, explain, render: a group larger than this lists each
// distinct value once and a finding names it by index; every list of ranks
// in a finding or a victim's row stops at this length.
inline constexpr std::size_t k_max_group_values = 256;
// render: at most this many waits in details.waits.
inline constexpr std::size_t k_max_listed_waits = 256;

// gather views: rank ids below k_dense_ranks_per_record x (ranks gathered)
// + k_dense_ranks_extra are kept in a vector, any other in a map.
inline constexpr std::size_t k_dense_ranks_per_record = 16;
inline constexpr std::size_t k_dense_ranks_extra = 4096;

// find positions (roles): pipeline stages up to this many get a role per pair
// of neighbouring stages.
inline constexpr std::uint64_t k_max_pipeline_stages = std::uint64_t{1} << 16;

// The probe's first phase (lib/hang/position.hpp): worlds up to this size may
// be found healthy from the nodes' 64-byte positions alone.
inline constexpr std::int64_t k_max_positions_world = std::int64_t{1} << 24;

// One row of the table.
struct ThresholdRow {
  std::string name;   // the constant's name
  std::string value;  // with its unit
  std::string stage;  // the stage(s) that use it
  std::string reason;
};

// The table, in stage order.
const std::vector<ThresholdRow>& hang_thresholds();

}  // namespace scout::hang
