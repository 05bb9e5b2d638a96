// Stage 10 of the decision (measures.hpp): the slow process groups the link measure flagged, confirmed over a
// strict majority of rounds, consequences dropped (consequence_share), mapped to nodes:
//   machine_local        slow groups of two or more kinds meet in one node (and, when they meet in one rank, that rank)
//   intra_node_link      only groups inside one node are slow (a tp group)
//   inter_node_network   only groups spanning nodes are slow
//   cluster_wide         slow groups on many nodes with no common node (cluster_wide_nodes), or half or more groups
//                        of a kind standing out in most rounds
// and the decision's confidence.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include "lib/straggler/measures/measures.hpp"
#include "lib/straggler/thresholds.hpp"

namespace scout::straggler::detail {

double diagnose_communication(Decision& d, const std::vector<RoundResult>& rounds,
                              const std::vector<TimingTable>& tables, const DecideOptions& o) {
  const auto majority = [&](std::int64_t n) { return 2 * n > d.rounds; };
  const NodeOf node_of = nodes_of(tables);  // looked up only where a slow group is confirmed
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
    // On an oversubscribed host (noise_notes) a group's link time moves with its members' turns on the CPUs: a
    // slow group is confirmed only where it was slow in every round with data, as a slow link is. Measured, a clean
    // dp=2 x tp=2 job beside a CI build and 2 busy loops (ranks waiting for a CPU 69% as long as they computed):
    // a dp group at 6.7x and 4.1x its kind's link time in two rounds of three (7-8 calls a round, its members'
    // CPU wait no longer than the other group's), 0.79x in the third, named the inter-node network (seed
    // 578854929); rate-limited links (link-31002, link-31003) at 22-63x in every round.
    if (d.oversubscribed && static_cast<std::int64_t>(hits.size()) < d.rounds_with_data) {
      d.notes.push_back(fmt::format(
          "{} group {} was slow in {} of {} rounds on an oversubscribed host, where link times move with the "
          "members' turns on the CPUs: not named (a slow link is slow in every round; rerun with more --rounds, "
          "or when the host is less loaded)",
          groups[gi].kind, hex_id(groups[gi].id), hits.size(), d.rounds_with_data));
      continue;
    }
    SlowGroup s;
    s.group = groups[gi];
    std::set<std::string> ns;
    for (auto m : s.group.members) ns.insert(node_of.count(m) ? node_of.at(m) : "");
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
      if (excess(g) >= thresholds::consequence_share.value * largest) {
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
    s.evidence["measure"] = "link";  // the named measure that flagged it
    d.suspects.push_back(std::move(s));
  };
  if (!widespread_kinds.empty()) {
    d.diagnosis = Diagnosis::cluster_wide;
    d.notes.push_back(fmt::format("half or more of the {} groups stand out in most rounds: no single group is slow",
                                  fmt::join(widespread_kinds, ", ")));
    comm_conf = std::max(comm_conf, thresholds::cluster_wide_confidence.value);
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
  return comm_conf;
}

void decision_confidence(Decision& d, double comm_conf) {
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
}

}  // namespace scout::straggler::detail
