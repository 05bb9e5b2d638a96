// Stage 6 of a round (measures.hpp): the measure "link", per process-group kind. link(G, call) = min over G's
// members of wait (the last arriver's time inside: what the collective costs once everyone is there; a straggler
// leaves it alone). A group is slow in a round when its median link time is a high outlier among the groups of its
// kind (C3 statistical with 3 or more groups, kappa; the ratio rule with 2: link_min_ratio and link_min_absolute_ns)
// and it is slower than the others call by call in at least link_min_consistency of the calls (a slow link slows
// every call; a loaded host's descheduling only some).
#include <algorithm>

#include "lib/straggler/measures/measures.hpp"

namespace scout::straggler::detail {

void measure_link(const TimingTable& t, const DecideOptions& o, RoundResult& out) {
  // Per kind, each group's median link time over the calls all groups of the kind share.
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
}

}  // namespace scout::straggler::detail
