// The straggler decision's stages and named measures (internal to lib/straggler; the entry points are in
// decide.hpp). decide.cpp runs them in this order; every threshold they read is in thresholds.hpp (fixed ones) or
// DecideOptions (tunable ones, defaults from the same table).
//
// Per round (analyse_round), per peer group:
//   1. stats        (stats.cpp)          the group's figures per rank: compute, wait, the time ratio (per call or
//                                        per step), CPU per call, off-CPU time, the reference of each (the peers'
//                                        median, a pair's partner), contended or not
//   2. time measures (time.cpp)          uncontended: compute; contended: cpu, off_cpu, cpu_wait
//   3. material     (round_checks.cpp)   the time measures' flags need a material excess (min_step_share)
//   4. direct measures (direct.cpp)      stopped (process state samples), throttled (its cgroup), and the figures
//                                        cause_of explains a named rank by
//   5. round checks (round_checks.cpp)   stopped_peer (a peer waiting for a stopped rank burns CPU), absorbed_alone
// and per process-group kind:
//   6. link         (link.cpp)           a slow process group
//  6b. link_blocked (round_checks.cpp)   a slow group's members' off_cpu flags (blocked sends) dropped
// Over the rounds (decide):
//   7. naming       (naming.cpp)         a rank is named when one measure flags it in a strict majority of rounds
//   8. pooled pairs (pooled_pairs.cpp)   a contended pair's rounds pooled (pooled_pair), then the other pairs'
//                                        noise (pair_noise_check), every round (pair_persistence_check), a
//                                        partner running light (pair_partner_low_check)
//   9. notes        (naming.cpp)         what the verdict could not see (noise_notes), absorbed CPU
//  10. diagnosis    (diagnosis.cpp)      slow groups confirmed, consequences dropped, mapped to nodes; confidence
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/straggler/decide.hpp"
#include "lib/straggler/timing.hpp"

namespace scout::straggler::detail {

bool is_mesh_kind(const std::string& kind);
double ms(double ns);  // ns -> ms, rounded to the microsecond
std::string hex_id(std::uint64_t id);

// A rank's entry of one of the table's per-rank maps in O(1): a dense array where the ranks are 0..n-1 (or nearly:
// the largest under twice the count), the map itself otherwise. Built once per round (a map lookup per member and
// figure cost most of a round at 100k ranks); the map must outlive it and not change meanwhile.
template <class V>
class ByRank {
 public:
  explicit ByRank(const std::map<std::int64_t, V>& m) : m_map(&m) {
    if (m.empty() || m.begin()->first < 0 || m.rbegin()->first >= 2 * static_cast<std::int64_t>(m.size()) + 64) return;
    m_dense.assign(static_cast<std::size_t>(m.rbegin()->first) + 1, nullptr);
    for (const auto& [r, v] : m) m_dense[static_cast<std::size_t>(r)] = &v;
  }
  const V* find(std::int64_t r) const {
    if (m_dense.empty()) {
      auto it = m_map->find(r);
      return it == m_map->end() ? nullptr : &it->second;
    }
    return r >= 0 && static_cast<std::size_t>(r) < m_dense.size() ? m_dense[static_cast<std::size_t>(r)] : nullptr;
  }

 private:
  const std::map<std::int64_t, V>* m_map;
  std::vector<const V*> m_dense;  // empty: look up m_map
};

// A rank's calls in the table in O(1) (as ByRank): a dense array of each rank's place in the table where the ranks
// are 0..n-1 or nearly, a bisection of the table's ranks otherwise; std::nullopt where the rank is not in the table.
class CallsOf {
 public:
  explicit CallsOf(const CallsByRank& calls);
  std::optional<RankCalls> find(std::int64_t r) const;

 private:
  static constexpr std::uint32_t k_none = static_cast<std::uint32_t>(-1);
  const CallsByRank* m_calls;
  std::vector<std::uint32_t> m_dense;  // by rank, its place in m_calls (k_none: none); empty: bisect
};

// The distinct sets of call keys of a table's ranks, and each rank's: ranks that make the same calls (most of them)
// share one, so the keys a group's members share are found from their few sets, and a member's calls at those keys
// by their places in its set, without walking each member's calls (four walks of every rank's calls per round, for
// its peer group and its group of each kind, were a sixth of the decision at 100k ranks: issue 40). Built with one
// walk of each rank's calls.
class KeySets {
 public:
  static constexpr std::uint32_t k_none = static_cast<std::uint32_t>(-1);
  explicit KeySets(const CallsByRank& ranks);
  // The set of `rank`'s keys (k_none: the rank is not in the table).
  std::uint32_t of(std::int64_t rank) const;
  // Set `set`'s keys, in key order.
  const std::vector<CallKey>& keys(std::uint32_t set) const { return m_sets[set]; }
  std::size_t size() const { return m_sets.size(); }
  // The keys every one of `sets` has, in key order (none where `sets` is empty or one of them is k_none).
  std::vector<CallKey> common(std::vector<std::uint32_t> sets) const;
  // The place in set `set` of each of `keys` (in key order, each one of the set's: std::out_of_range otherwise).
  void places(std::uint32_t set, const std::vector<CallKey>& keys, std::vector<std::size_t>& out) const;

 private:
  std::vector<std::vector<CallKey>> m_sets;
  std::vector<std::uint32_t> m_dense;              // by rank, where the ranks are 0..n-1 or nearly (as ByRank)
  std::map<std::int64_t, std::uint32_t> m_sparse;  // otherwise
};

// Members' calls at the same keys, each member's found by the places of the keys in its key set: the places found
// once per set (consecutive members mostly share one), no member's calls walked.
class CallsAtKeys {
 public:
  CallsAtKeys(const KeySets& sets, const std::vector<CallKey>& keys) : m_sets(sets), m_keys(keys) {}
  // The calls at the keys of a rank whose key set is `set` and whose calls are `calls`, into out[0 .. keys.size()).
  void operator()(std::uint32_t set, const RankCalls& calls, const CallTiming** out);

 private:
  const KeySets& m_sets;
  const std::vector<CallKey>& m_keys;
  std::uint32_t m_set = KeySets::k_none;  // the set m_places belong to
  std::vector<std::size_t> m_places;
};

// The table's per-rank maps, each as a ByRank, and its ranks' key sets.
struct RankIndex {
  explicit RankIndex(const TimingTable& t) : calls(t.ranks), cpu(t.cpu), stopped(t.stopped), key_sets(t.ranks) {}
  CallsOf calls;
  ByRank<CpuPerCall> cpu;
  ByRank<StoppedWindow> stopped;
  KeySets key_sets;
};

// ---- 1. stats: one peer group's figures in one round ----
struct PeerStats {
  const TimingTable* table = nullptr;
  std::vector<std::int64_t> present;  // the members with calls this round
  bool pair = false;                  // two members: each against the other
  double min_relative = 0;            // the effect floor (pair_min_relative in a pair)
  std::size_t calls = 0;              // common calls
  // Per member (in `present` order), per call:
  std::vector<double> compute, wait;  // mean compute; mean wait over the calls whose wait is exact on every peer
  std::vector<double> relative;       // the time ratio: per-step or per-call median against the reference
  std::vector<double> ref_c;          // the reference compute (the peers' median, a pair's partner's)
  bool counted = false;               // scheduler counters for every member
  bool main_counted = false;          // ... with the main thread's CPU
  std::vector<double> cpu, ref_cpu, cpu_ratio;   // process CPU per call, its reference, the ratio
  std::vector<double> ref_main_cpu, main_ratio;  // the main thread's
  std::vector<double> off_ratio;                 // 1 + (time off a CPU not waiting for one - reference) / ref_c
  double cpu_wait_share = 0;                     // median over members of CPU wait / compute
  bool contended = false;                        // cpu_wait_share >= contended_share: the CPU measures decide
  C3Result c3;                                   // statistical C3 over `relative` (reported score)
  // The figures each member compares with the other members' (their median, least, largest), sorted once per group:
  LeaveOneOut others_wait, others_compute, others_step;  // wait, compute, compute + wait
  LeaveOneOut others_relative, others_cpu_ratio, others_main_ratio, others_off_ratio;
  LeaveOneOut others_runq;           // counted: the CPU wait
  LeaveOneOut others_wait_per_cpu;   // counted: runq per ns of CPU used (main thread's where known), CPU used > 0
  LeaveOneOut others_runq_per_main;  // main_counted: runq per ns of the main thread's CPU, where that is > 0
  LeaveOneOut others_throttled;      // throttled time, where known (throttle_known: every member's)
  LeaveOneOut others_stopped_share;  // the stopped share, where stopped_min_samples samples or more
  bool throttle_known = false;       // counted, and every member's throttled time known
  // Per member, its entries of the table's cpu and stopped maps (null: none), looked up once.
  std::vector<const CpuPerCall*> cpu_of;
  std::vector<const StoppedWindow*> stopped_of;

  const CpuPerCall& counters(std::size_t i) const {
    if (!cpu_of[i]) throw std::out_of_range("PeerStats::counters: no counters for the member");
    return *cpu_of[i];
  }
  // v's member i less 1 at least min_relative and at least `factor` times the other members' spread (max - min) of v.
  bool stands_out(const LeaveOneOut& v, std::size_t i, double factor) const;
  // How long the other peers wait per call beyond member i's own wait (the median of theirs): what a late rank
  // holds them for.
  double held_by(std::size_t i) const { return others_wait.median_without(i) - wait[i]; }
};
// What peer_stats reads its members' calls into, kept from one peer group to the next: a few MB per group at 100k
// ranks, which allocated afresh per group went back to the system and came again as new pages, each cleared by the
// kernel (about a tenth of the decision, issue 40).
struct PeerScratch {
  std::vector<const CallTiming*> at_rows;            // row i: member i's calls at the common keys
  std::vector<double> compute_at, wait_at, by_call;  // per member and key; by_call: per key and member
};
// Empty where fewer than two members have calls or they share fewer than min_calls. `scratch`: the caller's, reused
// group after group.
std::optional<PeerStats> peer_stats(const TimingTable& t, const std::vector<std::int64_t>& group,
                                    const DecideOptions& o, const RankIndex& ix, PeerScratch& scratch);
// The RankRound of member i with its figures, flagged by nothing yet.
RankRound rank_figures(const PeerStats& s, std::size_t i);

// ---- 2. time measures (each sets rr.flagged_by[name] and rr.raised_by[name] where its rule holds) ----
// "compute" (uncontended host): it computes longer than the peers' median by the effect rules and waits less
// than they do (a pair: its partner waits for half its excess).
void measure_compute(const PeerStats& s, std::size_t i, const DecideOptions& o, RankRound& rr);
// Contended host: "cpu" (more CPU per call and arrives late, or absorbed), "off_cpu" (time off a CPU, stopped
// from outside), "cpu_wait" (starved of CPU; not in a pair), "late" (its peers wait for it; not in a pair), and
// which of them the round reports.
void measure_contended(const PeerStats& s, std::size_t i, const DecideOptions& o, RankRound& rr);

// ---- 3. material: the time measures' flags need a time excess of min_step_share of the peers' time ----
void check_material(const PeerStats& s, std::size_t i, const DecideOptions& o, RankRound& rr);

// ---- 4. direct measures ----
// "stopped": its process state samples (any host); reported where it flags.
void measure_stopped(const PeerStats& s, std::size_t i, const DecideOptions& o, RankRound& rr);
// The figures cause_of explains a named rank by (its excess, its peers' CPU wait and throttled time).
void explain_figures(const PeerStats& s, std::size_t i, RankRound& rr);
// "throttled": its cgroup's throttled time (any host, pairs too); needs explain_figures first.
void measure_throttled(const PeerStats& s, std::size_t i, const DecideOptions& o, RankRound& rr);

// ---- 5. round checks over the group's ranks ----
// A cpu flag of a rank that waits longer than a rank flagged stopped / off_cpu / throttled is dropped.
void check_stopped_peer(PeerRound& p);
// An absorbed cpu flag stands only where no other rank of the group is flagged that round.
void check_absorbed_alone(PeerRound& p);

// ---- 6. link: every kind's process groups, slow ones marked (appended to out.groups) ----
void measure_link(const TimingTable& t, const DecideOptions& o, RoundResult& out, const RankIndex& ix);

// ---- 6b. link_blocked: off_cpu flags of the slow groups' members dropped (round_checks.cpp) ----
void check_link_blocked(const TimingTable& t, RoundResult& out);

// ---- 7-9. naming, pooled pairs, notes ----
// Per rank, every RankRound that flagged it (over all rounds).
using Flagged = std::map<std::int64_t, std::vector<const RankRound*>>;
Flagged flagged_ranks(const std::vector<RoundResult>& rounds);
// Rank -> node, from the newest table naming it: looked up per rank asked for (the named ranks, a confirmed slow
// group's members) in the tables' own maps, not gathered into a copy of every rank's node per decision (a std::map of
// 100k names, 2.5% of the decision at 100k ranks, issue 40). Holds `tables`, which must outlive it.
class NodeOf {
 public:
  explicit NodeOf(const std::vector<TimingTable>& tables) : m_tables(&tables) {}
  std::size_t count(std::int64_t rank) const { return find(rank) ? 1 : 0; }
  // std::out_of_range where no table names the rank.
  const std::string& at(std::int64_t rank) const;

 private:
  const std::string* find(std::int64_t rank) const;
  const std::vector<TimingTable>* m_tables;
};
NodeOf nodes_of(const std::vector<TimingTable>& tables);
// A suspect named by `measure` over `hits` (ratio: that measure's median over them, or pooled_ratio where >= 0).
void add_compute_suspect(Decision& d, const NodeOf& node_of, std::int64_t rank,
                         const std::vector<const RankRound*>& hits, const std::string& measure, double pooled_ratio,
                         const DecideOptions& o);
// Names every rank one measure flags in a strict majority of rounds ("stopped" first where it has one).
void name_by_majority(Decision& d, const Flagged& flagged, const NodeOf& node_of, const DecideOptions& o);

// A rank of a contended pair flagged on the rounds pooled.
struct PooledPair {
  std::int64_t rank = -1;
  std::int64_t partner = -1;
  std::vector<const RankRound*> hits;
  double ratio = 1;  // its CPU per call over the pooled rounds / its partner's (the smaller of process and main)
};
// Every contended pair's pooled ratios, its members' in order: the noise of pairs.
using PairRatios = std::map<std::vector<std::int64_t>, std::vector<double>>;
std::vector<PooledPair> pooled_pairs(const std::vector<RoundResult>& rounds, const DecideOptions& o,
                                     PairRatios& pair_ratios);
// Names a pooled pair's rank where that is a strict majority of the rounds and no one of its pair is named.
void name_pooled(Decision& d, const std::vector<PooledPair>& pooled, const NodeOf& node_of, const DecideOptions& o);
// A pair's cpu suspect stays named only outside the other pairs' noise.
void pair_noise_check(Decision& d, const std::vector<RoundResult>& rounds, const PairRatios& pair_ratios,
                      const DecideOptions& o);
// A contended pair's cpu suspect stays named only above the cpu floor in every round (its noise over time).
void pair_persistence_check(Decision& d, const std::vector<RoundResult>& rounds, const DecideOptions& o);
// A contended pair's cpu suspect stays named only where it, not its partner, stands apart from the other pairs' ranks.
void pair_partner_low_check(Decision& d, const std::vector<RoundResult>& rounds, const DecideOptions& o);
// What the verdict could not see: unconfirmed ranks, the rounds' noise, an oversubscribed host.
void noise_notes(Decision& d, const std::vector<RoundResult>& rounds, const Flagged& flagged, const DecideOptions& o);
// A rank named for its CPU whose time barely exceeds its peers': why the steps hardly show it.
void absorbed_notes(Decision& d, const DecideOptions& o);

// ---- 10. diagnosis ----
// Slow groups confirmed over rounds, consequences dropped, the communication diagnosis (node suspects appended).
// Returns the communication side's confidence.
double diagnose_communication(Decision& d, const std::vector<RoundResult>& rounds,
                              const std::vector<TimingTable>& tables, const DecideOptions& o);
// The decision's diagnosis where only compute suspects, its confidence and the suspects' (rounded).
void decision_confidence(Decision& d, double comm_conf);

}  // namespace scout::straggler::detail
