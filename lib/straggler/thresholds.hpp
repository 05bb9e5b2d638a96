// Every threshold and constant the straggler decision uses (lib/straggler/README.md "Straggler decision: measures and
// thresholds"), in one table. Each entry names the measure (or stage) that uses it and its reason, stated as a
// model of the noise it must stay above (or the effect it must stay below). Where the value was first set from a
// seed that needed it, the reason says so and states the noise model that justifies the value; the seeds are in
// the measured figures of lib/straggler/README.md "Stragglers" and the recorded runs
// (tests/integration/data/straggler/).
//
// DecideOptions (decide.hpp) keeps the user-tunable ones (`tunable`), with their defaults from here; the rest are
// fixed parts of a measure's statistic. Changing a value here is tuning: re-run the recorded runs and the
// campaigns (bench/) before and after.
#pragma once

#include <array>
#include <string_view>

namespace scout::straggler::thresholds {

struct Threshold {
  std::string_view name;
  double value;
  std::string_view measure;  // the named measure or stage that reads it
  bool tunable;              // a DecideOptions field of the same name
  std::string_view reason;   // the noise model behind the value
};

// ---- Stage 1: the round's statistics per peer group (measures/stats.cpp) ----
inline constexpr Threshold min_calls{
    "min_calls", 3, "stats, link", true,
    "a round's median over its common calls needs at least 3 to drop one descheduling spike; fewer says nothing"};
inline constexpr Threshold busy_call_share{
    "busy_call_share", 0.25, "stats (compute ratio)", false,
    "the calls where the step computes carry the signal; a call whose median compute is under a quarter of the "
    "largest is bookkeeping between collectives whose ratio is scheduler jitter on microseconds"};
inline constexpr Threshold step_pattern_match{
    "step_pattern_match", 0.9, "stats (step period)", false,
    "a step's call pattern (kind, op, count) repeats exactly in a synchronous program; 10% of mismatches allows "
    "the rounds' edges and an occasional extra call (a checkpoint, a logging all-reduce)"};
inline constexpr Threshold min_step_blocks{
    "min_step_blocks", 3, "stats (step period)", false,
    "the per-step ratio is a median over blocks of whole steps: 3 blocks let one block hit by a descheduling "
    "spike be dropped; the period is at most a third of the calls for the same reason"};
inline constexpr Threshold contended_share{
    "contended_share", 0.1, "stats (contended)", true,
    "where ranks wait for a CPU 10% or more of their compute time, more runnable threads than CPUs spread the "
    "compute time of equal ranks by more than a mild straggler's excess (4 ranks on 2 CPUs: waits of 0.47-0.62 s "
    "in 2 s, a clean rank at 1.19x): below it time decides, above it CPU per call"};
// ---- Every time measure (compute, cpu, off_cpu, cpu_wait, throttled, stopped) ----
inline constexpr Threshold min_relative{
    "min_relative", 0.12, "compute, cpu, off_cpu, cpu_wait, throttled, stopped", true,
    "on an idle or evenly loaded host equal ranks' per-call compute ratios stay within a few percent (machine-wide "
    "load cancels in the per-call ratio); 12% is the smallest slowdown worth naming with margin over that "
    "(--min-ratio 1.12)"};
inline constexpr Threshold pair_min_relative{
    "pair_min_relative", 0.2, "compute, cpu, off_cpu, throttled (pairs)", true,
    "a pair has no third peer: each rank's reference is one value, not a median, so it carries the partner's "
    "noise too (about twice a median's spread); 0.2 keeps a clean pair's uneven share of 2 CPUs (1.1-1.19x) out"};
inline constexpr Threshold min_absolute_ns{
    "min_absolute_ns", 100'000, "compute, cpu, off_cpu, cpu_wait, throttled, stopped", true,
    "0.1 ms per call: below it a ratio is timer and wake-up latency (tens of microseconds on a loaded VM), not work"};
inline constexpr Threshold min_step_share{
    "min_step_share", 0.02, "material (all but stopped, throttled)", true,
    "a straggler must cost its peers 2% of their time per call (compute + wait); on a job whose steps are nearly "
    "all wait, a rank's 1-3 ms of compute moves by 0.3-1.3% of the step with scheduling alone (first seen as a rank "
    "named beside a stopped one in 5 of 19 runs)"};
inline constexpr Threshold contended_min_step_share{
    "contended_min_step_share", 0.06, "material on a contended host (all but stopped, throttled)", true,
    "where ranks wait for CPUs, a rank's compute of a step that is nearly all wait moves by more: every rank "
    "sleeping 0.3 s inside one collective a step, 3-15 ms of compute per call, 3 busy loops beside on 2 CPUs, a "
    "clean rank's excess reached 2.4-4.5% of its peers' time per call in the rounds a time measure flagged it (16 of "
    "40 runs, 1 of 35 named it in 2 of 3 rounds; 4 of 24 rounds of clean jobs); 6% left 1 such round of 144 and "
    "changed no verdict of the 195 recorded and held-out runs (tests' data, bench/heldout/kept*)"};
inline constexpr Threshold spread_factor{
    "spread_factor", 1.0, "compute, cpu, off_cpu (x0.5), cpu_wait", true,
    "the other peers' spread (max - min) that round measures the group's own noise; an effect of at least that "
    "spread is outside what the clean ranks did to each other in the same round"};
inline constexpr Threshold kappa{
    "kappa", 3.5, "compute (reported C3 score), link (C3 over 3+ groups)", true,
    "C3's robust z-score: 3.5 x 1.4826 MAD is the usual outlier cut for a median/MAD estimate (about 1 in 2000 "
    "for Gaussian noise); the compute score is reported, the flags use the rules above"};
// ---- compute (uncontended host) ----
inline constexpr Threshold pair_partner_wait_share{
    "pair_partner_wait_share", 0.5, "compute (pairs)", false,
    "in a synchronous pair the partner waits for the straggler's excess; half of it allows the wait to be "
    "measured on other calls than the compute (wait exact only on some) and jitter on either side"};
// ---- cpu (contended host: CPU per call) ----
inline constexpr Threshold contended_cpu_min_relative{
    "contended_cpu_min_relative", 0.2, "cpu, pooled_pair", true,
    "on a contended host CPU per unit of work moves by itself: contention alone moved a rank's CPU per call up to "
    "~17% (a fleet slowed 3x, one rank at 1.165x) and a clean world-8 rank reached 1.19x in 2 of 3 rounds (seed "
    "20370002 is where 0.15 failed); 1.2 leaves that margin, while trainer-slowed ranks showed 1.2x+ in most rounds"};
inline constexpr Threshold cpu_peers_wait_share{
    "cpu_peers_wait_share", 0.5, "cpu (groups of 3+)", true,
    "more CPU slows the job only if the rank arrives late: a slowed rank's time excess and its peers' wait are "
    "1-3x its CPU excess, while peers waiting for a stopped rank burn 1.2-1.4x CPU with far less time excess; half "
    "sits between the two"};
inline constexpr Threshold pair_cpu_peers_wait_share{
    "pair_cpu_peers_wait_share", 0.4, "cpu (pairs), pooled_pair", true,
    "in a pair the partner's wait is one figure, not a median, and a rank's extra CPU partly replaces time it would "
    "have waited for one; measured 0.49-0.56x for a slowed pair rank (seed 20268702 is where 0.5 failed), while 100 "
    "clean pair runs re-decided at 0.4 named no one: 0.4 is the margin under the slowed figure"};
inline constexpr Threshold absorbed_spread_factor{
    "absorbed_spread_factor", 2.0, "cpu (absorbed), pooled_pair (quieter)", true,
    "an oversubscribed host can absorb a slow rank's extra CPU into time it would have waited for one (no one "
    "waits for it); without the lateness check, standing out by twice the other peers' spread keeps a clean rank, "
    "whose CPU moves within that spread, out (first seen at seed 20418006: 1.31-1.33x, peers within 0.12)"};
inline constexpr Threshold pair_quiet_factor{
    "pair_quiet_factor", 3, "pooled_pair", true,
    "the other pairs of a dp=2 x tp mesh do the same work at the same moments: their median pooled spread is a "
    "pair's noise; an excess three times that noise is outside it, and there the rank need only be late at all "
    "(every rank CPU-bound, extra work slows all alike; seed 20282100: 0.34x late, other pair 0.08 apart)"};
// ---- off_cpu (contended host: time off a CPU without waiting for one) ----
inline constexpr Threshold off_cpu_wait_share{
    "off_cpu_wait_share", 0.5, "off_cpu", false,
    "time stolen from a stopped rank is time its peers wait; on a contended host only the time excess (not the "
    "whole off-CPU excess) reaches them, so they must wait half the smaller of the two"};
inline constexpr Threshold off_cpu_spread_share{
    "off_cpu_spread_share", 0.5, "off_cpu", false,
    "with the peers' wait checked as well, half the other peers' spread of time off a CPU is noise enough (a clean "
    "torch 2.x rank's compute holds blocked time too, up to 1.5x its peers', while it waits as long as they do)"};
// ---- cpu_wait (contended host: starved of CPU) ----
inline constexpr Threshold contended_wait_min_relative{
    "contended_wait_min_relative", 0.3, "cpu_wait", true,
    "a starved rank's extra time is CPU wait, the very thing contention spreads unequally: clean peers spread "
    "0.8-1.07x, a quota or pinned hogs gave 1.5-3.7x; 1.3 sits above the clean spread with margin"};
inline constexpr Threshold cpu_wait_extra_share{
    "cpu_wait_extra_share", 0.5, "cpu_wait", false,
    "its CPU wait beyond what its CPU would cost at its peers' wait per CPU second must explain half its excess: "
    "the rest may be cache and scheduling effects of the same starvation"};
// ---- late (contended host: its peers wait for it) ----
inline constexpr Threshold late_wait_share{
    "late_wait_share", 0.5, "late", false,
    "a rank that arrives last in its group's calls waits least: at most half the least wait of any other peer, in a "
    "majority of rounds. Over 180 recorded runs (clean ones at load 5-15 on 2 CPUs included) no clean rank did so at "
    "0.7 with late_held_share; a rank sleeping 1.54x its step on torch 2.15 waited 0.16-0.33x (seed 1973658015)"};
inline constexpr Threshold late_held_share{
    "late_held_share", 0.3, "late", false,
    "and its peers' median wait beyond its own is at least 0.3 of the group's median compute per call: they are held "
    "for it by a share of the step that contention's reshuffling of who arrives last does not reach (0.2 with "
    "late_wait_share 0.7 named a clean rank once over the same runs)"};
// ---- throttled (its cgroup's throttled time; direct) ----
inline constexpr Threshold throttled_share{
    "throttled_share", 0.5, "throttled", false,
    "a quota throttles no cgroup by chance: throttled time beyond its peers of half its excess, and its peers "
    "waiting half of it, leaves room for the throttle periods' alignment with the calls"};
// ---- stopped (the observer's process state samples; direct) ----
inline constexpr Threshold stopped_min_samples{
    "stopped_min_samples", 20, "stopped", true,
    "a share from fewer than 20 samples is too coarse (one sample is 5%); at 4-12 ms per sample a round of 1 s "
    "takes about 120"};
inline constexpr Threshold stopped_min_share{
    "stopped_min_share", 0.05, "stopped, cause", true,
    "the peers of a synchronous job are never stopped: every non-victim rank measured 0.000 over 161 rank-runs "
    "and a victim 1 - 1/F within -0.015..+0.024; 5% sits far from both"};
inline constexpr Threshold stopped_peer_share{
    "stopped_peer_share", 0.5, "stopped", false,
    "a whole job suspended (every rank stopped alike) has no straggler: another peer stopped half as often means a "
    "job-wide stop, not one rank's"};
inline constexpr Threshold stopped_share_cap{
    "stopped_share_cap", 0.999, "stopped (ratio)", false,
    "a numerical guard: the ratio 1 / (1 - share) of a rank stopped in every sample would be infinite"};
// ---- cause (cause_of: explains a named rank, never names one) ----
inline constexpr Threshold quota_window_share{
    "quota_window_share", 0.05, "cause", true,
    "stopped or throttled 5% of the window is beyond scheduling noise (an unthrottled cgroup reads 0)"};
inline constexpr Threshold cause_share{
    "cause_share", 0.5, "cause", true,
    "a cause must explain at least half the excess compute; the rest is the noise of two counters over different "
    "calls"};
inline constexpr Threshold contention_min_ratio{
    "contention_min_ratio", 1.1, "cause", true,
    "CPU wait per CPU second at least 10% above the peers': equal ranks on one host wait within a few percent of "
    "each other per CPU second over a round"};
inline constexpr Threshold more_work_min_relative{
    "more_work_min_relative", 0.15, "cause", true,
    "CPU per call (process and main thread) 15% above the peers' is more work: contention alone moves one "
    "round's figure up to ~17%, a named rank's figures are pooled over its flagged rounds, which narrows that; the "
    "value was set from campaigns (trainer-slowed ranks at 1.36-1.70x, 6 of 106 mislabelled before it)"};
inline constexpr Threshold more_work_wait_factor{
    "more_work_wait_factor", 2.5, "cause", true,
    "more work raises a rank's wait per CPU second too (its peers sleep in their collectives while it computes, and "
    "the scheduler favours a sleeper): trainer-slowed ranks at load 10-12 on 2 CPUs waited 1.3-1.9x their peers' per "
    "CPU second at 1.36-1.70x their CPU per call, a rise in wait up to 2.5x (0.9 / 0.36) the rise in CPU; the wait "
    "beyond that is not more work's"};
inline constexpr Threshold storage_read_ratio{
    "storage_read_ratio", 4, "cause (memory)", false,
    "a rank whose data sits in the page cache reads nothing from storage; one whose cache is reclaimed (its memory "
    "cgroup at its limit) reads its whole batch again every step: measured, 32-96 MB a step against 0 for its peers "
    "(world 4, a 48-64 MB limit). Four times its peers' median keeps a rank that merely opened a file out"};
inline constexpr Threshold storage_read_min_bytes{
    "storage_read_min_bytes", 65536, "cause (memory)", false,
    "64 KiB a call from storage is beyond what a trainer's logging, imports and checkpoint metadata read per "
    "collective; below it storage cannot explain a slow step"};
inline constexpr Threshold majflt_min_per_call{
    "majflt_min_per_call", 16, "cause (memory)", false,
    "16 major faults a call (64 KiB of 4 KiB pages brought in from storage) beside the same 4x ratio: a rank "
    "whose mapped data or code is reclaimed faults it back every step, a healthy one faults only at start"};
// ---- noise notes ----
inline constexpr Threshold oversubscribed_share{
    "oversubscribed_share", 0.5, "noise_notes", true,
    "ranks waiting for a CPU half as long as they compute: compute times then move by more than a mild straggler's "
    "slowdown from round to round (a 1.42x pair rank at 1.00, 0.76, 1.18x), which the verdict must say"};
// ---- link (communication) ----
inline constexpr Threshold link_min_ratio{
    "link_min_ratio", 1.5, "link", true,
    "the last arriver's time inside a collective moves with the host's load; 1.5x the other groups of its kind is "
    "beyond that (--link-ratio 1.5)"};
inline constexpr Threshold link_min_absolute_ns{
    "link_min_absolute_ns", 1'000'000, "link", true,
    "1 ms per call: below it a link ratio is wake-up latency of the collective's threads"};
inline constexpr Threshold link_min_consistency{
    "link_min_consistency", 0.75, "link", true,
    "a slow link slows every call of its group; a loaded host's descheduling only some: slow in 75% of the calls "
    "call by call"};
inline constexpr Threshold consequence_share{
    "consequence_share", 0.25, "diagnosis", false,
    "a slow link delays its members' next calls in other groups by less: a group whose excess is under a quarter "
    "of the slowest's is a consequence, while a second group slowed by the same cause is as slow as the first"};
inline constexpr Threshold cluster_wide_nodes{
    "cluster_wide_nodes", 3, "diagnosis", true,
    "slow groups on 3 or more nodes with no common node have no single machine or link to blame"};
inline constexpr Threshold cluster_wide_confidence{
    "cluster_wide_confidence", 0.5, "diagnosis", false,
    "not a threshold: the least confidence of a cluster-wide diagnosis (half or more groups of a kind stand out)"};
// ---- the verdict ----
inline constexpr Threshold max_group_runs{"max_group_runs", 4096, "verdict", false,
                                          "not a threshold: an output cap on the groups a verdict lists"};

// The whole table, in the order of the stages.
inline constexpr std::array all = {
    &min_calls,
    &busy_call_share,
    &step_pattern_match,
    &min_step_blocks,
    &contended_share,
    &min_relative,
    &pair_min_relative,
    &min_absolute_ns,
    &min_step_share,
    &contended_min_step_share,
    &spread_factor,
    &kappa,
    &pair_partner_wait_share,
    &contended_cpu_min_relative,
    &cpu_peers_wait_share,
    &pair_cpu_peers_wait_share,
    &absorbed_spread_factor,
    &pair_quiet_factor,
    &off_cpu_wait_share,
    &off_cpu_spread_share,
    &contended_wait_min_relative,
    &cpu_wait_extra_share,
    &late_wait_share,
    &late_held_share,
    &throttled_share,
    &stopped_min_samples,
    &stopped_min_share,
    &stopped_peer_share,
    &stopped_share_cap,
    &quota_window_share,
    &cause_share,
    &contention_min_ratio,
    &more_work_min_relative,
    &more_work_wait_factor,
    &storage_read_ratio,
    &storage_read_min_bytes,
    &majflt_min_per_call,
    &oversubscribed_share,
    &link_min_ratio,
    &link_min_absolute_ns,
    &link_min_consistency,
    &consequence_share,
    &cluster_wide_nodes,
    &cluster_wide_confidence,
    &max_group_runs,
};

}  // namespace scout::straggler::thresholds
