// The cause of a named compute straggler (decide.hpp cause_of): explains a suspect from its flagged rounds'
// figures; it never names one. Its thresholds (quota_window_share, cause_share, contention_min_ratio,
// more_work_min_relative, more_work_wait_factor) are in thresholds.hpp.
#include <algorithm>
#include <cmath>

#include "lib/straggler/decide.hpp"
#include "lib/straggler/thresholds.hpp"

namespace scout::straggler {

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
         used = 0, proc_used = 0, peer_proc_used = 0, peer_used = 0, off_excess = 0, extra_cpu_cost = 0;
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
    if (cpu_r > 0) {
      peer_used += cpu / cpu_r * n;
      // Its CPU beyond its peers' and the wait that CPU costs at their wait per CPU second.
      extra_cpu_cost += (cpu - cpu / cpu_r) * (1 + h->peer_wait_per_cpu) * n;
    }
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
  // ... and more work than its extra time off a CPU: a rank that slept 2-3x its step used 1.2x its peers' CPU per
  // call beside 16 busy loops (0.10 s more CPU, 2.3 s more off a CPU; seed 619206687), which is not its cause.
  bool late_only = !hits.empty();
  for (const auto* h : hits) late_only &= h->measure == "late";
  const bool more_work = peer_used > 0 && peer_proc_used > 0 && used >= floor * peer_used &&
                         proc_used >= floor * peer_proc_used && used - peer_used >= off_excess;
  c.figures["peers_cpu_s"] = s3(peer_used);
  // Which explains more of its excess, where it did more work and also waited: its busy time beyond its peers' is
  // its extra CPU with the wait that costs at their rate (extra_cpu_cost: more work's), plus its wait beyond its
  // CPU's at their rate (runq - expected_runq). More work also raises a rank's wait per CPU second (above), by up to
  // more_work_wait_factor times its CPU per call's rise over its peers' (more_wait): that much of the wait could be
  // either's and counts for neither. The larger of the rest is the cause: a rank pinned with 10 busy loops used 1.18x
  // its peers' CPU per call (its cache shared with them) and waited 6.47 s against 2.37 s at their rate (CI fresh
  // clone, 873f50c); one with 10 more used 1.26x and waited 6.37 s against 2.60 s (seed 4115: 0.68 s more work's,
  // 1.71 s either's, 2.05 s beyond), where the whole of that middle share as more work's read slow_compute.
  const double more_wait =
      peer_used > 0 ? o.more_work_wait_factor * std::max(0.0, used / peer_used - 1) * expected_runq : 0;
  const double work_share = std::max(0.0, extra_cpu_cost);
  const double wait_share = runq - expected_runq - more_wait;
  c.figures["more_work_s"] = s3(work_share);
  c.figures["wait_beyond_work_s"] = s3(wait_share);
  if (cgroup && throttled >= o.quota_window_share * window && throttled - peer_throttled >= o.cause_share * excess &&
      throttled > peer_throttled) {
    c.cause = "cpu_quota";
  } else if (more_work && !(waited && wait_share > work_share)) {
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
  } else if (late_only && peer_used > 0 && used < floor * peer_used) {
    // Named as late alone (its peers waited for it) with no more CPU and no longer wait for one: where a peer's
    // run-queue wait accrues inside its collectives (torch 2.x on a contended host) its time off a CPU reads near
    // 0 and off_excess misses the stall, and its compute per call can read no longer than theirs (their CPU wait
    // counts in it). What is left of its time is off a CPU (seed 1973658015: a rank sleeping 1.54x its step,
    // 1.02x its peers' CPU per call, off_cpu_excess 0.19 s of 0.43 s; campaign seed 17204, 1.35x, world 8 at load
    // 14.5: 0.95x their CPU, its compute excess 0).
    c.cause = "blocked";
    c.figures["why"] = "its peers waited for it while it used no more CPU and waited no longer for one";
  } else {
    c.cause = "slow_compute";
  }
  c.figures["off_cpu_excess_s"] = s3(off_excess);
  return c;
}

void memory_causes(Decision& d, const std::vector<RoundResult>& rounds) {
  namespace t = thresholds;
  for (auto& s : d.suspects) {
    const std::string cause = s.evidence.value("cause", "");
    if (s.rank < 0 || s.reason != "compute" || (cause != "slow_compute" && cause != "blocked" && cause != "unknown"))
      continue;
    // Its figures per call over every round that compared it, each weighted by its calls there; its peers' the
    // median of the others in the same rounds.
    double calls = 0, read = 0, peer_read = 0, faults = 0, peer_faults = 0, stall = 0;
    std::int64_t hits = 0, counted = 0;
    bool stall_known = false;
    for (const auto& r : rounds)
      for (const auto& p : r.peers) {
        const auto own = std::find_if(p.ranks.begin(), p.ranks.end(), [&](const auto& x) { return x.rank == s.rank; });
        if (own == p.ranks.end() || own->window.calls <= 0 || own->window.read_bytes < 0 || own->window.majflt < 0)
          continue;
        std::vector<double> others_read, others_faults;
        for (const auto& x : p.ranks)
          if (x.rank != s.rank && x.window.calls > 0 && x.window.read_bytes >= 0 && x.window.majflt >= 0) {
            others_read.push_back(x.window.read_bytes);
            others_faults.push_back(x.window.majflt);
          }
        if (others_read.empty()) continue;
        const auto n = static_cast<double>(own->window.calls);
        calls += n;
        read += own->window.read_bytes * n;
        faults += own->window.majflt * n;
        peer_read += median(others_read) * n;
        peer_faults += median(others_faults) * n;
        if (own->window.mem_limit_hits >= 0) hits += own->window.mem_limit_hits;
        if (own->window.mem_stall_ns >= 0) {
          stall += own->window.mem_stall_ns * n;
          stall_known = true;
        }
        ++counted;
        break;  // one peer group a round is enough: the rank's own counters are the same in each
      }
    if (counted == 0 || calls <= 0) continue;
    read /= calls;
    peer_read /= calls;
    faults /= calls;
    peer_faults /= calls;
    const bool reads = read >= t::storage_read_min_bytes.value && read >= t::storage_read_ratio.value * peer_read;
    const bool faulted = faults >= t::majflt_min_per_call.value && faults >= t::storage_read_ratio.value * peer_faults;
    auto& f = s.evidence["cause_figures"];
    f["read_mb_per_call"] = std::round(read / 1048576.0 * 1000) / 1000;
    f["peers_read_mb_per_call"] = std::round(peer_read / 1048576.0 * 1000) / 1000;
    f["majflt_per_call"] = std::round(faults * 10) / 10;
    f["peers_majflt_per_call"] = std::round(peer_faults * 10) / 10;
    f["memory_limit_hits"] = hits;
    f["memory_stall_s"] = stall_known ? nlohmann::json(std::round(stall / 1e6) / 1e3) : nlohmann::json(nullptr);
    if (!reads && !faulted) continue;
    s.evidence["cause"] = hits > 0 || stall > 0 ? "memory_pressure" : "storage_reads";
  }
}

}  // namespace scout::straggler
