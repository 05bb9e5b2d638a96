#include "lib/report/verdict.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <ctime>
#include <optional>

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

template <typename E, std::size_t N>
std::optional<E> enum_named(const nlohmann::json& j, const E (&values)[N], std::string_view (*name)(E)) {
  if (!j.is_string()) return std::nullopt;
  for (auto v : values)
    if (name(v) == j.get<std::string>()) return v;
  return std::nullopt;
}

bool string_or_null(const nlohmann::json& j) {
  return j.is_string() || j.is_null();
}

// j[key] when it is a string, else `fallback` (never throws on another type).
std::string string_at(const nlohmann::json& j, const char* key, std::string fallback = {}) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace

Result<Verdict> verdict_from_json(const nlohmann::json& j) {
  auto bad = [](std::string what) { return input_error(fmt::format("verdict JSON: {}", what)); };
  if (!j.is_object()) return bad("not an object");
  if (string_at(j, "schema") != k_verdict_schema) return bad("schema is not scout.verdict");
  for (const char* key : {"command", "status", "scope", "summary", "action"})
    if (!j.contains(key) || !j[key].is_string()) return bad(fmt::format("'{}' is missing or not a string", key));
  if (!j.contains("job") || !string_or_null(j["job"])) return bad("'job' is missing or not a string");
  for (const char* key : {"suspects", "groups"})
    if (!j.contains(key) || !j[key].is_array()) return bad(fmt::format("'{}' is missing or not an array", key));
  if (!j.contains("details") || !j["details"].is_object()) return bad("'details' is missing or not an object");
  Verdict v;
  v.command = j["command"];
  v.job = j["job"].is_string() ? j["job"].get<std::string>() : std::string();
  v.created_at = string_at(j, "created_at");
  v.summary = j["summary"];
  v.action = j["action"];
  constexpr VerdictStatus statuses[] = {VerdictStatus::healthy, VerdictStatus::attributed, VerdictStatus::inconclusive,
                                        VerdictStatus::group_stall};
  constexpr Scope scopes[] = {Scope::rank, Scope::node, Scope::group, Scope::job};
  auto status = enum_named(j["status"], statuses, verdict_status_name);
  auto scope = enum_named(j["scope"], scopes, scope_name);
  if (!status) return bad("unknown status");
  if (!scope) return bad("unknown scope");
  v.status = *status;
  v.scope = *scope;
  for (const auto& s : j["suspects"]) {
    if (!s.is_object() || !s.contains("rank") || !s.contains("node") || !s.contains("reason") ||
        !(s["rank"].is_number_integer() || s["rank"].is_null()) || !string_or_null(s["node"]) ||
        !s["reason"].is_string())
      return bad("a suspect lacks rank, node or reason");
    Suspect out;
    out.rank = s["rank"].is_null() ? -1 : s["rank"].get<std::int64_t>();
    out.node = s["node"].is_string() ? s["node"].get<std::string>() : std::string();
    out.reason = s["reason"];
    out.evidence = s.value("evidence", nlohmann::json::object());
    if (!out.evidence.is_object()) return bad("a suspect's evidence is not an object");
    v.suspects.push_back(std::move(out));
  }
  constexpr C3Mode modes[] = {C3Mode::exact, C3Mode::statistical};
  constexpr C3Status c3s[] = {C3Status::agree, C3Status::attributed, C3Status::inconclusive};
  for (const auto& g : j["groups"]) {
    if (!g.is_object() || !g.contains("kind") || !g["kind"].is_string() || !g.contains("members") ||
        !g["members"].is_array() || !g.contains("outliers") || !g["outliers"].is_array() || !g.contains("reason") ||
        !g["reason"].is_string())
      return bad("a group lacks kind, members, reason or outliers");
    GroupRun out;
    out.kind = g["kind"];
    out.reason = g["reason"];
    auto mode = enum_named(g.value("mode", nlohmann::json()), modes, c3_mode_name);
    auto st = enum_named(g.value("status", nlohmann::json()), c3s, c3_status_name);
    if (!mode || !st) return bad("a group's mode or status is unknown");
    out.mode = *mode;
    out.status = *st;
    for (const auto& m : g["members"]) {
      if (!m.is_number_integer()) return bad("a group member is not an integer");
      out.members.push_back(m.get<std::int64_t>());
    }
    for (const auto& m : g["outliers"]) {
      if (!m.is_number_integer()) return bad("a group outlier is not an integer");
      out.outliers.push_back(m.get<std::int64_t>());
    }
    out.values = g.value("values", nlohmann::json::array());
    out.stats = g.value("stats", nlohmann::json::object());
    v.groups.push_back(std::move(out));
  }
  v.details = j["details"];
  return v;
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
      if (auto c = s.evidence.find("cause"); c != s.evidence.end() && c->is_string())
        out += fmt::format(" (cause {})", c->get<std::string>());
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
  // What the command could not decide or see, in its details' notes (details.notes or details.<command>.notes):
  // a text reader gets them too (a healthy straggler verdict's summary points at them).
  if (v.details.is_object()) {
    std::vector<std::string> notes;
    const auto collect = [&](const nlohmann::json& obj) {
      if (auto n = obj.find("notes"); n != obj.end() && n->is_array())
        for (const auto& line : *n)
          if (line.is_string()) notes.push_back(line.get<std::string>());
    };
    collect(v.details);
    for (const auto& [key, value] : v.details.items())
      if (value.is_object()) collect(value);
    if (!notes.empty()) {
      out += "notes:\n";
      for (const auto& n : notes) out += fmt::format("  - {}\n", n);
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
      for (const auto& row : *r) {
        if (!row.is_object()) continue;
        const auto observer = row.find("observer");
        out += fmt::format(
            "  {:<24} {}\n",
            fmt::format("observer {} ({})",
                        observer != row.end() && observer->is_number_integer() ? observer->get<std::int64_t>()
                                                                               : std::int64_t{-1},
                        string_at(row, "source", "evidence")),
            string_at(row, "reason"));
      }
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
