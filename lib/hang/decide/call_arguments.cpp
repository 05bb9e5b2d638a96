// Stage 3, compare per group: the argument measures. Reads: the ranks' call
// histories (pending calls included) and the mesh's groups.
//   call_arguments: at one call (group, per-group sequence) that at least
//     k_min_majority_group members made, of a kind every member makes alike, a
//     strict majority of the group's members gave the same arguments (members
//     without any record not voting: a strict majority of those with one that
//     is at least half the group); the others gave other ones. Only calls some
//     rank is in are tallied.
//   stage_arguments: where replica groups are too small for a majority (dp = 2),
//     at one call of a pipeline stage that k_min_majority_group or more of its
//     ranks made, a rank's arguments differ from every replica's while a strict
//     majority of the stage's makers agree on other ones (where members left no
//     record, at least half the stage); never half the stage.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "lib/hang/decide/stages.hpp"
#include "lib/hang/thresholds.hpp"

namespace scout::hang::stages {

namespace {

// A call's arguments as every member must give them: type, dtype, element count, root or op.
using CallArguments = std::tuple<std::uint8_t, std::uint8_t, std::uint64_t, std::int64_t>;
CallArguments call_arguments(const Call* c) {
  const auto& f = c->fingerprint;
  return {static_cast<std::uint8_t>(f.type), f.dtype, f.count, f.root_or_op};
}

// The arguments the ranks in `made` gave one call, counted once per rank: the
// call of a strict majority of `of` ranks (nullptr: none), how many gave it,
// and how many different argument sets there were.
struct ArgumentTally {
  const Call* majority = nullptr;
  std::size_t agreeing = 0;
  std::size_t kinds = 0;
};
ArgumentTally tally_arguments(const std::vector<std::pair<std::int64_t, const Call*>>& made, std::size_t of) {
  std::map<CallArguments, std::pair<std::size_t, const Call*>> tally;
  for (const auto& [r, c] : made) {
    auto& t = tally[call_arguments(c)];
    ++t.first;
    t.second = c;
  }
  ArgumentTally out;
  out.kinds = tally.size();
  for (const auto& [a, t] : tally)
    if (strict_majority(t.first, of)) out.majority = t.second, out.agreeing = t.first;
  return out;
}

// Whether every member of a call's group gives it the same arguments (element count, dtype, root or
// reduce op): the reductions, broadcast, barrier and the tensor forms of all-gather and
// reduce-scatter. A list all-gather, an all-to-all, gather, scatter and point-to-point calls may
// differ per member.
bool members_give_same_arguments(records::CollectiveType t) {
  using T = records::CollectiveType;
  return t == T::all_reduce || t == T::broadcast || t == T::reduce || t == T::barrier ||
         t == T::all_gather_into_tensor || t == T::reduce_scatter_tensor;
}

}  // namespace

// A call made with other arguments where a pipeline stage's replica groups
// are too small for a majority (dp = 2): at one call (group role, per-group
// sequence), rank r's arguments differ from every replica's that made it, while
// a strict majority of the stage's ranks that made it agree on other ones. A
// value that depends on a coordinate (a shard size per tp coordinate, a
// broadcast root per tp group) is shared by the rank's replicas, so it never
// names anyone; one replica with other arguments than its partner is told
// apart by the rest of the stage. At most one finding per rank (its first).
RankFindings stage_argument_outliers(const Positions& pos, const Mesh& mesh, const std::vector<std::int64_t>& members) {
  RankFindings out;
  if (members.size() < k_min_majority_group) return out;
  // (role, seq) -> (rank, call) of every member that made it.
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<std::pair<std::int64_t, const Call*>>> calls;
  for (auto r : members) {
    const auto& p = pos.ranks[r];
    if (!p.s || !p.history_ok) continue;
    for (const auto& c : p.history) calls[{c.role, c.seq}].emplace_back(r, &c);
  }
  // Members with no record at all do not vote (as in call_arguments): the agreeing ranks must then
  // also be at least half of the stage, so the absent members could at most tie them.
  std::size_t absent = 0;
  for (auto r : members) absent += !pos.ranks[r].s;
  std::set<std::int64_t> named;
  for (const auto& [key, made] : calls) {
    if (made.size() < k_min_majority_group) continue;
    // The stage's majority arguments at this call, counted once (nullptr: no strict majority).
    const auto tally = tally_arguments(made, made.size());
    const Call* majority = tally.majority;
    if (!majority || (absent > 0 && tally.agreeing * 2 < members.size())) continue;
    std::map<std::int64_t, const Call*> by_rank(made.begin(), made.end());
    for (const auto& [r, c] : made) {
      if (named.count(r) || same_call(majority->fingerprint, c->fingerprint)) continue;
      std::size_t replicas = 0, replicas_differ = 0;
      for (auto q : mesh.peer_group(r)) {
        if (q == r) continue;
        auto it = by_rank.find(q);
        if (it == by_rank.end()) continue;
        ++replicas;
        replicas_differ += !same_call(c->fingerprint, it->second->fingerprint);
      }
      if (replicas == 0 || replicas_differ != replicas) continue;
      json ev = {{"mismatched_call",
                  {{"rank_call", fingerprint_json(c->fingerprint)},
                   {"majority_call", fingerprint_json(majority->fingerprint)}}},
                 {"compared", made.size()}};
      const bool other_type = c->fingerprint.type != majority->fingerprint.type;
      out.emplace_back(
          r, other_type
                 ? Finding{"different_collective", HangKind::control_flow_divergence, ev, Measure::stage_arguments}
                 : Finding{"collective_arguments_differ", HangKind::argument_divergence, ev, Measure::stage_arguments});
      named.insert(r);
    }
  }
  // Never half the stage or more.
  if (!strict_minority(named.size(), members.size())) out.clear();
  return out;
}

// A call made with other arguments than the rest of its process group, wherever the ranks now
// are: at one call (group, per-group sequence) that three or more members made (their histories,
// pending calls included), a strict majority of the group's members made it with the same
// arguments, a call every member must make alike, and a strict minority with others. Members with
// no record at all do not vote: there, a strict majority of the members with a record that is at
// least half the group will do (gloo aborts the peer that receives a larger all-reduce than it
// posted, so the rank whose shape differs outlives that peer, which leaves no Flight Recorder dump:
// bench/fr_vs_frtrace.py wrong-shape on dp x tp, the two other ranks agreeing). Gloo may let
// the majority finish such a call and go on while the rank that differs waits inside it (a 2x2
// pipeline, torch 2.x: the three other ranks left the world all-reduce), so the positions alone
// do not show it. Only groups the mesh knows (their members are known); a group whose ranks count
// one sequence number twice is skipped (two process groups of the same ranks counted apart: publishers
// before twins shared one counter per group id, and gloo's Flight Recorder dumps). At
// most one finding per rank (its first). Only the calls some rank is in (its pending call) are
// compared: a rank that made a call with other arguments is kept there, and one hash lookup per
// event keeps the cost linear in the evidence.
RankFindings call_argument_outliers(const Positions& pos) {
  RankFindings out;
  auto key_of = [](std::uint64_t group, std::uint64_t seq) { return std::pair{group, seq}; };
  struct KeyHash {
    std::size_t operator()(const std::pair<std::uint64_t, std::uint64_t>& k) const {
      return static_cast<std::size_t>(k.first ^ (k.second * 0x9e3779b97f4a7c15ull));
    }
  };
  // (group, seq) of every pending call of a known group -> (rank, call) of every member that made it.
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>, std::vector<std::pair<std::int64_t, const Call*>>,
                     KeyHash>
      calls;
  for (const auto& p : pos.ranks)
    if (p.s && p.call && pos.roles.known(p.s->pending.group))
      calls.try_emplace(key_of(p.s->pending.group, p.s->pending.group_seq));
  std::set<std::uint64_t> counted_twice;
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(pos.ranks.size()); ++r) {
    const auto& p = pos.ranks[r];
    if (!p.s) continue;
    for (const auto& c : p.history) {
      auto it = calls.find(key_of(c.group, c.seq));
      if (it == calls.end()) continue;
      if (!it->second.empty() && it->second.back().first == r) counted_twice.insert(c.group);
      it->second.emplace_back(r, &c);
    }
  }
  // In a fixed order, so every observer names the same ranks first.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> order;
  for (const auto& [k, made] : calls)
    if (made.size() >= k_min_majority_group) order.push_back(k);
  std::sort(order.begin(), order.end());
  std::set<std::int64_t> named;
  for (const auto& key : order) {
    const auto& made = calls.at(key);
    if (counted_twice.count(key.first)) continue;
    const auto& group_members = pos.roles.by_id.at(key.first).members;
    const auto group_size = group_members.size();
    auto tally = tally_arguments(made, group_size);
    if (!tally.majority) {
      // Members with no record at all (a rank that died without a Flight Recorder dump) do not
      // vote: the agreeing ranks must be a strict majority of the members with a record and at
      // least half of all members, so that absent members who had made the other arguments could
      // at most tie them, never outnumber them.
      std::size_t absent = 0;
      for (auto m : group_members)
        absent += m >= 0 && m < static_cast<std::int64_t>(pos.ranks.size()) && !pos.ranks[m].s;
      if (absent > 0) {
        auto seen = tally_arguments(made, group_size - absent);
        if (seen.majority && seen.agreeing * 2 >= group_size) tally = seen;
      }
    }
    const Call* majority = tally.majority;
    if (!majority || tally.kinds < 2 || !members_give_same_arguments(majority->fingerprint.type)) continue;
    for (const auto& [r, c] : made) {
      if (named.count(r) || call_arguments(c) == call_arguments(majority)) continue;
      json ev = {{"mismatched_call",
                  {{"rank_call", fingerprint_json(c->fingerprint)},
                   {"majority_call", fingerprint_json(majority->fingerprint)}}},
                 {"made_by", made.size()},
                 {"agreeing", tally.agreeing},
                 {"group_size", group_size},
                 {"role", Roles::name(c->role, c->group)}};
      const bool other_type = c->fingerprint.type != majority->fingerprint.type;
      out.emplace_back(
          r, other_type
                 ? Finding{"different_collective", HangKind::control_flow_divergence, ev, Measure::call_arguments}
                 : Finding{"collective_arguments_differ", HangKind::argument_divergence, ev, Measure::call_arguments});
      named.insert(r);
    }
  }
  return out;
}

}  // namespace scout::hang::stages
