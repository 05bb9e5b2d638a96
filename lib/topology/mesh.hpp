// The job's parallelism mesh: rank <-> logical address (d, s, t, p, c, e),
// the peer groups C3 compares, and the process groups each rank belongs to.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/error.hpp"

namespace scout {

// Mesh dimensions in coordinate order (d, s, t, p, c, e).
enum class Dim : int { dp = 0, fsdp = 1, tp = 2, pp = 3, cp = 4, ep = 5 };
inline constexpr int k_dim_count = 6;
inline constexpr std::array<Dim, k_dim_count> k_all_dims = {Dim::dp, Dim::fsdp, Dim::tp, Dim::pp, Dim::cp, Dim::ep};

// "dp", "fsdp", ... for a dimension.
std::string_view dim_name(Dim dim);
// Parses a dimension name; nullopt when unknown.
std::optional<Dim> parse_dim(std::string_view name);

// A rank's logical address, indexed by Dim.
using Coords = std::array<std::int64_t, k_dim_count>;

// Which peers a rank is compared with (docs/contracts.md "Mesh and peer groups").
enum class PeerKind { replica, state_shard };
std::string_view peer_kind_name(PeerKind kind);

// Largest world size scout accepts for a mesh (guards products against overflow).
inline constexpr std::int64_t k_max_world_size = std::int64_t{1} << 31;

class Mesh {
 public:
  // Parses "dp=4,tp=2" (omitted dims are 1; the written order is the
  // placement order, last varies fastest). `order`, when given, is a
  // comma-separated permutation of dims overriding the placement order
  // (dims it omits keep their written order, placed slowest).
  static Result<Mesh> parse(std::string_view spec, std::string_view order = {});

  // Builds a mesh from sizes (indexed by Dim) and a placement order (slowest first).
  static Result<Mesh> make(const Coords& sizes, std::vector<Dim> placement);

  std::int64_t world_size() const { return m_world; }
  std::int64_t size(Dim dim) const { return m_sizes[static_cast<int>(dim)]; }
  const Coords& sizes() const { return m_sizes; }
  // Placement order, slowest-varying first.
  const std::vector<Dim>& placement() const { return m_placement; }
  // Canonical spec in placement order, e.g. "dp=4,tp=2" (size-1 dims omitted).
  std::string spec() const;

  // Coordinates of `rank` (0 <= rank < world_size()).
  Coords coords(std::int64_t rank) const;
  // Rank at `coords` (each within its dim's size).
  std::int64_t rank(const Coords& coords) const;

  // Replica peers when dp > 1, otherwise state-shard peers.
  PeerKind peer_kind() const { return size(Dim::dp) > 1 ? PeerKind::replica : PeerKind::state_shard; }
  // The peer group of `rank`: ranks equal to it in every dim but the peer dims, ascending.
  std::vector<std::int64_t> peer_group(std::int64_t rank) const;
  // All peer groups, ordered by their lowest rank.
  std::vector<std::vector<std::int64_t>> peer_groups() const;

  // The `dim` process group of `rank`: ranks differing from it only in `dim`, ascending.
  std::vector<std::int64_t> process_group(Dim dim, std::int64_t rank) const;
  // All `dim` process groups, ordered by their lowest rank.
  std::vector<std::vector<std::int64_t>> process_groups(Dim dim) const;

 private:
  std::vector<std::vector<std::int64_t>> groups_varying(const std::vector<Dim>& vary) const;
  std::vector<std::int64_t> group_of(std::int64_t rank, const std::vector<Dim>& vary) const;
  std::vector<Dim> peer_dims() const;

  Coords m_sizes{1, 1, 1, 1, 1, 1};
  Coords m_strides{0, 0, 0, 0, 0, 0};
  std::vector<Dim> m_placement;
  std::int64_t m_world = 1;
};

// Rank -> node mapping, by a fixed number of ranks per node or by host names.
class NodeMap {
 public:
  // Ranks [k*n, (k+1)*n) live on node k, named "node<k>".
  static Result<NodeMap> by_ranks_per_node(std::int64_t world, std::int64_t ranks_per_node);
  // One host per rank (hosts.size() == world) or one per node in rank-block
  // order (world divisible by hosts.size()).
  static Result<NodeMap> from_hosts(std::int64_t world, std::vector<std::string> hosts);

  std::int64_t world_size() const { return static_cast<std::int64_t>(m_node_of_rank.size()); }
  std::int64_t node_count() const { return static_cast<std::int64_t>(m_names.size()); }
  std::int64_t node_index(std::int64_t rank) const { return m_node_of_rank.at(static_cast<std::size_t>(rank)); }
  const std::string& node_name(std::int64_t rank) const {
    return m_names.at(static_cast<std::size_t>(node_index(rank)));
  }
  const std::vector<std::string>& node_names() const { return m_names; }

 private:
  std::vector<std::int64_t> m_node_of_rank;
  std::vector<std::string> m_names;
};

// The mesh of `sizes` whose row-major placement fits every rank's recorded
// coordinates (`fits` checks one candidate), trying each placement order of
// the dims of size > 1, the canonical order first: a mesh written as
// dp=2,pp=2,tp=2 places tp fastest, dp=2,tp=2,pp=2 pp. nullopt when none fits.
std::optional<Mesh> mesh_from_coordinates(const Coords& sizes, const std::function<bool(const Mesh&)>& fits);

}  // namespace scout
