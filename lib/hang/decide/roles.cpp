// Stage 2, find positions: the roles of process groups. Reads: the mesh. Rule:
// a group's id is the publisher's (records::layout::group_id over its members
// in ascending order); a group of a mesh dimension has that dimension's role,
// so calls of replicas' groups (the tp groups of a dp x tp mesh) align; a pair
// of neighbouring pipeline stages has one role per pair of stage indices;
// any other id is a group the mesh does not know. Bound: k_max_pipeline_stages.
#include <fmt/format.h>

#include <algorithm>

#include "lib/common/hex.hpp"
#include "lib/hang/decide/stages.hpp"
#include "lib/hang/thresholds.hpp"
#include "lib/records/layout.hpp"

namespace scout::hang::stages {

std::uint64_t Roles::stage_pair(std::uint64_t i, std::uint64_t j) {
  return k_stage_pair + i * k_max_pipeline_stages + j;
}

std::string Roles::name(std::uint64_t role, std::uint64_t group) {
  if (role >= 1 && role <= static_cast<std::uint64_t>(k_dim_count)) return std::string(dim_name(k_all_dims[role - 1]));
  if (role == k_world) return "world";
  if (role >= k_stage_pair && role < (std::uint64_t{1} << 63)) {
    const auto pair = role - k_stage_pair;
    return fmt::format("pp pair {}-{}", pair / k_max_pipeline_stages, pair % k_max_pipeline_stages);
  }
  return "pg " + hex64(group);
}

// The group ids a publisher computes (records::layout::group_id over the
// members in ascending order) for every process group of `mesh`, and the world.
Roles make_roles(const Mesh& mesh) {
  Roles roles;
  for (int d = 0; d < k_dim_count; ++d) {
    if (mesh.size(k_all_dims[d]) <= 1) continue;
    for (auto& g : mesh.process_groups(k_all_dims[d])) {
      auto id = records::layout::group_id(g.data(), g.size());
      roles.by_id.try_emplace(id, Roles::Group{static_cast<std::uint64_t>(d + 1), std::move(g)});
    }
  }
  // Pipeline stages talk point to point with their neighbours (and the last with the first, for
  // interleaved schedules): each such pair's id, the publisher's (records::layout::group_id over
  // [lo, hi, -2]), with its members and a role per pair of stage indices. O(world) entries.
  if (const auto stages = mesh.size(Dim::pp); stages > 1 && static_cast<std::uint64_t>(stages) <= k_max_pipeline_stages)
    for (const auto& g : mesh.process_groups(Dim::pp))
      for (std::size_t i = 0; i < g.size(); ++i) {
        const std::size_t j = (i + 1) % g.size();
        if (j == i) continue;
        const std::int64_t pair[3] = {std::min(g[i], g[j]), std::max(g[i], g[j]), -2};
        roles.by_id.try_emplace(records::layout::group_id(pair, 3),
                                Roles::Group{Roles::stage_pair(std::min(i, j), std::max(i, j)), {pair[0], pair[1]}});
      }
  std::vector<std::int64_t> all(static_cast<std::size_t>(mesh.world_size()));
  for (std::int64_t r = 0; r < mesh.world_size(); ++r) all[r] = r;
  auto id = records::layout::group_id(all.data(), all.size());
  roles.by_id.try_emplace(id, Roles::Group{Roles::k_world, std::move(all)});
  return roles;
}

// A rooted call's root (broadcast, reduce, gather, scatter: recorded as a global rank; the peer of
// a send or receive) as its index among the group's members, so that replicas in different groups
// (the tp groups of a dp x tp mesh, the stage pairs of a dp x pp mesh) calling with the same
// group-local root make the same call. Other calls, and roots outside a known group, are kept as
// recorded.
records::Fingerprint group_local(const records::Fingerprint& f, const Roles& roles) {
  using T = records::CollectiveType;
  if (f.type != T::broadcast && f.type != T::reduce && f.type != T::gather && f.type != T::scatter &&
      f.type != T::send && f.type != T::recv)
    return f;
  auto it = roles.by_id.find(f.group);
  if (it == roles.by_id.end()) return f;
  const auto& m = it->second.members;
  auto at = std::lower_bound(m.begin(), m.end(), f.root_or_op);
  if (at == m.end() || *at != f.root_or_op) return f;
  auto out = f;
  out.root_or_op = at - m.begin();
  return out;
}

}  // namespace scout::hang::stages
