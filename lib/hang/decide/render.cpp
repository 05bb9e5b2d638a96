// Stage 7, render: the verdict's details. Reads: the views, positions, waits,
// comparison and explanation. What it writes: the observers, record problems
// and conflicts (render_header); the verdict when there is nothing to decide;
// the world and mesh; each suspect with its evidence, the process facts and the
// measure and stage that named it (evidence.measure, evidence.stage);
// the victims and the waits; one row per rank (beyond k_max_rank_rows only the
// notable ones). Output bounds:
// k_max_rank_rows, k_max_group_values, k_max_listed_waits. It decides nothing.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "lib/hang/decide/stages.hpp"
#include "lib/hang/position.hpp"
#include "lib/hang/thresholds.hpp"

namespace scout::hang::stages {

void append_rejected(Verdict& v, const std::vector<RejectedObserver>& rejected) {
  if (rejected.empty()) return;
  v.summary += fmt::format("; {} observer{} rejected (details.rejected): {}", rejected.size(),
                           rejected.size() > 1 ? "s" : "", rejected.front().reason);
}

json rejected_json(const std::vector<RejectedObserver>& rejected) {
  json out = json::array();
  for (const auto& r : rejected) {
    json row = {{"observer", r.observer},
                {"reason", r.reason},
                {"source", r.source == RejectedObserver::Source::presence ? "presence" : "evidence"}};
    if (r.source == RejectedObserver::Source::presence) {
      row["host"] = r.host;
      row["pid"] = r.pid;
      row["attempt"] = r.attempt;
    }
    out.push_back(std::move(row));
  }
  return out;
}

// The attempts the records that were set aside as another attempt's belong to.
std::set<std::string> other_attempts(const Views& views) {
  std::set<std::string> out;
  for (const auto& [seg, issue] : views.issues)
    if (issue->problem == "stale") out.insert(issue->attempt.empty() ? std::string("(unknown)") : issue->attempt);
  return out;
}

Verdict render_header(const DecisionInput& in, const Views& views) {
  Verdict v;
  v.command = in.command;
  v.job = in.job;
  v.details = json::object();
  v.details["threshold_s"] = seconds(in.threshold_ns);
  json issue_list = json::array();
  for (const auto& [seg, issue] : views.issues) {
    json row = {{"segment", seg},
                {"problem", issue->problem},
                {"message", issue->message},
                {"rank", issue->rank >= 0 ? json(issue->rank) : json(nullptr)},
                {"writer_alive", issue->writer_alive}};
    if (!issue->attempt.empty()) row["attempt"] = issue->attempt;
    issue_list.push_back(std::move(row));
  }
  json unreachable_names = json::array();
  for (auto o : views.unreachable_obs) unreachable_names.push_back(fmt::format("node{}", o));
  json rejected = rejected_json(in.rejected);
  v.details["observers"] = {
      {"expected", in.nodes.size()}, {"reached", views.reached_obs}, {"unreachable", views.unreachable_obs}};
  v.details["unreachable"] = unreachable_names;
  v.details["rejected"] = rejected;
  v.details["record_issues"] = issue_list;
  if (!views.conflicts.empty()) v.details["conflicts"] = views.conflicts;
  return v;
}

bool render_no_evidence(const DecisionInput& in, const Views& views, Verdict& v) {
  const std::int64_t world = views.world;
  bool any_snapshot = false;
  for (const auto& r : views.ranks) any_snapshot |= r.evidence != nullptr;
  const auto attempts = other_attempts(views);
  if (!(world <= 0 || (!any_snapshot && !attempts.empty()))) return false;
  v.status = VerdictStatus::inconclusive;
  v.scope = Scope::job;
  v.action = "escalate";
  if (!attempts.empty()) {
    // Records of another attempt only: never healthy, and say whose they are.
    std::vector<std::string> names(attempts.begin(), attempts.end());
    v.summary = fmt::format(
        "the only records of job '{}' belong to attempt{} {}{}: nothing of the attempt probed; probe that attempt "
        "(--attempt {}), or, if the job restarted, wait until its new attempt publishes",
        in.job, names.size() > 1 ? "s" : "", fmt::join(names, ", "),
        in.nodes.empty() || !in.nodes[0] || in.nodes[0]->attempt.empty()
            ? std::string()
            : fmt::format(" (not '{}')", in.nodes[0]->attempt),
        names.front());
    v.details["record_attempts"] = names;
  } else {
    v.summary = views.unreachable_obs.empty() ? "no readable progress record of this job was found"
                                              : "no readable progress record; some observers were unreachable";
  }
  v.details["kind"] = hang_kind_name(HangKind::no_evidence);
  v.details["world_size"] = std::max<std::int64_t>(world, 0);
  v.details["stalled"] = false;
  v.details["victims"] = json::array();
  v.details["ranks"] = json::array();
  append_rejected(v, in.rejected);
  return true;
}

void render_world(const Views& views, const Mesh& mesh, const std::string& mesh_source, const Positions& pos,
                  Verdict& v) {
  const std::int64_t world = views.world;
  const auto attempts = other_attempts(views);
  v.details["world_size"] = world;
  v.details["mesh"] = mesh.spec().empty() ? fmt::format("dp={}", world) : mesh.spec();
  v.details["mesh_source"] = mesh_source;
  v.details["missing_ranks"] = views.missing;
  if (!attempts.empty()) v.details["record_attempts"] = std::vector<std::string>(attempts.begin(), attempts.end());
  v.details["silent_s"] = seconds(std::max<std::int64_t>(pos.silent_ns, 0));
  v.details["stalled"] = pos.stalled;
}

void render_findings(const DecisionInput& in, const Views& views, const Positions& pos, const Waits& waits,
                     Explanation& ex, Verdict& v) {
  const std::int64_t world = views.world;
  auto node_for = [&](std::int64_t r) { return views.ranks[r].node ? *views.ranks[r].node : std::string(); };
  for (auto& [r, f] : ex.suspects) {
    Suspect s;
    s.rank = r;
    s.node = node_for(r);
    s.reason = f.reason;
    json evidence = std::move(f.evidence);
    evidence["measure"] = measure_name(f.measure);
    evidence["stage"] = measure_stage(f.measure);
    if (const auto* e = views.ranks[r].evidence) {
      const auto& snap = e->snapshot;
      evidence["process"] = process_json(e->process, snap.pid);
      evidence["silent_s"] = seconds(std::max<std::int64_t>(in.now_ns - last_progress(snap), 0));
      evidence["op_seq"] = snap.op_seq;
      evidence["phase"] = records::phase_name(snap.phase);
      if (!evidence.contains("step")) evidence["step"] = snap.step;
      if (!evidence.contains("pending")) evidence["pending"] = fingerprint_json(snap.pending);
    }
    s.evidence = std::move(evidence);
    v.suspects.push_back(std::move(s));
  }
  // Whole nodes: the node's ranks with how each ended.
  for (auto& n : ex.nodes) {
    Suspect s;
    s.node = n.node;
    s.reason = n.finding.reason;
    json evidence = std::move(n.finding.evidence);
    evidence["measure"] = measure_name(n.finding.measure);
    evidence["stage"] = measure_stage(n.finding.measure);
    json ranks = json::array();
    for (auto r : n.ranks) {
      if (ranks.size() >= k_max_group_values) break;
      const auto* e = views.ranks[r].evidence;
      if (!e) {
        ranks.push_back({{"rank", r}, {"record", views.ranks[r].unreachable ? "unreachable" : "missing"}});
        continue;
      }
      const auto& snap = e->snapshot;
      ranks.push_back({{"rank", r},
                       {"process", process_json(e->process, snap.pid)},
                       {"silent_s", seconds(std::max<std::int64_t>(in.now_ns - last_progress(snap), 0))},
                       {"step", snap.step},
                       {"pending", fingerprint_json(snap.pending)}});
    }
    evidence["ranks"] = std::move(ranks);
    s.evidence = std::move(evidence);
    v.suspects.push_back(std::move(s));
  }
  v.details["victims"] = ex.victims;
  // The waits: who is inside which call, waiting for which members (small worlds: every one).
  json wait_rows = json::array();
  for (std::int64_t w = 0; w < world && wait_rows.size() < k_max_listed_waits; ++w)
    if (waits.waiting(w)) {
      const auto& f = pos.ranks[w].s->pending;
      const auto& bl = waits.blockers(w);
      std::vector<std::int64_t> listed(
          bl.begin(), bl.begin() + static_cast<std::ptrdiff_t>(std::min(bl.size(), k_max_group_values)));
      wait_rows.push_back({{"rank", w},
                           {"group", Roles::name(pos.ranks[w].role, f.group)},
                           {"group_id", hex_id(f.group)},
                           {"group_seq", f.group_seq},
                           {"waiting_for", listed},
                           {"chain_ends_at", waits.ends({w}, world)}});
    }
  v.details["waits"] = std::move(wait_rows);
}

void render_rows(const DecisionInput& in, const Views& views, const Positions& pos, const Comparison& cmp,
                 const Explanation& ex, bool stalled, bool big_world, HangKind kind, Verdict& v) {
  const std::int64_t world = views.world;
  // Per-rank rows: every rank up to k_max_rank_rows; beyond, only the ranks that stand out.
  std::set<std::int64_t> notable;
  for (const auto& s : v.suspects)
    if (s.rank >= 0) notable.insert(s.rank);
  for (auto r : ex.victim_ranks) notable.insert(r);
  for (const auto& n : ex.nodes) notable.insert(n.ranks.begin(), n.ranks.end());
  json rank_rows = json::array();
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& view = views.ranks[r];
    const auto& p = pos.ranks[r];
    if (big_world && !notable.count(r) && view.evidence && (cmp.at_majority[r] || !stalled) &&
        view.evidence->process.state == ProcessState::alive)
      continue;
    json row = {{"rank", r}};
    if (view.evidence) {
      const auto& s = view.evidence->snapshot;
      row["node"] = view.node ? *view.node : std::string();
      row["step"] = s.step;
      row["op_seq"] = s.op_seq;
      row["phase"] = records::phase_name(s.phase);
      row["pending"] = fingerprint_json(s.pending);
      row["group"] = Roles::name(p.role, s.pending.group);
      row["collective_state"] = records::collective_state_name(s.collective_state);
      row["silent_s"] = seconds(std::max<std::int64_t>(in.now_ns - last_progress(s), 0));
      row["writer_alive"] = view.evidence->writer_alive;
      row["process"] = process_json(view.evidence->process, s.pid);
      row["ring_events"] = s.recent.size();
      if (s.dropped > 0) row["dropped_events"] = s.dropped;
    } else if (view.issue) {
      row["record_problem"] = view.issue->problem;
      row["writer_alive"] = view.issue->writer_alive;
    } else {
      row["record_problem"] = view.unreachable ? "unreachable" : "missing";
    }
    rank_rows.push_back(std::move(row));
  }
  v.details["ranks_listed"] = big_world ? "notable" : "all";
  v.details["ranks"] = std::move(rank_rows);
  v.details["kind"] = hang_kind_name(kind);
  append_rejected(v, in.rejected);
}

}  // namespace scout::hang::stages

namespace scout::hang {

using stages::append_rejected;
using stages::json;
using stages::rejected_json;
using stages::seconds;

void add_rejected(Verdict& v, const std::vector<RejectedObserver>& rejected) {
  if (rejected.empty()) return;
  if (!v.details.contains("rejected") || !v.details["rejected"].is_array()) v.details["rejected"] = json::array();
  for (auto& row : rejected_json(rejected)) v.details["rejected"].push_back(std::move(row));
  append_rejected(v, rejected);
}

Verdict healthy_from_positions(const DecisionInput& in, const std::vector<NodePosition>& positions) {
  std::int64_t now = 0, newest = 0, world = 0;
  for (const auto& p : positions) {
    now = std::max(now, p.collected_ns);
    newest = std::max(newest, p.newest_progress_ns);
    world = std::max(world, p.world_size);
  }
  const std::int64_t silent = newest > 0 ? std::max<std::int64_t>(now - newest, 0) : 0;
  Verdict v;
  v.command = in.command;
  v.job = in.job;
  v.status = VerdictStatus::healthy;
  v.scope = Scope::job;
  v.action = "none";
  v.summary = newest == 0 ? std::string("no rank has published progress yet (starting up)")
                          : fmt::format("progress is not silent (last progress {:.1f} s ago, threshold {:.1f} s)",
                                        seconds(silent), seconds(in.threshold_ns));
  std::vector<std::int64_t> reached;
  for (const auto& p : positions) reached.push_back(p.observer);
  json details = json::object();
  details["threshold_s"] = seconds(in.threshold_ns);
  details["observers"] = {{"expected", positions.size()}, {"reached", reached}, {"unreachable", json::array()}};
  details["unreachable"] = json::array();
  details["rejected"] = rejected_json(in.rejected);
  details["record_issues"] = json::array();
  details["world_size"] = world;
  if (in.mesh) {
    details["mesh"] = in.mesh->spec().empty() ? fmt::format("dp={}", world) : in.mesh->spec();
    details["mesh_source"] = "flag";
  }
  details["missing_ranks"] = json::array();
  details["silent_s"] = seconds(silent);
  details["stalled"] = false;
  details["victims"] = json::array();
  details["waits"] = json::array();
  details["ranks_listed"] = "positions";
  details["ranks"] = json::array();
  details["kind"] = hang_kind_name(HangKind::healthy);
  v.details = std::move(details);
  append_rejected(v, in.rejected);
  return v;
}

}  // namespace scout::hang
