// The straggler decision (lib/straggler/README.md "Stragglers"): pure functions over
// timing tables (timing.hpp), one per round, giving
//  - compute stragglers: per peer group (replicas, or state shards), C3 in
//    statistical mode (reported) on each rank's compute over the calls every peer
//    completed: the median over the busy calls of its compute / the peers'
//    median compute for that call; a rank
//    is flagged in a round when it waits less than its
//    peers' median wait, and its excess is at least min_relative and
//    spread_factor times the other peers' spread; it is named only when
//    flagged in a strict majority of the rounds taken;
//  - slow process groups: per group kind and call, link(G, c) (timing.hpp);
//    a group is slow in a round when its median link time is a high outlier
//    among the groups of its kind (C3 statistical with 3 or more groups, the
//    ratio rule with 2) and it is slower than the others call by call in at
//    least link_min_consistency of the calls (a slow link slows every call; a
//    loaded host's descheduling only some), confirmed over rounds like ranks;
//  - a diagnosis of the confirmed slow groups, mapped to nodes:
//      machine_local        slow groups of two or more kinds meet in one node
//                           (and, when they meet in one rank, that rank)
//      intra_node_link      only groups inside one node are slow (a tp group)
//      inter_node_network   only groups spanning nodes are slow
//      cluster_wide         slow groups on many nodes with no common node
//  - the temporal baseline lives in history.hpp.
// It runs as named stages and measures (measures/measures.hpp lists them in order; one file each or a few related
// ones under measures/), every threshold in one table (thresholds.hpp; DecideOptions' defaults come from it), and
// each suspect's evidence names the measure that flagged it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lib/consensus/c3.hpp"
#include "lib/report/verdict.hpp"
#include "lib/straggler/thresholds.hpp"
#include "lib/straggler/timing.hpp"
#include "lib/topology/mesh.hpp"

namespace scout::straggler {

// The user-tunable thresholds, their defaults from the one table (thresholds.hpp: each one's measure and the noise
// model behind its value). What each measure asks is described where it is (measures/*.cpp) and in
// lib/straggler/README.md "Straggler decision: measures and thresholds".
struct DecideOptions {
  // C3's robust z-score cut: the reported compute score, the link measure over 3 or more groups.
  double kappa = thresholds::kappa.value;
  // cause_of: stopped or throttled at least this share of the window (cpu_quota, stopped) ...
  double quota_window_share = thresholds::quota_window_share.value;
  // ... and the figure that explains it at least this share of its excess compute;
  double cause_share = thresholds::cause_share.value;
  // ... cpu_contention: its CPU wait per CPU second at least this times its peers'.
  double contention_min_ratio = thresholds::contention_min_ratio.value;
  // Every time measure: the effect (ratio - 1) at least this (--min-ratio - 1) ...
  double min_relative = thresholds::min_relative.value;
  // ... or this in a peer group of two (each rank against the other);
  double pair_min_relative = thresholds::pair_min_relative.value;
  // ... and at least this many ns longer per call (mean);
  double min_absolute_ns = thresholds::min_absolute_ns.value;
  // ... and longer by this share of its peers' time per call, computing and waiting (measure "material");
  double min_step_share = thresholds::min_step_share.value;
  // ... or this share where the peer group waits for CPUs (contended);
  double contended_min_step_share = thresholds::contended_min_step_share.value;
  // ... and its effect at least this times the other peers' spread (max - min) that round.
  double spread_factor = thresholds::spread_factor.value;
  // noise_notes: the host is oversubscribed where ranks wait for a CPU this share of their compute time.
  double oversubscribed_share = thresholds::oversubscribed_share.value;
  // A peer group whose ranks wait for a CPU this share of their compute time is decided on CPU (contended).
  double contended_share = thresholds::contended_share.value;
  // cpu: its CPU per call, process and main thread, at least this much above its peers' median;
  double contended_cpu_min_relative = thresholds::contended_cpu_min_relative.value;
  // ... and it arrives late: its time excess and its peers' extra wait each this share of its CPU excess,
  double cpu_peers_wait_share = thresholds::cpu_peers_wait_share.value;
  // ... or this share in a pair (and pooled_pair);
  double pair_cpu_peers_wait_share = thresholds::pair_cpu_peers_wait_share.value;
  // pooled_pair: late at all where the mesh's other pairs spread at most 1/this of its pooled excess.
  double pair_quiet_factor = thresholds::pair_quiet_factor.value;
  // cpu_wait: its compute time at least this much above its peers' median.
  double contended_wait_min_relative = thresholds::contended_wait_min_relative.value;
  // cpu (absorbed): no lateness asked where its CPU stands out by this times the other peers' spread and no other
  // rank of its group is flagged that round; pooled_pair: partner waiting longer at all where the other pairs
  // spread at most 1 / (this x pair_quiet_factor) of its excess.
  double absorbed_spread_factor = thresholds::absorbed_spread_factor.value;
  // cause_of: more work (slow_compute) where its CPU per call, process and main thread, is this much above.
  double more_work_min_relative = thresholds::more_work_min_relative.value;
  // cause_of: where it did more work and also waited, up to this times its CPU per call's rise over its peers' of
  // the wait its CPU costs at their rate could be either's and counts for neither; the larger of the rest decides.
  double more_work_wait_factor = thresholds::more_work_wait_factor.value;
  // stopped: stopped in at least this share of at least this many samples.
  double stopped_min_share = thresholds::stopped_min_share.value;
  std::int64_t stopped_min_samples = static_cast<std::int64_t>(thresholds::stopped_min_samples.value);
  // link: a group's link time at least this times the other groups' of its kind, this many ns more per call,
  double link_min_ratio = thresholds::link_min_ratio.value;
  double link_min_absolute_ns = thresholds::link_min_absolute_ns.value;
  // ... in at least this fraction of the calls, call by call.
  double link_min_consistency = thresholds::link_min_consistency.value;
  // A round needs this many common calls to say anything.
  std::int64_t min_calls = static_cast<std::int64_t>(thresholds::min_calls.value);
  // Cluster-wide when the slow groups touch at least this many nodes without a common one.
  std::int64_t cluster_wide_nodes = static_cast<std::int64_t>(thresholds::cluster_wide_nodes.value);
};

// One rank's numbers in one round (per call, over the calls its peer group shares).
struct RankRound {
  std::int64_t rank = -1;
  double compute_ns = 0;            // mean compute per common call
  double wait_ns = 0;               // mean wait per common call
  double ratio = 1;                 // the deciding measure's ratio: median over busy calls of compute / the peers'
                                    // median for that call, or cpu_ratio on a contended host
  double score = 0;                 // robust z-score of compute
  double cpu_ns = -1;               // CPU used per call (-1: no scheduler counters for every peer)
  double runq_ns = -1;              // its main thread's wait for a CPU per call
  double cpu_ratio = 1;             // cpu_ns / the peers' median
  double main_cpu_ratio = 1;        // its main thread's CPU per call / the peers' median (1 without counters)
  double compute_ratio = 1;         // the time measure's ratio, also where the CPU one decides
  double off_cpu_ratio = 1;         // 1 + (time off a CPU without waiting for one - the peers' median) / median compute
  std::string measure = "compute";  // what decided: "compute" (time), or on a contended host "cpu", "off_cpu",
                                    // "cpu_wait" or "late"; "stopped" (its process state samples) on any host
  bool flagged = false;
  bool absorbed = false;  // the cpu measure flagged it without its peers waiting for it (absorbed_spread_factor)
  // Every measure that flagged it this round, with that measure's ratio (`measure` is the one reported for the
  // round). A rank is named when one measure flags it in a strict majority of rounds: counted for each.
  std::map<std::string, double> flagged_by;
  // Every measure whose own rule flagged it this round, before the round's cross-checks dropped any (material,
  // stopped_peer, absorbed_alone: measures/round_checks.cpp); for scoring the measures one by one (measure_flags).
  std::map<std::string, double> raised_by;
  // What explains a slow rank (the cause of a named suspect; never a reason to name one), per call:
  double excess_ns = 0;           // its compute - the other peers' median compute
  double peer_runq_ns = -1;       // the other peers' median CPU wait (-1: no scheduler counters for every peer)
  double peer_wait_per_cpu = -1;  // the other peers' median CPU wait per ns of (main thread) CPU
  double throttled_ns = -1;       // its cgroup's throttled time (-1: unknown)
  double peer_throttled_ns = -1;  // the other peers' median throttled time (-1: unknown for one of them)
  CpuPerCall window;              // its counters over the round's window (calls, wall time, throttled periods, quota)
  StoppedWindow stopped;          // its process state samples over the round (samples 0: not sampled)
  double stopped_ratio = 1;       // 1 / (1 - its stopped share): the slowdown a duty cycle of that share makes
};

// One peer group's C3 in one round.
struct PeerRound {
  std::vector<std::int64_t> members;
  std::int64_t calls = 0;     // common calls compared
  bool contended = false;     // its ranks wait for CPUs (scheduler counters): the CPU measure decides
  double cpu_wait_share = 0;  // median over members of CPU wait / compute time (0 without counters)
  C3Result c3;
  std::vector<RankRound> ranks;  // in member order
};

// One process group's numbers in one round.
struct GroupRound {
  std::size_t group = 0;  // index into TimingTable::groups
  double link_ns = 0;     // median link time per call
  double ratio = 1;       // link / median link of the other groups of its kind
  std::int64_t calls = 0;
  bool slow = false;
};

struct RoundResult {
  std::vector<PeerRound> peers;
  std::vector<GroupRound> groups;
  std::int64_t calls = 0;                  // distinct call keys in the table
  bool has_data = false;                   // some peer group or group kind had min_calls common calls
  std::set<std::string> widespread_kinds;  // kinds where half or more groups stood out (C3 inconclusive)
};

// Analyses one round.
RoundResult analyse_round(const TimingTable& table, const Mesh& mesh, const DecideOptions& options);

// What the rounds together say.
// Why a named compute straggler is slow, from its rounds' RankRounds (those that flagged it):
// "stopped" (its process was stopped from outside, by the state samples), "cpu_quota", "cpu_contention",
// "slow_compute" or "unknown" (no scheduler counters), with the figures.
struct Cause {
  std::string cause = "unknown";
  nlohmann::json figures = nlohmann::json::object();
};
Cause cause_of(const std::vector<const RankRound*>& hits, const DecideOptions& options);

struct Suspicion {
  std::int64_t rank = -1;  // -1: a node
  std::string node;
  std::string reason;  // "compute" | "communication"
  std::int64_t flagged_rounds = 0;
  double ratio = 1;  // median over flagged rounds
  double confidence = 0;
  nlohmann::json evidence = nlohmann::json::object();
};

struct SlowGroup {
  GroupInfo group;
  std::vector<std::string> nodes;
  bool intra_node = false;
  std::int64_t flagged_rounds = 0;
  double ratio = 1;
  double link_ns = 0;
};

enum class Diagnosis { none, compute, machine_local, intra_node_link, inter_node_network, cluster_wide };
std::string_view diagnosis_name(Diagnosis d);

struct Decision {
  std::vector<Suspicion> suspects;
  std::vector<SlowGroup> slow_groups;
  Diagnosis diagnosis = Diagnosis::none;  // of the communication side; compute stragglers alone give compute
  double confidence = 0;
  std::int64_t rounds = 0;  // rounds taken
  std::int64_t rounds_with_data = 0;
  bool enough_data = false;
  std::vector<std::string> notes;
  // What the verdict could not see (noise_notes): ranks flagged in some rounds but not named (unconfirmed), and
  // the rounds' noise: the median over rounds of the CPU wait share and the largest ratio of a rank no one named
  // in any round, in the measure that decides its group (CPU per call where contended, compute time elsewhere;
  // -1 / 0 where no round had data); oversubscribed where both are above their floors.
  std::vector<std::int64_t> unconfirmed;
  double noise_cpu_wait_share = -1;
  double noise_ratio = 0;
  bool oversubscribed = false;
};

// A named compute straggler that reads from storage what its peers do not (reads, major faults: its page cache
// reclaimed, or its data not cached) gets the cause "memory_pressure" where its memory cgroup hit its limit or
// stalled (PSI) in the rounds, else "storage_reads"; the figures join its cause_figures. Over every round that
// compared it with its peers; a cause of stopped, cpu_quota or cpu_contention is kept.
void memory_causes(Decision& d, const std::vector<RoundResult>& rounds);

// Combines the rounds (all analysed over the same mesh and groups).
Decision decide(const std::vector<RoundResult>& rounds, const std::vector<TimingTable>& tables, const Mesh& mesh,
                const DecideOptions& options);

// Every round's table (calls used by an earlier round excluded), analysis, and the decision.
struct Analysis {
  std::vector<TimingTable> tables;
  std::vector<RoundResult> rounds;
  Decision decision;
};
Analysis analyse(const std::vector<RoundEvidence>& evidence, const Mesh& mesh, const DecideOptions& options);

// The named measures, in the order a round runs them (the "measure" of a suspect's evidence is one of them; a
// communication suspect's is "link"; "pooled_pair" names its suspects "cpu", with evidence pooled_rounds).
inline constexpr std::array<std::string_view, 9> measure_names = {
    "compute", "cpu", "off_cpu", "cpu_wait", "late", "stopped", "throttled", "pooled_pair", "link"};

// What each measure flagged, for scoring the measures one by one: per round and measure, the ranks it flagged
// (flagged: after the round's cross-checks, what naming counts; raised: its own rule alone), the process groups the
// link measure found slow (indices into the round's TimingTable::groups), and the ranks pooled_pair flagged over
// the rounds pooled (named where that is a strict majority of the rounds and no other measure named it or its
// partner).
struct MeasureFlags {
  std::vector<std::map<std::string, std::set<std::int64_t>>> flagged;
  std::vector<std::map<std::string, std::set<std::int64_t>>> raised;
  std::vector<std::set<std::size_t>> slow_groups;
  std::set<std::int64_t> pooled_pair;
};
MeasureFlags measure_flags(const Analysis& analysis, const DecideOptions& options);

// The verdict of a decision. `extra` is merged into details (history, bench, transport).
Verdict make_verdict(const std::string& command, const std::string& job, const Decision& d,
                     const std::vector<RoundResult>& rounds, const std::vector<TimingTable>& tables, const Mesh& mesh,
                     const std::string& mesh_source);

}  // namespace scout::straggler
