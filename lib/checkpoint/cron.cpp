#include "lib/checkpoint/cron.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <optional>

#include "lib/checkpoint/verdicts.hpp"

namespace scout::checkpoint {

Result<CronOutcome> run_cron_pass(const CronRequest& o, const std::vector<std::string>& roots,
                                  const LedgerStore& store) {
  auto loaded = store.load(o.job, true);
  if (!loaded) return loaded.error();
  Ledger known = std::move(*loaded);
  auto discovered = discover_checkpoints(roots);
  if (!discovered) return discovered.error();
  const std::vector<std::string>& found = *discovered;
  nlohmann::json results = nlohmann::json::array();
  std::vector<Suspect> suspects;
  RunStats stats;
  bool any_attributed = false, any_inconclusive = false, any_invalid = false;
  for (const auto& id : found) {
    const LedgerCheckpoint* seen = known.find(id);
    const bool recheck = seen && seen->id == id && o.recheck_invalid && seen->state == CheckpointState::invalid;
    if (seen && seen->id == id && !recheck) continue;
    if (o.settle_s > 0 && seconds_since_modified(id) < o.settle_s) {
      results.push_back({{"id", id}, {"result", "settling"}, {"summary", "modified recently; checked on a later run"}});
      continue;
    }
    LayoutRequest one = o.layout;
    one.replicas.clear();
    std::optional<Manifest> manifest;
    std::string summary;
    CheckpointState state = CheckpointState::invalid;
    nlohmann::json entry = {{"id", id}};
    auto layout = resolve_layout(one, id, manifest);
    Result<VerifyReport> report =
        layout ? Result<VerifyReport>(internal_error("unset")) : Result<VerifyReport>(layout.error());
    if (layout) {
      VerifyOptions vo;
      vo.jobs = o.jobs;
      vo.manifest = manifest ? &*manifest : nullptr;
      if (o.progress) vo.progress = o.progress(id);
      report = verify_layout(*layout, vo);
    }
    if (!report) {
      const Error& e = report.error();
      if (e.code != ExitCode::bad_input && e.code != ExitCode::usage) return e;  // unavailable/internal: record nothing
      summary = e.message();
      any_invalid = true;
      entry["result"] = "invalid";
    } else {
      Verdict cv = check_verdict(*report, id);
      summary = cv.summary;
      stats.bytes += report->bytes_read;
      stats.seconds += report->seconds;
      if (cv.status == VerdictStatus::attributed) {
        state = CheckpointState::corrupt;
        any_attributed = true;
        entry["result"] = "corrupt";
        for (auto& s : cv.suspects) {
          s.evidence["checkpoint"] = id;
          suspects.push_back(s);
        }
      } else if (cv.status == VerdictStatus::inconclusive) {
        state = CheckpointState::inconclusive;
        any_inconclusive = true;
        entry["result"] = "inconclusive";
      } else {
        state = CheckpointState::pending;
        entry["result"] = "intact";
      }
      entry["bytes"] = report->bytes_read;
      entry["seconds"] = std::round(report->seconds * 1000.0) / 1000.0;
    }
    entry["summary"] = summary;
    ++stats.checked;
    const std::string now = now_rfc3339();
    auto updated = store.update(o.job, [&](Ledger& l) -> Result<bool> {
      if (recheck) return ledger_recheck_invalid(l, id, state, summary, now).changed;
      return ledger_add_checkpoint(l, id, state, summary, now).changed;
    });
    if (!updated) return updated.error();
    known = std::move(*updated);
    results.push_back(std::move(entry));
  }
  Verdict v = verify_ckpt_verdict(o.job);
  v.suspects = std::move(suspects);
  std::vector<std::string> bad;
  nlohmann::json outstanding = outstanding_json(known, bad);
  any_attributed = any_attributed || !bad.empty();  // a finding stays reported until superseded or acknowledged
  add_outstanding_suspects(v, known);
  int code = 0;
  if (any_attributed) {
    v.status = VerdictStatus::attributed;
    v.scope = Scope::rank;
    v.action = "repair_replica";
    code = to_int(ExitCode::attributed);
  } else if (any_invalid || any_inconclusive) {
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::group;
    v.action = "escalate";
    code = to_int(any_invalid ? ExitCode::bad_input : ExitCode::inconclusive);
  } else {
    v.status = VerdictStatus::healthy;
    v.action = "none";
  }
  std::size_t intact = 0;
  for (const auto& r : results) intact += r["result"] == "intact";
  std::vector<std::string> invalid;
  for (const auto& r : results)
    if (r["result"] == "invalid" || r["result"] == "inconclusive")
      invalid.push_back(fmt::format("{} {}", r["result"].get<std::string>(), r["id"].get<std::string>()));
  v.summary =
      fmt::format("{} new checkpoint(s) checked, {} intact; latest {}, verified {}", stats.checked, intact,
                  known.latest() ? known.latest()->id : "none", known.verified() ? known.verified()->id : "none");
  if (!bad.empty())
    v.summary +=
        fmt::format("; CORRUPT: {} (scout verify-ckpt ack --job {} ID once handled)", fmt::join(bad, ", "), o.job);
  if (!invalid.empty()) v.summary += fmt::format("; {}", fmt::join(invalid, "; "));
  v.details = {{"action", "cron"},
               {"checkpoints", results},
               {"ledger", ledger_summary(known, store.path())},
               {"outstanding", outstanding},
               {"bytes_read", stats.bytes},
               {"seconds", std::round(stats.seconds * 1000.0) / 1000.0}};
  stats.exit_code = code;
  CronOutcome out;
  out.verdict = std::move(v);
  out.exit_code = code;
  out.ledger = std::move(known);
  out.stats = stats;
  return out;
}

}  // namespace scout::checkpoint
