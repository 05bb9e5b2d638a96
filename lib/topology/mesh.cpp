#include "lib/topology/mesh.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "lib/common/parse.hpp"

namespace scout {

namespace {
constexpr std::array<std::string_view, k_dim_count> k_dim_names = {"dp", "fsdp", "tp", "pp", "cp", "ep"};
constexpr std::string_view k_mesh_hint =
    "write the mesh as dim=size pairs such as dp=4,tp=2 (dims: dp, fsdp, tp, pp, cp, ep)";
int idx(Dim d) {
  return static_cast<int>(d);
}
}  // namespace

std::string_view dim_name(Dim dim) {
  return k_dim_names[static_cast<std::size_t>(dim)];
}

std::optional<Dim> parse_dim(std::string_view name) {
  for (Dim d : k_all_dims)
    if (dim_name(d) == name) return d;
  return std::nullopt;
}

std::string_view peer_kind_name(PeerKind kind) {
  return kind == PeerKind::replica ? "replica" : "state_shard";
}

Result<Mesh> Mesh::parse(std::string_view spec, std::string_view order) {
  if (trim(spec).empty()) return usage_error("the mesh spec is empty", {}, std::string(k_mesh_hint));
  Coords sizes{1, 1, 1, 1, 1, 1};
  std::array<bool, k_dim_count> seen{};
  std::vector<Dim> placement;
  for (std::string_view field : split(spec, ',')) {
    field = trim(field);
    std::size_t eq = field.find('=');
    if (field.empty() || eq == std::string_view::npos)
      return usage_error(fmt::format("mesh field '{}' is not dim=size", field), {}, std::string(k_mesh_hint));
    std::string_view name = trim(field.substr(0, eq));
    auto dim = parse_dim(name);
    if (!dim) return usage_error(fmt::format("unknown mesh dimension '{}'", name), {}, std::string(k_mesh_hint));
    if (seen[idx(*dim)])
      return usage_error(fmt::format("mesh dimension '{}' is given twice", name), {}, std::string(k_mesh_hint));
    seen[idx(*dim)] = true;
    auto value = parse_int(field.substr(eq + 1), fmt::format("mesh size of {}", name));
    if (!value) return usage_error(value.error().what, value.error().why, std::string(k_mesh_hint));
    if (*value < 1)
      return usage_error(fmt::format("mesh size {}={} must be at least 1", name, *value), {},
                         "use 1 for an unused dimension, or omit it");
    if (*value >= k_max_world_size)
      return usage_error(fmt::format("mesh size {}={} is too large", name, *value),
                         fmt::format("scout accepts at most {} ranks", k_max_world_size - 1));
    sizes[idx(*dim)] = *value;
    placement.push_back(*dim);
  }
  if (!trim(order).empty()) {
    std::vector<Dim> ordered;
    std::array<bool, k_dim_count> in_order{};
    for (std::string_view name : split(order, ',')) {
      name = trim(name);
      auto dim = parse_dim(name);
      if (!dim)
        return usage_error(fmt::format("unknown dimension '{}' in --order", name), {},
                           "list dims slowest first, e.g. --order tp,dp");
      if (in_order[idx(*dim)]) return usage_error(fmt::format("dimension '{}' is repeated in --order", name));
      in_order[idx(*dim)] = true;
      ordered.push_back(*dim);
    }
    // Dims written in the spec but not named in --order stay slowest, in written order.
    std::vector<Dim> merged;
    for (Dim d : placement)
      if (!in_order[idx(d)]) merged.push_back(d);
    merged.insert(merged.end(), ordered.begin(), ordered.end());
    placement = std::move(merged);
  }
  return make(sizes, std::move(placement));
}

Result<Mesh> Mesh::make(const Coords& sizes, std::vector<Dim> placement) {
  Mesh mesh;
  mesh.m_sizes = sizes;
  // Dims never placed explicitly are size 1 or placed slowest in coordinate order.
  std::array<bool, k_dim_count> placed{};
  for (Dim d : placement) placed[idx(d)] = true;
  std::vector<Dim> full;
  for (Dim d : k_all_dims)
    if (!placed[idx(d)]) full.push_back(d);
  full.insert(full.end(), placement.begin(), placement.end());
  mesh.m_placement = placement;
  std::int64_t stride = 1;
  for (auto it = full.rbegin(); it != full.rend(); ++it) {
    std::int64_t s = sizes[idx(*it)];
    if (s < 1) return usage_error(fmt::format("mesh size {}={} must be at least 1", dim_name(*it), s));
    mesh.m_strides[idx(*it)] = stride;
    if (stride > k_max_world_size / s)
      return usage_error("the mesh has too many ranks",
                         fmt::format("the product of its sizes exceeds {}", k_max_world_size - 1),
                         "check the sizes for a typo");
    stride *= s;
  }
  if (stride >= k_max_world_size)
    return usage_error("the mesh has too many ranks",
                       fmt::format("the product of its sizes exceeds {}", k_max_world_size - 1),
                       "check the sizes for a typo");
  mesh.m_world = stride;
  return mesh;
}

std::string Mesh::spec() const {
  std::string out;
  for (Dim d : m_placement) {
    if (size(d) == 1) continue;
    if (!out.empty()) out += ',';
    out += fmt::format("{}={}", dim_name(d), size(d));
  }
  return out.empty() ? "dp=1" : out;
}

Coords Mesh::coords(std::int64_t rank) const {
  Coords c{};
  for (Dim d : k_all_dims) c[idx(d)] = (rank / m_strides[idx(d)]) % m_sizes[idx(d)];
  return c;
}

std::int64_t Mesh::rank(const Coords& c) const {
  std::int64_t r = 0;
  for (Dim d : k_all_dims) r += c[idx(d)] * m_strides[idx(d)];
  return r;
}

std::vector<Dim> Mesh::peer_dims() const {
  if (peer_kind() == PeerKind::replica) return {Dim::dp};
  return {Dim::dp, Dim::fsdp};
}

std::vector<std::int64_t> Mesh::group_of(std::int64_t of, const std::vector<Dim>& vary) const {
  Coords base = coords(of);
  for (Dim d : vary) base[idx(d)] = 0;
  std::vector<std::int64_t> members{rank(base)};
  for (Dim d : vary) {
    std::vector<std::int64_t> next;
    next.reserve(members.size() * static_cast<std::size_t>(size(d)));
    for (std::int64_t m : members)
      for (std::int64_t k = 0; k < size(d); ++k) next.push_back(m + k * m_strides[idx(d)]);
    members = std::move(next);
  }
  std::sort(members.begin(), members.end());
  return members;
}

std::vector<std::vector<std::int64_t>> Mesh::groups_varying(const std::vector<Dim>& vary) const {
  std::vector<std::vector<std::int64_t>> groups;
  std::vector<bool> done(static_cast<std::size_t>(m_world), false);
  for (std::int64_t r = 0; r < m_world; ++r) {
    if (done[static_cast<std::size_t>(r)]) continue;
    auto g = group_of(r, vary);
    for (std::int64_t m : g) done[static_cast<std::size_t>(m)] = true;
    groups.push_back(std::move(g));
  }
  return groups;
}

std::vector<std::int64_t> Mesh::peer_group(std::int64_t rank) const {
  return group_of(rank, peer_dims());
}
std::vector<std::vector<std::int64_t>> Mesh::peer_groups() const {
  return groups_varying(peer_dims());
}
std::vector<std::int64_t> Mesh::process_group(Dim dim, std::int64_t rank) const {
  return group_of(rank, {dim});
}
std::vector<std::vector<std::int64_t>> Mesh::process_groups(Dim dim) const {
  return groups_varying({dim});
}

Result<NodeMap> NodeMap::by_ranks_per_node(std::int64_t world, std::int64_t ranks_per_node) {
  if (ranks_per_node < 1) return usage_error(fmt::format("--ranks-per-node {} must be at least 1", ranks_per_node));
  if (world % ranks_per_node != 0)
    return usage_error(fmt::format("--ranks-per-node {} does not divide the world size {}", ranks_per_node, world), {},
                       "every node must hold the same number of ranks; or give --hosts");
  NodeMap map;
  std::int64_t nodes = world / ranks_per_node;
  for (std::int64_t n = 0; n < nodes; ++n) map.m_names.push_back(fmt::format("node{}", n));
  map.m_node_of_rank.resize(static_cast<std::size_t>(world));
  for (std::int64_t r = 0; r < world; ++r) map.m_node_of_rank[static_cast<std::size_t>(r)] = r / ranks_per_node;
  return map;
}

Result<NodeMap> NodeMap::from_hosts(std::int64_t world, std::vector<std::string> hosts) {
  if (hosts.empty()) return usage_error("the host list is empty");
  for (const auto& h : hosts)
    if (h.empty())
      return usage_error("the host list has an empty name", {},
                         "separate host names with commas, one per node or one per rank");
  std::int64_t n = static_cast<std::int64_t>(hosts.size());
  std::vector<std::string> per_rank;
  if (n == world) {
    per_rank = std::move(hosts);
  } else if (world % n == 0) {
    for (std::int64_t r = 0; r < world; ++r) per_rank.push_back(hosts[static_cast<std::size_t>(r / (world / n))]);
  } else {
    return usage_error(fmt::format("{} hosts do not fit a world of {} ranks", n, world), {},
                       "give one host per rank, or one per node with equal ranks per node");
  }
  NodeMap map;
  std::map<std::string, std::int64_t> index;
  for (const auto& h : per_rank) {
    auto [it, inserted] = index.emplace(h, static_cast<std::int64_t>(map.m_names.size()));
    if (inserted) map.m_names.push_back(h);
    map.m_node_of_rank.push_back(it->second);
  }
  return map;
}

std::optional<Mesh> mesh_from_coordinates(const Coords& sizes, const std::function<bool(const Mesh&)>& fits) {
  std::vector<int> used;  // indices into k_all_dims of the dims of size > 1, canonical order
  for (int d = 0; d < k_dim_count; ++d)
    if (sizes[idx(k_all_dims[d])] > 1) used.push_back(d);
  do {
    std::vector<Dim> order;
    for (int d : used) order.push_back(k_all_dims[d]);
    auto m = Mesh::make(sizes, order);
    if (!m) return std::nullopt;
    if (fits(*m)) return *m;
  } while (std::next_permutation(used.begin(), used.end()));
  return std::nullopt;
}

}  // namespace scout
