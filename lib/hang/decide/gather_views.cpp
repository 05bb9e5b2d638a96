// Stage 1, gather views. Reads: every reachable observer's ranks (snapshot,
// process, writer liveness) and record problems, --mesh. Rule: one view per
// rank; when two observers report a rank, the record with the newest heartbeat
// wins (the conflict is listed); a rank with neither a record nor a problem is
// unreachable when some observer did not answer, else missing. The world is
// --mesh's, else the largest the records name. Bounds: k_dense_ranks_per_record,
// k_dense_ranks_extra, k_max_world_size (thresholds.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "lib/hang/decide/stages.hpp"
#include "lib/hang/thresholds.hpp"

namespace scout::hang::stages {

// One view per rank of the job from every reachable observer's evidence (the
// record with the newest heartbeat wins when two observers report a rank),
// the record problems naming ranks without one, and the world size (--mesh's,
// else the largest the records name).
Views gather_views(const DecisionInput& in) {
  Views out;
  struct Seen {
    const RankEvidence* evidence = nullptr;
    const std::string* node = nullptr;
  };
  std::size_t rank_count = 0;
  for (const auto& n : in.nodes)
    if (n) rank_count += n->ranks.size();
  // Ranks in [0, dense_limit) in a vector; any other rank a blob names in a map.
  const std::int64_t dense_limit =
      static_cast<std::int64_t>(k_dense_ranks_per_record * rank_count + k_dense_ranks_extra);
  std::vector<Seen> dense;
  std::unordered_map<std::int64_t, Seen> sparse;
  auto slot = [&](std::int64_t r) -> std::pair<Seen*, bool> {
    if (r >= 0 && r < dense_limit) {
      if (static_cast<std::size_t>(r) >= dense.size())
        dense.resize(std::max<std::size_t>(r + 1, dense.size() * 2), Seen{});
      Seen& e = dense[r];
      return {&e, e.evidence == nullptr};
    }
    auto [it, fresh] = sparse.try_emplace(r, Seen{});
    return {&it->second, fresh};
  };
  for (std::size_t i = 0; i < in.nodes.size(); ++i) {
    const auto& n = in.nodes[i];
    if (!n) {
      out.unreachable_obs.push_back(static_cast<std::int64_t>(i));
      continue;
    }
    out.reached_obs.push_back(static_cast<std::int64_t>(i));
    for (const auto& re : n->ranks) {
      const auto& s = re.snapshot;
      const std::string* node = s.host.empty() ? &n->node : &s.host;
      auto [seen, fresh] = slot(s.rank);
      if (!fresh) {
        out.conflicts.push_back({{"rank", s.rank}, {"nodes", {*seen->node, n->node}}});
        if (s.heartbeat_ns <= seen->evidence->snapshot.heartbeat_ns) continue;
      }
      *seen = Seen{&re, node};
    }
    for (const auto& issue : n->issues) out.issues.try_emplace(issue.segment, &issue);
  }
  auto for_each_seen = [&](auto&& fn) {
    for (std::size_t r = 0; r < dense.size(); ++r)
      if (dense[r].evidence) fn(static_cast<std::int64_t>(r), dense[r]);
    for (const auto& [r, e] : sparse) fn(r, e);
  };
  std::int64_t world = 0;
  for_each_seen([&](std::int64_t r, const Seen& e) {
    world = std::max({world, e.evidence->snapshot.world_size, r + 1});
  });
  if (in.mesh) world = in.mesh->world_size();
  for (const auto& [seg, issue] : out.issues)
    if (!in.mesh && issue->rank >= world && issue->rank < k_max_world_size) world = issue->rank + 1;
  out.world = world;
  if (world <= 0) return out;
  out.ranks.resize(static_cast<std::size_t>(world));
  for_each_seen([&](std::int64_t r, const Seen& e) {
    if (r < 0 || r >= world) return;
    out.ranks[r].evidence = e.evidence;
    out.ranks[r].node = e.node;
  });
  for (const auto& [seg, issue] : out.issues)
    if (issue->rank >= 0 && issue->rank < world && !out.ranks[issue->rank].evidence)
      out.ranks[issue->rank].issue = issue;
  for (std::int64_t r = 0; r < world; ++r)
    if (!out.ranks[r].evidence && !out.ranks[r].issue) {
      if (!out.unreachable_obs.empty())
        out.ranks[r].unreachable = true;
      else
        out.missing.push_back(r);
    }
  return out;
}

// Infers the mesh from the records' coordinates when they are consistent with
// row-major placement in some order of the dims in use (the canonical order
// first: SCOUT_MESH=dp=2,pp=2,tp=2 places tp fastest, dp=2,tp=2,pp=2 pp);
// otherwise every rank is a data-parallel replica.
Mesh infer_mesh(std::int64_t world, const std::vector<RankView>& views, std::string& how) {
  Coords sizes{1, 1, 1, 1, 1, 1};
  bool any = false;
  for (const auto& v : views) {
    if (!v.evidence) continue;
    any = true;
    for (int d = 0; d < k_dim_count; ++d) sizes[d] = std::max(sizes[d], v.evidence->snapshot.coords[d] + 1);
  }
  std::int64_t product = 1;
  for (auto s : sizes) product *= s;
  if (any && product == world && product > 1) {
    auto m = mesh_from_coordinates(sizes, [&](const Mesh& mesh) {
      for (std::size_t r = 0; r < views.size(); ++r)
        if (views[r].evidence) {
          Coords c;
          for (int d = 0; d < k_dim_count; ++d) c[d] = views[r].evidence->snapshot.coords[d];
          if (mesh.rank(c) != static_cast<std::int64_t>(r)) return false;
        }
      return true;
    });
    if (m) {
      how = "records";
      return *m;
    }
  }
  how = "default";
  return *Mesh::parse(fmt::format("dp={}", world));
}

}  // namespace scout::hang::stages
