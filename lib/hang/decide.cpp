// The hang decision: the stages in order (lib/hang/decide/stages.hpp says what
// each reads and passes on; lib/hang/thresholds.hpp holds every threshold).
#include "lib/hang/decide.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "lib/hang/decide/stages.hpp"
#include "lib/hang/thresholds.hpp"

namespace scout::hang {

std::string_view hang_kind_name(HangKind kind) {
  switch (kind) {
    case HangKind::healthy:
      return "healthy";
    case HangKind::rank_local_divergence:
      return "rank_local_divergence";
    case HangKind::control_flow_divergence:
      return "control_flow_divergence";
    case HangKind::argument_divergence:
      return "argument_divergence";
    case HangKind::stopped_rank:
      return "stopped_rank";
    case HangKind::dead_rank:
      return "dead_rank";
    case HangKind::uninterruptible_rank:
      return "uninterruptible_rank";
    case HangKind::node_unreachable:
      return "node_unreachable";
    case HangKind::group_stall:
      return "group_stall";
    case HangKind::inconclusive:
      return "inconclusive";
    case HangKind::no_evidence:
      return "no_evidence";
  }
  return "inconclusive";
}

std::int64_t agreed_now(const std::vector<std::optional<NodeEvidence>>& nodes) {
  std::int64_t now = 0;
  for (const auto& n : nodes)
    if (n) now = std::max(now, n->collected_ns);
  return now;
}

Status check_decision_input(const DecisionInput& in, std::int64_t positions_world) {
  if (!in.mesh) return Ok{};
  std::int64_t records_world = positions_world;
  for (const auto& n : in.nodes) {
    if (!n) continue;
    for (const auto& r : n->ranks) records_world = std::max(records_world, r.snapshot.world_size);
    for (const auto& i : n->issues) records_world = std::max(records_world, i.world_size);
  }
  if (records_world > 0 && records_world != in.mesh->world_size())
    return usage_error(
        fmt::format("--mesh {} has {} ranks, but the records of job '{}' are from a world of {}",
                    in.mesh->spec().empty() ? std::string("dp=1") : in.mesh->spec(), in.mesh->world_size(), in.job,
                    records_world),
        "comparing a part of the job, or a wrong mesh, would compare ranks that are not peers",
        fmt::format("give the job's own mesh (the trainers' SCOUT_MESH) with sizes multiplying to {}, or "
                    "leave --mesh out to infer it from the records",
                    records_world));
  return Ok{};
}

Verdict decide(const DecisionInput& in) {
  using namespace stages;
  const Views views = gather_views(in);  // 1 gather views
  Verdict v = render_header(in, views);
  if (render_no_evidence(in, views, v)) return v;
  const std::int64_t world = views.world;
  std::string mesh_source = "flag";
  const Mesh mesh = in.mesh ? *in.mesh : infer_mesh(world, views.ranks, mesh_source);

  const Positions pos = find_positions(in, views, mesh);  // 2 find positions
  const bool stalled = pos.stalled;
  render_world(views, mesh, mesh_source, pos, v);
  const bool big_world = world > k_max_rank_rows;

  Comparison cmp = Comparison::none(world);
  Waits waits = Waits::none(world);
  if (stalled) {
    cmp = compare_groups(pos, views, mesh, big_world);  // 3 compare per group
    v.groups = std::move(cmp.groups);
    waits = follow_waits(pos, world);  // 4 follow waits
  }
  Explanation ex = explain(pos, cmp, waits, views, stalled);  // 5 explain
  render_findings(in, views, pos, waits, ex, v);
  const HangKind kind = conclude(in, views, pos, cmp, ex, stalled, v);  // 6 conclude
  render_rows(in, views, pos, cmp, ex, stalled, big_world, kind, v);    // 7 render
  return v;
}

}  // namespace scout::hang
