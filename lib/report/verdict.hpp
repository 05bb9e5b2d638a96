// The verdict envelope every command prints (docs/contracts.md "Verdict JSON"), its
// JSON form (schemas/verdict.schema.json) and a text rendering for people.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/common/exit_code.hpp"
#include "lib/consensus/c3.hpp"

namespace scout {

inline constexpr std::string_view k_verdict_schema = "scout.verdict";
inline constexpr std::string_view k_verdict_schema_version = "1.0";

enum class VerdictStatus { healthy, attributed, inconclusive, group_stall };
enum class Scope { rank, node, group, job };

std::string_view verdict_status_name(VerdictStatus status);
std::string_view scope_name(Scope scope);

// A rank (or node) the verdict blames, with why and the evidence behind it.
struct Suspect {
  std::int64_t rank = -1;  // -1 when the suspect is a whole node
  std::string node;        // empty when unknown
  std::string reason;      // machine-readable, e.g. "value_differs_from_majority"
  nlohmann::json evidence = nlohmann::json::object();
};

// One C3 run: which peers were compared, how, and what it decided.
struct GroupRun {
  std::string kind;                   // "replica", "state_shard", "tp", "input", ...
  std::vector<std::int64_t> members;  // rank ids, in peer order
  C3Mode mode = C3Mode::exact;
  C3Status status = C3Status::agree;
  std::string reason;                               // c3_reason_name(...)
  std::vector<std::int64_t> outliers;               // rank ids of outliers
  nlohmann::json values = nlohmann::json::array();  // the gathered evidence, in peer order
  nlohmann::json stats = nlohmann::json::object();  // statistical: median, scale, ...
};

// Builds a GroupRun from a C3 result over `members` (same order as the evidence).
GroupRun make_group_run(std::string kind, std::vector<std::int64_t> members, C3Mode mode, const C3Result& result,
                        nlohmann::json values);

struct Verdict {
  std::string command;
  std::string job;         // empty -> null
  std::string created_at;  // RFC 3339 UTC; filled by finalize() when empty
  VerdictStatus status = VerdictStatus::healthy;
  Scope scope = Scope::job;
  std::string summary;  // one sentence for people
  std::vector<Suspect> suspects;
  std::vector<GroupRun> groups;
  std::string action = "none";
  nlohmann::json details = nlohmann::json::object();
};

// Current time as RFC 3339 UTC with milliseconds, e.g. 2026-11-29T08:00:00.123Z.
std::string now_rfc3339();

// The verdict as JSON, per schemas/verdict.schema.json, keys in envelope order.
nlohmann::ordered_json to_json(const Verdict& verdict);

// The verdict back from its JSON form (to_json's output, e.g. a decision one
// observer made and sent to the others). Bad input naming the field when a
// required field is missing or of the wrong type, or an enum value is unknown.
Result<Verdict> verdict_from_json(const nlohmann::json& json);

// The verdict for a person: status line, suspects, groups, action.
std::string render_text(const Verdict& verdict);

// The documented exit code for a verdict's status.
ExitCode exit_code_for(const Verdict& verdict);

}  // namespace scout
