// Stage 4 of a round (measures.hpp): the direct measures, on any host, pairs too. Each reads a counter that says
// what happened to the rank rather than inferring it from time: "stopped" its process state samples (stopped.hpp),
// "throttled" its cgroup's throttled time (cgroup.hpp). Neither is asked the material excess (stage 3). And the
// figures cause_of explains a named rank by.
#include <algorithm>

#include "lib/straggler/measures/measures.hpp"
#include "lib/straggler/thresholds.hpp"

namespace scout::straggler::detail {

// Stopped from outside: the observer's samples of its process state say so directly, wherever its stops fell.
// Inside a collective its own wait absorbs them and timing sees a slow link (torch 2.x seed 20263318: a 2.74x
// duty-cycled rank computing 1.57x, then 1.00x and 1.00x its peers, every rank waiting ~70 ms per call, it a
// little less: unnamed); schedstat cannot tell stopped time from a peer blocked in recv. Its peers of a
// synchronous job are never stopped. Flagged with at least stopped_min_samples samples, stopped in at least
// stopped_min_share of them, its stopped time per call at least min_relative of its peers' median compute (and
// min_absolute_ns: were all its stops between collectives, it would be a min_relative compute straggler), and no
// other peer stopped in stopped_peer_share of its share. Where it flags, it is the measure reported.
void measure_stopped(const PeerStats& s, std::size_t i, const DecideOptions& o, RankRound& rr) {
  if (!s.stopped_of[i] || s.stopped_of[i]->samples <= 0) return;
  const StoppedWindow& st = *s.stopped_of[i];
  rr.stopped = st;
  rr.stopped_ratio = 1 / (1 - std::min(st.share(), thresholds::stopped_share_cap.value));
  const double others_share = std::max(0.0, s.others_stopped_share.max_without(i, 0.0));
  const bool by_stopped =
      st.samples >= o.stopped_min_samples && st.share() >= o.stopped_min_share &&
      others_share < thresholds::stopped_peer_share.value * st.share() &&
      st.ns_per_call() >= std::max(o.min_absolute_ns, o.min_relative * s.others_compute.median_without(i));
  if (by_stopped) {
    rr.flagged = true;
    rr.flagged_by["stopped"] = rr.stopped_ratio;
    rr.raised_by["stopped"] = rr.stopped_ratio;
    rr.measure = "stopped";
    rr.ratio = rr.stopped_ratio;
  }
}

// What would explain it (cause_of): its excess over the other peers, their CPU wait and throttled time.
void explain_figures(const PeerStats& s, std::size_t i, RankRound& rr) {
  rr.excess_ns = s.compute[i] - s.others_compute.median_without(i);
  if (s.counted) {
    rr.window = s.counters(i);
    rr.peer_runq_ns = s.others_runq.median_without(i);
    rr.peer_wait_per_cpu = s.others_wait_per_cpu.count_without(i) == 0 ? -1 : s.others_wait_per_cpu.median_without(i);
    rr.throttled_ns = rr.window.throttled_ns;
    rr.peer_throttled_ns = s.throttle_known ? s.others_throttled.median_without(i) : -1;
  }
}

// Throttled by its cgroup's CPU quota: the cgroup's counters say so directly, as its process state samples do for
// a stopped rank, so this applies to a pair too (where cpu_wait does not: between two ranks an uneven share of the
// CPUs looks the same in schedstat, but it throttles no cgroup). Flagged when its throttled time beyond its peers'
// median, per call, is at least throttled_share of its excess compute; that excess is at least min_relative of the
// other peers' median compute and min_absolute_ns; and its peers wait for it at least throttled_share of its excess.
// (Measured: a two-rank job, rank 1 under a quota of 0.42 CPU, 1.97-2.22x its partner's compute time, throttled
// 25 ms per call, its partner waiting 20 ms per call longer: 0.87-0.93x its partner's CPU, so no CPU measure flagged
// it, and cpu_wait does not apply to a pair; seed 20273601.) Reported only where nothing else flagged it.
void measure_throttled(const PeerStats& s, std::size_t i, const DecideOptions& o, RankRound& rr) {
  if (rr.throttled_ns < 0 || rr.peer_throttled_ns < 0) return;
  const double excess = rr.excess_ns;
  const double share = thresholds::throttled_share.value;
  const bool by_throttled =
      excess >= std::max(o.min_absolute_ns, s.min_relative * s.others_compute.median_without(i)) &&
      rr.throttled_ns - rr.peer_throttled_ns >= share * excess &&
      s.others_wait.median_without(i) - s.wait[i] >= share * excess;
  if (!by_throttled) return;
  rr.flagged_by["throttled"] = s.relative[i];
  rr.raised_by["throttled"] = s.relative[i];
  if (!rr.flagged) {
    rr.flagged = true;
    rr.measure = "throttled";
    rr.ratio = s.relative[i];
  }
}

}  // namespace scout::straggler::detail
