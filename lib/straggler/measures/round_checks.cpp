// Stages 3 and 5 of a round (measures.hpp): the checks that drop a measure's flag for what it cannot tell apart.
#include <algorithm>
#include <set>

#include "lib/straggler/measures/measures.hpp"

namespace scout::straggler::detail {

// "material": a straggler costs its peers a material share of their time: its time excess per call (the mean's or
// the ratio's, the larger) at least min_step_share of its peers' median time per call, computing and waiting. On a
// job whose steps are nearly all wait (every rank sleeping 0.3 s inside each collective, 1-3 ms of compute per
// call), rank 0 computed 0.4-1.7 ms per call longer than its peers in most runs (1.2-1.9x, 0.3-1.3% of their 131 ms
// per call), and the contended measures named it beside the stopped rank in 5 of 19 runs. The process state samples
// (stopped) and the cgroup's throttled time are direct evidence and are not asked this (they run after it).
void check_material(const PeerStats& s, std::size_t i, const DecideOptions& o, RankRound& rr) {
  const double med_c = s.ref_c[i];
  double excess = std::max(s.compute[i] - med_c, (s.relative[i] - 1) * med_c);
  // (An absorbed rank's cost is the CPU it took from the others: its CPU excess, process and main thread.)
  if (rr.absorbed && s.main_counted)
    excess = std::max(excess, std::min(s.cpu[i] - s.ref_cpu[i], s.counters(i).main_cpu_ns - s.ref_main_cpu[i]));
  // (A late rank's cost is what its peers wait for it beyond its own wait.)
  if (rr.flagged_by.count("late")) excess = std::max(excess, s.held_by(i));
  // (On a contended host the time excess is as noisy as the time itself: contended_min_step_share. An absorbed
  // rank's cost is CPU, which stood out by absorbed_spread_factor of its peers' spread: min_step_share.)
  const double share = s.contended && !rr.absorbed ? o.contended_min_step_share : o.min_step_share;
  if (rr.flagged && excess < share * s.others_step.median_without(i)) {
    rr.flagged = false;
    rr.flagged_by.clear();
  }
}

// "stopped_peer": a rank stopped from outside keeps its peers waiting, and waiting burns CPU unequally (measured: a
// peer of a SIGSTOP-cycled rank at 1.15-1.32x CPU per call): where a rank is flagged as stopped (or off_cpu, or
// throttled by its quota), a CPU flag of a rank that waits longer than it (it waits for it) is dropped that round.
void check_stopped_peer(PeerRound& p) {
  double stopped_wait = -1;
  for (const auto& r : p.ranks)
    if (r.flagged && (r.measure == "off_cpu" || r.measure == "stopped" || r.flagged_by.count("throttled")))
      stopped_wait = std::max(stopped_wait, r.wait_ns);
  if (stopped_wait >= 0)
    for (auto& r : p.ranks)
      if (r.flagged && r.measure == "cpu" && r.wait_ns > stopped_wait) {
        r.flagged = false;
        r.flagged_by.clear();
      }
}

// "absorbed_alone": a CPU flag its peers did not wait for stands only where no other rank of the group is flagged
// that round (whose peers burn CPU waiting for it: a stopped or throttled rank's).
void check_absorbed_alone(PeerRound& p) {
  // (The flagged ranks counted once, not per rank: a group of n ranks, n of them absorbed, costs O(n).)
  std::size_t flagged = 0;
  for (const auto& r : p.ranks) flagged += r.flagged ? 1 : 0;
  for (auto& r : p.ranks) {
    if (!r.flagged || !r.absorbed || r.flagged_by.size() != 1 || !r.flagged_by.count("cpu")) continue;
    if (flagged > 1) {  // another rank than r
      r.flagged = false;
      r.flagged_by.clear();
      --flagged;
    }
  }
}

// "link_blocked" (after the link measure): a member of a group found slow this round spends time off a CPU outside
// its calls too (a send into the congested link blocks between calls): measured under a 16 Mbit/s tbf on one
// node's veth at load 14, the slow rank's tp partner 2.3x and 1.8x off-CPU (seed 31002, named as a compute
// straggler on another node) and the slow rank itself 1.6x (seed 31003). Its off_cpu flag is dropped that round;
// the link names the slow link's rank. Its late flag alike: a rank that arrives late because its sends block is the
// link's to name. Flags by the CPU it used, stopped or throttled stay.
void check_link_blocked(const TimingTable& t, RoundResult& out) {
  std::set<std::int64_t> in_slow_group;
  for (const auto& g : out.groups)
    if (g.slow)
      for (auto m : t.groups.at(g.group).members) in_slow_group.insert(m);
  if (in_slow_group.empty()) return;
  for (auto& p : out.peers)
    for (auto& r : p.ranks) {
      if (!r.flagged || !in_slow_group.count(r.rank)) continue;
      const bool erased = r.flagged_by.erase("off_cpu") + r.flagged_by.erase("late") > 0;
      if (!erased) continue;
      r.flagged = !r.flagged_by.empty();
      if (r.flagged && (r.measure == "off_cpu" || r.measure == "late")) r.measure = r.flagged_by.begin()->first;
    }
}

}  // namespace scout::straggler::detail
