// The straggler decision (ARCHITECTURE.md "Stragglers"): pure functions over
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
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/consensus/c3.hpp"
#include "lib/report/verdict.hpp"
#include "lib/straggler/timing.hpp"
#include "lib/topology/mesh.hpp"

namespace scout::straggler {

struct DecideOptions {
  // Compute C3 (high side only).
  double kappa = 3.5;
  // The cause of a named compute straggler (cause_of): cpu_quota when its cgroup was throttled for at least
  // quota_window_share of the window and its throttled time beyond its peers' is at least cause_share of
  // its excess compute; else cpu_contention when it waited for a CPU, per ns of CPU it used, at least
  // contention_min_ratio times as long as its peers (median), and that extra wait is at least cause_share
  // of the excess (a rank with more work waits longer in proportion: not contention), unless it used at least
  // 1 + more_work_min_relative times its peers' CPU per call (process and main thread): more work is
  // then the cause, and its extra wait follows from it; else slow_compute.
  double quota_window_share = 0.05;
  double cause_share = 0.5;
  double contention_min_ratio = 1.1;
  double min_relative = 0.12;  // a straggler computes at least this much longer than its peers' median
  // ... or, in a peer group of two (each rank against the other: no median, no spread of the others to
  // measure noise by), at least this much longer, and its partner waits for at least half its excess.
  double pair_min_relative = 0.2;
  double min_absolute_ns = 100'000;  // ... and at least this many ns longer per call (mean)
  double min_step_share = 0.02;      // ... and longer by this share of its peers' time per call (compute + wait)
  double spread_factor = 1.0;  // ... and its effect at least this times the other peers' spread (max - min) that round
  // The verdict notes an oversubscribed host (noise_notes) where its ranks wait for a CPU at least this share
  // of their compute time in most rounds and the ranks no one named differ by at least 1 + min_relative.
  double oversubscribed_share = 0.5;
  double contended_share =
      0.1;  // a group whose ranks wait for a CPU this share of their compute time is decided on CPU used
  // ... where a rank's CPU per call must be at least this much above its peers' median: contention
  // alone moves it up to ~17% (CI: a fleet slowed 3x at a CPU wait share of 0.7, one rank at 1.165x). In a peer
  // group of three or more as in a pair: a clean world-8 job on 2 CPUs (load 3.7, seed 20370002) named rank 6 at
  // 1.19x in a majority of rounds at 0.15, arriving late by as much (the floor groups had); trainer-slowed ranks
  // (1.3-1.4x, worlds 8, 14 runs) showed 1.15-1.46x, at least 1.2x in 2 of 3 rounds in every run.
  double contended_cpu_min_relative = 0.2;
  // ... and where its compute time above the median and its peers' wait for it, per call, are each at least
  // this share of its CPU excess per call (it arrives late: more CPU that delays no one is no straggler).
  double cpu_peers_wait_share = 0.5;
  // ... or, in a pair, this share: there a rank's extra CPU partly replaces time it would have waited for a CPU,
  // and the partner's wait is one figure, not the median of several. Measured, a torch 2.x two-rank job, rank 0
  // trainer-slowed 1.31x at 1.27x its partner's CPU per call in all 3 rounds, waiting 0.86x its partner's time for
  // a CPU; its time excess 0.56x and its partner's extra wait 0.49x its CPU excess, pooled (seed 20268702, not named
  // at 0.5). Over 100 clean pair runs (world 2 and dp=2 x tp=2, load 5-12) re-decided at 0.4, no one was named.
  // Groups of three or more keep 0.5: a fleet slowdown of a world-8 job named a rank at 1.39x at 0.4, once in
  // about 30 runs (its evidence was not kept; the 0.5 it had before is the safer side).
  double pair_cpu_peers_wait_share = 0.4;
  // ... or, pooled, late at all where the other pairs of its mesh are quiet: their median spread (the two ranks'
  // pooled CPU ratios apart) at most 1/pair_quiet_factor of its pooled excess (decide.cpp, pooled_pairs).
  double pair_quiet_factor = 3;
  // ... or, a rank starved of CPU (quota, contention), its compute time at least this much above its peers'
  // median with its extra wait for a CPU making up half the excess (measure "cpu_wait").
  double contended_wait_min_relative = 0.3;
  // A rank that needs more CPU per call where the CPUs are oversubscribed can take it from the time it would have
  // waited for one: its extra CPU is absorbed, it arrives no later than its peers and they do not wait for it
  // (measured: world 8 on 2 CPUs, load 7.6, a rank stalled 1.32x at 1.31-1.33x its peers' CPU per call in every
  // round, its compute time 1.07x, its wait its peers' median: unnamed in 2 of 8 runs). In a peer group of three
  // or more the cpu measure flags it without the lateness check (cpu_peers_wait_share) where its CPU per call,
  // process and main thread, stands out by at least this many times the other peers' spread, and no other rank of
  // its group is flagged that round (whose peers burn CPU waiting for it: a stopped or throttled rank's). A pair's
  // rank, pooled, where the mesh's other pairs spread at most 1 / (this x pair_quiet_factor) of its excess, need
  // only keep its partner waiting longer than it (pooled_pairs).
  double absorbed_spread_factor = 2.0;
  // The cause of a named rank is more work (slow_compute, cause_of) where its CPU per call, process and main
  // thread, is at least this much above its peers'.
  double more_work_min_relative = 0.15;
  // A rank stopped from outside (the observer's samples of its process state, stopped.hpp; measure "stopped"):
  // flagged in a round when at least stopped_min_samples were taken, it was stopped in at least
  // stopped_min_share of them, its stopped time per call is at least min_relative times its peers' median
  // compute per call (and min_absolute_ns: were all its stops outside its collectives, it would be a
  // min_relative compute straggler), and no other peer was stopped in half its share (the peers of a
  // synchronous job are never stopped; a whole job suspended has no straggler).
  double stopped_min_share = 0.05;
  std::int64_t stopped_min_samples = 20;
  // Communication: a group's link time against the median of the other groups of its kind.
  double link_min_ratio = 1.5;
  double link_min_absolute_ns = 1'000'000;  // per call
  double link_min_consistency = 0.75;       // ... in at least this fraction of the calls, call by call
  std::int64_t min_calls = 3;               // a round needs this many common calls to say anything
  // Cluster-wide when the slow groups touch at least this many nodes without a common one.
  std::int64_t cluster_wide_nodes = 3;
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
  std::string measure = "compute";  // what decided: "compute" (time), or on a contended host "cpu", "off_cpu"
                                    // or "cpu_wait"; "stopped" (its process state samples) on any host
  bool flagged = false;
  bool absorbed = false;  // the cpu measure flagged it without its peers waiting for it (absorbed_spread_factor)
  // Every measure that flagged it this round, with that measure's ratio (`measure` is the one reported for the
  // round). A rank is named when one measure flags it in a strict majority of rounds: counted for each.
  std::map<std::string, double> flagged_by;
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

// The verdict of a decision. `extra` is merged into details (history, bench, transport).
Verdict make_verdict(const std::string& command, const std::string& job, const Decision& d,
                     const std::vector<RoundResult>& rounds, const std::vector<TimingTable>& tables, const Mesh& mesh,
                     const std::string& mesh_source);

}  // namespace scout::straggler
