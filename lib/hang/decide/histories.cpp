// Stage 3, compare per group: the history measures. Reads: the ranks' call
// histories (rings, role-normalized, pending call included), only where no
// event was dropped and the ring was not lost. Statistic: pairwise alignment of
// two histories by (role, per-group sequence); a departure is a skipped, extra,
// reordered or different call, or the same call with other arguments. Rule: a
// class of equal histories is named when it is incompatible with a strict
// majority of the group while some class is compatible with a strict majority
// (strict_majority); where members left no record, those it is incompatible
// with must also be at least half of the group (absent members do not vote). Thresholds: k_min_majority_group,
// k_history_class_limit, k_history_reference_classes.
#include <algorithm>
#include <map>

#include "lib/hang/decide/stages.hpp"
#include "lib/hang/thresholds.hpp"

namespace scout::hang::stages {

// Where rank `o`'s history first departs from `m`'s, the histories aligned by
// (group role, per-group sequence): a call `o` made that `m` skipped past
// (extra), a call of `m`'s that `o` went past without making (skipped), or
// the same call number with other arguments. nullopt when one history is a
// prefix of the other (a rank behind or ahead on the same path). With
// `structure_only` a call's arguments are not compared, only its type; with
// `ignore_root` its root (a global rank: replicas in different tp groups
// broadcast from different ranks) is not.
std::optional<Finding> history_divergence(const RankPos& o, const RankPos& m, bool structure_only, bool ignore_root) {
  const auto& R = o.history;
  const auto& M = m.history;
  auto key = [](const Call& c) { return std::pair{c.role, c.seq}; };
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t> in_m, in_r;
  for (std::size_t i = 0; i < M.size(); ++i) in_m.emplace(key(M[i]), i);
  for (std::size_t i = 0; i < R.size(); ++i) in_r.emplace(key(R[i]), i);
  std::size_t a = 0;
  while (a < R.size() && !in_m.count(key(R[a]))) ++a;
  if (a == R.size()) return std::nullopt;  // no call in common: nothing to align
  std::size_t b = in_m[key(R[a])];
  auto call_json = [](const Call& c) {
    json j = fingerprint_json(c.fingerprint);
    j["role"] = Roles::name(c.role, c.group);
    return j;
  };
  for (; a < R.size() && b < M.size(); ++a, ++b) {
    const Call& rc = R[a];
    const Call& mc = M[b];
    if (key(rc) == key(mc)) {
      auto rf = rc.fingerprint, mf = mc.fingerprint;
      if (ignore_root) rf.root_or_op = mf.root_or_op;
      if (structure_only ? rf.type == mf.type : same_call(rf, mf)) continue;
      json ev = {{"mismatched_call", {{"rank_call", call_json(rc)}, {"majority_call", call_json(mc)}}}};
      if (rf.type != mf.type || rf.root_or_op != mf.root_or_op)
        return Finding{"different_collective", HangKind::control_flow_divergence, ev};
      return Finding{"collective_arguments_differ", HangKind::argument_divergence, ev};
    }
    const bool r_in_m = in_m.count(key(rc)) != 0;
    const bool m_in_r = in_r.count(key(mc)) != 0;
    json ev = {{"rank_call", call_json(rc)}, {"majority_call", call_json(mc)}};
    if (!m_in_r && r_in_m) {
      ev["skipped_call"] = call_json(mc);
      return Finding{"skipped_collective", HangKind::control_flow_divergence, ev};
    }
    if (!r_in_m) {
      ev["extra_call"] = call_json(rc);
      return Finding{m_in_r ? "extra_collective" : "different_collective", HangKind::control_flow_divergence, ev};
    }
    // Both calls exist on the other side, in another order.
    return Finding{"collectives_out_of_order", HangKind::control_flow_divergence, ev};
  }
  return std::nullopt;
}

// The members of `members` whose call history is incompatible (history_divergence,
// either way) with more than half of the group: ranks of one program whose own
// history departs from everyone else's, wherever they now wait. Innocent ranks'
// histories are prefixes of each other (they are at different points of the same
// path), so a strict minority of diverged ranks is all this can name. Ranks with
// dropped events are neither judged nor used as references; beyond
// k_history_class_limit classes of equal histories each is compared with the
// k_history_reference_classes largest. `structure_only`: the
// members run one program with other arguments (the ranks of a pipeline stage
// at different tp coordinates hold shards of other sizes, and a broadcast
// within each tp group has its own root): the order and type of the calls is
// compared, not their arguments.
RankFindings history_outliers(const Positions& pos, const std::vector<std::int64_t>& members, bool structure_only) {
  // Ranks with the same history are one class: compared once.
  struct Class {
    std::int64_t rep = -1;
    std::size_t count = 0;
    std::vector<std::int64_t> ranks;
  };
  std::unordered_map<std::uint64_t, std::size_t> by_hash;
  std::vector<Class> classes;
  std::size_t total = 0;
  for (auto r : members) {
    const auto& p = pos.ranks[r];
    if (!p.s || !p.history_ok || p.history.empty()) continue;
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const auto& c : p.history)
      for (std::uint64_t x : {c.role, c.seq, structure_only ? 0 : c.fingerprint.count,
                              structure_only ? 0 : static_cast<std::uint64_t>(c.fingerprint.root_or_op),
                              std::uint64_t{static_cast<std::uint8_t>(c.fingerprint.type)} << 8 |
                                  (structure_only ? 0 : c.fingerprint.dtype)})
        h = (h ^ x) * 0x100000001b3ull;
    auto [it, fresh] = by_hash.try_emplace(h, classes.size());
    if (fresh) classes.push_back({r, 0, {}});
    ++classes[it->second].count;
    classes[it->second].ranks.push_back(r);
    ++total;
  }
  RankFindings out;
  if (total < k_min_majority_group || classes.size() < 2) return out;
  // Beyond k_history_class_limit classes each is compared with the k_history_reference_classes largest.
  std::vector<std::size_t> refs(classes.size());
  for (std::size_t i = 0; i < refs.size(); ++i) refs[i] = i;
  std::size_t ref_total = total;
  if (refs.size() > k_history_class_limit) {
    std::stable_sort(refs.begin(), refs.end(), [&](auto x, auto y) { return classes[x].count > classes[y].count; });
    refs.resize(k_history_reference_classes);
    ref_total = 0;
    for (auto i : refs) ref_total += classes[i].count;
  }
  // Pairwise incompatibility of each class with the reference classes.
  std::vector<std::size_t> against(classes.size(), 0);
  std::vector<std::optional<Finding>> first(classes.size());
  std::size_t best_compatible = 0;  // the most ranks one class is compatible with (itself included)
  for (std::size_t ci = 0; ci < classes.size(); ++ci) {
    const auto& c = classes[ci];
    std::size_t compatible = std::find(refs.begin(), refs.end(), ci) != refs.end() ? c.count : 0;
    for (auto di : refs) {
      if (di == ci) continue;
      const auto& d = classes[di];
      auto f = history_divergence(pos.ranks[c.rep], pos.ranks[d.rep], structure_only);
      const bool incompatible = f || history_divergence(pos.ranks[d.rep], pos.ranks[c.rep], structure_only);
      if (!incompatible) {
        compatible += d.count;
        continue;
      }
      against[ci] += d.count;
      if (!first[ci] && f) {
        first[ci] = std::move(f);
        first[ci]->evidence["compared_with"] = d.rep;
      }
    }
    best_compatible = std::max(best_compatible, compatible);
  }
  // Only where the histories of a strict majority agree with each other: then
  // a class more than half of the group disagrees with has diverged.
  if (!strict_majority(best_compatible, ref_total)) return out;
  // Members with no record at all (a rank that left no Flight Recorder dump) do not vote, as in
  // call_arguments: the ranks a class is incompatible with must then also be at least half of the
  // group, so that the absent members, had they made the class's calls, could at most tie them,
  // never outnumber them (2 dumps agreeing against 1 in a world of 5 with 2 dumps missing named
  // the 1). Where the missing members are themselves the explanation (every rank that dumped
  // waits for them), explain's missing-dump rule names them.
  std::size_t absent = 0;
  for (auto r : members) absent += !pos.ranks[r].s;
  for (std::size_t ci = 0; ci < classes.size(); ++ci) {
    if (!first[ci] || !strict_majority(against[ci], ref_total)) continue;
    if (absent > 0 && against[ci] * 2 < members.size()) continue;
    for (auto r : classes[ci].ranks) {
      Finding g = *first[ci];
      g.measure = structure_only ? Measure::history_structure : Measure::history;
      g.evidence["incompatible_with"] = against[ci];
      g.evidence["compared"] = ref_total;
      out.emplace_back(r, std::move(g));
    }
  }
  return out;
}

}  // namespace scout::hang::stages
