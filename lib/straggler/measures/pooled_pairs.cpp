// Stage 8 of the decision (measures.hpp): the measure "pooled_pair" and the noise check of pairs. In a contended
// peer group of two there is no third peer to measure noise by: its rounds are pooled (pooled_pairs), and where the
// mesh has other pairs, their pooled spread is the noise a pair's cpu suspect must stand out of (pair_noise_check).
// Thresholds: contended_cpu_min_relative, pair_cpu_peers_wait_share, pair_quiet_factor, absorbed_spread_factor,
// spread_factor (thresholds.hpp).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "lib/straggler/measures/measures.hpp"

namespace scout::straggler::detail {

namespace {

// The median spread (the two ranks' pooled CPU ratios apart) of the pairs other than `own`, leaving out pairs with a
// rank in `skip`: how far CPU per unit of work drifts in a pair of this mesh (pooled_pairs, pair_noise_check). Empty
// without such a pair.
std::optional<double> other_pairs_spread(const PairRatios& pair_ratios, const std::vector<std::int64_t>& own,
                                         const std::set<std::int64_t>& skip) {
  std::vector<double> spreads;
  for (const auto& [members, r] : pair_ratios)
    if (members != own && r.size() == 2 && !skip.count(members[0]) && !skip.count(members[1]))
      spreads.push_back(std::abs(r[0] - r[1]));
  if (spreads.empty()) return std::nullopt;
  return median(spreads);
}

// The median, over the rounds and the contended pairs other than `own` (pairs with a rank in `skip` left out), of
// the two ranks' CPU ratios apart in one round (each rank's the smaller of process and main thread, against its
// partner): how far a pair drifts within a round, which pooling hides where the heavier rank changes from round to
// round. 0 without such a round.
double other_pairs_round_spread(const std::vector<RoundResult>& rounds, const PairRatios& pair_ratios,
                                const std::vector<std::int64_t>& own, const std::set<std::int64_t>& skip) {
  std::vector<double> spreads;
  for (const auto& r : rounds)
    for (const auto& p : r.peers) {
      if (p.members == own || p.members.size() != 2 || p.ranks.size() != 2 || !p.contended ||
          !pair_ratios.count(p.members) || skip.count(p.members[0]) || skip.count(p.members[1]))
        continue;
      const double a = std::min(p.ranks[0].cpu_ratio, p.ranks[0].main_cpu_ratio);
      const double b = std::min(p.ranks[1].cpu_ratio, p.ranks[1].main_cpu_ratio);
      if (a > 0 && b > 0) spreads.push_back(std::abs(a - b));
    }
  return spreads.empty() ? 0.0 : median(spreads);
}

}  // namespace

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
                                     PairRatios& pair_ratios) {
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

// "pooled_pair" names a rank flagged on the pooled rounds where they are a strict majority of the rounds and no one
// of its pair is named already (a pair has one straggler at most); its evidence's measure is "cpu", with
// pooled_rounds.
void name_pooled(Decision& d, const std::vector<PooledPair>& pooled_pairs, const NodeOf& node_of,
                 const DecideOptions& o) {
  for (const auto& pooled : pooled_pairs) {
    if (2 * static_cast<std::int64_t>(pooled.hits.size()) <= d.rounds) continue;
    bool named = false;  // it, or its partner (a pair has one straggler at most)
    for (const auto& s : d.suspects) named |= s.rank == pooled.rank || s.rank == pooled.partner;
    if (!named) add_compute_suspect(d, node_of, pooled.rank, pooled.hits, "cpu", pooled.ratio, o);
  }
}

// A pair has no third peer to measure its noise by, but a mesh of several pairs (the replicas of a dp=2 x tp
// mesh) has other pairs doing the same work at the same moments: their pooled CPU ratios (`pair_ratios`, each rank's
// over its partner's, from pooled_pairs) show how far CPU per unit of work drifts in a pair that round. A rank of
// a pair named by the cpu measure stays named only where its pooled excess (ratio - 1) is at least spread_factor
// times the median spread of the other pairs (their two ratios' max - min), pairs with a named rank left out (a
// second straggler is no noise). Measured, dp=2 x tp=2 on 2 CPUs at load 7-11: a clean run's rank at 1.25x its
// partner pooled, in all 3 rounds, where the other pair's ranks stood at 1.15x and 0.87x (seed 20266206); 20
// trainer-slowed ranks at 1.26-1.76x, the other pair's at most 1.11x (their excess 4.5-530x its spread/2).
// Pooled spreads hide a heavy rank that moves: the noise is the larger of the pooled median spread and the median
// of the other pairs' spreads in each round (other_pairs_round_spread). Measured, a clean dp=2 x tp=2 job beside a
// build, load 11 on 2 CPUs: rank 0 at 1.31, 1.66 and 1.28x its partner's CPU per call (1.40x pooled), named; the other
// pair's heavy rank was rank 3 in two rounds and rank 1 in the third (0.65, 0.85 and 0.57 apart, 0.32 pooled; seed
// 353869121).
void pair_noise_check(Decision& d, const std::vector<RoundResult>& rounds, const PairRatios& pair_ratios,
                      const DecideOptions& o) {
  std::set<std::int64_t> named;
  for (const auto& s : d.suspects) named.insert(s.rank);
  std::vector<Suspicion> kept;
  for (auto& s : d.suspects) {
    const auto own = std::find_if(pair_ratios.begin(), pair_ratios.end(), [&](const auto& p) {
      return p.second.size() == 2 && std::find(p.first.begin(), p.first.end(), s.rank) != p.first.end();
    });
    auto noise = own == pair_ratios.end() ? std::nullopt : other_pairs_spread(pair_ratios, own->first, named);
    if (noise) noise = std::max(*noise, other_pairs_round_spread(rounds, pair_ratios, own->first, named));
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
        "its mesh (their ranks {:.2f} apart, median, pooled or in a round): not named",
        s.rank, ratio, *noise));
  }
  d.suspects = std::move(kept);
}

// A pair has no third peer, so its noise is measured over time: a rank named by the cpu measure in a contended pair
// stays named only where its CPU per call (the smaller of process and main thread) was at least the cpu measure's
// floor above its partner's in every round taken. A slowed rank's extra work is there in every round; a loaded host's
// uneven share moves from rank to rank and from round to round. Measured, dp=2 x tp=2 clean jobs on 2 CPUs at load
// 6-8: a rank at 0.90, 1.59 and 1.24x its partner's CPU per call (1.23x pooled, seed 365129926) and one at 1.12,
// 1.57 and 1.29x, 1.5x its compute time in two rounds (seed 208788480), both named before; slowed pair ranks at
// 1.38/1.34/1.41x (seed 20282100), 1.30/1.21/1.29x (20268702) and 1.30/1.25/1.28x (20468000) stay named, one at
// 1.41/1.11/1.16x (500614964) no longer is (the verdict notes it).
void pair_persistence_check(Decision& d, const std::vector<RoundResult>& rounds, const DecideOptions& o) {
  const double floor = 1.0 + std::max({o.min_relative, o.pair_min_relative, o.contended_cpu_min_relative});
  std::vector<Suspicion> kept;
  for (auto& s : d.suspects) {
    std::vector<double> ratios;
    bool in_contended_pair = false;
    for (const auto& r : rounds)
      for (const auto& p : r.peers) {
        if (p.members.size() != 2 || std::find(p.members.begin(), p.members.end(), s.rank) == p.members.end()) continue;
        in_contended_pair |= p.contended;
        for (const auto& rr : p.ranks)
          if (rr.rank == s.rank) ratios.push_back(std::min(rr.cpu_ratio, rr.main_cpu_ratio));
      }
    const double least = ratios.empty() ? 0.0 : *std::min_element(ratios.begin(), ratios.end());
    if (!in_contended_pair || s.evidence.value("measure", "") != "cpu" || least >= floor) {
      kept.push_back(std::move(s));
      continue;
    }
    d.notes.push_back(fmt::format(
        "rank {} used {:.2f}x its partner's CPU per call, but only {:.2f}x in its least round: a pair on a loaded host "
        "shares its CPUs unevenly from round to round, so a rank is named only above {:.2f}x in every round (more "
        "rounds, or a quieter host, decide it): not named",
        s.rank, s.ratio, least, floor));
  }
  d.suspects = std::move(kept);
}

// A pair's two ranks compared with each other cannot tell a slow rank from a partner that is fast: a mesh of
// several pairs (dp=2 x tp) can. Each rank's CPU per call pooled over the rounds (weighted by its calls) is compared
// with the other pairs' ranks (see below for a pair with a named rank): a rank named by the cpu measure whose CPU per
// call is at their median's level or above but within half the cpu floor of their highest, while its partner's is
// below their median by more than half the floor, looks like a rank of the mesh: the pair's gap is its partner running
// light, not it running heavy, and it is not named. Measured, dp=2 x tp=2 clean jobs beside builds at load 15-18:
// rank 2 at 1.48, 1.80 and 1.37x its partner's CPU per call (1.52x pooled, twice the other pair's spread), named; its
// partner rank 0 used 8.7-9.8 ms a call in every round, ranks 1, 2 and 3 12-16 ms (seed 55434957); again rank 2 at
// 1.56x pooled, rank 1 at 0.96x its CPU per call, rank 0 at 0.64x (seed 238488398); a heavy rank in each pair named
// at 1.30-1.39x, each at the other's level, their partners at 0.72-0.74x (seeds 900927578, 23329949: with named pairs
// left out of the comparison, neither had another pair to be compared with). Two stragglers of different weight
// (1.6x and 1.25x, decide_test) are each left out of the other's comparison and both stay named. A rank slowed for real
// stands above every other pair's ranks (its partner near them), and a pair whose stage does other work (pp) than the
// other pairs is not at their level: neither is dropped.
void pair_partner_low_check(Decision& d, const std::vector<RoundResult>& rounds, const DecideOptions& o) {
  std::map<std::int64_t, std::vector<std::int64_t>> pair_of;
  std::map<std::int64_t, double> cpu, calls;
  for (const auto& r : rounds)
    for (const auto& p : r.peers) {
      if (p.members.size() != 2 || p.ranks.size() != 2 || !p.contended) continue;
      for (const auto& rr : p.ranks) {
        if (rr.cpu_ns < 0 || rr.window.calls <= 0) continue;
        pair_of[rr.rank] = p.members;
        cpu[rr.rank] += rr.cpu_ns * static_cast<double>(rr.window.calls);
        calls[rr.rank] += static_cast<double>(rr.window.calls);
      }
    }
  std::set<std::int64_t> named;
  for (const auto& s : d.suspects) named.insert(s.rank);
  const double margin = std::max({o.min_relative, o.pair_min_relative, o.contended_cpu_min_relative}) / 2;
  std::vector<Suspicion> kept;
  for (auto& s : d.suspects) {
    const auto own = pair_of.find(s.rank);
    if (own == pair_of.end() || s.evidence.value("measure", "") != "cpu") {
      kept.push_back(std::move(s));
      continue;
    }
    const std::int64_t partner = own->second[0] == s.rank ? own->second[1] : own->second[0];
    std::vector<double> others;
    // The other pairs' ranks. A pair with a named rank is left out (a second straggler is no level to compare
    // with), unless that rank stands at this one's level (within half the floor): then every pair has one heavy
    // rank alike, the two are no strict minority of the mesh's ranks, and each is compared with the other's pair.
    const double own_cpu = cpu[s.rank] / calls[s.rank];
    for (const auto& [rank, members] : pair_of) {
      if (members == own->second) continue;
      bool left_out = false;
      for (auto m : members)
        if (named.count(m) && calls.count(m) && std::abs(cpu[m] / calls[m] / own_cpu - 1) > margin) left_out = true;
      if (!left_out) others.push_back(cpu[rank] / calls[rank]);
    }
    if (others.size() < 2 || !calls.count(partner)) {
      kept.push_back(std::move(s));
      continue;
    }
    const double level = median(others), highest = *std::max_element(others.begin(), others.end());
    const double mine = own_cpu / level, theirs = cpu[partner] / calls[partner] / level;
    // At the other pairs' level or above it, but no more than half the floor above their highest rank, while its
    // partner is below their level by more than that.
    if (level <= 0 || mine < 1 - margin || own_cpu > (1 + margin) * highest || theirs >= 1 - margin) {
      kept.push_back(std::move(s));
      continue;
    }
    d.notes.push_back(
        fmt::format("rank {} used {:.2f}x its partner's CPU per call, but {:.2f}x the other pairs' ranks (median; "
                    "{:.2f}x their highest) while its partner used {:.2f}x: its partner runs light, it does not run "
                    "heavy: not named",
                    s.rank, s.ratio, mine, own_cpu / highest, theirs));
  }
  d.suspects = std::move(kept);
}

}  // namespace scout::straggler::detail
