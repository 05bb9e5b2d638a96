#include "commands/groups.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>

#include "lib/common/parse.hpp"
#include "lib/topology/mesh.hpp"

namespace scout {

CommandRunner register_groups(CLI::App& cmd, const GlobalOptions& globals) {
  auto opts = std::make_shared<GroupsOptions>();
  cmd.add_option("--mesh", opts->mesh,
                 "Parallelism mesh, e.g. dp=4,tp=2 (dims dp,fsdp,tp,pp,cp,ep; last varies fastest)")
      ->required();
  cmd.add_option("--order", opts->order, "Placement order override, slowest first, e.g. tp,dp");
  cmd.add_option("--ranks-per-node", opts->ranks_per_node, "Ranks per node (node k holds ranks k*N..k*N+N-1)")
      ->each([opts](const std::string&) { opts->ranks_per_node_given = true; });
  cmd.add_option("--hosts", opts->hosts, "Host names, one per node or one per rank, comma-separated");
  cmd.add_option("--world-size", opts->world_size, "Expected world size; an error when the mesh disagrees");
  cmd.add_option("--rank", opts->rank, "Show only this rank");
  cmd.footer("Example: scout groups --mesh dp=4,tp=2 --ranks-per-node 4");
  return make_runner(opts, globals, run_groups);
}

namespace {

nlohmann::json coords_json(const Mesh& mesh, std::int64_t rank) {
  nlohmann::json c = nlohmann::json::object();
  Coords xs = mesh.coords(rank);
  for (Dim d : k_all_dims) c[std::string(dim_name(d))] = xs[static_cast<int>(d)];
  return c;
}

std::string text_report(const Mesh& mesh, const NodeMap* nodes, const std::vector<std::int64_t>& shown) {
  std::string out = fmt::format("mesh {} ({} ranks), peer groups are {} groups\n", mesh.spec(), mesh.world_size(),
                                peer_kind_name(mesh.peer_kind()));
  out += fmt::format("{:>6}  {:<24} {:<8} {:<24} {}\n", "rank", "coords (d,s,t,p,c,e)", "node", "peer group",
                     "process groups");
  for (std::int64_t r : shown) {
    Coords c = mesh.coords(r);
    std::string pgs;
    for (Dim d : k_all_dims) {
      if (mesh.size(d) == 1) continue;
      pgs += fmt::format("{}={} ", dim_name(d), mesh.process_group(d, r));
    }
    out += fmt::format("{:>6}  {:<24} {:<8} {:<24} {}\n", r, fmt::format("({})", fmt::join(c, ",")),
                       nodes ? nodes->node_name(r) : "-", fmt::format("{}", mesh.peer_group(r)), pgs);
  }
  return out;
}

}  // namespace

int run_groups(const GroupsOptions& o) {
  Mesh mesh = value_or_throw(Mesh::parse(o.mesh, o.order));
  if (o.world_size > 0 && o.world_size != mesh.world_size())
    throw FatalError(usage_error(
        fmt::format("the mesh {} has {} ranks but --world-size is {}", mesh.spec(), mesh.world_size(), o.world_size),
        {}, "fix the mesh sizes so that their product is the world size"));
  if (o.ranks_per_node_given && o.ranks_per_node < 1)
    throw FatalError(usage_error(fmt::format("--ranks-per-node must be at least 1, not {}", o.ranks_per_node), {},
                                 "give how many ranks each node holds, e.g. --ranks-per-node 8"));
  if (o.ranks_per_node != 0 && !o.hosts.empty())
    throw FatalError(usage_error("--ranks-per-node and --hosts are mutually exclusive", {}, "give one of them"));
  std::optional<NodeMap> nodes;
  if (o.ranks_per_node != 0) nodes = value_or_throw(NodeMap::by_ranks_per_node(mesh.world_size(), o.ranks_per_node));
  if (!o.hosts.empty()) {
    std::vector<std::string> hosts;
    for (auto h : split(o.hosts, ',')) hosts.emplace_back(trim(h));
    nodes = value_or_throw(NodeMap::from_hosts(mesh.world_size(), std::move(hosts)));
  }
  std::vector<std::int64_t> shown;
  if (o.rank) {
    if (*o.rank < 0 || *o.rank >= mesh.world_size())
      throw FatalError(usage_error(fmt::format("--rank {} is outside the mesh", *o.rank),
                                   fmt::format("ranks are 0..{}", mesh.world_size() - 1)));
    shown.push_back(*o.rank);
  } else {
    for (std::int64_t r = 0; r < mesh.world_size(); ++r) shown.push_back(r);
  }

  if (o.format == OutputFormat::text) {
    std::string out = text_report(mesh, nodes ? &*nodes : nullptr, shown);
    write_stdout(out);
    return to_int(ExitCode::healthy);
  }

  Verdict v;
  v.command = "groups";
  v.summary = fmt::format("mesh {} has {} ranks in {} {} peer groups", mesh.spec(), mesh.world_size(),
                          mesh.peer_groups().size(), peer_kind_name(mesh.peer_kind()));
  nlohmann::json d;
  d["mesh"] = mesh.spec();
  d["world_size"] = mesh.world_size();
  d["order"] = nlohmann::json::array();
  for (Dim dim : mesh.placement()) d["order"].push_back(dim_name(dim));
  d["sizes"] = nlohmann::json::object();
  for (Dim dim : k_all_dims) d["sizes"][std::string(dim_name(dim))] = mesh.size(dim);
  d["peer_kind"] = peer_kind_name(mesh.peer_kind());
  d["peer_groups"] = nlohmann::json::array();
  auto add_group = [&](const std::vector<std::int64_t>& g) {
    d["peer_groups"].push_back({{"kind", peer_kind_name(mesh.peer_kind())}, {"members", g}});
  };
  if (o.rank)
    add_group(mesh.peer_group(*o.rank));
  else
    for (const auto& g : mesh.peer_groups()) add_group(g);
  d["process_groups"] = nlohmann::json::object();
  for (Dim dim : k_all_dims) {
    if (mesh.size(dim) == 1) continue;
    if (o.rank)
      d["process_groups"][std::string(dim_name(dim))] = {mesh.process_group(dim, *o.rank)};
    else
      d["process_groups"][std::string(dim_name(dim))] = mesh.process_groups(dim);
  }
  if (nodes) {
    d["nodes"] = nlohmann::json::array();
    for (std::int64_t n = 0; n < nodes->node_count(); ++n) {
      std::vector<std::int64_t> ranks;
      for (std::int64_t r = 0; r < mesh.world_size(); ++r)
        if (nodes->node_index(r) == n) ranks.push_back(r);
      d["nodes"].push_back({{"node", nodes->node_names()[static_cast<std::size_t>(n)]}, {"ranks", ranks}});
    }
  } else {
    d["nodes"] = nullptr;
  }
  d["ranks"] = nlohmann::json::array();
  for (std::int64_t r : shown) {
    nlohmann::json rj = {{"rank", r},
                         {"coords", coords_json(mesh, r)},
                         {"node", nodes ? nlohmann::json(nodes->node_name(r)) : nlohmann::json(nullptr)},
                         {"peer_group", mesh.peer_group(r)}};
    rj["process_groups"] = nlohmann::json::object();
    for (Dim dim : k_all_dims)
      if (mesh.size(dim) > 1) rj["process_groups"][std::string(dim_name(dim))] = mesh.process_group(dim, r);
    d["ranks"].push_back(std::move(rj));
  }
  v.details = std::move(d);
  return emit_verdict(v, o.format);
}

}  // namespace scout
