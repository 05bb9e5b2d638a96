// Stage 3, compare per group: the position and step measures, and the order in
// which the stage's measures run. Reads: the positions (interned keys), the
// mesh's peer groups, process groups and pipeline stages.
//   position: C3 exact (strict majority) over the positions of each group; an
//     outlier's departure from the majority's call is classified (classify):
//     the same call number with other arguments or another call, a call
//     skipped, or never entering the call (a position-weight finding, named in
//     stage 5 only when the rank cannot move); a rank inside an earlier call is
//     waiting (stage 4).
//   step: C3 exact over the steps of the ranks inside the majority's call.
//   then call_arguments, history, history_structure and stage_arguments
//     (call_arguments.cpp, histories.cpp); a rank is named by the first measure
//     that names it. Replica pairs whose histories depart are splits.
// Thresholds: strict majority (C3), k_min_majority_group, k_max_group_values,
// k_max_rank_rows (through big_world: an agreeing group's values listed once each).
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "lib/consensus/c3.hpp"
#include "lib/hang/decide/stages.hpp"
#include "lib/hang/thresholds.hpp"
#include "lib/report/c3_suspects.hpp"

namespace scout::hang::stages {

namespace {

// Why outlier `o` is away from the majority position `m` of its group, or
// nullopt when the difference is one a stall produces by itself (a rank
// inside another call, waiting for someone: stage 4 follows that wait).
// `peers`: o and m are peers (replicas), so their calls under one number of a
// role must agree; otherwise (ranks at other tp coordinates, in other groups
// of one role) only calls of one group, the same call, are compared: a shard's
// size or a call's root may depend on the coordinate (a 2x2x2 mesh's stage
// named an innocent tp1 rank against a tp0 rank's shard).
std::optional<Candidate> classify(const RankPos& o, const RankPos& m, bool peers) {
  const auto& os = *o.s;
  const auto& ms = *m.s;
  const auto& of = o.pending;  // roots group-local, as in the histories
  const auto& mf = m.pending;
  json ev = {{"step", os.step},
             {"majority_step", ms.step},
             {"pending", fingerprint_json(os.pending)},
             {"majority_pending", fingerprint_json(ms.pending)},
             {"collective_state", records::collective_state_name(os.collective_state)},
             {"majority_collective_state", records::collective_state_name(ms.collective_state)}};
  if (!m.call) return std::nullopt;
  // Has `o` gone past the majority's call (made it, or a later one of that group)?
  auto reached = o.reached_role.find(m.role);
  const bool passed = reached != o.reached_role.end() && reached->second >= mf.group_seq;
  // Whether o's call `a` and m's call `b` under one number may be compared.
  auto comparable = [&](std::uint64_t a, std::uint64_t b) { return peers || a == b; };
  if (o.role == m.role && of.group_seq == mf.group_seq && o.call) {
    if (!comparable(of.group, mf.group)) return std::nullopt;
    // The same call number with other arguments.
    if (of.type != mf.type || of.root_or_op != mf.root_or_op)
      return Candidate{{"different_collective", HangKind::control_flow_divergence, ev}, Weight::definitive};
    return Candidate{{"collective_arguments_differ", HangKind::argument_divergence, ev}, Weight::definitive};
  }
  if (passed) {
    // It made the majority's call number: with the same arguments it is ahead
    // (a stall, not a cause); with others it made a different call.
    for (const auto& c : o.history)
      if (c.role == m.role && c.seq == mf.group_seq && comparable(c.group, mf.group) && !same_call(c.fingerprint, mf)) {
        ev["mismatched_call"] = {{"rank_call", fingerprint_json(c.fingerprint)},
                                 {"majority_call", fingerprint_json(mf)}};
        if (c.fingerprint.type != mf.type || c.fingerprint.root_or_op != mf.root_or_op)
          return Candidate{{"different_collective", HangKind::control_flow_divergence, ev}, Weight::definitive};
        return Candidate{{"collective_arguments_differ", HangKind::argument_divergence, ev}, Weight::definitive};
      }
    // Ahead in the same group without ever making the majority's call number: skipped it.
    if (o.role == m.role && of.group_seq > mf.group_seq && o.history_ok) {
      bool made = false, older = false;
      for (const auto& c : o.history) {
        made |= c.role == m.role && c.seq == mf.group_seq;
        older |= c.role == m.role && c.seq < mf.group_seq;
      }
      if (!made && older)
        return Candidate{{"skipped_collective", HangKind::control_flow_divergence, ev}, Weight::definitive};
    }
    return std::nullopt;
  }
  if (o.role == m.role && o.call && of.group_seq > mf.group_seq && o.history_ok) {
    bool made = false, older = false;
    for (const auto& c : o.history) {
      made |= c.role == m.role && c.seq == mf.group_seq;
      older |= c.role == m.role && c.seq < mf.group_seq;
    }
    if (!made && older)
      return Candidate{{"skipped_collective", HangKind::control_flow_divergence, ev}, Weight::definitive};
    return std::nullopt;
  }
  // Behind the majority's call.
  if (o.entered) {
    // Inside an earlier call the others finished: a stall, unless they finished a different call under that number.
    for (const auto& c : m.history)
      if (c.role == o.role && c.seq == of.group_seq && comparable(of.group, c.group) && !same_call(c.fingerprint, of)) {
        ev["mismatched_call"] = {{"rank_call", fingerprint_json(of)},
                                 {"majority_call", fingerprint_json(c.fingerprint)}};
        if (c.fingerprint.type != of.type || c.fingerprint.root_or_op != of.root_or_op)
          return Candidate{{"different_collective", HangKind::control_flow_divergence, ev}, Weight::definitive};
        return Candidate{{"collective_arguments_differ", HangKind::argument_divergence, ev}, Weight::definitive};
      }
    return std::nullopt;  // waiting: stage 4
  }
  return Candidate{{"never_entered_collective", HangKind::rank_local_divergence, ev}, Weight::position};
}

}  // namespace

Comparison Comparison::none(std::int64_t world) {
  Comparison c;
  c.at_majority.assign(static_cast<std::size_t>(world), 0);
  c.outlier.assign(static_cast<std::size_t>(world), 0);
  return c;
}

// C3 over the positions of every peer group, process group and pipeline stage;
// the outliers' reasons (classify); the steps at the majority's call; the calls
// made with other arguments than a strict majority of their group; and the call
// histories of every replica group of k_min_majority_group or more (else of every
// pipeline stage), so a skipped or extra call is seen wherever it was.
Comparison compare_groups(const Positions& pos, const Views& views, const Mesh& mesh, bool big_world) {
  Comparison out;
  const std::int64_t world = views.world;
  out.at_majority.assign(static_cast<std::size_t>(world), 0);
  out.outlier.assign(static_cast<std::size_t>(world), 0);
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> compared;
  std::unordered_multimap<std::uint64_t, std::size_t> seen_groups;
  auto add_group = [&](std::string kind, std::vector<std::int64_t> members) {
    if (members.size() < 2) return;
    std::uint64_t digest = members.size();
    for (auto r : members) digest = (digest ^ static_cast<std::uint64_t>(r)) * 0x100000001b3ull;
    auto [lo, hi] = seen_groups.equal_range(digest);
    for (auto it = lo; it != hi; ++it)
      if (compared[it->second].second == members) return;
    seen_groups.emplace(digest, compared.size());
    compared.emplace_back(std::move(kind), std::move(members));
  };
  for (auto& g : mesh.peer_groups()) add_group(std::string(peer_kind_name(mesh.peer_kind())), std::move(g));
  const std::size_t peer_group_count = compared.size();
  for (Dim d : k_all_dims)
    if (mesh.size(d) > 1)
      for (auto& g : mesh.process_groups(d)) add_group(std::string(dim_name(d)), std::move(g));
  // Stage groups: the ranks of one pipeline stage (every dim but pp varies) run the
  // same program of collectives, so their call histories must agree.
  std::vector<std::vector<std::int64_t>> stages(static_cast<std::size_t>(mesh.size(Dim::pp)));
  for (std::int64_t r = 0; r < world; ++r) stages[mesh.coords(r)[static_cast<int>(Dim::pp)]].push_back(r);
  if (stages.size() > 1)
    for (auto g : stages) add_group("stage", g);

  std::vector<std::optional<std::string>> key_text(pos.key_rank.size());
  auto text = [&](std::uint64_t key) -> const std::string& {
    if (!key_text[key]) key_text[key] = position_text(pos, views, key);
    return *key_text[key];
  };
  std::vector<std::uint64_t> keys;
  std::vector<std::pair<std::uint64_t, std::int64_t>> distinct;
  out.groups.reserve(compared.size());
  for (std::size_t gi = 0; gi < compared.size(); ++gi) {
    const auto& [kind, members] = compared[gi];
    const bool peer_group = gi < peer_group_count;
    keys.clear();
    for (auto r : members) keys.push_back(pos.ranks[r].key);
    C3Result res = c3_exact(keys);
    const bool compact = members.size() > k_max_group_values || (big_world && res.status == C3Status::agree);
    json values = json::array();
    if (!compact) {
      for (auto k : keys) values.push_back(text(k));
    } else {
      distinct.clear();
      for (std::size_t i = 0; i < keys.size(); ++i) distinct.emplace_back(keys[i], static_cast<std::int64_t>(i));
      std::stable_sort(distinct.begin(), distinct.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<std::pair<std::int64_t, json>> entries;
      const std::uint64_t majority_key = res.majority_peer >= 0 ? keys[res.majority_peer] : ~std::uint64_t{0};
      for (std::size_t i = 0; i < distinct.size();) {
        std::size_t j = i;
        while (j < distinct.size() && distinct[j].first == distinct[i].first) ++j;
        json entry = {{"value", text(distinct[i].first)}, {"count", j - i}};
        if (distinct[i].first != majority_key || res.status == C3Status::inconclusive) {
          json ranks = json::array();
          for (std::size_t k = i; k < j; ++k) ranks.push_back(members[distinct[k].second]);
          entry["ranks"] = std::move(ranks);
        }
        entries.emplace_back(distinct[i].second, std::move(entry));
        i = j;
      }
      std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (auto& e : entries) values.push_back(std::move(e.second));
    }
    C3Attribution att = attribute_c3(kind, members, C3Mode::exact, res, std::move(values));
    if (compact) att.run.stats["values"] = "distinct";
    std::erase_if(att.run.outliers, [&](std::int64_t r) { return !pos.ranks[r].s; });
    if (!att.decided()) out.any_inconclusive = true;
    auto place = [&](Finding& f) {
      f.evidence["group"] = kind;
      if (members.size() <= k_max_group_values) {
        f.evidence["group_members"] = members;
      } else {
        f.evidence["group_index"] = out.groups.size();
        f.evidence["group_size"] = members.size();
      }
    };
    if (att.majority && pos.ranks[members[*att.majority]].s) {
      const std::uint64_t majority_key = keys[*att.majority];
      if (peer_group)
        for (auto r : members) {
          out.at_majority[r] |= pos.ranks[r].key == majority_key;
          out.outlier[r] |= pos.ranks[r].key != majority_key;
        }
      // Outliers of the position.
      for (auto i : att.outliers) {
        const auto r = members[i];
        if (!pos.ranks[r].s || out.candidates.count(r)) continue;
        const auto m = members[*att.majority];
        const auto peers_of_r = peer_group || mesh.peer_group(r) == mesh.peer_group(m);
        auto c = classify(pos.ranks[r], pos.ranks[m], peers_of_r);
        if (!c) continue;
        place(c->finding);
        out.candidates.emplace(r, std::move(*c));
      }
      // Among the ranks at the majority position: the step of the call (entered ranks only:
      // a rank that finished the call may have begun its next step) ...
      std::vector<std::int64_t> same;
      for (auto r : members)
        if (pos.ranks[r].key == majority_key && pos.ranks[r].entered) same.push_back(r);
      if (same.size() >= 2) {
        std::vector<std::uint64_t> steps;
        for (auto r : same) steps.push_back(pos.ranks[r].s->step);
        C3Result sr = c3_exact(steps);
        if (sr.status == C3Status::attributed)
          for (std::size_t i = 0; i < same.size(); ++i)
            if (sr.outliers[i] && !out.candidates.count(same[i])) {
              const auto& o = *pos.ranks[same[i]].s;
              Finding f{"collective_at_different_step",
                        HangKind::control_flow_divergence,
                        {{"step", o.step},
                         {"majority_step", pos.ranks[same[sr.majority_peer]].s->step},
                         {"pending", fingerprint_json(o.pending)}},
                        Measure::step};
              place(f);
              out.candidates.emplace(same[i], Candidate{std::move(f), Weight::definitive});
            }
      }
    }
    out.groups.push_back(std::move(att.run));
  }
  // Replica pairs: their histories cannot name either rank, but a departure between them is a
  // software divergence, never a fabric stall (details.replica_splits).
  if (mesh.peer_kind() == PeerKind::replica)
    for (std::size_t gi = 0; gi < peer_group_count && out.splits.size() < k_max_group_values; ++gi) {
      const auto& m = compared[gi].second;
      if (m.size() != k_min_majority_group - 1) continue;  // a pair: too small for a majority
      const auto& pa = pos.ranks[m[0]];
      const auto& pb = pos.ranks[m[1]];
      if (!pa.s || !pb.s || !pa.history_ok || !pb.history_ok) continue;
      auto f = history_divergence(pa, pb, false, true);
      if (!f) f = history_divergence(pb, pa, false, true);
      if (f) out.splits.push_back({m[0], m[1], std::move(*f)});
    }
  // Calls made with other arguments than a strict majority of their group's members.
  for (auto& [r, f] : call_argument_outliers(pos)) {
    if (out.candidates.count(r)) continue;
    f.evidence["group"] = f.evidence["role"];
    f.evidence.erase("role");
    out.candidates.emplace(r, Candidate{std::move(f), Weight::definitive});
  }
  // The call histories, whatever the positions: of every replica group of three
  // or more; of every pipeline stage where the replica groups are smaller (the
  // ranks of one stage run one program of collectives).
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> history_groups;
  const bool small_replicas =
      mesh.peer_kind() != PeerKind::replica || mesh.size(Dim::dp) < static_cast<std::int64_t>(k_min_majority_group);
  if (!small_replicas)
    for (std::size_t gi = 0; gi < peer_group_count; ++gi) history_groups.push_back(compared[gi]);
  else
    for (const auto& g : stages) history_groups.emplace_back("stage", g);
  for (const auto& [hkind, hmembers_all] : history_groups) {
    // A rank already known to have made other calls is no reference for the others' histories.
    std::vector<std::int64_t> hmembers;
    for (auto r : hmembers_all) {
      auto it = out.candidates.find(r);
      if (it == out.candidates.end() || it->second.weight != Weight::definitive) hmembers.push_back(r);
    }
    // A stage's ranks at different tp (cp, ep) coordinates hold shards of other sizes: where
    // their whole calls leave no majority, the order and types of their calls still must agree.
    auto outliers = history_outliers(pos, hmembers);
    if (hkind == "stage") {
      // By whole calls, a stage's majority may be one coordinate's (the tp1 ranks' shards, once a
      // diverged tp0 rank left the references): a rank apart from it is an outlier only when one of
      // its own peers, which share its coordinates, parts from it too. Without replicas (a mesh of
      // tp, cp, ep only: Flight Recorder dumps whose pgs do not say which dim holds replicas) a rank
      // has no such peer and whole calls name nobody (a cp1 rank's uneven shard was named against
      // the cp0 ranks', fr_mesh_job skip at the last step).
      std::set<std::int64_t> refs(hmembers.begin(), hmembers.end());
      std::erase_if(outliers, [&](const auto& o) {
        const auto& p = pos.ranks[o.first];
        for (auto q : mesh.peer_group(o.first)) {
          const auto& qp = pos.ranks[q];
          if (q == o.first || !refs.count(q) || !qp.s || !qp.history_ok || qp.history.empty()) continue;
          if (history_divergence(p, qp) || history_divergence(qp, p)) return false;
        }
        return true;
      });
    }
    if (outliers.empty() && hkind == "stage") outliers = history_outliers(pos, hmembers, true);
    if (outliers.empty() && hkind == "stage" && mesh.peer_kind() == PeerKind::replica)
      outliers = stage_argument_outliers(pos, mesh, hmembers);
    for (const auto& [r, f] : outliers) {
      if (out.candidates.count(r)) continue;
      Finding g = f;
      g.evidence["step"] = pos.ranks[r].s->step;
      g.evidence["pending"] = fingerprint_json(pos.ranks[r].s->pending);
      g.evidence["group"] = hkind;
      if (hmembers_all.size() <= k_max_group_values)
        g.evidence["group_members"] = hmembers_all;
      else
        g.evidence["group_size"] = hmembers_all.size();
      out.candidates.emplace(r, Candidate{std::move(g), Weight::definitive});
    }
  }
  return out;
}

}  // namespace scout::hang::stages
