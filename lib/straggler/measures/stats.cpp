// Stage 1 of a round (measures.hpp): one peer group's figures per rank, the statistics every measure reads.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <span>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "lib/common/hex.hpp"
#include "lib/common/prefetch.hpp"
#include "lib/straggler/measures/measures.hpp"
#include "lib/straggler/thresholds.hpp"

namespace scout::straggler::detail {

CallsOf::CallsOf(const CallsByRank& calls) : m_calls(&calls) {
  if (!calls.dense()) return;
  m_dense.assign(static_cast<std::size_t>(calls.back_rank()) + 1, k_none);
  std::uint32_t i = 0;
  for (auto it = calls.begin(); it != calls.end(); ++it) m_dense[static_cast<std::size_t>((*it).first)] = i++;
}

std::optional<RankCalls> CallsOf::find(std::int64_t r) const {
  if (m_dense.empty()) {
    const auto it = m_calls->find(r);
    if (it == m_calls->end()) return std::nullopt;
    return m_calls->calls_of(it.index());
  }
  if (r < 0 || static_cast<std::size_t>(r) >= m_dense.size() || m_dense[static_cast<std::size_t>(r)] == k_none)
    return std::nullopt;
  return m_calls->calls_of(m_dense[static_cast<std::size_t>(r)]);
}

KeySets::KeySets(const CallsByRank& ranks) {
  const bool dense = ranks.dense();
  if (dense) m_dense.assign(static_cast<std::size_t>(ranks.back_rank()) + 1, k_none);
  std::unordered_multimap<std::uint64_t, std::uint32_t> by_hash;  // a set's keys hashed -> the set
  std::vector<CallKey> keys;
  std::uint32_t last = k_none;  // the previous rank's set: most ranks make the same calls as the rank before
  auto hint = m_sparse.end();
  const auto same_as = [](const RankCalls& calls, const std::vector<CallKey>& keys) {
    return std::equal(calls.keys(), calls.keys() + calls.size(), keys.begin(), keys.end());
  };
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::int64_t rank = ranks.rank_of(i);
    // The previous rank's set where the table noted the same keys (not read again, cold), or where the calls
    // themselves are its keys: no copy of the keys nor hash where it is theirs.
    std::uint32_t set = k_none;
    if (last != k_none && i > 0 && ranks.same_keys_as_before(i)) set = last;
    const RankCalls calls = set == k_none ? ranks.calls_of(i) : RankCalls{};
    if (set == k_none && last != k_none && same_as(calls, m_sets[last])) set = last;
    if (set == k_none) {
      keys.clear();
      std::uint64_t h = 0x9E3779B97F4A7C15ULL;
      for (const CallKey& key : std::span(calls.keys(), calls.size())) {
        keys.push_back(key);
        h = (h ^ (key.seq * 0xFF51AFD7ED558CCDULL + key.kind)) * 0xC4CEB9FE1A85EC53ULL;
      }
      for (auto [it, end] = by_hash.equal_range(h); it != end && set == k_none; ++it)
        if (m_sets[it->second] == keys) set = it->second;
      if (set == k_none) {
        set = static_cast<std::uint32_t>(m_sets.size());
        m_sets.push_back(keys);
        by_hash.emplace(h, set);
      }
    }
    last = set;
    if (dense)
      m_dense[static_cast<std::size_t>(rank)] = set;
    else
      hint = std::next(m_sparse.insert_or_assign(hint, rank, set));  // (ranks in ascending order: at the end)
  }
}

std::uint32_t KeySets::of(std::int64_t rank) const {
  if (m_dense.empty()) {
    auto it = m_sparse.find(rank);
    return it == m_sparse.end() ? k_none : it->second;
  }
  return rank >= 0 && static_cast<std::size_t>(rank) < m_dense.size() ? m_dense[static_cast<std::size_t>(rank)]
                                                                      : k_none;
}

std::vector<CallKey> KeySets::common(std::vector<std::uint32_t> sets) const {
  std::sort(sets.begin(), sets.end());
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  if (sets.empty() || sets.back() == k_none) return {};
  std::vector<CallKey> out = m_sets[sets[0]];
  // Each other set walked once beside the keys kept so far (both in key order).
  for (std::size_t i = 1; i < sets.size() && !out.empty(); ++i) {
    const auto& other = m_sets[sets[i]];
    std::size_t kept = 0;
    auto key_of = other.begin();
    for (const auto& key : out) {
      while (key_of != other.end() && *key_of < key) ++key_of;
      if (key_of != other.end() && *key_of == key) out[kept++] = key;
    }
    out.resize(kept);
  }
  return out;
}

void KeySets::places(std::uint32_t set, const std::vector<CallKey>& keys, std::vector<std::size_t>& out) const {
  const auto& all = m_sets[set];
  out.clear();
  out.reserve(keys.size());
  std::size_t p = 0;
  for (const auto& key : keys) {
    while (p < all.size() && all[p] < key) ++p;
    if (p == all.size() || all[p] != key) throw std::out_of_range("KeySets::places: a key not in the set");
    out.push_back(p);
  }
}

void CallsAtKeys::operator()(std::uint32_t set, const RankCalls& calls, const CallTiming** out) {
  if (set != m_set) {
    m_sets.places(set, m_keys, m_places);
    m_set = set;
  }
  const CallTiming* first = calls.timings();
  for (auto p : m_places) *out++ = first + p;
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

namespace {

// How many members ahead peer_stats asks for a member's calls (prefetch_range): a member's run is ~2 KB read cold at
// 100k ranks, its peers' runs far apart (issue 40).
constexpr std::size_t k_prefetch_ahead = 2;

// thresholds::min_step_blocks and step_pattern_match as the integers the step period counts with.
constexpr std::size_t k_min_blocks = static_cast<std::size_t>(thresholds::min_step_blocks.value);
constexpr std::size_t k_match_tenths = static_cast<std::size_t>(10 * thresholds::step_pattern_match.value + 0.5);
static_assert(k_min_blocks == 3 && k_match_tenths == 9);

// The number of calls in one step of the program: the smallest period P (at most a third of the calls) with
// which the calls' pattern repeats (the same group kind, op and element count as the call P before it, for at
// least step_pattern_match of the calls); 0 when none does. `keys` and `calls` (the calls at them) are in the
// program's order.
std::size_t step_period(const std::vector<CallKey>& keys, const std::vector<const CallTiming*>& calls) {
  const std::size_t n = keys.size();
  for (std::size_t p = 1; k_min_blocks * p <= n; ++p) {
    std::size_t same = 0;
    for (std::size_t i = p; i < n; ++i) {
      const auto& a = *calls[i];
      const auto& b = *calls[i - p];
      same += keys[i].kind == keys[i - p].kind && a.type == b.type && a.count == b.count ? 1 : 0;
    }
    if (10 * same >= k_match_tenths * (n - p)) return p;
  }
  return 0;
}

// The group's figures as each member sees the other members' (PeerStats::others_*), from its per-member figures.
void others_of(PeerStats& s, const DecideOptions& o) {
  const std::size_t n = s.present.size();
  std::vector<double> step(n);
  for (std::size_t i = 0; i < n; ++i) step[i] = s.compute[i] + s.wait[i];
  s.others_wait = LeaveOneOut(s.wait);
  s.others_compute = LeaveOneOut(s.compute);
  s.others_step = LeaveOneOut(std::move(step));
  s.others_relative = LeaveOneOut(s.relative);
  s.others_cpu_ratio = LeaveOneOut(s.cpu_ratio);
  s.others_main_ratio = LeaveOneOut(s.main_ratio);
  s.others_off_ratio = LeaveOneOut(s.off_ratio);
  if (s.counted) {
    std::vector<double> runq(n), per_cpu(n, 0.0), per_main(n, 0.0), throttled(n);
    std::vector<bool> used(n, false), main_used(n, false), throttle(n, false);
    s.throttle_known = true;
    for (std::size_t i = 0; i < n; ++i) {
      const auto& pc = s.counters(i);
      runq[i] = pc.runq_ns;
      const double u = pc.main_cpu_ns >= 0 ? pc.main_cpu_ns : pc.cpu_ns;
      used[i] = u > 0;
      if (used[i]) per_cpu[i] = pc.runq_ns / u;
      main_used[i] = pc.main_cpu_ns > 0;
      if (main_used[i]) per_main[i] = pc.runq_ns / pc.main_cpu_ns;
      throttle[i] = pc.throttled_ns >= 0;
      throttled[i] = pc.throttled_ns;
      s.throttle_known = s.throttle_known && throttle[i];
    }
    s.others_runq = LeaveOneOut(std::move(runq));
    s.others_wait_per_cpu = LeaveOneOut(std::move(per_cpu), used);
    if (s.main_counted) s.others_runq_per_main = LeaveOneOut(std::move(per_main), main_used);
    s.others_throttled = LeaveOneOut(std::move(throttled), throttle);
  }
  std::vector<double> share(n, 0.0);
  std::vector<bool> sampled(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const StoppedWindow* st = s.stopped_of[i];
    sampled[i] = st && st->samples >= o.stopped_min_samples;
    if (sampled[i]) share[i] = st->share();
  }
  s.others_stopped_share = LeaveOneOut(std::move(share), sampled);
}

}  // namespace

bool PeerStats::stands_out(const LeaveOneOut& v, std::size_t i, double factor) const {
  const double lo = v.min_without(i, 1e300), hi = v.max_without(i, -1e300);
  const double effect = v.value(i) - 1.0;
  return effect >= min_relative && effect >= factor * (hi >= lo ? hi - lo : 0.0);
}

std::optional<PeerStats> peer_stats(const TimingTable& t, const std::vector<std::int64_t>& group,
                                    const DecideOptions& o, const RankIndex& ix, PeerScratch& scratch) {
  PeerStats s;
  s.table = &t;
  std::vector<std::int64_t>& present = s.present;
  std::vector<RankCalls> member_calls;     // per member in `present`, its calls
  std::vector<std::uint32_t> member_sets;  // ... and its key set
  for (auto r : group) {
    const auto calls = ix.calls.find(r);
    if (!calls || calls->empty()) continue;
    present.push_back(r);
    member_calls.push_back(*calls);
    member_sets.push_back(ix.key_sets.of(r));
  }
  // Three or more peers: each rank against the group's median. Two (a two-rank job, the replicas of a
  // dp=2 x tp mesh): no strict minority, but the asymmetry of a synchronous pair still tells which one is
  // slow (it computes longer and its partner waits for it): each rank against the other, with the larger
  // pair_min_relative (options). One: nothing to compare.
  if (present.size() < 2) return std::nullopt;
  const bool pair = s.pair = present.size() == 2;
  s.min_relative = pair ? std::max(o.min_relative, o.pair_min_relative) : o.min_relative;
  auto keys = ix.key_sets.common(member_sets);
  if (static_cast<std::int64_t>(keys.size()) < o.min_calls) return std::nullopt;
  s.cpu_of.reserve(present.size());
  s.stopped_of.reserve(present.size());
  for (auto r : present) {
    s.cpu_of.push_back(ix.cpu.find(r));
    s.stopped_of.push_back(ix.stopped.find(r));
  }
  s.calls = keys.size();
  // Per member, its calls at `keys` (looked up once: the loops below read them per rank and call), one row each of
  // one array (an array per member, 100k of them per round, was malloc's).
  const std::size_t n = present.size();
  std::vector<const CallTiming*>& at_rows = scratch.at_rows;
  at_rows.resize(n * keys.size());  // (every row written below: kept values are overwritten)
  const auto at = [&](std::size_t i) { return at_rows.data() + i * keys.size(); };
  CallsAtKeys calls_at(ix.key_sets, keys);
  // Who waits for whom is told by the calls whose wait is exact on every peer: a wait that ends when the
  // trainer's wait() returns (CallTiming::wait_exact) holds whatever the rank did before calling it. With
  // no such call, every rank's wait is 0 and no time measure flags anyone (the stopped samples still do).
  std::vector<char> exact(keys.size(), 1);
  // Each member's calls read once, here, as they are found: its compute and wait at each key into one row each (the
  // loops below read these rows; read again from the calls, three times, they were out of the cache each time at
  // 100k ranks: issue 40).
  const std::size_t nk = keys.size();
  std::vector<double>& compute_at = scratch.compute_at;
  std::vector<double>& wait_at = scratch.wait_at;
  std::vector<double>& by_call = scratch.by_call;  // row k: every member's compute at call k
  compute_at.resize(n * nk);
  wait_at.resize(n * nk);
  by_call.resize(nk * n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i + k_prefetch_ahead < n) {
      const RankCalls& next = member_calls[i + k_prefetch_ahead];
      prefetch_range(next.timings(), next.timings() + next.size());
    }
    calls_at(member_sets[i], member_calls[i], at_rows.data() + i * nk);
    for (std::size_t k = 0; k < nk; ++k) {
      const CallTiming& call = *at(i)[k];
      compute_at[i * nk + k] = by_call[k * n + i] = static_cast<double>(call.compute_ns);
      wait_at[i * nk + k] = static_cast<double>(call.wait_ns);
      exact[k] = exact[k] && call.wait_exact;
    }
  }
  // Per call, each rank's compute relative to its peers' median for that call: what the whole machine does
  // at that moment cancels out (every rank slowed alike is no straggler). The calls where the step's
  // computation happens (median compute at least busy_call_share of the largest) carry the signal; the median
  // over them drops a loaded host's descheduling spikes. (A summed excess, tried to catch CPU taken from
  // outside in bursts, was as large on clean runs at load 8-17 on 2 CPUs as on 1.6x stragglers.)
  // (The members' compute per call gathered member by member, each member's calls read in order, into one row per
  // call, and each row's median taken in place: gathered call by call, one member's call after another's, with a
  // fresh array per call, this was a third of peer_stats at 100k ranks, most of it cache misses.)
  std::vector<double> call_median(keys.size());
  double largest = 0;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    call_median[k] = median_in_place(by_call.data() + k * n, by_call.data() + (k + 1) * n);
    largest = std::max(largest, call_median[k]);
  }
  // On a host with more runnable threads than CPUs every rank's compute time includes time its main
  // thread waited for a CPU, unequally: measured with 4 ranks on 2 CPUs, 0.47-0.62 s of every 2 s, and a
  // clean rank 1.19x (once 1.71x after taking the wait out) its peers' compute, while a 1.3x straggler's
  // showed as 1.13x. Where the scheduler counters show such a wait for the group (at least
  // `contended_share` of compute), time says little, and the CPU each rank used per call decides.
  bool counted = true;
  for (const auto* c : s.cpu_of) counted &= c != nullptr;
  s.counted = counted;
  const auto exact_calls = static_cast<std::size_t>(std::count(exact.begin(), exact.end(), 1));
  // Per step, too: a rank whose extra time falls in one gap of a step of several calls (a slow data loader, a
  // host-side optimizer step) computes longer at one call in P, and the per-call median misses it (measured, a
  // two-rank job whose rank 0 burned 0.42x its step's CPU after the optimizer step: 1.44x its partner's mean
  // compute and its partner waiting 6.4 ms per call longer, per-call median 1.00x; 8 of 9 runs unnamed). In
  // the program's order, blocks of whole steps (P calls, P the period of the call pattern): each rank's compute
  // summed over a block against its reference's, the median over at least min_step_blocks blocks (a descheduling
  // spike falls in one). Where the round holds that many whole steps that is the time measure's ratio, else the
  // per-call median: per call, a stall's one call in P is either dropped (1.00x above) or, where the stall dwarfs
  // the step's other calls and only its calls count as busy, all that counts (a rank sleeping 1.85x its step:
  // 72x). Over the recorded corpus both name the same ranks; the step's ratio is the factor within 0.89-1.23x.
  // On a contended host the CPU measures ask for a time excess the same way: a torch 2.x rank burning 0.9-1.8x
  // its step's CPU in one gap (2x its peers' CPU per call, its peers waiting 20 ms per call longer) computed
  // 0.94-1.01x its peers' time per call and 1.0x their mean, and went unnamed with the per-call median there
  // (3 of 4 runs, seeds 20358201-203).
  std::vector<std::size_t> order_at(keys.size());  // the place in `keys` of each call in the program's order
  for (std::size_t k = 0; k < keys.size(); ++k) order_at[k] = k;
  std::sort(order_at.begin(), order_at.end(),
            [&](std::size_t a, std::size_t b) { return at(0)[a]->op_seq < at(0)[b]->op_seq; });
  std::vector<CallKey> order(keys.size());
  std::vector<const CallTiming*> order_calls(keys.size());  // the first member's calls in that order
  for (std::size_t k = 0; k < keys.size(); ++k) {
    order[k] = keys[order_at[k]];
    order_calls[k] = at(0)[order_at[k]];
  }
  const std::size_t period = step_period(order, order_calls);
  std::vector<double> shares;
  std::vector<double> rel, blocks;  // per member, reused
  auto &compute = s.compute, &wait = s.wait, &relative = s.relative, &cpu = s.cpu;
  for (std::size_t ri = 0; ri < present.size(); ++ri) {
    const auto r = present[ri];
    double c = 0, w = 0;
    const double* own = compute_at.data() + ri * nk;
    const double* waits = wait_at.data() + ri * nk;
    const double* partner = compute_at.data() + (present[0] == r ? 1 : 0) * nk;  // a pair's other rank
    for (std::size_t k = 0; k < nk; ++k) {
      c += own[k];
      if (exact[k]) w += waits[k];
    }
    compute.push_back(c / static_cast<double>(keys.size()));
    wait.push_back(exact_calls > 0 ? w / static_cast<double>(exact_calls) : 0.0);
    // The step's ratio where the round holds enough whole steps, else the per-call median (taken only then: it was
    // taken for every member and then replaced, issue 40).
    blocks.clear();
    if (period > 0 && order.size() / period >= k_min_blocks) {
      for (std::size_t start = 0; start + period <= order.size(); start += period) {
        double mine = 0, ref = 0;
        for (std::size_t k = start; k < start + period; ++k) {
          const std::size_t at_k = order_at[k];
          mine += own[at_k];
          ref += pair ? partner[at_k] : call_median[at_k];
        }
        if (ref > 0) blocks.push_back(mine / ref);
      }
    }
    if (blocks.size() >= k_min_blocks) {
      relative.push_back(median_in_place(blocks.data(), blocks.data() + blocks.size()));
    } else {
      rel.clear();
      for (std::size_t k = 0; k < nk; ++k)
        if (largest > 0 && call_median[k] >= thresholds::busy_call_share.value * largest) {
          const double ref = pair ? partner[k] : call_median[k];
          if (ref > 0) rel.push_back(own[k] / ref);
        }
      relative.push_back(rel.empty() ? 1.0 : median_in_place(rel.data(), rel.data() + rel.size()));
    }
    if (counted) {
      cpu.push_back(s.counters(ri).cpu_ns);
      shares.push_back(compute.back() > 0 ? s.counters(ri).runq_ns / compute.back() : 0.0);
    }
  }
  // Each rank's reference: the group's median of a measure, or in a pair the other rank's value.
  const auto reference = [&](const std::vector<double>& v) {
    std::vector<double> out(v.size(), median(v));
    if (pair && v.size() == 2) out = {v[1], v[0]};
    return out;
  };
  s.cpu_ratio.assign(present.size(), 1.0);
  s.ref_cpu.assign(present.size(), 0.0);
  if (counted) {
    s.ref_cpu = reference(cpu);
    for (std::size_t i = 0; i < present.size(); ++i) s.cpu_ratio[i] = s.ref_cpu[i] > 0 ? cpu[i] / s.ref_cpu[i] : 1.0;
    s.cpu_wait_share = median(shares);
    s.contended = s.cpu_wait_share >= o.contended_share;
  }
  s.ref_c = reference(compute);
  // Time off a CPU without waiting for one, per call: compute less the main thread's CPU and its wait
  // for a CPU. A rank stopped from outside (SIGSTOP duty cycle, a frozen cgroup) spends its stolen time
  // there; its peers do not. As a share of the peers' median compute, 1 + (off - median off) / median compute.
  // The main thread's CPU per call is a second view of the work: the work of a rank that does more
  // shows in both (measured: a 1.36-2.2x straggler at 1.1-2.0x in each); another thread's burst
  // (a store, a communication thread) only in the process's.
  bool main_counted = counted;
  if (counted)
    for (std::size_t i = 0; i < present.size(); ++i) main_counted &= s.counters(i).main_cpu_ns >= 0;
  s.main_counted = main_counted;
  s.ref_main_cpu.assign(present.size(), 0.0);
  if (main_counted) {
    std::vector<double> mc;
    for (std::size_t i = 0; i < present.size(); ++i) mc.push_back(s.counters(i).main_cpu_ns);
    s.ref_main_cpu = reference(mc);
  }
  s.off_ratio.assign(present.size(), 1.0);
  s.main_ratio.assign(present.size(), 1.0);
  if (main_counted) {
    // Never below 0: compute time (the ring's calls) less CPU and CPU wait (the counters over the calls between
    // reads) is two measurements' difference, and a partner's negative value is their noise, not time it
    // spent on a CPU beyond its compute (clean dp=2 x tp=2 seed 20264601, load 9.9: rank 3 off 0.25 ms per call,
    // its partner -0.95 ms, named by off_cpu at 1.20x in 2 of 3 rounds).
    std::vector<double> off;
    for (std::size_t i = 0; i < present.size(); ++i)
      off.push_back(std::max(0.0, compute[i] - s.counters(i).main_cpu_ns - s.counters(i).runq_ns));
    const std::vector<double> ref_off = reference(off);
    for (std::size_t i = 0; i < present.size(); ++i) {
      if (s.ref_c[i] > 0) s.off_ratio[i] = 1 + (off[i] - ref_off[i]) / s.ref_c[i];
      s.main_ratio[i] = s.ref_main_cpu[i] > 0 ? s.counters(i).main_cpu_ns / s.ref_main_cpu[i] : 1.0;
    }
  }
  others_of(s, o);
  StatisticalOptions so;
  so.kappa = o.kappa;
  so.min_relative = s.min_relative;
  so.min_absolute = 0;
  so.direction = Direction::high;
  s.c3 = c3_statistical(relative, so);
  return s;
}

RankRound rank_figures(const PeerStats& s, std::size_t i) {
  RankRound rr;
  rr.rank = s.present[i];
  rr.compute_ns = s.compute[i];
  rr.wait_ns = s.wait[i];
  rr.score = i < s.c3.scores.size() ? s.c3.scores[i] : 0;
  rr.compute_ratio = s.relative[i];
  if (s.counted) {
    rr.cpu_ns = s.cpu[i];
    rr.runq_ns = s.counters(i).runq_ns;
    rr.cpu_ratio = s.cpu_ratio[i];
    rr.main_cpu_ratio = s.main_ratio[i];
  }
  return rr;
}

}  // namespace scout::straggler::detail
