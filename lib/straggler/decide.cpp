#include "lib/straggler/decide.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "lib/common/hex.hpp"

namespace scout::straggler {

std::string_view diagnosis_name(Diagnosis d) {
  switch (d) {
    case Diagnosis::none:
      return "none";
    case Diagnosis::compute:
      return "compute";
    case Diagnosis::machine_local:
      return "machine_local";
    case Diagnosis::intra_node_link:
      return "intra_node_link";
    case Diagnosis::inter_node_network:
      return "inter_node_network";
    case Diagnosis::cluster_wide:
      return "cluster_wide";
  }
  return "none";
}

namespace {

// Keys present in every listed rank's calls.
std::vector<CallKey> common_keys(const TimingTable& t, const std::vector<std::int64_t>& ranks) {
  std::vector<CallKey> out;
  if (ranks.empty()) return out;
  auto first = t.ranks.find(ranks[0]);
  if (first == t.ranks.end()) return out;
  for (const auto& [key, c] : first->second) {
    bool all = true;
    for (std::size_t i = 1; i < ranks.size() && all; ++i) {
      auto it = t.ranks.find(ranks[i]);
      all = it != t.ranks.end() && it->second.count(key);
    }
    if (all) out.push_back(key);
  }
  return out;
}

bool is_mesh_kind(const std::string& kind) {
  return kind.rfind("group:", 0) != 0;
}

std::string hex_id(std::uint64_t id) {
  return hex64(id);
}

double ms(double ns) {
  return std::round(ns / 1e3) / 1e3;
}

// The number of calls in one step of the program: the smallest period P (at most a third of the calls) with
// which the calls' pattern repeats (the same group kind, op and element count as the call P before it, for at
// least 90% of the calls); 0 when none does. `keys` are in the program's order.
std::size_t step_period(const std::map<CallKey, CallTiming>& calls, const std::vector<CallKey>& keys) {
  const std::size_t n = keys.size();
  for (std::size_t p = 1; 3 * p <= n; ++p) {
    std::size_t same = 0;
    for (std::size_t i = p; i < n; ++i) {
      const auto& a = calls.at(keys[i]);
      const auto& b = calls.at(keys[i - p]);
      same += keys[i].first == keys[i - p].first && a.type == b.type && a.count == b.count ? 1 : 0;
    }
    if (10 * same >= 9 * (n - p)) return p;
  }
  return 0;
}

}  // namespace

RoundResult analyse_round(const TimingTable& t, const Mesh& mesh, const DecideOptions& o) {
  RoundResult out;
  std::set<CallKey> all_keys;
  for (const auto& [rank, calls] : t.ranks)
    for (const auto& [key, c] : calls) all_keys.insert(key);
  out.calls = static_cast<std::int64_t>(all_keys.size());

  // Compute: C3 per peer group over the calls every present peer completed.
  for (auto& group : mesh.peer_groups()) {
    std::vector<std::int64_t> present;
    for (auto r : group)
      if (t.ranks.count(r) && !t.ranks.at(r).empty()) present.push_back(r);
    // Three or more peers: each rank against the group's median. Two (a two-rank job, the replicas of a
    // dp=2 x tp mesh): no strict minority, but the asymmetry of a synchronous pair still tells which one is
    // slow (it computes longer and its partner waits for it): each rank against the other, with the larger
    // pair_min_relative (options). One: nothing to compare.
    if (present.size() < 2) continue;
    const bool pair = present.size() == 2;
    const double min_relative = pair ? std::max(o.min_relative, o.pair_min_relative) : o.min_relative;
    auto keys = common_keys(t, present);
    if (static_cast<std::int64_t>(keys.size()) < o.min_calls) continue;
    PeerRound p;
    p.members = present;
    p.calls = static_cast<std::int64_t>(keys.size());
    // Per call, each rank's compute relative to its peers' median for that call: what the whole machine does
    // at that moment cancels out (every rank slowed alike is no straggler). The calls where the step's
    // computation happens (median compute at least a quarter of the largest) carry the signal; the median
    // over them drops a loaded host's descheduling spikes. (A summed excess, tried to catch CPU taken from
    // outside in bursts, was as large on clean runs at load 8-17 on 2 CPUs as on 1.6x stragglers.)
    std::vector<double> call_median(keys.size());
    double largest = 0;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      std::vector<double> g;
      for (auto r : present) g.push_back(static_cast<double>(t.ranks.at(r).at(keys[k]).compute_ns));
      call_median[k] = median(g);
      largest = std::max(largest, call_median[k]);
    }
    // On a host with more runnable threads than CPUs every rank's compute time includes time its main
    // thread waited for a CPU, unequally: measured with 4 ranks on 2 CPUs, 0.47-0.62 s of every 2 s, and a
    // clean rank 1.19x (once 1.71x after taking the wait out) its peers' compute, while a 1.3x straggler's
    // showed as 1.13x. Where the scheduler counters show such a wait for the group (at least
    // `contended_share` of compute), time says little, and the CPU each rank used per call decides.
    bool counted = true;
    for (auto r : present) counted &= t.cpu.count(r) > 0;
    // Who waits for whom is told by the calls whose wait is exact on every peer: a wait that ends when the
    // trainer's wait() returns (CallTiming::wait_exact) holds whatever the rank did before calling it. With
    // no such call, every rank's wait is 0 and no time measure flags anyone (the stopped samples still do).
    std::vector<bool> exact(keys.size(), true);
    std::size_t exact_calls = 0;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      for (auto r : present) exact[k] = exact[k] && t.ranks.at(r).at(keys[k]).wait_exact;
      exact_calls += exact[k] ? 1 : 0;
    }
    // Per step, too: a rank whose extra time falls in one gap of a step of several calls (a slow data loader, a
    // host-side optimizer step) computes longer at one call in P, and the per-call median misses it (measured, a
    // two-rank job whose rank 0 burned 0.42x its step's CPU after the optimizer step: 1.44x its partner's mean
    // compute and its partner waiting 6.4 ms per call longer, per-call median 1.00x; 8 of 9 runs unnamed). In
    // the program's order, blocks of whole steps (P calls, P the period of the call pattern): each rank's compute
    // summed over a block against its reference's, the median over at least 3 blocks (a descheduling spike
    // falls in one). Where the round holds 3 whole steps that is the time measure's ratio, else the per-call
    // median: per call, a stall's one call in P is either dropped (1.00x above) or, where the stall dwarfs the
    // step's other calls and only its calls count as busy, all that counts (a rank sleeping 1.85x its step:
    // 72x). Over the recorded corpus both name the same ranks; the step's ratio is the factor within 0.89-1.23x.
    // On a contended host the CPU measures ask for a time excess the same way: a torch 2.x rank burning 0.9-1.8x
    // its step's CPU in one gap (2x its peers' CPU per call, its peers waiting 20 ms per call longer) computed
    // 0.94-1.01x its peers' time per call and 1.0x their mean, and went unnamed with the per-call median there
    // (3 of 4 runs, seeds 20358201-203).
    std::vector<CallKey> order = keys;
    {
      const auto& first = t.ranks.at(present[0]);
      std::sort(order.begin(), order.end(),
                [&](const CallKey& a, const CallKey& b) { return first.at(a).op_seq < first.at(b).op_seq; });
    }
    const std::size_t period = step_period(t.ranks.at(present[0]), order);
    std::map<CallKey, std::size_t> index;  // a key's place in `keys` (call_median)
    for (std::size_t k = 0; k < keys.size(); ++k) index[keys[k]] = k;
    std::vector<double> compute, wait, relative, cpu, shares;
    for (auto r : present) {
      double c = 0, w = 0;
      std::vector<double> rel;
      const auto& calls = t.ranks.at(r);
      for (std::size_t k = 0; k < keys.size(); ++k) {
        const auto& call = calls.at(keys[k]);
        c += static_cast<double>(call.compute_ns);
        if (exact[k]) w += static_cast<double>(call.wait_ns);
        if (largest > 0 && call_median[k] >= 0.25 * largest) {
          const double ref =
              pair ? static_cast<double>(t.ranks.at(present[present[0] == r ? 1 : 0]).at(keys[k]).compute_ns)
                   : call_median[k];
          if (ref > 0) rel.push_back(static_cast<double>(call.compute_ns) / ref);
        }
      }
      compute.push_back(c / static_cast<double>(keys.size()));
      wait.push_back(exact_calls > 0 ? w / static_cast<double>(exact_calls) : 0.0);
      relative.push_back(rel.empty() ? 1.0 : median(rel));
      if (period > 0 && order.size() / period >= 3) {
        const auto& partner = t.ranks.at(present[present[0] == r ? 1 : 0]);
        std::vector<double> blocks;
        for (std::size_t start = 0; start + period <= order.size(); start += period) {
          double mine = 0, ref = 0;
          for (std::size_t k = start; k < start + period; ++k) {
            mine += static_cast<double>(calls.at(order[k]).compute_ns);
            ref += pair ? static_cast<double>(partner.at(order[k]).compute_ns) : call_median[index.at(order[k])];
          }
          if (ref > 0) blocks.push_back(mine / ref);
        }
        if (blocks.size() >= 3) relative.back() = median(blocks);
      }
      if (counted) {
        cpu.push_back(t.cpu.at(r).cpu_ns);
        shares.push_back(compute.back() > 0 ? t.cpu.at(r).runq_ns / compute.back() : 0.0);
      }
    }
    // Each rank's reference: the group's median of a measure, or in a pair the other rank's value.
    const auto reference = [&](const std::vector<double>& v) {
      std::vector<double> out(v.size(), median(v));
      if (pair && v.size() == 2) out = {v[1], v[0]};
      return out;
    };
    std::vector<double> cpu_ratio(present.size(), 1.0), ref_cpu(present.size(), 0.0);
    if (counted) {
      ref_cpu = reference(cpu);
      for (std::size_t i = 0; i < present.size(); ++i) cpu_ratio[i] = ref_cpu[i] > 0 ? cpu[i] / ref_cpu[i] : 1.0;
      p.cpu_wait_share = median(shares);
      p.contended = p.cpu_wait_share >= o.contended_share;
    }
    const std::vector<double> ref_c = reference(compute);
    // Time off a CPU without waiting for one, per call: compute less the main thread's CPU and its wait
    // for a CPU. A rank stopped from outside (SIGSTOP duty cycle, a frozen cgroup) spends its stolen time
    // there; its peers do not. As a share of the peers' median compute, 1 + (off - median off) / median compute.
    // The main thread's CPU per call is a second view of the work: the work of a rank that does more
    // shows in both (measured: a 1.36-2.2x straggler at 1.1-2.0x in each); another thread's burst
    // (a store, a communication thread) only in the process's.
    bool main_counted = counted;
    if (counted)
      for (auto r : present) main_counted &= t.cpu.at(r).main_cpu_ns >= 0;
    std::vector<double> ref_main_cpu(present.size(), 0.0);
    if (main_counted) {
      std::vector<double> mc;
      for (auto r : present) mc.push_back(t.cpu.at(r).main_cpu_ns);
      ref_main_cpu = reference(mc);
    }
    std::vector<double> off_ratio(present.size(), 1.0), main_ratio(present.size(), 1.0);
    if (main_counted) {
      // Never below 0: compute time (the ring's calls) less CPU and CPU wait (the counters over the calls between
      // reads) is two measurements' difference, and a partner's negative value is their noise, not time it
      // spent on a CPU beyond its compute (clean dp=2 x tp=2 seed 20264601, load 9.9: rank 3 off 0.25 ms per call,
      // its partner -0.95 ms, named by off_cpu at 1.20x in 2 of 3 rounds).
      std::vector<double> off;
      for (std::size_t i = 0; i < present.size(); ++i)
        off.push_back(std::max(0.0, compute[i] - t.cpu.at(present[i]).main_cpu_ns - t.cpu.at(present[i]).runq_ns));
      const std::vector<double> ref_off = reference(off);
      for (std::size_t i = 0; i < present.size(); ++i) {
        if (ref_c[i] > 0) off_ratio[i] = 1 + (off[i] - ref_off[i]) / ref_c[i];
        main_ratio[i] = ref_main_cpu[i] > 0 ? t.cpu.at(present[i]).main_cpu_ns / ref_main_cpu[i] : 1.0;
      }
    }
    StatisticalOptions so;
    so.kappa = o.kappa;
    so.min_relative = min_relative;
    so.min_absolute = 0;
    so.direction = Direction::high;
    p.c3 = c3_statistical(relative, so);
    // A measure flags rank i when its effect is at least min_relative and at least `spread_factor` times
    // the spread (max - min) of the other peers' values that round (the group's own noise).
    auto stands_out = [&](const std::vector<double>& v, std::size_t i, double spread_factor) {
      double lo = 1e300, hi = -1e300;
      for (std::size_t j = 0; j < v.size(); ++j)
        if (j != i) {
          lo = std::min(lo, v[j]);
          hi = std::max(hi, v[j]);
        }
      const double effect = v[i] - 1.0;
      return effect >= min_relative && effect >= spread_factor * (hi >= lo ? hi - lo : 0.0);
    };
    for (std::size_t i = 0; i < present.size(); ++i) {
      const double med_c = ref_c[i], med_cpu = ref_cpu[i], med_main_cpu = ref_main_cpu[i];
      RankRound rr;
      rr.rank = present[i];
      rr.compute_ns = compute[i];
      rr.wait_ns = wait[i];
      rr.score = i < p.c3.scores.size() ? p.c3.scores[i] : 0;
      rr.compute_ratio = relative[i];
      if (counted) {
        rr.cpu_ns = cpu[i];
        rr.runq_ns = t.cpu.at(present[i]).runq_ns;
        rr.cpu_ratio = cpu_ratio[i];
        rr.main_cpu_ratio = main_ratio[i];
      }
      // The straggler computes longest and so waits least: its peers wait for it. Both must hold, the
      // excess must be at least min_absolute_ns per call, and its compute time (on a contended host: the
      // CPU it used) must stand out. (C3's MAD over a handful of peers is itself noisy on a loaded host.)
      std::vector<double> other_wait;
      for (std::size_t j = 0; j < present.size(); ++j)
        if (j != i) other_wait.push_back(wait[j]);
      // On a contended host the wait and the time excess are as noisy as the time itself: the CPU used
      // decides (a rank that needs more CPU per call where CPUs are short is the slow one), or the time
      // off a CPU without waiting for one (a rank stopped from outside), with a longer compute time.
      if (p.contended) {
        const double cpu_floor = 1.0 + std::max(min_relative, o.contended_cpu_min_relative);
        // More CPU per call slows the job only where it makes the rank arrive late: its compute time above
        // the median and its peers' wait beyond its own, per call, both at least cpu_peers_wait_share of its
        // CPU excess (the smaller of the process's and the main thread's). A rank that burns more CPU but
        // arrives no later than its peers is no straggler: measured, peers of a rank stopped from outside or
        // under a quota at 1.21-1.40x CPU per call (waiting burns CPU unequally) with less time excess than
        // that. A trainer-slowed rank's time excess and its peers' wait are 1-3x its CPU excess (its extra CPU
        // is CPU it waited for too). (Clean seed 416's rank 3 at 1.25-1.31x CPU kept its peers waiting 8.7-19.5
        // ms per call, as long as its time excess: a slower rank, named as a 1.4x trainer-slowed one is.)
        double cpu_excess = cpu[i] - med_cpu;
        if (main_counted) cpu_excess = std::min(cpu_excess, t.cpu.at(present[i]).main_cpu_ns - med_main_cpu);
        // Its time excess is the larger of the mean's and the per-call median ratio's: on torch 2.x a few of
        // a clean peer's calls hold long blocks off a CPU, and the peers' mean compute rose to a stopped rank's
        // (seed 30299019 round 2: the rank at 1.63x its peers per call, its peers waiting 34.6 ms per call
        // longer than it, its mean compute 0.1 ms above theirs; 2 of 10 torch 2.x outside runs not named), or
        // to a trainer-slowed one's (seed 1900518409, 2.23x on a contended host: 1.39-1.59x per call, its peers
        // waiting 28-41 ms per call longer, its mean compute 6 ms above theirs). The cpu and off_cpu measures
        // both take it so.
        const double time_excess = std::max(compute[i] - med_c, (relative[i] - 1) * med_c);
        const double late_share = pair ? o.pair_cpu_peers_wait_share : o.cpu_peers_wait_share;
        const bool late =
            time_excess >= late_share * cpu_excess && median(other_wait) - wait[i] >= late_share * cpu_excess;
        const bool more_cpu =
            cpu[i] - med_cpu >= o.min_absolute_ns && cpu_ratio[i] >= cpu_floor &&
            stands_out(cpu_ratio, i, o.spread_factor) &&
            (!main_counted || (main_ratio[i] >= cpu_floor && stands_out(main_ratio, i, o.spread_factor)));
        // ... or, in a group of three or more, far outside the other peers' spread though its extra CPU was
        // absorbed (absorbed_spread_factor; dropped below where another rank of the group is flagged that round).
        const bool absorbed = !late && !pair && main_counted && stands_out(cpu_ratio, i, o.absorbed_spread_factor) &&
                              stands_out(main_ratio, i, o.absorbed_spread_factor);
        const bool by_cpu = more_cpu && (late || absorbed);
        rr.absorbed = more_cpu && absorbed;
        // Its peers wait for it for at least half its excess time off a CPU: the time stolen from a stopped
        // rank is time they wait. With that check, half the other peers' spread is noise enough. (On
        // torch 2.x a clean rank's compute holds time blocked off a CPU too, measured up to 1.5x its
        // peers' median, while it waits about as long as they do.)
        // On a contended host the stolen time partly replaces time the rank would have waited for a CPU
        // anyway (its peers get the CPU meanwhile): its time excess is then less than its excess off a CPU,
        // and its peers wait for the time excess. Measured, a 2.7x SIGSTOP duty cycle at load ~5 on 2 CPUs:
        // off x1.39-1.99, compute 1.18-1.44x, its peers waiting 10-40 ms per call longer, under half its off
        // excess in all 3 rounds (seed 2508, not named). So the peers wait at least half the smaller of the
        // two, and its compute time is at least min_relative above the median.
        const double off_excess = (off_ratio[i] - 1) * med_c;
        const bool by_off = main_counted && time_excess >= std::max(o.min_absolute_ns, min_relative * med_c) &&
                            median(other_wait) - wait[i] >= 0.5 * std::min(time_excess, off_excess) &&
                            stands_out(off_ratio, i, 0.5 * o.spread_factor);
        // A rank starved of CPU (a cgroup quota throttling it, or CPUs it shares with other work) uses no
        // more CPU and is not off a CPU: its extra time is time waiting for one (throttled time counts
        // there too). It stands out in time by contended_wait_min_relative and the other peers' spread,
        // waits least of all, and waiting for a CPU beyond what its CPU would cost at its peers' rate
        // (runq per ns of CPU) makes up at least half its excess. (Measured here, load 4-6 on 2 CPUs: a
        // 1.5-3x quota or 4-8 pinned hogs gave 1.5-3.7x its peers' compute; its peers' spread 0.8-1.07x.)
        // Not in a pair: with no third peer, the scheduler's uneven share of the CPUs between two ranks is
        // the same figure (measured: a clean dp=2 x tp=2 job on 2 CPUs, seed 715009310, one rank waited
        // 1.9x its partner's time for a CPU in 2 of 3 rounds, 1.47-1.56x its compute).
        bool by_wait = false;
        if (main_counted && !pair) {
          std::vector<double> per_cpu, oc;
          for (std::size_t j = 0; j < present.size(); ++j) {
            if (j == i) continue;
            const auto& pc = t.cpu.at(present[j]);
            if (pc.main_cpu_ns > 0) per_cpu.push_back(pc.runq_ns / pc.main_cpu_ns);
            oc.push_back(compute[j]);
          }
          const auto& mine = t.cpu.at(present[i]);
          const double extra_wait = mine.runq_ns - mine.main_cpu_ns * median(per_cpu);
          const double excess = compute[i] - median(oc);
          double least_other_wait = 1e300;
          for (double w : other_wait) least_other_wait = std::min(least_other_wait, w);
          by_wait = !per_cpu.empty() && excess >= o.min_absolute_ns && wait[i] < least_other_wait &&
                    relative[i] - 1 >= std::max(min_relative, o.contended_wait_min_relative) &&
                    stands_out(relative, i, o.spread_factor) && extra_wait >= 0.5 * excess;
        }
        const double cpu_r = main_counted ? std::min(cpu_ratio[i], main_ratio[i]) : cpu_ratio[i];
        rr.flagged = by_cpu || by_off || by_wait;
        if (by_cpu) rr.flagged_by["cpu"] = main_counted ? std::min(cpu_ratio[i], main_ratio[i]) : cpu_ratio[i];
        if (by_off) rr.flagged_by["off_cpu"] = off_ratio[i];
        if (by_wait) rr.flagged_by["cpu_wait"] = relative[i];
        rr.measure = by_wait && !by_cpu ? "cpu_wait" : by_off && (!by_cpu || off_ratio[i] > cpu_r) ? "off_cpu" : "cpu";
        rr.ratio = rr.measure == "off_cpu" ? off_ratio[i] : rr.measure == "cpu_wait" ? relative[i] : cpu_r;
      } else {
        rr.flagged = wait[i] < median(other_wait) && compute[i] - med_c >= o.min_absolute_ns &&
                     stands_out(relative, i, o.spread_factor) &&
                     (!pair || median(other_wait) - wait[i] >= 0.5 * (compute[i] - med_c));
        rr.measure = "compute";
        rr.ratio = relative[i];
        if (rr.flagged) rr.flagged_by["compute"] = relative[i];
      }
      // A straggler costs its peers a material share of their time: its time excess per call (the mean's or the
      // ratio's, the larger) at least min_step_share of its peers' median time per call, computing and waiting.
      // On a job whose steps are nearly all wait (every rank sleeping 0.3 s inside each collective, 1-3 ms of
      // compute per call), rank 0 computed 0.4-1.7 ms per call longer than its peers in most runs (1.2-1.9x,
      // 0.3-1.3% of their 131 ms per call), and the contended measures named it beside the stopped rank in 5 of
      // 19 runs. The process state samples (stopped) and the cgroup's throttled time are direct evidence and
      // are not asked this.
      {
        std::vector<double> peer_step;
        for (std::size_t j = 0; j < present.size(); ++j)
          if (j != i) peer_step.push_back(compute[j] + wait[j]);
        double excess = std::max(compute[i] - med_c, (relative[i] - 1) * med_c);
        // (An absorbed rank's cost is the CPU it took from the others: its CPU excess, process and main thread.)
        if (rr.absorbed && main_counted)
          excess = std::max(excess, std::min(cpu[i] - ref_cpu[i], t.cpu.at(present[i]).main_cpu_ns - ref_main_cpu[i]));
        if (rr.flagged && excess < o.min_step_share * median(peer_step)) {
          rr.flagged = false;
          rr.flagged_by.clear();
        }
      }
      // Stopped from outside: the observer's samples of its process state say so directly, wherever its stops
      // fell. Inside a collective its own wait absorbs them and timing sees a slow link (torch 2.x seed
      // 20263318: a 2.74x duty-cycled rank computing 1.57x, then 1.00x and 1.00x its peers, every rank waiting
      // ~70 ms per call, it a little less: unnamed); schedstat cannot tell stopped time from a peer blocked in
      // recv. Its peers of a synchronous job are never stopped.
      if (auto sit = t.stopped.find(present[i]); sit != t.stopped.end() && sit->second.samples > 0) {
        const StoppedWindow& st = sit->second;
        rr.stopped = st;
        rr.stopped_ratio = 1 / (1 - std::min(st.share(), 0.999));
        double others_share = 0;
        std::vector<double> others_compute;
        for (std::size_t j = 0; j < present.size(); ++j) {
          if (j == i) continue;
          others_compute.push_back(compute[j]);
          auto pj = t.stopped.find(present[j]);
          if (pj != t.stopped.end() && pj->second.samples >= o.stopped_min_samples)
            others_share = std::max(others_share, pj->second.share());
        }
        const bool by_stopped =
            st.samples >= o.stopped_min_samples && st.share() >= o.stopped_min_share &&
            others_share < 0.5 * st.share() &&
            st.ns_per_call() >= std::max(o.min_absolute_ns, o.min_relative * median(others_compute));
        if (by_stopped) {
          rr.flagged = true;
          rr.flagged_by["stopped"] = rr.stopped_ratio;
          rr.measure = "stopped";
          rr.ratio = rr.stopped_ratio;
        }
      }
      rr.off_cpu_ratio = off_ratio[i];
      // What would explain it (cause_of): its excess over the other peers, their CPU wait and throttled time.
      {
        std::vector<double> oc, orq, oth, opc;
        bool throttle_known = counted && t.cpu.at(present[i]).throttled_ns >= 0;
        for (std::size_t j = 0; j < present.size(); ++j) {
          if (j == i) continue;
          oc.push_back(compute[j]);
          if (!counted) continue;
          const auto& pc = t.cpu.at(present[j]);
          orq.push_back(pc.runq_ns);
          const double used = pc.main_cpu_ns >= 0 ? pc.main_cpu_ns : pc.cpu_ns;
          if (used > 0) opc.push_back(pc.runq_ns / used);
          if (pc.throttled_ns >= 0)
            oth.push_back(pc.throttled_ns);
          else
            throttle_known = false;
        }
        rr.excess_ns = compute[i] - median(oc);
        if (counted) {
          rr.window = t.cpu.at(present[i]);
          rr.peer_runq_ns = median(orq);
          rr.peer_wait_per_cpu = opc.empty() ? -1 : median(opc);
          rr.throttled_ns = rr.window.throttled_ns;
          rr.peer_throttled_ns = throttle_known ? median(oth) : -1;
        }
      }
      // Throttled by its cgroup's CPU quota: the cgroup's counters say so directly, as its process state samples
      // do for a stopped rank, so this applies to a pair too (where cpu_wait does not: between two ranks an
      // uneven share of the CPUs looks the same in schedstat, but it throttles no cgroup). Flagged when its
      // throttled time beyond its peers' median, per call, is at least half its excess compute; that excess is at
      // least min_relative of the other peers' median compute and min_absolute_ns; and its peers wait for it at
      // least half its excess. (Measured: a two-rank job, rank 1 under a quota of 0.42 CPU, 1.97-2.22x its
      // partner's compute time, throttled 25 ms per call, its partner waiting 20 ms per call longer: 0.87-0.93x
      // its partner's CPU, so no CPU measure flagged it, and cpu_wait does not apply to a pair; seed 20273601.)
      if (rr.throttled_ns >= 0 && rr.peer_throttled_ns >= 0) {
        std::vector<double> oc;
        for (std::size_t j = 0; j < present.size(); ++j)
          if (j != i) oc.push_back(compute[j]);
        const double excess = rr.excess_ns;
        const bool by_throttled = excess >= std::max(o.min_absolute_ns, min_relative * median(oc)) &&
                                  rr.throttled_ns - rr.peer_throttled_ns >= 0.5 * excess &&
                                  median(other_wait) - wait[i] >= 0.5 * excess;
        if (by_throttled) {
          rr.flagged_by["throttled"] = relative[i];
          if (!rr.flagged) {
            rr.flagged = true;
            rr.measure = "throttled";
            rr.ratio = relative[i];
          }
        }
      }
      spdlog::debug(
          "straggler: rank {} calls {} compute {:.3f} ms (x{:.3f}) wait {:.3f} ms cpu x{:.3f} main x{:.3f} off x{:.3f} "
          "contended {} flagged {} by {} cpu {:.3f} ms main {:.3f} ms runq {:.3f} ms",
          rr.rank, keys.size(), compute[i] / 1e6, relative[i], wait[i] / 1e6, cpu_ratio[i], main_ratio[i], off_ratio[i],
          p.contended, rr.flagged, rr.measure, rr.cpu_ns / 1e6, counted ? t.cpu.at(present[i]).main_cpu_ns / 1e6 : -1.0,
          rr.runq_ns / 1e6);
      p.ranks.push_back(rr);
    }
    // A rank stopped from outside keeps its peers waiting, and waiting burns CPU unequally (measured: a
    // peer of a SIGSTOP-cycled rank at 1.15-1.32x CPU per call): where a rank is flagged as stopped (or
    // throttled by its quota), a CPU flag of a rank that waits longer than it (it waits for it) is dropped
    // that round.
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
    // A CPU flag its peers did not wait for stands only where no other rank of the group is flagged that round.
    for (auto& r : p.ranks) {
      if (!r.flagged || !r.absorbed || r.flagged_by.size() != 1 || !r.flagged_by.count("cpu")) continue;
      bool other = false;
      for (const auto& q : p.ranks) other |= q.rank != r.rank && q.flagged;
      if (other) {
        r.flagged = false;
        r.flagged_by.clear();
      }
    }
    out.has_data = true;
    out.peers.push_back(std::move(p));
  }

  // Communication: per kind, each group's median link time over the calls all groups of the kind share.
  std::map<std::string, std::vector<std::size_t>> by_kind;
  for (std::size_t i = 0; i < t.groups.size(); ++i)
    if (is_mesh_kind(t.groups[i].kind) && t.groups[i].members.size() >= 2) by_kind[t.groups[i].kind].push_back(i);
  for (const auto& [kind, idx] : by_kind) {
    if (idx.size() < 2) continue;
    std::vector<std::vector<CallKey>> keys_of;
    for (auto i : idx) keys_of.push_back(common_keys(t, t.groups[i].members));
    // ... whose wait is exact on every member of every group: an upper bound (a wait() returning, not the
    // call completing) says nothing about how long the link took.
    std::vector<CallKey> keys;
    for (const auto& k : keys_of[0]) {
      if (k.first != kind) continue;
      bool all = true;
      for (std::size_t j = 1; j < keys_of.size() && all; ++j)
        all = std::binary_search(keys_of[j].begin(), keys_of[j].end(), k);
      for (std::size_t j = 0; j < idx.size() && all; ++j)
        for (auto r : t.groups[idx[j]].members) all = all && t.ranks.at(r).at(k).wait_exact;
      if (all) keys.push_back(k);
    }
    if (static_cast<std::int64_t>(keys.size()) < o.min_calls) continue;
    std::vector<double> link;
    std::vector<std::vector<double>> per_group;
    for (auto i : idx) {
      std::vector<double> per_call;
      for (const auto& k : keys) {
        double m = -1;
        for (auto r : t.groups[i].members) {
          double w = static_cast<double>(t.ranks.at(r).at(k).wait_ns);
          m = m < 0 ? w : std::min(m, w);
        }
        per_call.push_back(m);
      }
      link.push_back(median(per_call));
      per_group.push_back(std::move(per_call));
    }
    // A slow link slows every call of its group; a loaded host's descheduling slows some calls of any group.
    // Per call (the same call of every group of the kind), is the group slower than the others' median by the
    // ratio and the absolute floor? A slow group must be so in at least `link_min_consistency` of the calls.
    std::vector<double> consistent(idx.size(), 0);
    for (std::size_t j = 0; j < idx.size(); ++j) {
      std::int64_t n = 0;
      for (std::size_t k = 0; k < keys.size(); ++k) {
        std::vector<double> others;
        for (std::size_t i = 0; i < idx.size(); ++i)
          if (i != j) others.push_back(per_group[i][k]);
        const double ref = median(others);
        n += per_group[j][k] >= o.link_min_ratio * ref && per_group[j][k] - ref >= o.link_min_absolute_ns ? 1 : 0;
      }
      consistent[j] = static_cast<double>(n) / static_cast<double>(keys.size());
    }
    std::vector<bool> slow(idx.size(), false);
    if (idx.size() >= 3) {
      StatisticalOptions so;
      so.kappa = o.kappa;
      so.min_relative = o.link_min_ratio - 1;
      so.min_absolute = o.link_min_absolute_ns;
      so.direction = Direction::high;
      auto c3 = c3_statistical(link, so);
      if (c3.status == C3Status::attributed)
        slow = c3.outliers;
      else if (c3.status == C3Status::inconclusive &&
               (c3.reason == C3Reason::majority_flagged || c3.reason == C3Reason::bimodal))
        out.widespread_kinds.insert(kind);
    }
    for (std::size_t j = 0; j < idx.size(); ++j) {
      std::vector<double> others;
      for (std::size_t k = 0; k < idx.size(); ++k)
        if (k != j) others.push_back(link[k]);
      const double ref = median(others);
      GroupRound g;
      g.group = idx[j];
      g.link_ns = link[j];
      g.ratio = ref > 0 ? link[j] / ref : (link[j] > 0 ? 1e9 : 1);
      g.calls = static_cast<std::int64_t>(keys.size());
      // Two groups: the ratio rule decides (C3 needs three for a strict minority).
      g.slow = (idx.size() >= 3 ? static_cast<bool>(slow[j])
                                : g.ratio >= o.link_min_ratio && link[j] - ref >= o.link_min_absolute_ns) &&
               consistent[j] >= o.link_min_consistency;
      out.groups.push_back(g);
    }
    out.has_data = true;
  }
  return out;
}

Cause cause_of(const std::vector<const RankRound*>& hits, const DecideOptions& o) {
  Cause c;
  const auto s3 = [](double ns) { return std::round(ns / 1e6) / 1e3; };
  // Stopped from outside: its process state samples over the rounds that flagged it (every one sampled).
  // Stopped for at least quota_window_share of the window and for at least cause_share of its excess
  // compute, it was stopped (however its stops fell against its collectives).
  bool sampled = !hits.empty();
  for (const auto* h : hits) sampled &= h->stopped.samples > 0 && h->stopped.calls > 0;
  nlohmann::json stopped_figures = nlohmann::json::object();
  if (sampled) {
    std::int64_t samples = 0, stopped = 0, calls = 0;
    double window = 0, stopped_ns = 0, excess = 0;
    for (const auto* h : hits) {
      samples += h->stopped.samples;
      stopped += h->stopped.stopped;
      calls += h->stopped.calls;
      window += static_cast<double>(h->stopped.window_ns);
      stopped_ns += h->stopped.share() * static_cast<double>(h->stopped.window_ns);
      excess += std::max(0.0, h->excess_ns) * static_cast<double>(h->stopped.calls);
    }
    stopped_figures = {
        {"stopped_s", s3(stopped_ns)},
        {"stopped_share", std::round(static_cast<double>(stopped) / static_cast<double>(samples) * 1000) / 1000},
        {"state_samples", samples},
        {"stopped_samples", stopped}};
    if (stopped_ns >= o.quota_window_share * window && stopped_ns >= o.cause_share * excess && stopped > 0) {
      c.cause = "stopped";
      c.figures = {{"window_s", s3(window)}, {"calls", calls}, {"excess_s", s3(excess)}};
      c.figures.update(stopped_figures);
      return c;
    }
  }
  double window = 0, excess = 0, runq = 0, peer_runq = 0, throttled = 0, peer_throttled = 0, expected_runq = 0,
         used = 0, proc_used = 0, peer_proc_used = 0, peer_used = 0, off_excess = 0;
  std::int64_t calls = 0, nr_throttled = 0, nr_periods = 0;
  bool sched = !hits.empty(), cgroup = !hits.empty();
  for (const auto* h : hits) {
    sched &= h->runq_ns >= 0 && h->peer_runq_ns >= 0 && h->peer_wait_per_cpu >= 0 && h->window.calls > 0;
    cgroup &= h->throttled_ns >= 0 && h->peer_throttled_ns >= 0 && h->window.nr_throttled >= 0;
  }
  if (!sched) {
    c.figures = {{"why",
                  "no scheduler counters for this rank or its peers in the rounds that flagged it (another "
                  "host's rank recorded without them, or /proc unreadable)"}};
    c.figures.update(stopped_figures);
    return c;
  }
  // Over the rounds that flagged it: per-call figures times the calls of each round's window.
  for (const auto* h : hits) {
    const double n = static_cast<double>(h->window.calls);
    calls += h->window.calls;
    window += static_cast<double>(h->window.window_ns);
    excess += std::max(0.0, h->excess_ns) * n;
    runq += h->runq_ns * n;
    peer_runq += h->peer_runq_ns * n;
    // The wait its CPU would have cost at its peers' wait per ns of CPU: the share of its wait that more
    // work explains.
    const double cpu = h->window.main_cpu_ns >= 0 ? h->window.main_cpu_ns : h->window.cpu_ns;
    used += cpu * n;
    expected_runq += cpu * h->peer_wait_per_cpu * n;
    // Its peers' CPU per call, from its ratios (the main thread's where it has one, like `cpu`).
    const double cpu_r = h->window.main_cpu_ns >= 0 ? h->main_cpu_ratio : h->cpu_ratio;
    if (cpu_r > 0) peer_used += cpu / cpu_r * n;
    proc_used += h->cpu_ns * n;
    if (h->cpu_ratio > 0) peer_proc_used += h->cpu_ns / h->cpu_ratio * n;
    // Its time off a CPU without waiting for one beyond its peers' (off_cpu_ratio is 1 + that / their compute).
    off_excess += std::max(0.0, (h->off_cpu_ratio - 1) * (h->compute_ns - h->excess_ns)) * n;
    if (cgroup) {
      throttled += h->throttled_ns * n;
      peer_throttled += h->peer_throttled_ns * n;
      nr_throttled += h->window.nr_throttled;
      nr_periods += h->window.nr_periods;
    }
  }
  c.figures = {{"window_s", s3(window)},
               {"calls", calls},
               {"excess_s", s3(excess)},
               {"cpu_s", s3(used)},
               {"runq_s", s3(runq)},
               {"peers_runq_s", s3(peer_runq)},
               {"runq_at_peers_rate_s", s3(expected_runq)}};
  c.figures.update(stopped_figures);
  const auto& q = hits.back()->window;
  if (cgroup) {
    c.figures["throttled_s"] = s3(throttled);
    c.figures["peers_throttled_s"] = s3(peer_throttled);
    c.figures["nr_throttled"] = nr_throttled;
    c.figures["nr_periods"] = nr_periods;
    // The quota in CPUs (null: none, or unreadable: quota_known says which).
    c.figures["quota_known"] = q.period_us > 0;
    c.figures["quota_cpus"] =
        q.period_us > 0 && q.quota_us > 0
            ? nlohmann::json(std::round(static_cast<double>(q.quota_us) / static_cast<double>(q.period_us) * 1000) /
                             1000)
            : nlohmann::json(nullptr);
  } else {
    c.figures["throttled_s"] = nullptr;
  }
  const bool waited =
      runq - expected_runq >= o.cause_share * excess && runq > 0 && runq >= o.contention_min_ratio * expected_runq;
  // More work: on a host short of CPUs a rank that needs more CPU per call also waits longer for a CPU per
  // CPU second than its peers, which wait in their collectives meanwhile (measured, trainer-slowed ranks at
  // load 10-12 on 2 CPUs: 1.36-1.70x their peers' CPU per call, 1.3-1.9x their peers' wait per CPU second;
  // 6 of 106 labelled cpu_contention). A rank starved of CPU uses no more CPU than its peers.
  const double floor = 1 + o.more_work_min_relative;
  const bool more_work =
      peer_used > 0 && peer_proc_used > 0 && used >= floor * peer_used && proc_used >= floor * peer_proc_used;
  c.figures["peers_cpu_s"] = s3(peer_used);
  if (cgroup && throttled >= o.quota_window_share * window && throttled - peer_throttled >= o.cause_share * excess &&
      throttled > peer_throttled) {
    c.cause = "cpu_quota";
  } else if (more_work) {
    c.cause = "slow_compute";
  } else if (waited && cgroup) {
    c.cause = "cpu_contention";
  } else if (waited) {
    // Throttled time is also time waiting for a CPU in schedstat: without the cgroup's counters a quota
    // and contention look alike.
    c.figures["why"] = "it waited for a CPU, and its cgroup's throttling could not be read: a quota or contention";
  } else if (excess > 0 && off_excess >= o.cause_share * excess) {
    // No more CPU, no longer wait for one, not stopped: its extra time was off a CPU, asleep or blocked (I/O, a
    // lock: a data loader waiting on storage). Measured: 14 of 14 ranks sleeping 0.35-1.85x their step's time in
    // one gap of it (worlds 2-8, compute-sleep campaign) labelled so; over the recorded corpus none of 368 ranks
    // slowed by more work, stopped or under a quota.
    c.cause = "blocked";
  } else {
    c.cause = "slow_compute";
  }
  c.figures["off_cpu_excess_s"] = s3(off_excess);
  return c;
}

namespace {

// A rank of a contended peer group of two, over the rounds that pair was decided on CPU per call (`hits`: its
// RankRound in each), flagged on the rounds pooled (see pooled_pairs).
struct PooledPair {
  std::int64_t rank = -1;
  std::int64_t partner = -1;
  std::vector<const RankRound*> hits;
  double ratio = 1;  // its CPU per call over the pooled rounds / its partner's (the smaller of process and main)
};

// The median spread (the two ranks' pooled CPU ratios apart) of the pairs other than `own`, leaving out pairs with a
// rank in `skip`: how far CPU per unit of work drifts in a pair of this mesh (pooled_pairs, pair_noise_check). Empty
// without such a pair.
std::optional<double> other_pairs_spread(const std::map<std::vector<std::int64_t>, std::vector<double>>& pair_ratios,
                                         const std::vector<std::int64_t>& own, const std::set<std::int64_t>& skip) {
  std::vector<double> spreads;
  for (const auto& [members, r] : pair_ratios)
    if (members != own && r.size() == 2 && !skip.count(members[0]) && !skip.count(members[1]))
      spreads.push_back(std::abs(r[0] - r[1]));
  if (spreads.empty()) return std::nullopt;
  return median(spreads);
}

// In a pair there is no third peer to measure noise by, and on a loaded VM a rank's CPU time per unit of work moves
// by itself: measured here, two processes doing identical work under 2 busy loops on 2 CPUs used 0.80-1.19x each
// other's CPU per iteration in 1.5 s windows (and 13-20 ms per iteration from window to window). A trainer-slowed
// rank whose own work is 1.3-1.8x its partner's (diluted by the per-step work the factor does not scale) then shows
// 1.00-1.24x its partner's CPU per call in 2 of 3 rounds, under the cpu measure's 1.2 floor (torch 1.13, load 4.5,
// seeds 500614964 and 608423859: 1.41, 1.11, 1.16x and 1.98, 1.00, 1.24x; not named). Pooled, the rounds' noise
// averages out (1.22x and 1.37x there): a rank of a contended pair is flagged on the rounds pooled (weighted by their
// calls) when its CPU per call, process and main thread alike, is at least the cpu measure's floor above its
// partner's, it arrives late by at least pair_cpu_peers_wait_share of that excess (its compute time above its
// partner's) and its partner waits for it as much (the cpu measure's rules, on sums instead of one round), and in a
// strict majority of those rounds it used more CPU per call and waited less than its partner (the same direction, not
// one round's outlier).
//
// `ratios` gets every contended pair's pooled ratios (flagged or not), its members' in order: the noise of pairs
// (pair_noise_check).
std::vector<PooledPair> pooled_pairs(const std::vector<RoundResult>& rounds, const DecideOptions& o,
                                     std::map<std::vector<std::int64_t>, std::vector<double>>& pair_ratios) {
  std::map<std::vector<std::int64_t>, std::vector<const PeerRound*>> pairs;
  for (const auto& r : rounds)
    for (const auto& p : r.peers)
      if (p.members.size() == 2 && p.ranks.size() == 2 && p.contended && p.ranks[0].cpu_ns >= 0 &&
          p.ranks[1].cpu_ns >= 0 && p.ranks[0].window.main_cpu_ns >= 0 && p.ranks[1].window.main_cpu_ns >= 0 &&
          p.ranks[0].window.calls > 0 && p.ranks[1].window.calls > 0 && p.calls > 0)
        pairs[p.members].push_back(&p);
  const double floor = 1.0 + std::max({o.min_relative, o.pair_min_relative, o.contended_cpu_min_relative});
  // Each rank of each pair over the pooled rounds; the flags need every pair's spread (below).
  struct Pooled {
    PooledPair pp;
    std::vector<std::int64_t> members;
    double cpu_excess = 0, time_excess = 0, partner_waits = 0;
    bool direction = false;  // more CPU per call and less wait than its partner in a strict majority of rounds
  };
  std::vector<Pooled> all;
  for (const auto& [members, peer_rounds] : pairs) {
    for (std::size_t i = 0; i < 2; ++i) {
      const std::size_t j = 1 - i;
      double cpu[2] = {0, 0}, main_cpu[2] = {0, 0}, cpu_calls[2] = {0, 0}, compute = 0, wait = 0, calls = 0;
      std::int64_t same_direction = 0;
      Pooled x;
      x.members = members;
      x.pp.rank = members[i];
      x.pp.partner = members[j];
      for (const auto* p : peer_rounds) {
        for (std::size_t k = 0; k < 2; ++k) {
          const auto n = static_cast<double>(p->ranks[k].window.calls);
          cpu[k] += p->ranks[k].cpu_ns * n;
          main_cpu[k] += p->ranks[k].window.main_cpu_ns * n;
          cpu_calls[k] += n;
        }
        const auto n = static_cast<double>(p->calls);
        compute += (p->ranks[i].compute_ns - p->ranks[j].compute_ns) * n;
        wait += (p->ranks[j].wait_ns - p->ranks[i].wait_ns) * n;
        calls += n;
        same_direction += p->ranks[i].cpu_ns > p->ranks[j].cpu_ns && p->ranks[i].wait_ns < p->ranks[j].wait_ns ? 1 : 0;
        x.pp.hits.push_back(&p->ranks[i]);
      }
      for (std::size_t k = 0; k < 2; ++k) {
        cpu[k] /= cpu_calls[k];
        main_cpu[k] /= cpu_calls[k];
      }
      if (cpu[j] <= 0 || main_cpu[j] <= 0) continue;
      x.cpu_excess = std::min(cpu[i] - cpu[j], main_cpu[i] - main_cpu[j]);
      x.pp.ratio = std::min(cpu[i] / cpu[j], main_cpu[i] / main_cpu[j]);
      x.time_excess = compute / calls;
      x.partner_waits = wait / calls;
      x.direction = 2 * same_direction > static_cast<std::int64_t>(peer_rounds.size());
      pair_ratios[members].push_back(x.pp.ratio);
      all.push_back(std::move(x));
    }
  }
  std::vector<PooledPair> out;
  for (auto& x : all) {
    // Late by pair_cpu_peers_wait_share of its CPU excess, as the cpu measure asks; or, where the other pairs of
    // the mesh are quiet (their median spread at most 1/pair_quiet_factor of its excess), late at all: on a host
    // whose ranks are all CPU-bound, a rank's extra work slows every rank alike (measured, dp=2 x tp=2 at load 5.6:
    // a 1.47x trainer-slowed rank at 1.34-1.41x its partner's CPU in all 3 rounds, the other pair at 0.96 and
    // 1.04x, late by 0.34x its CPU excess and its partner waiting 0.30x of it; seed 20282100).
    // Where they are quieter still (absorbed_spread_factor times that), its extra CPU may have been absorbed, as in
    // a group of three or more: its partner need only wait longer than it (measured, torch 2.x dp=2 x tp=2 at load
    // 5.5, a rank stalled 1.33x at 1.25-1.30x its partner's CPU per call in every round, its time 0.92-0.98x its
    // partner's, its partner waiting 0.4-1.5 ms per call longer; the other pair within 0.01 of each other pooled;
    // seed 20468000).
    const auto noise = other_pairs_spread(pair_ratios, x.members, {});
    const bool quiet = noise && o.pair_quiet_factor * *noise <= x.pp.ratio - 1;
    const bool quieter = noise && o.absorbed_spread_factor * o.pair_quiet_factor * *noise <= x.pp.ratio - 1;
    const double share = o.pair_cpu_peers_wait_share;
    const bool late = (x.time_excess >= share * x.cpu_excess && x.partner_waits >= share * x.cpu_excess) ||
                      (quiet && x.time_excess > 0 && x.partner_waits > 0) || (quieter && x.partner_waits > 0);
    const bool flagged = x.cpu_excess >= o.min_absolute_ns && x.pp.ratio >= floor && late && x.direction;
    spdlog::debug(
        "straggler: pair {}/{} pooled over {} rounds: rank {} cpu x{:.3f} time excess {:.3f} ms partner waits {:.3f} "
        "ms cpu excess {:.3f} ms same direction {} other pairs quiet {} flagged {}",
        x.members[0], x.members[1], x.pp.hits.size(), x.pp.rank, x.pp.ratio, x.time_excess / 1e6, x.partner_waits / 1e6,
        x.cpu_excess / 1e6, x.direction, quiet, flagged);
    if (flagged) out.push_back(std::move(x.pp));
  }
  return out;
}

// A pair has no third peer to measure its noise by, but a mesh of several pairs (the replicas of a dp=2 x tp
// mesh) has other pairs doing the same work at the same moments: their pooled CPU ratios (`pair_ratios`, each rank's
// over its partner's, from pooled_pairs) show how far CPU per unit of work drifts in a pair that round. A rank of
// a pair named by the cpu measure stays named only where its pooled excess (ratio - 1) is at least spread_factor
// times the median spread of the other pairs (their two ratios' max - min), pairs with a named rank left out (a
// second straggler is no noise). Measured, dp=2 x tp=2 on 2 CPUs at load 7-11: a clean run's rank at 1.25x its
// partner pooled, in all 3 rounds, where the other pair's ranks stood at 1.15x and 0.87x (seed 20266206); 20
// trainer-slowed ranks at 1.26-1.76x, the other pair's at most 1.11x (their excess 4.5-530x its spread/2).
void pair_noise_check(Decision& d, const std::map<std::vector<std::int64_t>, std::vector<double>>& pair_ratios,
                      const DecideOptions& o) {
  std::set<std::int64_t> named;
  for (const auto& s : d.suspects) named.insert(s.rank);
  std::vector<Suspicion> kept;
  for (auto& s : d.suspects) {
    const auto own = std::find_if(pair_ratios.begin(), pair_ratios.end(), [&](const auto& p) {
      return p.second.size() == 2 && std::find(p.first.begin(), p.first.end(), s.rank) != p.first.end();
    });
    const auto noise = own == pair_ratios.end() ? std::nullopt : other_pairs_spread(pair_ratios, own->first, named);
    if (!noise || s.evidence.value("measure", "") != "cpu") {
      kept.push_back(std::move(s));
      continue;
    }
    const double ratio = own->second[own->first[0] == s.rank ? 0 : 1];
    if (ratio - 1 >= o.spread_factor * *noise) {
      kept.push_back(std::move(s));
      continue;
    }
    d.notes.push_back(fmt::format(
        "rank {} used {:.2f}x its partner's CPU per call over the rounds, within the noise of the other pairs of "
        "its mesh (their ranks {:.2f} apart, median): not named",
        s.rank, ratio, *noise));
  }
  d.suspects = std::move(kept);
}

// What a verdict that names no one (or not every suspect) cannot see, in its notes: ranks flagged in some
// rounds but not named (unconfirmed; a note where they were flagged in less than a strict majority of the rounds:
// a rerun with more --rounds confirms or clears them; pair_noise_check notes those it overruled), and a host whose
// CPUs are oversubscribed, where compute times move by more than a mild straggler's slowdown from round to
// round (measured: a 1.42x trainer-slowed rank of a pair at load 5.9 on 2 CPUs computed 1.00x, 0.76x and
// 1.18x its partner's time in three rounds, and went unnamed with "no straggler" and nothing else said).
void noise_notes(Decision& d, const std::vector<RoundResult>& rounds,
                 const std::map<std::int64_t, std::vector<const RankRound*>>& flagged, const DecideOptions& o) {
  std::set<std::int64_t> named;
  for (const auto& s : d.suspects) named.insert(s.rank);
  for (const auto& [rank, hits] : flagged) {
    if (named.count(rank)) continue;
    d.unconfirmed.push_back(rank);
    if (2 * static_cast<std::int64_t>(hits.size()) > d.rounds) continue;  // a majority a noise check overruled (noted)
    std::set<std::string> measures;
    for (const auto* h : hits)
      for (const auto& [m, ratio] : h->flagged_by) measures.insert(m);
    d.notes.push_back(
        fmt::format("rank {} was flagged in {} of {} rounds (by {}), not a strict majority: rerun "
                    "with more --rounds to confirm or clear it",
                    rank, hits.size(), d.rounds, fmt::join(measures, ", ")));
  }
  // Per round: the median CPU wait share, and the largest ratio of a rank no one named in the measure that decides
  // its group (CPU per call, process and main thread alike, where the group waits for CPUs; compute time elsewhere).
  std::vector<double> shares, spreads;
  std::int64_t contended = 0;
  for (const auto& r : rounds) {
    if (!r.has_data || r.peers.empty()) continue;
    std::vector<double> s;
    double spread = 1;
    bool any = false;
    for (const auto& p : r.peers) {
      s.push_back(p.cpu_wait_share);
      any |= p.contended;
      for (const auto& rr : p.ranks)
        if (!named.count(rr.rank))
          spread = std::max(spread, p.contended ? std::min(rr.cpu_ratio, rr.main_cpu_ratio) : rr.compute_ratio);
    }
    shares.push_back(median(s));
    spreads.push_back(spread);
    contended += any ? 1 : 0;
  }
  if (shares.empty()) return;
  d.noise_cpu_wait_share = median(shares);
  d.noise_ratio = *std::max_element(spreads.begin(), spreads.end());
  d.oversubscribed = 2 * contended > static_cast<std::int64_t>(shares.size()) &&
                     d.noise_cpu_wait_share >= o.oversubscribed_share && d.noise_ratio >= 1 + o.min_relative;
  if (!d.oversubscribed) return;
  d.notes.push_back(fmt::format(
      "the host's CPUs are oversubscribed: ranks waited for a CPU {:.0f}% as long as they computed (median over "
      "rounds), and a rank no one named was {:.2f}x its peers in a round (CPU per call where they waited for CPUs, "
      "compute time elsewhere): a straggler slowed by less than that may go unnamed; rerun with more --rounds, or "
      "when the host is less loaded",
      100 * d.noise_cpu_wait_share, d.noise_ratio));
}

}  // namespace

Decision decide(const std::vector<RoundResult>& rounds, const std::vector<TimingTable>& tables, const Mesh& mesh,
                const DecideOptions& o) {
  (void)mesh;
  Decision d;
  d.rounds = static_cast<std::int64_t>(rounds.size());
  for (const auto& r : rounds) d.rounds_with_data += r.has_data ? 1 : 0;
  d.enough_data = d.rounds > 0 && 2 * d.rounds_with_data > d.rounds;
  if (!d.enough_data) {
    d.notes.push_back(fmt::format("{} of {} rounds had {} or more calls every peer completed", d.rounds_with_data,
                                  d.rounds, o.min_calls));
    return d;
  }
  const auto majority = [&](std::int64_t n) { return 2 * n > d.rounds; };
  std::map<std::string, std::string> nodes;  // rank (as text) -> node, from the newest table naming it
  std::map<std::int64_t, std::string> node_of;
  for (const auto& t : tables)
    for (const auto& [r, n] : t.nodes) node_of[r] = n;

  // Compute stragglers.
  std::map<std::int64_t, std::vector<const RankRound*>> flagged;
  for (const auto& r : rounds)
    for (const auto& p : r.peers)
      for (const auto& rr : p.ranks)
        if (rr.flagged) flagged[rr.rank].push_back(&rr);
  // A suspect named by `measure` in the rounds `hits` (ratio: the median of that measure's ratio over them, or
  // `pooled_ratio` where >= 0).
  const auto add_suspect = [&](std::int64_t rank, const std::vector<const RankRound*>& hits, const std::string& measure,
                               double pooled_ratio) {
    Suspicion s;
    s.rank = rank;
    s.node = node_of.count(rank) ? node_of[rank] : "";
    s.reason = "compute";
    s.flagged_rounds = static_cast<std::int64_t>(hits.size());
    if (pooled_ratio >= 0) {  // the rounds pooled; flagged_rounds counts those that flagged it alone
      s.flagged_rounds = 0;
      for (const auto* h : hits) s.flagged_rounds += h->flagged ? 1 : 0;
    }
    std::vector<double> ratios, scores, c, w, cpu, runq, cpu_ratio, time_ratio;
    for (auto* h : hits) {
      if (pooled_ratio < 0) ratios.push_back(h->flagged_by.at(measure));
      scores.push_back(h->score);
      c.push_back(h->compute_ns);
      w.push_back(h->wait_ns);
      time_ratio.push_back(h->compute_ratio);
      if (h->cpu_ns >= 0) {
        cpu.push_back(h->cpu_ns);
        runq.push_back(h->runq_ns);
        cpu_ratio.push_back(h->cpu_ratio);
      }
    }
    s.ratio = pooled_ratio >= 0 ? pooled_ratio : median(ratios);
    s.confidence = static_cast<double>(hits.size()) / static_cast<double>(d.rounds);
    s.evidence = {{"compute_ratio", std::round(s.ratio * 1000) / 1000},
                  {"score", std::round(median(scores) * 100) / 100},
                  {"compute_ms_per_call", ms(median(c))},
                  {"wait_ms_per_call", ms(median(w))},
                  {"flagged_rounds", s.flagged_rounds},
                  {"rounds", d.rounds},
                  {"measure", measure},  // one measure named it
                  {"time_ratio", std::round(median(time_ratio) * 1000) / 1000}};
    // Named by the cpu measure over its rounds pooled (pooled_pairs): how many.
    if (pooled_ratio >= 0) s.evidence["pooled_rounds"] = static_cast<std::int64_t>(hits.size());
    // Named by the cpu measure in rounds its peers did not wait for it (absorbed_spread_factor): how many.
    if (measure == "cpu") {
      std::int64_t absorbed = 0;
      for (const auto* h : hits) absorbed += h->flagged && h->absorbed ? 1 : 0;
      if (absorbed > 0) s.evidence["absorbed_rounds"] = absorbed;
    }
    if (!cpu.empty()) {
      s.evidence["cpu_ms_per_call"] = ms(median(cpu));
      s.evidence["cpu_ratio"] = std::round(median(cpu_ratio) * 1000) / 1000;
      s.evidence["runq_ms_per_call"] = ms(median(runq));
    }
    // Its process state samples over the rounds that flagged it (where every one was sampled).
    {
      std::int64_t samples = 0, stopped = 0;
      std::vector<double> per_call;
      bool sampled = true;
      for (auto* h : hits) {
        sampled &= h->stopped.samples > 0;
        samples += h->stopped.samples;
        stopped += h->stopped.stopped;
        per_call.push_back(h->stopped.ns_per_call());
      }
      if (sampled && samples > 0) {
        s.evidence["stopped_share"] =
            std::round(static_cast<double>(stopped) / static_cast<double>(samples) * 1000) / 1000;
        s.evidence["state_samples"] = samples;
        s.evidence["stopped_ms_per_call"] = ms(median(per_call));
      }
    }
    Cause cause = cause_of(hits, o);
    s.evidence["cause"] = cause.cause;
    s.evidence["cause_figures"] = cause.figures;
    d.suspects.push_back(std::move(s));
  };
  for (const auto& [rank, all_hits] : flagged) {
    // Named when one measure flags it in a strict majority of rounds: a clean rank flagged once by its
    // CPU and once by its time off a CPU (measured, --rounds 2) is two kinds of noise, not one straggler.
    // A round counts for every measure that flagged it: a rank starved by 10 pinned hogs was flagged by
    // cpu and cpu_wait in round 1 (cache-cold, 1.40x CPU per call, 5.1x compute time) and by cpu_wait in
    // round 2, and went unnamed when each round counted for one (test seed 30683001).
    std::map<std::string, std::vector<const RankRound*>> by_measure;
    for (const auto* h : all_hits)
      for (const auto& [m, ratio] : h->flagged_by) by_measure[m].push_back(h);
    const std::vector<const RankRound*>* most = nullptr;
    std::string measure;
    for (const auto& [m, v] : by_measure)
      if (!most || v.size() > most->size()) {
        most = &v;
        measure = m;
      }
    // Its process state samples are direct evidence: where they flag it in a strict majority, they name it.
    if (auto st = by_measure.find("stopped");
        st != by_measure.end() && majority(static_cast<std::int64_t>(st->second.size()))) {
      most = &st->second;
      measure = "stopped";
    }
    if (!most || !majority(static_cast<std::int64_t>(most->size()))) continue;
    add_suspect(rank, *most, measure, -1);
  }
  std::map<std::vector<std::int64_t>, std::vector<double>> pair_ratios;
  for (const auto& pooled : pooled_pairs(rounds, o, pair_ratios)) {
    if (!majority(static_cast<std::int64_t>(pooled.hits.size()))) continue;
    bool named = false;  // it, or its partner (a pair has one straggler at most)
    for (const auto& s : d.suspects) named |= s.rank == pooled.rank || s.rank == pooled.partner;
    if (!named) add_suspect(pooled.rank, pooled.hits, "cpu", pooled.ratio);
  }
  pair_noise_check(d, pair_ratios, o);
  std::sort(d.suspects.begin(), d.suspects.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  noise_notes(d, rounds, flagged, o);
  // A rank named for its CPU whose time barely exceeds its peers': say why the job's steps hardly show it.
  for (const auto& s : d.suspects) {
    const double time_ratio = s.evidence.value("time_ratio", 1.0);
    if (s.evidence.value("measure", "") == "cpu" && time_ratio < 1 + o.min_relative)
      d.notes.push_back(fmt::format(
          "rank {} used {:.2f}x its peers' CPU per call but took only {:.2f}x their time: the host's CPUs are "
          "oversubscribed and it took its extra CPU from time it would have waited for one; with a CPU of its "
          "own it would slow every step",
          s.rank, s.ratio, time_ratio));
  }

  // Slow groups, confirmed over rounds.
  const auto& groups = tables.back().groups;
  std::map<std::size_t, std::vector<const GroupRound*>> slow_hits;
  std::map<std::string, std::int64_t> widespread;
  for (const auto& r : rounds) {
    for (const auto& g : r.groups)
      if (g.slow) slow_hits[g.group].push_back(&g);
    for (const auto& k : r.widespread_kinds) ++widespread[k];
  }
  for (const auto& [gi, hits] : slow_hits) {
    if (!majority(static_cast<std::int64_t>(hits.size())) || gi >= groups.size()) continue;
    SlowGroup s;
    s.group = groups[gi];
    std::set<std::string> ns;
    for (auto m : s.group.members) ns.insert(node_of.count(m) ? node_of[m] : "");
    s.nodes.assign(ns.begin(), ns.end());
    s.intra_node = ns.size() == 1;
    s.flagged_rounds = static_cast<std::int64_t>(hits.size());
    std::vector<double> ratios, link;
    for (auto* h : hits) {
      ratios.push_back(h->ratio);
      link.push_back(h->link_ns);
    }
    s.ratio = median(ratios);
    s.link_ns = median(link);
    d.slow_groups.push_back(std::move(s));
  }
  // A slow link delays the members' next calls in other groups too, by less: keep the slow groups whose
  // excess over their kind's median is at least a quarter of the largest excess (a second group slowed
  // by the same cause, e.g. a rank's NIC in its tp and dp groups, is as slow as the first).
  {
    double largest = 0;
    auto excess = [](const SlowGroup& g) { return g.ratio > 0 ? g.link_ns - g.link_ns / g.ratio : 0.0; };
    for (const auto& g : d.slow_groups) largest = std::max(largest, excess(g));
    std::vector<SlowGroup> kept;
    for (auto& g : d.slow_groups) {
      if (excess(g) >= 0.25 * largest) {
        kept.push_back(std::move(g));
      } else {
        d.notes.push_back(
            fmt::format("{} group {} is slower than its kind ({:.2f}x) but far less than the slowest group: "
                        "taken as a consequence, not a cause",
                        g.group.kind, hex_id(g.group.id), g.ratio));
      }
    }
    d.slow_groups = std::move(kept);
  }
  std::vector<std::string> widespread_kinds;
  for (const auto& [k, n] : widespread)
    if (majority(n)) widespread_kinds.push_back(k);

  // Diagnosis of the communication side.
  double comm_conf = 0;
  for (const auto& s : d.slow_groups)
    comm_conf += static_cast<double>(s.flagged_rounds) / static_cast<double>(d.rounds);
  if (!d.slow_groups.empty()) comm_conf /= static_cast<double>(d.slow_groups.size());
  std::set<std::string> kinds, all_nodes;
  std::set<std::string> common_nodes;
  std::set<std::int64_t> common_ranks;
  bool first = true, all_intra = true, all_inter = true;
  for (const auto& s : d.slow_groups) {
    kinds.insert(s.group.kind);
    all_nodes.insert(s.nodes.begin(), s.nodes.end());
    all_intra &= s.intra_node;
    all_inter &= !s.intra_node;
    std::set<std::string> ns(s.nodes.begin(), s.nodes.end());
    std::set<std::int64_t> rs(s.group.members.begin(), s.group.members.end());
    if (first) {
      common_nodes = ns;
      common_ranks = rs;
      first = false;
    } else {
      std::set<std::string> a;
      std::set_intersection(common_nodes.begin(), common_nodes.end(), ns.begin(), ns.end(),
                            std::inserter(a, a.begin()));
      common_nodes = a;
      std::set<std::int64_t> b;
      std::set_intersection(common_ranks.begin(), common_ranks.end(), rs.begin(), rs.end(),
                            std::inserter(b, b.begin()));
      common_ranks = b;
    }
  }
  auto group_json = [&](const SlowGroup& s) {
    return nlohmann::json{{"kind", s.group.kind},
                          {"id", hex_id(s.group.id)},
                          {"members", s.group.members},
                          {"nodes", s.nodes},
                          {"link_ratio", std::round(s.ratio * 1000) / 1000},
                          {"link_ms_per_call", ms(s.link_ns)},
                          {"flagged_rounds", s.flagged_rounds}};
  };
  auto node_suspect = [&](const std::string& node, std::int64_t rank, nlohmann::json ev, double ratio) {
    Suspicion s;
    s.rank = rank;
    s.node = node;
    s.reason = "communication";
    s.ratio = ratio;
    s.confidence = comm_conf;
    s.flagged_rounds = 0;
    s.evidence = std::move(ev);
    d.suspects.push_back(std::move(s));
  };
  if (!widespread_kinds.empty()) {
    d.diagnosis = Diagnosis::cluster_wide;
    d.notes.push_back(fmt::format("half or more of the {} groups stand out in most rounds: no single group is slow",
                                  fmt::join(widespread_kinds, ", ")));
    comm_conf = std::max(comm_conf, 0.5);
  } else if (!d.slow_groups.empty()) {
    double max_ratio = 0;
    nlohmann::json gl = nlohmann::json::array();
    for (const auto& s : d.slow_groups) {
      max_ratio = std::max(max_ratio, s.ratio);
      gl.push_back(group_json(s));
    }
    if (kinds.size() >= 2 && common_nodes.size() == 1) {
      d.diagnosis = Diagnosis::machine_local;
      const std::string node = *common_nodes.begin();
      nlohmann::json ev = {{"slow_groups", gl}, {"link_ratio", std::round(max_ratio * 1000) / 1000}};
      node_suspect(node, common_ranks.size() == 1 ? *common_ranks.begin() : -1, ev, max_ratio);
    } else if (all_intra && static_cast<std::int64_t>(all_nodes.size()) < o.cluster_wide_nodes) {
      d.diagnosis = Diagnosis::intra_node_link;
      for (const auto& node : all_nodes) {
        nlohmann::json mine = nlohmann::json::array();
        double r = 0;
        for (const auto& s : d.slow_groups)
          if (s.nodes.size() == 1 && s.nodes[0] == node) {
            mine.push_back(group_json(s));
            r = std::max(r, s.ratio);
          }
        node_suspect(node, -1, {{"slow_groups", mine}, {"link_ratio", std::round(r * 1000) / 1000}}, r);
      }
    } else if (all_inter && kinds.size() == 1) {
      d.diagnosis = Diagnosis::inter_node_network;
    } else if (static_cast<std::int64_t>(all_nodes.size()) >= o.cluster_wide_nodes || !all_inter) {
      d.diagnosis = Diagnosis::cluster_wide;
    } else {
      d.diagnosis = Diagnosis::inter_node_network;
    }
  }
  if (d.diagnosis == Diagnosis::none && !d.suspects.empty()) d.diagnosis = Diagnosis::compute;
  double conf = 0;
  std::int64_t n = 0;
  for (const auto& s : d.suspects)
    if (s.reason == "compute") {
      conf += s.confidence;
      ++n;
    }
  if (d.diagnosis != Diagnosis::none && d.diagnosis != Diagnosis::compute) {
    conf += comm_conf;
    ++n;
  }
  d.confidence = n > 0 ? std::round(conf / static_cast<double>(n) * 1000) / 1000 : 0;
  for (auto& s : d.suspects) s.confidence = std::round(s.confidence * 1000) / 1000;
  return d;
}

Analysis analyse(const std::vector<RoundEvidence>& evidence, const Mesh& mesh, const DecideOptions& o) {
  Analysis a;
  const auto known = mesh_groups(mesh);
  std::map<std::int64_t, std::set<CallKey>> used;
  const auto cpus = cpu_per_call(evidence);
  const auto stops = stopped_per_round(evidence);
  for (std::size_t i = 0; i < evidence.size(); ++i) {
    TimingTable table = build_table(evidence[i], known, &used);
    for (const auto& [rank, calls] : table.ranks)
      for (const auto& [key, c] : calls) used[rank].insert(key);
    if (evidence[i].baseline) continue;  // it opens the counters' window; its calls were before it
    table.cpu = cpus[i];
    table.stopped = stops[i];
    a.tables.push_back(std::move(table));
    a.rounds.push_back(analyse_round(a.tables.back(), mesh, o));
  }
  a.decision = decide(a.rounds, a.tables, mesh, o);
  return a;
}

Verdict make_verdict(const std::string& command, const std::string& job, const Decision& d,
                     const std::vector<RoundResult>& rounds, const std::vector<TimingTable>& tables, const Mesh& mesh,
                     const std::string& mesh_source) {
  Verdict v;
  v.command = command;
  v.job = job;
  std::map<std::int64_t, std::string> node_of;
  for (const auto& t : tables)
    for (const auto& [r, n] : t.nodes) node_of[r] = n;

  for (const auto& s : d.suspects) {
    Suspect out;
    out.rank = s.rank;
    out.node = s.node;
    out.reason = s.reason;
    out.evidence = s.evidence;
    out.evidence["confidence"] = s.confidence;
    v.suspects.push_back(std::move(out));
  }
  // Peer groups: per member the median over rounds of compute per call; outliers are the named compute stragglers.
  std::set<std::int64_t> named;
  for (const auto& s : d.suspects)
    if (s.reason == "compute") named.insert(s.rank);
  std::map<std::vector<std::int64_t>, std::map<std::int64_t, std::vector<double>>> peer_values;
  for (const auto& r : rounds)
    for (const auto& p : r.peers)
      for (const auto& rr : p.ranks) peer_values[p.members][rr.rank].push_back(rr.compute_ns);
  constexpr std::size_t k_max_runs = 4096;
  for (const auto& [members, values] : peer_values) {
    if (v.groups.size() >= k_max_runs) break;
    GroupRun g;
    g.kind = std::string(peer_kind_name(mesh.peer_kind()));
    g.members = members;
    g.mode = C3Mode::statistical;
    g.values = nlohmann::json::array();
    for (auto m : members) {
      auto it = values.find(m);
      g.values.push_back(it == values.end() ? nlohmann::json(nullptr) : nlohmann::json(ms(median(it->second))));
      if (named.count(m)) g.outliers.push_back(m);
    }
    g.status = g.outliers.empty() ? C3Status::agree : C3Status::attributed;
    g.reason = g.outliers.empty() ? "no_dispersion" : "strict_minority";
    g.stats = {{"measure", "compute_ms_per_call"}, {"rounds", d.rounds}};
    v.groups.push_back(std::move(g));
  }

  nlohmann::json slow = nlohmann::json::array();
  for (const auto& s : d.slow_groups)
    slow.push_back({{"kind", s.group.kind},
                    {"id", hex_id(s.group.id)},
                    {"members", s.group.members},
                    {"nodes", s.nodes},
                    {"intra_node", s.intra_node},
                    {"link_ratio", std::round(s.ratio * 1000) / 1000},
                    {"link_ms_per_call", ms(s.link_ns)},
                    {"flagged_rounds", s.flagged_rounds}});
  // Every compared process group's median link time over rounds (up to a cap).
  nlohmann::json groups = nlohmann::json::array();
  if (!tables.empty()) {
    std::map<std::size_t, std::vector<const GroupRound*>> per;
    for (const auto& r : rounds)
      for (const auto& g : r.groups) per[g.group].push_back(&g);
    for (const auto& [gi, list] : per) {
      if (groups.size() >= k_max_runs || gi >= tables.back().groups.size()) break;
      std::vector<double> l, ra;
      std::int64_t slow_n = 0;
      for (auto* g : list) {
        l.push_back(g->link_ns);
        ra.push_back(g->ratio);
        slow_n += g->slow ? 1 : 0;
      }
      const auto& gi_ = tables.back().groups[gi];
      groups.push_back({{"kind", gi_.kind},
                        {"id", hex_id(gi_.id)},
                        {"members", gi_.members},
                        {"link_ms_per_call", ms(median(l))},
                        {"link_ratio", std::round(median(ra) * 1000) / 1000},
                        {"slow_rounds", slow_n}});
    }
  }
  nlohmann::json per_round = nlohmann::json::array();
  for (const auto& r : rounds) {
    std::int64_t flagged = 0, slow_n = 0, contended = 0;
    std::vector<double> share;
    std::vector<std::int64_t> flagged_list;
    for (const auto& p : r.peers) {
      for (const auto& rr : p.ranks)
        if (rr.flagged) {
          ++flagged;
          flagged_list.push_back(rr.rank);
        }
      contended += p.contended ? 1 : 0;
      share.push_back(p.cpu_wait_share);
    }
    for (const auto& g : r.groups) slow_n += g.slow ? 1 : 0;
    per_round.push_back({{"calls", r.calls},
                         {"has_data", r.has_data},
                         {"flagged_ranks", flagged},
                         {"flagged", flagged_list},
                         {"slow_groups", slow_n},
                         {"contended_peer_groups", contended},
                         {"cpu_wait_share", std::round(median(share) * 1000) / 1000}});
  }
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& s : d.suspects)
    findings.push_back({{"kind", s.reason == "compute" ? "compute_straggler" : "slow_communication"},
                        {"rank", s.rank >= 0 ? nlohmann::json(s.rank) : nlohmann::json(nullptr)},
                        {"node", s.node},
                        {"ratio", std::round(s.ratio * 1000) / 1000}});
  if (d.diagnosis == Diagnosis::inter_node_network || d.diagnosis == Diagnosis::cluster_wide)
    findings.push_back({{"kind", std::string(diagnosis_name(d.diagnosis))}, {"slow_groups", slow.size()}});

  v.details = {{"straggler",
                {{"diagnosis", std::string(diagnosis_name(d.diagnosis))},
                 {"confidence", d.confidence},
                 {"rounds", d.rounds},
                 {"rounds_with_data", d.rounds_with_data},
                 {"mesh", mesh.spec().empty() ? fmt::format("dp={}", mesh.world_size()) : mesh.spec()},
                 {"mesh_source", mesh_source},
                 {"slow_groups", slow},
                 {"groups", groups},
                 {"per_round", per_round},
                 {"noise",
                  {{"unconfirmed_ranks", d.unconfirmed},
                   {"cpu_wait_share", d.noise_cpu_wait_share < 0
                                          ? nlohmann::json(nullptr)
                                          : nlohmann::json(std::round(d.noise_cpu_wait_share * 1000) / 1000)},
                   {"unnamed_ratio", d.noise_ratio <= 0 ? nlohmann::json(nullptr)
                                                        : nlohmann::json(std::round(d.noise_ratio * 1000) / 1000)},
                   {"oversubscribed", d.oversubscribed}}},
                 {"notes", d.notes}}},
               {"findings", findings}};

  // Status, scope, summary, action.
  std::vector<std::string> named_text;
  for (const auto& s : d.suspects)
    named_text.push_back(s.rank >= 0 ? fmt::format("rank {} ({}, {:.2f}x{})", s.rank, s.reason, s.ratio,
                                                   s.node.empty() ? "" : ", node " + s.node)
                                     : fmt::format("node {} ({}, {:.2f}x)", s.node, s.reason, s.ratio));
  if (!d.enough_data) {
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::job;
    v.summary = fmt::format("not enough timing evidence: {}", fmt::join(d.notes, "; "));
    v.action = "collect_more_rounds";
  } else if (d.diagnosis == Diagnosis::cluster_wide) {
    // Compute stragglers stay named; the communication side has no single explanation.
    v.status = v.suspects.empty() ? VerdictStatus::inconclusive : VerdictStatus::attributed;
    v.scope = v.suspects.empty() ? Scope::job : Scope::rank;
    v.summary = fmt::format(
        "communication is slow in {} group(s) on many nodes with no common node: cluster-wide, no single explanation{}",
        d.slow_groups.size(), named_text.empty() ? "" : fmt::format("; straggler(s): {}", fmt::join(named_text, "; ")));
    v.action = "escalate_cluster_wide_slowdown";
  } else if (d.diagnosis == Diagnosis::inter_node_network) {
    v.status = VerdictStatus::attributed;
    v.scope = Scope::group;
    for (const auto& s : d.slow_groups) {
      Suspect out;
      out.rank = -1;
      out.reason = "communication";
      out.evidence = {{"group", s.group.kind},
                      {"id", hex_id(s.group.id)},
                      {"members", s.group.members},
                      {"nodes", s.nodes},
                      {"link_ratio", std::round(s.ratio * 1000) / 1000},
                      {"confidence", d.confidence}};
      v.suspects.push_back(std::move(out));
    }
    v.summary = fmt::format("only inter-node groups are slow ({}): the inter-node network", d.slow_groups.size());
    v.action = "run_fabric_diagnostics";
  } else if (!d.suspects.empty()) {
    v.status = VerdictStatus::attributed;
    bool any_node = false;
    for (const auto& s : d.suspects) any_node |= s.rank < 0;
    v.scope = any_node ? Scope::node : Scope::rank;
    v.summary = fmt::format("straggler{}: {}", d.suspects.size() > 1 ? "s" : "", fmt::join(named_text, "; "));
    v.action = d.diagnosis == Diagnosis::machine_local     ? "replace_node"
               : d.diagnosis == Diagnosis::intra_node_link ? "check_intra_node_links"
                                                           : "inspect_straggler";
  } else {
    v.status = VerdictStatus::healthy;
    v.scope = Scope::job;
    v.summary = fmt::format(
        "no straggler: compute and communication agree across peers over {} round(s){}{}", d.rounds,
        d.unconfirmed.empty() ? "" : fmt::format("; unconfirmed: rank(s) {} (notes)", fmt::join(d.unconfirmed, ", ")),
        d.oversubscribed ? fmt::format("; the host's CPUs are oversubscribed: a rank slowed by less than "
                                       "{:.2f}x may go unnamed (notes)",
                                       d.noise_ratio)
                         : "");
    v.action = "none";
  }
  (void)node_of;
  return v;
}

}  // namespace scout::straggler
