#include "lib/checkpoint/ledger.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>

#include "lib/common/json_input.hpp"
#include "lib/common/schema.hpp"
#include "lib/report/verdict.hpp"

namespace scout::checkpoint {

namespace fs = std::filesystem;

namespace {
constexpr std::array<std::pair<CheckpointState, std::string_view>, 7> k_states = {{
    {CheckpointState::pending, "pending"},
    {CheckpointState::verified, "verified"},
    {CheckpointState::superseded, "superseded"},
    {CheckpointState::rejected, "rejected"},
    {CheckpointState::corrupt, "corrupt"},
    {CheckpointState::inconclusive, "inconclusive"},
    {CheckpointState::invalid, "invalid"},
}};
constexpr std::array<std::pair<FailureKind, std::string_view>, 5> k_failures = {{
    {FailureKind::sdc, "sdc"},
    {FailureKind::hang, "hang"},
    {FailureKind::straggler, "straggler"},
    {FailureKind::machine_lost, "machine-lost"},
    {FailureKind::unknown, "unknown"},
}};
}  // namespace

std::string_view checkpoint_state_name(CheckpointState state) {
  for (const auto& [s, n] : k_states)
    if (s == state) return n;
  return "invalid";
}

std::optional<CheckpointState> parse_checkpoint_state(std::string_view name) {
  for (const auto& [s, n] : k_states)
    if (n == name) return s;
  return std::nullopt;
}

std::optional<FailureKind> parse_failure_kind(std::string_view name) {
  for (const auto& [k, n] : k_failures)
    if (n == name) return k;
  return std::nullopt;
}

std::string_view failure_kind_name(FailureKind kind) {
  for (const auto& [k, n] : k_failures)
    if (k == kind) return n;
  return "unknown";
}

const LedgerCheckpoint* Ledger::find(std::string_view key) const {
  for (const auto& c : checkpoints)
    if (c.id == key) return &c;
  for (const auto& c : checkpoints)
    if (fs::path(c.id).filename() == key) return &c;
  return nullptr;
}

const LedgerCheckpoint* Ledger::verified() const {
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it)
    if (it->state == CheckpointState::verified) return &*it;
  return nullptr;
}

const LedgerCheckpoint* Ledger::latest() const {
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it)
    if (it->state == CheckpointState::pending || it->state == CheckpointState::verified) return &*it;
  return nullptr;
}

const LedgerCheckpoint* Ledger::candidate() const {
  const LedgerCheckpoint* v = verified();
  for (const auto& c : checkpoints)
    if (c.state == CheckpointState::pending && (!v || c.seq > v->seq)) return &c;
  return nullptr;
}

LedgerChange ledger_add_checkpoint(Ledger& ledger, const std::string& id, CheckpointState state,
                                   const std::string& summary, const std::string& now) {
  LedgerChange change;
  if (ledger.find(id) && ledger.find(id)->id == id) {
    change.note = fmt::format("{} is already in the ledger", id);
    return change;
  }
  LedgerCheckpoint c;
  c.id = id;
  c.seq = ledger.checkpoints.empty() ? 1 : ledger.checkpoints.back().seq + 1;
  c.recorded_at = now;
  c.state = state;
  c.summary = summary;
  ledger.checkpoints.push_back(std::move(c));
  change.changed = true;
  change.note = fmt::format("recorded {} as {}", id, checkpoint_state_name(state));
  return change;
}

LedgerChange ledger_recheck_invalid(Ledger& ledger, const std::string& id, CheckpointState state,
                                    const std::string& summary, const std::string& now) {
  LedgerChange change;
  for (auto& c : ledger.checkpoints) {
    if (c.id != id || c.state != CheckpointState::invalid) continue;
    c.state = state;
    c.summary = summary;
    c.recorded_at = now;
    change.changed = state != CheckpointState::invalid;
    change.note = fmt::format("re-checked {}: {}", id, checkpoint_state_name(state));
  }
  return change;
}

std::vector<const LedgerCheckpoint*> outstanding_corrupt(const Ledger& ledger) {
  std::vector<const LedgerCheckpoint*> out;
  for (const auto& c : ledger.checkpoints) {
    if (c.state != CheckpointState::corrupt || !c.acknowledged_at.empty()) continue;
    const bool superseded =
        std::any_of(ledger.checkpoints.begin(), ledger.checkpoints.end(), [&](const LedgerCheckpoint& o) {
          return o.seq > c.seq && (o.state == CheckpointState::pending || o.state == CheckpointState::verified ||
                                   o.state == CheckpointState::superseded);
        });
    if (!superseded) out.push_back(&c);
  }
  return out;
}

Result<LedgerChange> ledger_acknowledge(Ledger& ledger, const std::string& id, const std::string& now) {
  LedgerChange change;
  for (auto& c : ledger.checkpoints) {
    if (c.id != id) continue;
    if (c.state != CheckpointState::corrupt)
      return input_error(fmt::format("{} is {}, not corrupt", id, checkpoint_state_name(c.state)),
                         "only corrupt findings are acknowledged", "see 'scout verify-ckpt status'");
    if (!c.acknowledged_at.empty()) {
      change.note = fmt::format("{} was already acknowledged at {}", id, c.acknowledged_at);
      return change;
    }
    c.acknowledged_at = now;
    change.changed = true;
    change.note = fmt::format("acknowledged corrupt checkpoint {}", id);
    return change;
  }
  return input_error(fmt::format("{} is not in the ledger", id), {},
                     "give the id that 'scout verify-ckpt status' prints");
}

Result<LedgerChange> ledger_apply_replay(Ledger& ledger, const ReplayCycle& r, const std::string& now) {
  LedgerChange change;
  if (ledger.last_cycle && r.cycle < *ledger.last_cycle)
    return input_error(fmt::format("{}: replay cycle {} is older than the ledger's last cycle {}", r.source, r.cycle,
                                   *ledger.last_cycle),
                       "replay verdicts must be recorded in cycle order",
                       "record only newer cycles; this one is stale");
  if (ledger.last_cycle && r.cycle == *ledger.last_cycle) {
    change.note = fmt::format("replay cycle {} is already recorded", r.cycle);
    return change;  // idempotent re-ingestion (a cron re-run)
  }
  const bool consecutive = !ledger.last_cycle || r.cycle == *ledger.last_cycle + 1;
  // Which checkpoints the cycle follows: up to `after` when given and known, else all recorded so far.
  std::int64_t follows_seq = ledger.checkpoints.empty() ? 0 : ledger.checkpoints.back().seq;
  if (r.after) {
    if (const auto* c = ledger.find(*r.after)) follows_seq = c->seq;
  }
  ledger.last_cycle = r.cycle;
  ++ledger.cycles_seen;
  change.changed = true;
  switch (r.outcome) {
    case ReplayOutcome::clean: {
      ledger.clean_streak = consecutive ? ledger.clean_streak + 1 : 1;
      for (auto& c : ledger.checkpoints) {
        if (c.state != CheckpointState::pending || c.seq > follows_seq) continue;
        bool chain = c.last_clean_cycle && *c.last_clean_cycle == r.cycle - 1;
        c.clean_cycles = chain ? c.clean_cycles + 1 : 1;
        c.last_clean_cycle = r.cycle;
      }
      // Promote the newest pending checkpoint with two consecutive clean cycles after it.
      LedgerCheckpoint* promote = nullptr;
      for (auto& c : ledger.checkpoints)
        if (c.state == CheckpointState::pending && c.clean_cycles >= 2) promote = &c;
      if (promote) {
        for (auto& c : ledger.checkpoints) {
          if (c.seq >= promote->seq) continue;
          if (c.state == CheckpointState::verified || c.state == CheckpointState::pending)
            c.state = CheckpointState::superseded;
        }
        promote->state = CheckpointState::verified;
        promote->decided_by_cycle = r.cycle;
        change.verified.push_back(promote->id);
      }
      change.note = promote ? fmt::format("clean replay cycle {} verified {}", r.cycle, promote->id)
                            : fmt::format("clean replay cycle {} recorded", r.cycle);
      break;
    }
    case ReplayOutcome::sdc:
      ledger.clean_streak = 0;
      for (auto& c : ledger.checkpoints) {
        if (c.state != CheckpointState::pending) continue;
        c.state = CheckpointState::rejected;
        c.decided_by_cycle = r.cycle;
        change.rejected.push_back(c.id);
      }
      change.note = fmt::format("replay cycle {} found SDC evidence: {} unverified checkpoint(s) rejected", r.cycle,
                                change.rejected.size());
      break;
    case ReplayOutcome::unclear:
      ledger.clean_streak = 0;
      for (auto& c : ledger.checkpoints)
        if (c.state == CheckpointState::pending) c.clean_cycles = 0;
      change.note = fmt::format("replay cycle {} was not clean (no verdict): consecutive clean runs restart", r.cycle);
      break;
  }
  if (r.full_sweep) {
    ledger.last_full_sweep = FullSweep{r.cycle, r.outcome == ReplayOutcome::clean, follows_seq, now, r.source};
  }
  return change;
}

namespace {

nlohmann::ordered_json opt(const std::optional<std::int64_t>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}
nlohmann::ordered_json id_or_null(const LedgerCheckpoint* c) {
  return c ? nlohmann::ordered_json(c->id) : nlohmann::ordered_json(nullptr);
}

}  // namespace

nlohmann::ordered_json ledger_to_json(const Ledger& l) {
  nlohmann::ordered_json cps = nlohmann::ordered_json::array();
  for (const auto& c : l.checkpoints)
    cps.push_back({{"id", c.id},
                   {"seq", c.seq},
                   {"recorded_at", c.recorded_at},
                   {"state", checkpoint_state_name(c.state)},
                   {"summary", c.summary},
                   {"clean_cycles", c.clean_cycles},
                   {"last_clean_cycle", opt(c.last_clean_cycle)},
                   {"decided_by_cycle", opt(c.decided_by_cycle)},
                   {"acknowledged_at", c.acknowledged_at.empty() ? nlohmann::ordered_json(nullptr)
                                                                 : nlohmann::ordered_json(c.acknowledged_at)}});
  nlohmann::ordered_json sweep = nullptr;
  if (l.last_full_sweep)
    sweep = {{"cycle", l.last_full_sweep->cycle},
             {"clean", l.last_full_sweep->clean},
             {"after_seq", l.last_full_sweep->after_seq},
             {"recorded_at", l.last_full_sweep->recorded_at},
             {"source", l.last_full_sweep->source}};
  return {{"schema", k_ledger_schema},
          {"schema_version", k_ledger_schema_version},
          {"job", l.job},
          {"revision", l.revision},
          {"updated_at", l.updated_at},
          {"latest", id_or_null(l.latest())},
          {"candidate", id_or_null(l.candidate())},
          {"verified", id_or_null(l.verified())},
          {"replay",
           {{"last_cycle", opt(l.last_cycle)},
            {"clean_streak", l.clean_streak},
            {"cycles_seen", l.cycles_seen},
            {"last_full_sweep", sweep}}},
          {"checkpoints", std::move(cps)}};
}

namespace {

Error bad_ledger(const std::string& path, const std::string& what) {
  return input_error(
      fmt::format("{}: {}", path, what), "the ledger file is malformed",
      "restore it from a backup or move it aside (a new ledger forgets which checkpoints were verified)");
}

bool get_int(const nlohmann::json& j, const char* key, std::int64_t& out) {
  if (!j.contains(key) || !j[key].is_number_integer()) return false;
  out = j[key].get<std::int64_t>();
  return true;
}

bool get_opt_int(const nlohmann::json& j, const char* key, std::optional<std::int64_t>& out) {
  if (!j.contains(key)) return false;
  if (j[key].is_null()) {
    out.reset();
    return true;
  }
  if (!j[key].is_number_integer()) return false;
  out = j[key].get<std::int64_t>();
  return true;
}

}  // namespace

Result<Ledger> ledger_from_json(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) return bad_ledger(path, "not a JSON object");
  if (auto st = check_schema(j, k_ledger_schema, 1, path, "use the scout version that wrote it"); !st)
    return st.error();
  Ledger l;
  if (!j.contains("job") || !j["job"].is_string()) return bad_ledger(path, "job missing");
  l.job = j["job"].get<std::string>();
  if (!get_int(j, "revision", l.revision) || l.revision < 0) return bad_ledger(path, "revision missing");
  auto updated = optional_string(j, "updated_at");
  if (!updated) return bad_ledger(path, "updated_at is not a string");
  l.updated_at = *updated;
  if (!j.contains("replay") || !j["replay"].is_object()) return bad_ledger(path, "replay missing");
  const auto& r = j["replay"];
  if (!get_opt_int(r, "last_cycle", l.last_cycle)) return bad_ledger(path, "replay.last_cycle missing");
  if (!get_int(r, "clean_streak", l.clean_streak)) return bad_ledger(path, "replay.clean_streak missing");
  if (!get_int(r, "cycles_seen", l.cycles_seen)) return bad_ledger(path, "replay.cycles_seen missing");
  if (r.contains("last_full_sweep") && r["last_full_sweep"].is_object()) {
    const auto& s = r["last_full_sweep"];
    FullSweep fs;
    if (!get_int(s, "cycle", fs.cycle) || !s.contains("clean") || !s["clean"].is_boolean() ||
        !get_int(s, "after_seq", fs.after_seq))
      return bad_ledger(path, "replay.last_full_sweep is incomplete");
    fs.clean = s["clean"].get<bool>();
    auto recorded = optional_string(s, "recorded_at");
    auto source = optional_string(s, "source");
    if (!recorded || !source) return bad_ledger(path, "replay.last_full_sweep.recorded_at or .source is not a string");
    fs.recorded_at = *recorded;
    fs.source = *source;
    l.last_full_sweep = fs;
  }
  if (!j.contains("checkpoints") || !j["checkpoints"].is_array()) return bad_ledger(path, "checkpoints missing");
  std::int64_t prev = 0;
  for (std::size_t i = 0; i < j["checkpoints"].size(); ++i) {
    const auto& c = j["checkpoints"][i];
    const std::string where = fmt::format("checkpoints[{}]", i);
    LedgerCheckpoint lc;
    if (!c.is_object() || !c.contains("id") || !c["id"].is_string()) return bad_ledger(path, where + ".id missing");
    lc.id = c["id"].get<std::string>();
    if (!get_int(c, "seq", lc.seq) || lc.seq <= prev) return bad_ledger(path, where + ".seq missing or not ascending");
    prev = lc.seq;
    auto st = c.contains("state") && c["state"].is_string() ? parse_checkpoint_state(c["state"].get<std::string>())
                                                            : std::nullopt;
    if (!st) return bad_ledger(path, where + ".state missing or unknown");
    lc.state = *st;
    auto recorded = optional_string(c, "recorded_at");
    auto summary = optional_string(c, "summary");
    if (!recorded || !summary) return bad_ledger(path, where + ".recorded_at or .summary is not a string");
    lc.recorded_at = *recorded;
    lc.summary = *summary;
    if (!get_int(c, "clean_cycles", lc.clean_cycles)) return bad_ledger(path, where + ".clean_cycles missing");
    if (!get_opt_int(c, "last_clean_cycle", lc.last_clean_cycle))
      return bad_ledger(path, where + ".last_clean_cycle missing");
    if (!get_opt_int(c, "decided_by_cycle", lc.decided_by_cycle))
      return bad_ledger(path, where + ".decided_by_cycle missing");
    if (c.contains("acknowledged_at") && !c["acknowledged_at"].is_null()) {
      if (!c["acknowledged_at"].is_string()) return bad_ledger(path, where + ".acknowledged_at is not a string");
      lc.acknowledged_at = c["acknowledged_at"].get<std::string>();
    }
    l.checkpoints.push_back(std::move(lc));
  }
  return l;
}

Result<ReplayCycle> parse_replay_verdict(const nlohmann::json& v, const std::string& path, const std::string& job) {
  auto bad = [&](const std::string& what) {
    return input_error(fmt::format("{}: {}", path, what), "not a replay verdict scout can record",
                       "pass the JSON that 'scout replay' printed (see man scout-verify-ckpt, REPLAY VERDICTS)");
  };
  if (!v.is_object()) return bad("not a JSON object");
  if (auto st = check_schema(v, "scout.verdict", 1, path, "pass the JSON that 'scout replay' printed"); !st)
    return st.error();
  if (string_or(v, "command") != "replay")
    return bad(fmt::format("command is \"{}\", not \"replay\"", string_or(v, "command")));
  if (!job.empty() && v.contains("job") && v["job"].is_string() && v["job"].get<std::string>() != job)
    return input_error(
        fmt::format("{}: verdict is for job '{}', the ledger for '{}'", path, v["job"].get<std::string>(), job), {},
        "record each job's replay verdicts in its own ledger");
  if (!v.contains("status") || !v["status"].is_string()) return bad("status missing");
  const std::string status = v["status"].get<std::string>();
  ReplayCycle r;
  r.source = path;
  if (status == "healthy")
    r.outcome = ReplayOutcome::clean;
  else if (status == "attributed")
    r.outcome = ReplayOutcome::sdc;
  else if (status == "inconclusive" || status == "group_stall")
    r.outcome = ReplayOutcome::unclear;
  else
    return bad(fmt::format("status \"{}\" is unknown", status));
  if (!v.contains("details") || !v["details"].is_object()) return bad("details missing");
  const auto& d = v["details"];
  // Algorithm 3 withholds promotion only for SDC and hang outcomes: a cycle
  // whose numbers all agreed counts as clean even when it also named a slow
  // peer (compute_straggler, gather_straggler: status attributed), since
  // slowness carries no evidence of corruption. details.numerics says which;
  // verdicts without it are read by their status alone.
  if (d.contains("numerics")) {
    if (!d["numerics"].is_string()) return bad("details.numerics must be \"clean\", \"sdc\" or \"unclear\"");
    const std::string n = d["numerics"].get<std::string>();
    ReplayOutcome by_numbers = ReplayOutcome::unclear;
    if (n == "clean")
      by_numbers = ReplayOutcome::clean;
    else if (n == "sdc")
      by_numbers = ReplayOutcome::sdc;
    else if (n != "unclear")
      return bad(fmt::format("details.numerics \"{}\" is unknown (clean, sdc or unclear)", n));
    if (status == "healthy" && by_numbers != ReplayOutcome::clean)
      return bad(fmt::format("status healthy contradicts details.numerics \"{}\"", n));
    if (status == "attributed" && by_numbers == ReplayOutcome::unclear)
      return bad("status attributed contradicts details.numerics \"unclear\"");
    // A stalled group is a hang (never clean); otherwise the numbers decide.
    r.outcome = status == "group_stall" ? ReplayOutcome::unclear : by_numbers;
  }
  if (!d.contains("cycle") || !d["cycle"].is_number_integer() || d["cycle"].get<std::int64_t>() < 0)
    return bad("details.cycle must be a non-negative integer");
  r.cycle = d["cycle"].get<std::int64_t>();
  if (d.contains("checkpoint") && !d["checkpoint"].is_null()) {
    if (!d["checkpoint"].is_string() || d["checkpoint"].get<std::string>().empty())
      return bad("details.checkpoint must be a string or null");
    r.after = d["checkpoint"].get<std::string>();
  }
  if (d.contains("sweep")) {
    if (!d["sweep"].is_string() || (d["sweep"] != "full" && d["sweep"] != "periodic"))
      return bad("details.sweep must be \"full\" or \"periodic\"");
    r.full_sweep = d["sweep"] == "full";
  }
  return r;
}

Selection select_checkpoint(const Ledger& l, FailureKind failure, const std::optional<ReplayCycle>& sweep) {
  Selection s;
  const LedgerCheckpoint* verified = l.verified();
  const LedgerCheckpoint* latest = l.latest();
  auto use_verified = [&](std::string rule, std::string reason) {
    s.rule = std::move(rule);
    s.role = "verified";
    s.checkpoint = verified;
    s.reason = verified ? std::move(reason) : reason + "; but no checkpoint is verified yet";
  };
  auto use_latest = [&](std::string rule, std::string reason) {
    s.rule = std::move(rule);
    s.role = "latest";
    s.checkpoint = latest;
    s.reason = latest ? std::move(reason) : reason + "; but no intact checkpoint is recorded";
  };
  switch (failure) {
    case FailureKind::sdc:
    case FailureKind::machine_lost:
      use_verified("sdc_or_machine_lost_use_verified",
                   failure == FailureKind::sdc
                       ? "silent data corruption may have reached every unverified checkpoint"
                       : "a lost machine's shard cannot be inspected, so only a verified checkpoint is trusted");
      break;
    case FailureKind::straggler:
      use_latest("straggler_use_latest", "slowness carries no evidence of numerical corruption");
      break;
    case FailureKind::hang:
    case FailureKind::unknown: {
      std::optional<FullSweep> full;
      if (sweep) {
        full = FullSweep{sweep->cycle, sweep->outcome == ReplayOutcome::clean, latest ? latest->seq : 0, "",
                         sweep->source};
      } else if (l.last_full_sweep && latest && l.last_full_sweep->after_seq >= latest->seq) {
        full = l.last_full_sweep;
      }
      if (full && full->clean)
        use_latest(
            "clean_full_sweep_use_latest",
            fmt::format("the full-catalog replay sweep (cycle {}) after the latest checkpoint is clean", full->cycle));
      else if (full)
        use_verified("sweep_not_clean_use_verified",
                     fmt::format("the full-catalog replay sweep (cycle {}) was not clean", full->cycle));
      else
        use_verified("no_full_sweep_use_verified",
                     "no full-catalog replay sweep has run since the latest checkpoint; run one and pass it with "
                     "--sweep to resume from latest");
      break;
    }
  }
  return s;
}

Result<Ledger> LedgerStore::load(const std::string& job, bool create) const {
  std::error_code ec;
  if (!fs::exists(m_path, ec)) {
    if (!create)
      return input_error(fmt::format("no ledger at {}", m_path), {},
                         "run 'scout verify-ckpt --job J --ledger FILE DIR...' first, or check --ledger");
    Ledger l;
    l.job = job;
    return l;
  }
  auto text = read_small_file(m_path);
  if (!text) return text.error();
  nlohmann::json j = parse_json_input(*text);
  if (j.is_discarded()) return bad_ledger(m_path, "not valid JSON");
  auto l = ledger_from_json(j, m_path);
  if (!l) return l.error();
  if (!job.empty() && l->job != job)
    return input_error(fmt::format("{} is the ledger of job '{}', not '{}'", m_path, l->job, job), {},
                       "give each job its own --ledger");
  return l;
}

Status LedgerStore::ensure_parent() const {
  std::error_code ec;
  fs::path parent = fs::path(m_path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec)
      return unavailable_error(fmt::format("cannot create the ledger directory {}", parent.string()), ec.message(),
                               "create it, or give --ledger in a writable directory");
  }
  return Ok{};
}

void LedgerStore::remove_stale_temps() const {
  std::error_code ec;
  fs::path target(m_path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string prefix = "." + target.filename().string() + ".tmp.";
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) fs::remove(e.path(), ec);
  }
}

Status LedgerStore::save(Ledger& ledger) const {
  ledger.revision += 1;
  ledger.updated_at = now_rfc3339();
  return atomic_write_file(m_path, ledger_to_json(ledger).dump(2) + "\n");
}

}  // namespace scout::checkpoint
