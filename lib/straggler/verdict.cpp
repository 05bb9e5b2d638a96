// The verdict of a straggler decision (decide.hpp make_verdict): the suspects with their evidence (the named
// measure that flagged each), the peer groups' runs, the slow groups, the rounds and what the verdict could not see.
#include <fmt/format.h>

#include <cmath>

#include "lib/straggler/decide.hpp"
#include "lib/straggler/measures/measures.hpp"
#include "lib/straggler/thresholds.hpp"

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
  constexpr auto k_max_runs = static_cast<std::size_t>(thresholds::max_group_runs.value);
  for (const auto& [members, values] : peer_values) {
    if (v.groups.size() >= k_max_runs) break;
    GroupRun g;
    g.kind = std::string(peer_kind_name(mesh.peer_kind()));
    g.members = members;
    g.mode = C3Mode::statistical;
    g.values = nlohmann::json::array();
    for (auto m : members) {
      auto it = values.find(m);
      g.values.push_back(it == values.end() ? nlohmann::json(nullptr) : nlohmann::json(detail::ms(median(it->second))));
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
                    {"id", detail::hex_id(s.group.id)},
                    {"members", s.group.members},
                    {"nodes", s.nodes},
                    {"intra_node", s.intra_node},
                    {"link_ratio", std::round(s.ratio * 1000) / 1000},
                    {"link_ms_per_call", detail::ms(s.link_ns)},
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
                        {"id", detail::hex_id(gi_.id)},
                        {"members", gi_.members},
                        {"link_ms_per_call", detail::ms(median(l))},
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
      out.evidence = {
          {"measure", "link"},          {"group", s.group.kind}, {"id", detail::hex_id(s.group.id)},
          {"members", s.group.members}, {"nodes", s.nodes},      {"link_ratio", std::round(s.ratio * 1000) / 1000},
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
