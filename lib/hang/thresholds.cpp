#include "lib/hang/thresholds.hpp"

#include <fmt/format.h>

#include "lib/topology/mesh.hpp"

namespace scout::hang {

const std::vector<ThresholdRow>& hang_thresholds() {
  static const std::vector<ThresholdRow> rows = {
      {"k_dense_ranks_per_record, k_dense_ranks_extra",
       fmt::format("{} x ranks + {}", k_dense_ranks_per_record, k_dense_ranks_extra), "gather views",
       "A storage bound, not a noise model: rank ids come from outside input (the gathered blobs), so a vector "
       "indexed by rank is only used below this bound and any other id goes to a map. Either holds the same views; "
       "the verdict does not depend on it."},
      {"k_max_world_size", fmt::format("{} ranks (lib/topology/mesh.hpp)", k_max_world_size), "gather views",
       "A record problem naming a rank beyond any world a mesh can describe does not widen the world."},
      {"k_max_pipeline_stages", fmt::format("{} stages", k_max_pipeline_stages), "find positions",
       "An encoding bound: the role of a pair of pipeline stages (i, j) is one key, i x this + j, so pairs of up to "
       "this many stages never collide; beyond, the pairs' point-to-point calls keep their own group ids."},
      {"k_default_silence_threshold", fmt::format("{} s (--threshold)", k_default_silence_threshold.count() / 1000.0),
       "find positions (the silence rule; also observe and the probe's first phase)",
       "A healthy rank stamps progress at every collective it enters or leaves, so the gap between two stamps is at "
       "most the longest stretch outside collectives (one forward or backward pass between calls, a data-loader wait, "
       "an optimizer step) plus the scheduler delay of the trainer's thread on a loaded host (milliseconds). The "
       "decision compares a stamp from the rank's node clock with the newest collection time of all observers, so "
       "the clock skew between nodes (NTP keeps it to milliseconds) and the spread of the observers' collection times "
       "(the gather, under a second) add to the gap. 10 s is that sum for steps of a few seconds with a wide margin; "
       "it is a default, not a value fitted to a recorded case: a job whose longest pause between collectives is "
       "longer (checkpoint writes, evaluation) must raise it. A rank that never published an event is starting up "
       "and does not count."},
      {"k_max_silence_threshold_s", fmt::format("{} s", k_max_silence_threshold_s), "input (--threshold)",
       "A bound on the flag, a day: a longer silence is not a hang to probe."},
      {"k_max_positions_world", fmt::format("{} ranks", k_max_positions_world), "the probe's first phase",
       "A cost bound: the check that the nodes' ranks are 0..world-1 each once sums rank ids (world^2 / 2 must fit "
       "in 64 bits) and loops over the world; larger worlds always take the full gather."},
      {"strict_majority, strict_minority", "more than 1/2; less than 1/2", "compare per group, explain, conclude",
       "Faults are independent and rare: a bad rank, process or node is one of many that must behave alike, so "
       "within a group of peers the faulty ones are a minority (with a per-rank fault probability p << 1/2, half a "
       "group faulty at once has a probability falling geometrically with its size). A tie carries no information "
       "about which side is wrong (C3, docs/contracts.md), so nothing is attributed without a strict majority and no "
       "rule names half the ranks it judges or more (first failures, torn records, uninterruptible sleep: a strict "
       "minority of the world; a stage's argument outliers: fewer than half the stage; an unreachable node: the "
       "visible ranks a strict majority)."},
      {"k_min_majority_group", fmt::format("{} ranks", k_min_majority_group), "compare per group",
       "Arithmetic of the majority rule: one member is outvoted by a strict majority only when two others agree, so "
       "histories, call arguments and a stage's calls are judged among three or more ranks. Replica groups of two "
       "(dp = 2) cannot name either rank: their histories are compared within the pipeline stage instead, and a "
       "departure between the two is reported as a replica split."},
      {"k_history_class_limit, k_history_reference_classes",
       fmt::format("{} classes; {} references", k_history_class_limit, k_history_reference_classes),
       "compare per group (history)",
       "A cost bound, not a noise model: ranks with the same call history are one class and classes are aligned "
       "pairwise, so the work grows with the square of the classes. Innocent ranks at different points of one path "
       "make one class per distinct point, a handful; beyond 64 classes each is compared with the 32 largest, which "
       "must then hold the strict majority. The values were chosen for cost, not measured against a recorded case."},
      {"k_cascade_signals", "SIGABRT, SIGTERM, SIGINT, SIGHUP", "explain (first failure)",
       "How a peer's failure kills a rank: its call fails (recorded); an uncaught communication exception or gloo's "
       "transport thread aborts it (SIGABRT); a launcher tearing the job down terminates it (SIGTERM, SIGINT, "
       "SIGHUP). Any other signal (SIGKILL, SIGSEGV, SIGBUS, SIGILL, SIGFPE) comes from the rank's own process or from "
       "outside, never from a peer's failure."},
      {"k_victim_abort_signal", "SIGABRT", "explain",
       "gloo's transport thread aborts a rank whose peer closed the connection or sent a bad message before its call "
       "can fail or be recorded, so a SIGABRT is never taken as a rank leaving its call of its own accord, and a lone "
       "unrecorded SIGABRT among recorded failures is a victim's (recorded case: CI, world 4, two ranks skipping a "
       "call, the peer receiving the wrong-sized message was named before this rule)."},
      {"k_max_group_values", fmt::format("{} values", k_max_group_values), "compare per group, explain, render",
       "An output bound: a group of more members lists each distinct value once (with the ranks of the non-majority "
       "values) and a finding names the group by index and size; lists in a finding or a victim's row stop here. It "
       "changes what is listed, never who is named."},
      {"k_max_rank_rows", fmt::format("{} ranks", k_max_rank_rows), "compare per group, render",
       "An output bound (a row is a few hundred bytes): beyond this world size details.ranks lists the notable ranks "
       "only and an agreeing group lists distinct values. It changes what is listed, never who is named."},
      {"k_max_listed_waits", fmt::format("{} waits", k_max_listed_waits), "render",
       "An output bound on details.waits; the waits followed are not limited."},
  };
  return rows;
}

}  // namespace scout::hang
