// Stage 2 of a round (measures.hpp): the time measures, per rank of a peer group. On an uncontended host the
// measure "compute" (its compute time); where the group waits for CPUs (contended_share) time says little, and
// the measures "cpu" (CPU per call), "off_cpu" (time off a CPU without waiting for one), "cpu_wait" (starved
// of CPU) and "late" (its peers wait for it) decide instead. Every one asks its effect to be at least min_relative
// (pair_min_relative in a pair) and spread_factor times the other peers' spread that round (PeerStats::stands_out), and
// at least min_absolute_ns per call; thresholds.hpp says why each value.
#include <algorithm>

#include "lib/straggler/measures/measures.hpp"
#include "lib/straggler/thresholds.hpp"

namespace scout::straggler::detail {

// The straggler computes longest and so waits least: its peers wait for it. Both must hold, the excess must be at
// least min_absolute_ns per call, and its compute time must stand out. (C3's MAD over a handful of peers is itself
// noisy on a loaded host.) In a pair, its partner waits for at least pair_partner_wait_share of its excess.
void measure_compute(const PeerStats& s, std::size_t i, const DecideOptions& o, RankRound& rr) {
  const double other_wait = s.others_wait.median_without(i);
  const double med_c = s.ref_c[i];
  const auto& compute = s.compute;
  const auto& wait = s.wait;
  rr.flagged = wait[i] < other_wait && compute[i] - med_c >= o.min_absolute_ns &&
               s.stands_out(s.others_relative, i, o.spread_factor) &&
               (!s.pair || other_wait - wait[i] >= thresholds::pair_partner_wait_share.value * (compute[i] - med_c));
  rr.measure = "compute";
  rr.ratio = s.relative[i];
  if (rr.flagged) rr.flagged_by["compute"] = s.relative[i];
  rr.raised_by = rr.flagged_by;
}

namespace {

// Its time excess per call: the larger of the mean's and the per-call median ratio's. On torch 2.x a few of a clean
// peer's calls hold long blocks off a CPU, and the peers' mean compute rose to a stopped rank's (seed 30299019
// round 2: the rank at 1.63x its peers per call, its peers waiting 34.6 ms per call longer than it, its mean compute
// 0.1 ms above theirs; 2 of 10 torch 2.x outside runs not named), or to a trainer-slowed one's (seed 1900518409,
// 2.23x on a contended host: 1.39-1.59x per call, its peers waiting 28-41 ms per call longer, its mean compute 6 ms
// above theirs). The cpu and off_cpu measures both take it so.
double time_excess(const PeerStats& s, std::size_t i) {
  return std::max(s.compute[i] - s.ref_c[i], (s.relative[i] - 1) * s.ref_c[i]);
}

// "cpu": more CPU per call (process and main thread alike) by contended_cpu_min_relative and the spread rules, and it
// arrives late. More CPU per call slows the job only where it makes the rank arrive late: its compute time above
// the median and its peers' wait beyond its own, per call, both at least cpu_peers_wait_share (a pair:
// pair_cpu_peers_wait_share) of its CPU excess (the smaller of the process's and the main thread's). A rank that
// burns more CPU but arrives no later than its peers is no straggler: measured, peers of a rank stopped from outside
// or under a quota at 1.21-1.40x CPU per call (waiting burns CPU unequally) with less time excess than that. A
// trainer-slowed rank's time excess and its peers' wait are 1-3x its CPU excess (its extra CPU is CPU it waited for
// too). (Clean seed 416's rank 3 at 1.25-1.31x CPU kept its peers waiting 8.7-19.5 ms per call, as long as its time
// excess: a slower rank, named as a 1.4x trainer-slowed one is.)
// ... or, in a group of three or more, far outside the other peers' spread though its extra CPU was absorbed
// (absorbed_spread_factor; check_absorbed_alone drops it where another rank of the group is flagged that round).
bool by_cpu(const PeerStats& s, std::size_t i, const DecideOptions& o, bool& absorbed_out) {
  const double cpu_floor = 1.0 + std::max(s.min_relative, o.contended_cpu_min_relative);
  double cpu_excess = s.cpu[i] - s.ref_cpu[i];
  if (s.main_counted) cpu_excess = std::min(cpu_excess, s.counters(i).main_cpu_ns - s.ref_main_cpu[i]);
  const double excess = time_excess(s, i);
  const double late_share = s.pair ? o.pair_cpu_peers_wait_share : o.cpu_peers_wait_share;
  const bool late =
      excess >= late_share * cpu_excess && s.others_wait.median_without(i) - s.wait[i] >= late_share * cpu_excess;
  const bool more_cpu =
      s.cpu[i] - s.ref_cpu[i] >= o.min_absolute_ns && s.cpu_ratio[i] >= cpu_floor &&
      s.stands_out(s.others_cpu_ratio, i, o.spread_factor) &&
      (!s.main_counted || (s.main_ratio[i] >= cpu_floor && s.stands_out(s.others_main_ratio, i, o.spread_factor)));
  const bool absorbed = !late && !s.pair && s.main_counted &&
                        s.stands_out(s.others_cpu_ratio, i, o.absorbed_spread_factor) &&
                        s.stands_out(s.others_main_ratio, i, o.absorbed_spread_factor);
  absorbed_out = more_cpu && absorbed;
  return more_cpu && (late || absorbed);
}

// "off_cpu": stopped from outside. Its peers wait for it for at least off_cpu_wait_share of its excess time off a
// CPU: the time stolen from a stopped rank is time they wait. With that check, off_cpu_spread_share of the other
// peers' spread is noise enough. (On torch 2.x a clean rank's compute holds time blocked off a CPU too, measured up
// to 1.5x its peers' median, while it waits about as long as they do.) On a contended host the stolen time partly
// replaces time the rank would have waited for a CPU anyway (its peers get the CPU meanwhile): its time excess is
// then less than its excess off a CPU, and its peers wait for the time excess. Measured, a 2.7x SIGSTOP duty cycle
// at load ~5 on 2 CPUs: off x1.39-1.99, compute 1.18-1.44x, its peers waiting 10-40 ms per call longer, under half
// its off excess in all 3 rounds (seed 2508, not named). So the peers wait at least that share of the smaller of
// the two, and its compute time is at least min_relative above the median.
bool by_off_cpu(const PeerStats& s, std::size_t i, const DecideOptions& o) {
  const double med_c = s.ref_c[i];
  const double excess = time_excess(s, i);
  const double off_excess = (s.off_ratio[i] - 1) * med_c;
  return s.main_counted && excess >= std::max(o.min_absolute_ns, s.min_relative * med_c) &&
         s.others_wait.median_without(i) - s.wait[i] >=
             thresholds::off_cpu_wait_share.value * std::min(excess, off_excess) &&
         s.stands_out(s.others_off_ratio, i, thresholds::off_cpu_spread_share.value * o.spread_factor);
}

// "cpu_wait": a rank starved of CPU (a cgroup quota throttling it, or CPUs it shares with other work) uses no more
// CPU and is not off a CPU: its extra time is time waiting for one (throttled time counts there too). It stands
// out in time by contended_wait_min_relative and the other peers' spread, waits least of all, and waiting for a CPU
// beyond what its CPU would cost at its peers' rate (runq per ns of CPU) makes up at least cpu_wait_extra_share of
// its excess. (Measured here, load 4-6 on 2 CPUs: a 1.5-3x quota or 4-8 pinned hogs gave 1.5-3.7x its peers'
// compute; its peers' spread 0.8-1.07x.) Not in a pair: with no third peer, the scheduler's uneven share of the
// CPUs between two ranks is the same figure (measured: a clean dp=2 x tp=2 job on 2 CPUs, seed 715009310, one rank
// waited 1.9x its partner's time for a CPU in 2 of 3 rounds, 1.47-1.56x its compute).
bool by_cpu_wait(const PeerStats& s, std::size_t i, const DecideOptions& o) {
  if (!s.main_counted || s.pair) return false;
  const auto& mine = s.counters(i);
  const double extra_wait = mine.runq_ns - mine.main_cpu_ns * s.others_runq_per_main.median_without(i);
  const double excess = s.compute[i] - s.others_compute.median_without(i);
  const double least_other_wait = s.others_wait.min_without(i, 1e300);
  return s.others_runq_per_main.count_without(i) > 0 && excess >= o.min_absolute_ns && s.wait[i] < least_other_wait &&
         s.relative[i] - 1 >= std::max(s.min_relative, o.contended_wait_min_relative) &&
         s.stands_out(s.others_relative, i, o.spread_factor) &&
         extra_wait >= thresholds::cpu_wait_extra_share.value * excess;
}

// "late": its peers wait for it, call after call. Where the host's run queue is long, the counters can miss a rank
// blocked off a CPU between its calls: on torch 2.x a peer's run-queue wait also accrues inside its collectives,
// so compute less CPU and CPU wait reads near 0 for every peer, and the compute time per call moves with who got a
// CPU. Who arrives last does not: the rank that does waits least, its peers wait for it. (A rank sleeping 1.54x its
// step in one gap of it, torch 2.15 at load ~6 on 2 CPUs, seed 1973658015: 20-36 ms per call against its peers'
// 106-174 ms; off_cpu 0.94-1.23x, its compute 1.0-1.48x its peers' and another's 2.2x; read healthy.) Not in a pair:
// between two ranks, one waits least in every call by construction.
bool by_late(const PeerStats& s, std::size_t i) {
  if (s.pair || s.present.size() < 3) return false;
  const double least_other = s.others_wait.min_without(i, 1e300);
  const double held = s.held_by(i);
  return s.wait[i] <= thresholds::late_wait_share.value * least_other &&
         held >= thresholds::late_held_share.value * s.ref_c[i] && held > 0;
}

}  // namespace

// On a contended host the wait and the time excess are as noisy as the time itself: the CPU used decides (a rank
// that needs more CPU per call where CPUs are short is the slow one), or the time off a CPU without waiting for one
// (a rank stopped from outside), with a longer compute time, or its wait for a CPU (starved). The round reports
// cpu_wait where cpu did not flag it, else off_cpu where its ratio is the larger, else cpu.
void measure_contended(const PeerStats& s, std::size_t i, const DecideOptions& o, RankRound& rr) {
  bool absorbed = false;
  const bool cpu = by_cpu(s, i, o, absorbed);
  rr.absorbed = absorbed;
  const bool off = by_off_cpu(s, i, o);
  const bool wait = by_cpu_wait(s, i, o);
  const bool late = by_late(s, i);
  const double cpu_r = s.main_counted ? std::min(s.cpu_ratio[i], s.main_ratio[i]) : s.cpu_ratio[i];
  // late's ratio: 1 + its peers' wait beyond its own, as a share of the group's compute per call.
  const double late_r = s.ref_c[i] > 0 ? 1 + s.held_by(i) / s.ref_c[i] : 1.0;
  rr.flagged = cpu || off || wait || late;
  if (cpu) rr.flagged_by["cpu"] = cpu_r;
  if (off) rr.flagged_by["off_cpu"] = s.off_ratio[i];
  if (wait) rr.flagged_by["cpu_wait"] = s.relative[i];
  if (late) rr.flagged_by["late"] = late_r;
  rr.raised_by = rr.flagged_by;
  if (!cpu && !off && !wait && late) {
    rr.measure = "late";
    rr.ratio = late_r;
    return;
  }
  rr.measure = wait && !cpu ? "cpu_wait" : off && (!cpu || s.off_ratio[i] > cpu_r) ? "off_cpu" : "cpu";
  rr.ratio = rr.measure == "off_cpu" ? s.off_ratio[i] : rr.measure == "cpu_wait" ? s.relative[i] : cpu_r;
}

}  // namespace scout::straggler::detail
