#include "lib/report/verdict.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <ctime>

namespace scout {

std::string_view verdict_status_name(VerdictStatus status) {
  switch (status) {
    case VerdictStatus::healthy:
      return "healthy";
    case VerdictStatus::attributed:
      return "attributed";
    case VerdictStatus::inconclusive:
      return "inconclusive";
    case VerdictStatus::group_stall:
      return "group_stall";
  }
  return "inconclusive";
}

std::string_view scope_name(Scope scope) {
  switch (scope) {
    case Scope::rank:
      return "rank";
    case Scope::node:
      return "node";
    case Scope::group:
      return "group";
    case Scope::job:
      return "job";
  }
  return "job";
}

GroupRun make_group_run(std::string kind, std::vector<std::int64_t> members, C3Mode mode, const C3Result& result,
                        nlohmann::json values) {
  GroupRun g;
  g.kind = std::move(kind);
  g.mode = mode;
  g.status = result.status;
  g.reason = std::string(c3_reason_name(result.reason));
  for (std::size_t i = 0; i < result.outliers.size() && i < members.size(); ++i)
    if (result.outliers[i]) g.outliers.push_back(members[i]);
  g.members = std::move(members);
  g.values = std::move(values);
  if (mode == C3Mode::statistical) {
    g.stats = {{"median", result.median},
               {"scale", result.scale},
               {"scale_source", std::string(result.scale_source)},
               {"scores", result.scores}};
  } else if (result.majority_count > 0) {
    g.stats = {{"majority_count", result.majority_count}, {"majority_peer", result.majority_peer}};
  }
  return g;
}

std::string now_rfc3339() {
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t t = system_clock::to_time_t(now);
  auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms));
}

nlohmann::ordered_json to_json(const Verdict& v) {
  using nlohmann::json;
  nlohmann::ordered_json j;
  j["schema"] = k_verdict_schema;
  j["schema_version"] = k_verdict_schema_version;
  j["command"] = v.command;
  j["job"] = v.job.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.job);
  j["created_at"] = v.created_at.empty() ? now_rfc3339() : v.created_at;
  j["status"] = verdict_status_name(v.status);
  j["scope"] = scope_name(v.scope);
  j["summary"] = v.summary;
  j["suspects"] = nlohmann::ordered_json::array();
  for (const auto& s : v.suspects) {
    j["suspects"].push_back(
        nlohmann::ordered_json{{"rank", s.rank < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.rank)},
                               {"node", s.node.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.node)},
                               {"reason", s.reason},
                               {"evidence", nlohmann::ordered_json(s.evidence)}});
  }
  j["groups"] = nlohmann::ordered_json::array();
  for (const auto& g : v.groups) {
    j["groups"].push_back(nlohmann::ordered_json{{"kind", g.kind},
                                                 {"members", g.members},
                                                 {"mode", c3_mode_name(g.mode)},
                                                 {"status", c3_status_name(g.status)},
                                                 {"reason", g.reason},
                                                 {"outliers", g.outliers},
                                                 {"values", nlohmann::ordered_json(g.values)},
                                                 {"stats", nlohmann::ordered_json(g.stats)}});
  }
  j["action"] = v.action;
  j["details"] = v.details.is_null() ? nlohmann::ordered_json::object() : nlohmann::ordered_json(v.details);
  return j;
}

namespace {
std::string brief(const nlohmann::json& value) {
  std::string s = value.is_string() ? value.get<std::string>() : value.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}
}  // namespace

std::string render_text(const Verdict& v) {
  std::string out = fmt::format("scout {}: {}", v.command, verdict_status_name(v.status));
  if (!v.job.empty()) out += fmt::format(" (job {})", v.job);
  out += fmt::format("\n  scope:  {}\n  action: {}\n", scope_name(v.scope), v.action);
  if (!v.summary.empty()) out += fmt::format("  {}\n", v.summary);
  if (!v.suspects.empty()) {
    out += "suspects:\n";
    for (const auto& s : v.suspects) {
      // Who: the rank, else the node, else the replica the evidence names (checkpoint files have no rank).
      std::string who = s.rank >= 0                         ? fmt::format("rank {}", s.rank)
                        : !s.node.empty()                   ? s.node
                        : s.evidence.contains("replica")    ? fmt::format("replica {}", brief(s.evidence["replica"]))
                        : s.evidence.contains("checkpoint") ? std::string("checkpoint")
                                                            : std::string("unknown");
      if (s.rank >= 0 && !s.node.empty()) who += fmt::format(" on {}", s.node);
      out += fmt::format("  {:<20} {}", who, s.reason);
      if (s.evidence.contains("value")) out += fmt::format(" (value {})", brief(s.evidence["value"]));
      for (const char* key : {"checkpoint", "file", "source", "tensor"})
        if (s.evidence.contains(key) && s.evidence[key].is_string())
          out += fmt::format("\n  {:<20} {} {}", "", key, s.evidence[key].get<std::string>());
      out += "\n";
    }
  }
  if (!v.groups.empty()) {
    out += "groups:\n";
    for (const auto& g : v.groups) {
      std::string members =
          g.members.size() > 16 ? fmt::format("{} ranks", g.members.size()) : fmt::format("{}", g.members);
      out += fmt::format("  {:<12} {:<12} {:<12} {}", g.kind, c3_mode_name(g.mode), c3_status_name(g.status), members);
      if (!g.outliers.empty()) out += fmt::format("  outliers {}", g.outliers);
      out += "\n";
    }
  }
  // Observers that never answered, and what the transport refused (hang verdicts).
  if (v.details.is_object()) {
    if (auto u = v.details.find("unreachable"); u != v.details.end() && u->is_array() && !u->empty()) {
      std::vector<std::string> names;
      for (const auto& n : *u) names.push_back(n.is_string() ? n.get<std::string>() : n.dump());
      out += fmt::format("unreachable: {}\n", fmt::join(names, ", "));
    }
    if (auto r = v.details.find("rejected"); r != v.details.end() && r->is_array() && !r->empty()) {
      out += "rejected:\n";
      for (const auto& row : *r)
        out += fmt::format(
            "  {:<24} {}\n",
            fmt::format("observer {} ({})", row.value("observer", -1), row.value("source", std::string("evidence"))),
            row.value("reason", std::string()));
    }
  }
  return out;
}

ExitCode exit_code_for(const Verdict& v) {
  switch (v.status) {
    case VerdictStatus::healthy:
      return ExitCode::healthy;
    case VerdictStatus::attributed:
      return ExitCode::attributed;
    case VerdictStatus::inconclusive:
    case VerdictStatus::group_stall:
      return ExitCode::inconclusive;
  }
  return ExitCode::internal;
}

}  // namespace scout
