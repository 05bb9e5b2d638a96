#include "lib/trace/sources.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "lib/common/file.hpp"
#include "lib/hang/position.hpp"

namespace scout::trace {
namespace {

std::vector<SuspectMark> suspects_of(const Verdict& v, bool stalled) {
  std::vector<SuspectMark> out;
  for (const auto& s : v.suspects) {
    SuspectMark m;
    m.stalled = stalled;
    m.rank = s.rank;
    m.node = s.node;
    m.reason = s.reason;
    m.args["verdict_status"] = verdict_status_name(v.status);
    out.push_back(std::move(m));
  }
  return out;
}

nlohmann::json verdict_facts(const Verdict& v) {
  nlohmann::json j;
  j["verdict_status"] = verdict_status_name(v.status);
  j["verdict_summary"] = v.summary;
  if (v.details.is_object() && v.details.contains("kind")) j["verdict_kind"] = v.details["kind"];
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& s : v.suspects) ranks.push_back(s.rank);
  j["suspect_ranks"] = ranks;
  return j;
}

}  // namespace

TraceInput from_records(const std::vector<records::RecordRead>& reads, const std::string& job, std::int64_t now_ns) {
  TraceInput in;
  in.job = job;
  in.command = "records trace";
  in.end_ns = now_ns;
  std::int64_t unreadable = 0;
  for (const auto& r : reads) {
    if (!r.snapshot || r.problem != records::RecordProblem::none) {
      ++unreadable;
      continue;
    }
    Track t = track_of(*r.snapshot);
    t.args["segment"] = r.segment;
    t.args["writer_alive"] = r.writer_alive;
    t.args["stale"] = r.stale;
    in.tracks.push_back(std::move(t));
  }
  // Two readable records of one rank (another job's or attempt's): keep the first in reader order.
  std::map<std::int64_t, int> seen;
  std::erase_if(in.tracks, [&seen](const Track& t) { return seen[t.rank]++ > 0; });
  in.other["unreadable_records"] = unreadable;
  return in;
}

TraceInput from_hang(const hang::ProbeEvidence& seen, const Verdict& v) {
  TraceInput in;
  in.job = v.job;
  in.command = v.command;
  in.end_ns = seen.now_ns;
  std::int64_t gathered = 0, positions_only = 0, issues = 0;
  nlohmann::json silent = nlohmann::json::array();
  std::map<std::int64_t, int> ranks_seen;
  auto add = [&](Track t) {
    if (ranks_seen[t.rank]++ == 0) in.tracks.push_back(std::move(t));
  };
  std::vector<Mark> node_marks;
  const std::size_t slots = std::max(seen.nodes.size(), seen.positions.size());
  for (std::size_t i = 0; i < slots; ++i) {
    const hang::NodeEvidence* n = i < seen.nodes.size() && seen.nodes[i] ? &*seen.nodes[i] : nullptr;
    const hang::NodePosition* p = i < seen.positions.size() && seen.positions[i] ? &*seen.positions[i] : nullptr;
    const std::int64_t node = n ? n->observer : p ? p->observer : static_cast<std::int64_t>(i);
    if (n) {
      ++gathered;
      issues += static_cast<std::int64_t>(n->issues.size());
      for (const auto& r : n->ranks) {
        Track t = track_of(r.snapshot);
        if (t.host.empty()) t.host = n->node;
        t.node = node;
        t.ring_known = !r.ring && !r.ring_lost;
        if (!t.ring_known) t.events.clear();
        t.args["process_state"] = hang::process_state_name(r.process.state);
        t.args["writer_alive"] = r.writer_alive;
        t.args["ring_source"] = t.ring_known ? "gathered" : r.ring_lost ? "lost" : "not gathered (compact evidence)";
        add(std::move(t));
      }
      continue;
    }
    Mark m;
    m.ts_ns = seen.now_ns;
    m.args["node"] = node;
    if (p) {
      ++positions_only;
      const auto ranks = hang::position_ranks(*p);
      for (const auto r : ranks.value_or(std::vector<std::int64_t>{})) {
        Track t;
        t.rank = r;
        t.node = node;
        t.ring_known = false;
        t.progress_ns = p->newest_progress_ns;
        t.position = fmt::format("position: node {}", p->clean ? "clean" : "not clean");
        t.args["ring_source"] = "position only";
        t.args["node_clean"] = p->clean;
        add(std::move(t));
      }
      if (ranks) continue;
      m.name = fmt::format("node {}: position only ({} ranks, not one run)", node, p->ranks);
      m.args["evidence"] = "position";
      m.args["ranks"] = p->ranks;
      m.args["clean"] = p->clean;
    } else {
      if (seen.local_only) continue;  // decided alone: the other nodes were never asked
      silent.push_back(node);
      m.name = fmt::format("node {}: no evidence (observer silent)", node);
      m.args["evidence"] = "none";
    }
    node_marks.push_back(std::move(m));
  }
  in.suspects = suspects_of(v, true);
  Mark probe;
  probe.ts_ns = seen.now_ns;
  probe.name = fmt::format("probe: {}", verdict_status_name(v.status));
  probe.category = "probe";
  probe.args = verdict_facts(v);
  in.marks.push_back(std::move(probe));
  for (auto& m : node_marks) in.marks.push_back(std::move(m));
  in.other = verdict_facts(v);
  in.other["observers_gathered"] = gathered;
  in.other["observers_position_only"] = positions_only;
  in.other["observers_missing"] = static_cast<std::int64_t>(silent.size());
  in.other["silent_nodes"] = std::move(silent);
  in.other["record_issues"] = issues;
  if (seen.local_only)
    in.other["decided_alone"] =
        "the store was unreachable: this observer decided on its own node's evidence alone; no other node was asked";
  return in;
}

TraceInput from_straggler(const std::vector<straggler::RoundEvidence>& rounds, const Verdict& v) {
  TraceInput in;
  in.job = v.job;
  in.command = v.command;
  // Each rank's calls over every round, by op_seq (a later read's copy of a call wins: its exit is known).
  std::map<std::int64_t, Track> tracks;
  std::map<std::int64_t, std::map<std::uint64_t, records::CollectiveEvent>> calls;
  std::vector<std::int64_t> read_at;  // per round, its earliest read
  for (const auto& r : rounds) {
    std::int64_t at = 0;
    for (const auto& e : r.ranks) {
      at = at == 0 ? e.read_ns : std::min(at, e.read_ns);
      Track& t = tracks[e.rank];
      t.rank = e.rank;
      if (t.host.empty()) t.host = e.node;
      t.step = e.step;
      for (const auto& c : e.events) {
        auto& slot = calls[e.rank][c.op_seq];
        if (slot.enter_ns == 0 || c.exit_ns != 0) slot = c;
      }
    }
    read_at.push_back(at);
    in.end_ns = std::max(in.end_ns, at);
    for (const auto& e : r.ranks) in.end_ns = std::max(in.end_ns, e.read_ns);
  }
  for (auto& [rank, t] : tracks) {
    for (const auto& [seq, c] : calls[rank]) t.events.push_back(c);
    in.tracks.push_back(std::move(t));
  }
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    Mark m;
    m.ts_ns = read_at[i];
    m.name = rounds[i].baseline ? std::string("baseline read") : fmt::format("round {} read", i);
    m.category = "round";
    m.args["round"] = static_cast<std::int64_t>(i);
    m.args["ranks"] = static_cast<std::int64_t>(rounds[i].ranks.size());
    in.marks.push_back(std::move(m));
  }
  in.suspects = suspects_of(v, false);
  // The decided rounds are the evidence's non-baseline ones, in order; per_round[k] is the k-th.
  std::vector<std::size_t> decided;
  for (std::size_t i = 0; i < rounds.size(); ++i)
    if (!rounds[i].baseline) decided.push_back(i);
  const nlohmann::json per_round = v.details.is_object() && v.details.contains("straggler")
                                       ? v.details["straggler"].value("per_round", nlohmann::json::array())
                                       : nlohmann::json::array();
  for (std::size_t k = 0; k < decided.size() && k < per_round.size(); ++k) {
    const auto& pr = per_round[k];
    if (!pr.is_object() || !pr.contains("flagged") || !pr["flagged"].is_array()) continue;
    const std::size_t i = decided[k];
    for (const auto& f : pr["flagged"]) {
      if (!f.is_number_integer()) continue;
      const auto rank = f.get<std::int64_t>();
      if (std::none_of(v.suspects.begin(), v.suspects.end(), [rank](const Suspect& s) { return s.rank == rank; }))
        continue;  // flagged in a round, never named: the verdict's noise, not its finding
      Window w;
      w.rank = rank;
      w.round = static_cast<std::int64_t>(k) + 1;
      w.start_ns = i > 0 ? read_at[i - 1] : 0;
      w.end_ns = read_at[i];
      w.name = fmt::format("straggler: round {} flagged", w.round);
      w.args["flagged"] = true;
      in.windows.push_back(std::move(w));
    }
  }
  in.other = verdict_facts(v);
  in.other["rounds"] = static_cast<std::int64_t>(rounds.size());
  return in;
}

Status write(const std::string& path, const nlohmann::ordered_json& doc) {
  auto w = atomic_write_file(path, doc.dump() + "\n", 0644);
  if (!w) {
    Error e = w.error();
    e.what = fmt::format("cannot write the trace: {}", e.what);
    return e;
  }
  return Ok{};
}

nlohmann::json summary(const std::string& path, const TraceStats& s) {
  return {{"path", path},     {"ranks", s.tracks}, {"slices", s.slices},  {"open_slices", s.open_slices},
          {"lanes", s.lanes}, {"marks", s.marks},  {"dropped", s.dropped}};
}

std::optional<Error> write_for_verdict(const TraceInput& input, const std::string& path, Verdict& v) {
  TraceStats stats;
  const auto doc = build(input, &stats);
  auto w = write(path, doc);
  nlohmann::json j = summary(path, stats);
  j["written"] = w.ok();
  if (!w) j["error"] = w.error().message();
  if (!v.details.is_object()) v.details = nlohmann::json::object();
  v.details["trace"] = std::move(j);
  if (!w) return w.error();
  return std::nullopt;
}

}  // namespace scout::trace
