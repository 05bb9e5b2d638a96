#include "commands/verify_ckpt.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>

#include "lib/checkpoint/cron.hpp"
#include "lib/checkpoint/discovery.hpp"
#include "lib/checkpoint/ledger.hpp"
#include "lib/checkpoint/prometheus.hpp"
#include "lib/checkpoint/verdicts.hpp"
#include "lib/checkpoint/verify.hpp"
#include "lib/common/file.hpp"

namespace scout {

namespace fs = std::filesystem;
using namespace scout::checkpoint;

CommandRunner register_verify_ckpt(CLI::App& cmd, const GlobalOptions& globals) {
  auto o = std::make_shared<VerifyCkptOptions>();
  auto ledger_opts = [o](CLI::App* c) {
    c->add_option("--ledger", o->ledger,
                  "Ledger file (default: $SCOUT_STATE_DIR or /var/lib/scout, then verify-ckpt/<job>.ledger.json)");
    c->add_option("--job", o->job, "Job id; must match the ledger's");
    c->add_option("--lock-timeout", o->lock_timeout_s, "Seconds to wait for the ledger lock")->default_str("30");
  };
  auto layout_opts = [o](CLI::App* c) {
    c->add_option("--mesh", o->mesh,
                  "Mesh the checkpoint was saved with, e.g. dp=4,tp=2: replicas are ranks that differ only in dp");
    c->add_option(
        "--pattern", o->pattern,
        "Per-rank file name with {rank}, e.g. 'model_rank{rank}.safetensors' (default: 'rank<N>' in the name)");
    c->add_option("--jobs", o->jobs, "Files hashed at once (0: automatic)")->default_str("0");
    c->add_flag("--quiet", o->quiet, "No progress lines on stderr");
  };

  cmd.require_subcommand(0, 1);
  cmd.add_option("dirs", o->dirs, "Cron form: checkpoint directories, or roots whose subdirectories are checkpoints");
  cmd.add_option("--replicas", o->replicas,
                 "Files holding copies of the same state: compare them tensor by tensor (same as 'check --replicas')");
  layout_opts(&cmd);
  ledger_opts(&cmd);
  cmd.add_option("--settle", o->settle_s, "Cron: skip checkpoints with files modified less than this many seconds ago")
      ->default_str("60");
  cmd.add_option("--prometheus", o->prometheus,
                 "Write the ledger's state and this run's result as a node_exporter textfile (atomically)");
  cmd.add_flag("--no-manifest", o->no_manifest, "Do not compare with DIR/scout-ckpt.json");
  cmd.add_flag("--recheck-invalid", o->recheck_invalid,
               "Cron: check again checkpoints the ledger records as invalid (e.g. incomplete when first seen)");

  auto* check = cmd.add_subcommand(
      "check", "Certify one checkpoint: replica consensus per tensor, and its hash manifest when present");
  check->add_option("dir", o->dirs, "Checkpoint directory (per-rank files)")->expected(0, 1);
  check->add_option("--replicas", o->replicas, "Files holding copies of the same state");
  check->add_flag("--no-manifest", o->no_manifest, "Do not compare with DIR/scout-ckpt.json");
  layout_opts(check);

  auto* manifest = cmd.add_subcommand(
      "manifest", "Write or check a checkpoint's hash manifest (scout-ckpt.json), to detect bit rot later");
  manifest->require_subcommand(1);
  auto* mwrite = manifest->add_subcommand(
      "write", "Hash every file of DIR and write DIR/scout-ckpt.json (run right after saving)");
  mwrite->add_option("dir", o->dirs, "Checkpoint directory")->required()->expected(1);
  layout_opts(mwrite);
  auto* mcheck = manifest->add_subcommand("check", "Re-hash every file of DIR and compare with DIR/scout-ckpt.json");
  mcheck->add_option("dir", o->dirs, "Checkpoint directory")->required()->expected(1);
  mcheck->add_option("--jobs", o->jobs, "Files hashed at once (0: automatic)")->default_str("0");
  mcheck->add_flag("--quiet", o->quiet, "No progress lines on stderr");

  auto* record = cmd.add_subcommand(
      "record", "Record replay verdicts (scout replay's JSON) in the ledger: promote or reject checkpoints");
  record->add_option("--replay", o->replay_files, "Replay verdict files, in cycle order")->required();
  ledger_opts(record);

  auto* select = cmd.add_subcommand("select", "Print the checkpoint to restart from after a failure, and why");
  select->add_option("--failure", o->failure, "What failed")
      ->required()
      ->check(CLI::IsMember({"sdc", "hang", "straggler", "machine-lost", "unknown"}));
  select->add_option("--sweep", o->sweep_file,
                     "Hang/unknown: verdict of a full-catalog replay sweep run after the failure");
  ledger_opts(select);

  auto* ack = cmd.add_subcommand("ack", "Acknowledge corrupt checkpoints, so cron runs and status stop reporting them");
  ack->add_option("checkpoints", o->dirs, "Checkpoint ids (as status prints them)")->required();
  ledger_opts(ack);

  auto* status = cmd.add_subcommand("status", "Print the ledger: latest, candidate, verified, replay cycles");
  ledger_opts(status);
  status->add_option("--prometheus", o->prometheus, "Also write the node_exporter textfile");

  cmd.footer(
      "Examples:\n"
      "  scout verify-ckpt --replicas r0.safetensors r1.safetensors r2.safetensors\n"
      "  scout verify-ckpt check /ckpt/step_1000 --mesh dp=4,tp=2\n"
      "  scout verify-ckpt --job llm7 --mesh dp=4,tp=2 --prometheus /var/lib/node_exporter/scout_ckpt.prom /ckpt\n"
      "  scout verify-ckpt record --job llm7 --replay replay-cycle-12.json\n"
      "  scout verify-ckpt select --job llm7 --failure sdc\n"
      "Exit: 0 healthy/selected, 1 corrupted replica named, 3 inconclusive (2 replicas disagree, nothing to select),\n"
      "4 bad input (malformed/truncated files, missing shards, dtype/shape mismatch), 5 ledger locked/unavailable.");

  auto* settle_opt = cmd.get_option("--settle");
  return [o, &globals, check, mwrite, mcheck, record, select, status, ack, settle_opt]() {
    o->settle_given = settle_opt->count() > 0;
    o->format = resolve_format(globals.format);
    if (check->parsed())
      o->action = "check";
    else if (mwrite->parsed())
      o->action = "manifest-write";
    else if (mcheck->parsed())
      o->action = "manifest-check";
    else if (record->parsed())
      o->action = "record";
    else if (select->parsed())
      o->action = "select";
    else if (status->parsed())
      o->action = "status";
    else if (ack->parsed())
      o->action = "ack";
    else if (!o->replicas.empty())
      o->action = "check";
    else
      o->action = "cron";
    return run_verify_ckpt(*o);
  };
}

namespace {

// Progress lines on stderr for long work (256 MiB or more): first after 1 s, then every 2 s.
class Progress {
 public:
  Progress(bool quiet, std::string label)
      : m_quiet(quiet), m_label(std::move(label)), m_start(std::chrono::steady_clock::now()) {}
  void operator()(std::uint64_t done, std::uint64_t total) {
    if (m_quiet || total < (std::uint64_t{256} << 20)) return;  // small work finishes before anyone waits
    std::lock_guard lock(m_mutex);
    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - m_start).count();
    if (elapsed < 1.0 || std::chrono::duration<double>(now - m_last).count() < 2.0) return;
    m_last = now;
    double gib = 1024.0 * 1024.0 * 1024.0;
    std::fprintf(stderr, "scout verify-ckpt: %s: hashed %.2f of %.2f GiB (%.0f%%), %.0f MiB/s\n", m_label.c_str(),
                 done / gib, total / gib, total ? 100.0 * done / total : 100.0, done / elapsed / (1024.0 * 1024.0));
  }

 private:
  bool m_quiet;
  std::string m_label;
  std::chrono::steady_clock::time_point m_start;
  std::chrono::steady_clock::time_point m_last{};
  std::mutex m_mutex;
};

nlohmann::json null_or(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

LayoutRequest layout_request(const VerifyCkptOptions& o) {
  LayoutRequest r;
  r.replicas = o.replicas;
  r.mesh = o.mesh;
  r.pattern = o.pattern;
  r.no_manifest = o.no_manifest;
  return r;
}

LedgerStore make_store(const VerifyCkptOptions& o) {
  if (!(o.lock_timeout_s >= 0) || o.lock_timeout_s > 86400)
    throw FatalError(usage_error("--lock-timeout must be between 0 and 86400 seconds"));
  return LedgerStore(value_or_throw(default_ledger_path(o.job, o.ledger)),
                     std::chrono::milliseconds(static_cast<std::int64_t>(o.lock_timeout_s * 1000)));
}

// Writes the textfile when asked; a failure never changes the verdict or its
// exit code: it is reported on stderr and in details.side_outputs.
void write_side_prometheus(const std::string& file, const Ledger& l, const std::optional<RunStats>& run, Verdict& v) {
  if (file.empty()) return;
  auto st = write_prometheus(file, l, run);
  nlohmann::json out = {{"path", file},
                        {"written", st.ok()},
                        {"error", st.ok() ? nlohmann::json(nullptr) : nlohmann::json(st.error().message())}};
  if (!st)
    std::fprintf(stderr, "scout verify-ckpt: warning: prometheus textfile not written: %s (the verdict below stands)\n",
                 st.error().message().c_str());
  v.details["side_outputs"] = {{"prometheus", out}};
}

int run_check(const VerifyCkptOptions& o) {
  if (!o.replicas.empty() && !o.dirs.empty())
    throw FatalError(usage_error("give either --replicas FILE... or a checkpoint directory, not both"));
  if (o.replicas.empty() && o.dirs.size() != 1)
    throw FatalError(usage_error("check needs one checkpoint directory or --replicas FILE FILE...", {},
                                 "e.g. scout verify-ckpt check /ckpt/step_100 --mesh dp=4"));
  if (!o.replicas.empty()) {
    // Options of the directory and cron forms mean nothing for explicit replicas: refuse them rather than ignore them.
    for (auto [given, name] :
         {std::pair{!o.mesh.empty(), "--mesh"}, std::pair{!o.pattern.empty(), "--pattern"},
          std::pair{!o.prometheus.empty(), "--prometheus"}, std::pair{o.settle_given, "--settle"},
          std::pair{o.recheck_invalid, "--recheck-invalid"}, std::pair{!o.ledger.empty(), "--ledger"}})
      if (given)
        throw FatalError(usage_error(
            fmt::format("{} does not apply to --replicas", name),
            "--replicas compares the files given, in order; it reads no mesh and keeps no ledger",
            "drop the option, or run the cron form: scout verify-ckpt --job J [--mesh M] [--prometheus F] DIR..."));
  }
  const std::string dir = o.dirs.empty() ? std::string() : o.dirs.front();
  std::optional<Manifest> manifest;
  auto layout = value_or_throw(resolve_layout(layout_request(o), dir, manifest));
  Progress progress(o.quiet, dir.empty() ? "replicas" : dir);
  VerifyOptions vo;
  vo.jobs = o.jobs;
  vo.manifest = manifest ? &*manifest : nullptr;
  vo.progress = std::ref(progress);
  auto report = value_or_throw(verify_layout(layout, vo));
  Verdict v = check_verdict(report, dir);
  v.job = o.job;
  return emit_verdict(v, o.format);
}

int run_manifest_write(const VerifyCkptOptions& o) {
  const std::string& dir = o.dirs.at(0);
  if (o.mesh.empty())
    throw FatalError(usage_error("manifest write needs --mesh to know which files are replicas", {},
                                 "e.g. --mesh dp=4,tp=2 (dp=1 for unreplicated shards)"));
  auto layout = value_or_throw(layout_from_directory(dir, o.mesh, o.pattern));
  Progress progress(o.quiet, dir);
  VerifyOptions vo;
  vo.jobs = o.jobs;
  vo.progress = std::ref(progress);
  auto report = value_or_throw(verify_layout(layout, vo));
  Verdict v = check_verdict(report, dir);
  // A manifest records known-good hashes: refuse to write one over replicas that disagree.
  if (v.status != VerdictStatus::healthy) {
    v.summary = "manifest not written: " + v.summary;
    v.details["action"] = "manifest-write";
    v.details["manifest"] = nullptr;
    return emit_verdict(v, o.format);
  }
  const std::string path = (fs::path(dir) / k_manifest_file_name).string();
  auto st = atomic_write_file(path, manifest_to_json(layout, report.digests).dump(1) + "\n");
  if (!st) throw FatalError(st.error());
  v.details["action"] = "manifest-write";
  v.details["manifest"] = {{"path", path}, {"mismatches", nlohmann::json::array()}};
  v.summary = fmt::format("wrote {} ({} files, replicas agree)", path, layout.file_count());
  return emit_verdict(v, o.format);
}

int run_manifest_check(const VerifyCkptOptions& o) {
  const std::string& dir = o.dirs.at(0);
  auto manifest = value_or_throw(read_manifest(dir));
  auto layout = layout_from_manifest(manifest);
  Progress progress(o.quiet, dir);
  VerifyOptions vo;
  vo.jobs = o.jobs;
  vo.manifest = &manifest;
  vo.progress = std::ref(progress);
  auto report = value_or_throw(verify_layout(layout, vo));
  Verdict v = check_verdict(report, dir);
  v.details["action"] = "manifest-check";
  return emit_verdict(v, o.format);
}

int run_record(const VerifyCkptOptions& o) {
  auto store = make_store(o);
  std::vector<ReplayCycle> cycles;
  for (const auto& f : o.replay_files) {
    auto text = value_or_throw(read_small_file(f));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded())
      throw FatalError(
          input_error(fmt::format("{}: not valid JSON", f), {}, "pass the JSON that 'scout replay' printed"));
    cycles.push_back(value_or_throw(parse_replay_verdict(j, f, o.job)));
  }
  nlohmann::json recorded = nlohmann::json::array();
  const std::string now = now_rfc3339();
  auto ledger = value_or_throw(store.update(o.job, [&](Ledger& l) -> Result<bool> {
    bool changed = false;
    for (const auto& c : cycles) {
      auto change = ledger_apply_replay(l, c, now);
      if (!change) return change.error();
      changed = changed || change->changed;
      recorded.push_back({{"file", c.source},
                          {"cycle", c.cycle},
                          {"outcome", c.outcome == ReplayOutcome::clean ? "clean"
                                      : c.outcome == ReplayOutcome::sdc ? "sdc"
                                                                        : "unclear"},
                          {"sweep", c.full_sweep ? "full" : "periodic"},
                          {"note", change->note},
                          {"verified", change->verified},
                          {"rejected", change->rejected}});
    }
    return changed;
  }));
  Verdict v = verify_ckpt_verdict(o.job);
  v.job = ledger.job;
  v.status = VerdictStatus::healthy;
  v.action = "none";
  std::vector<std::string> notes;
  for (const auto& r : recorded) notes.push_back(r["note"].get<std::string>());
  v.summary = fmt::format("{}", fmt::join(notes, "; "));
  v.details = {{"action", "record"}, {"recorded", recorded}, {"ledger", ledger_summary(ledger, store.path())}};
  return emit_verdict(v, o.format);
}

int run_select(const VerifyCkptOptions& o) {
  auto store = make_store(o);
  auto ledger = value_or_throw(store.load(o.job, false));
  auto failure = parse_failure_kind(o.failure).value();
  std::optional<ReplayCycle> sweep;
  if (!o.sweep_file.empty()) {
    auto text = value_or_throw(read_small_file(o.sweep_file));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) throw FatalError(input_error(fmt::format("{}: not valid JSON", o.sweep_file)));
    sweep = value_or_throw(parse_replay_verdict(j, o.sweep_file, ledger.job));
    if (!sweep->full_sweep)
      throw FatalError(input_error(fmt::format("{}: details.sweep is not \"full\"", o.sweep_file),
                                   "only a full-catalog sweep can clear a hang",
                                   "run the replay with the full catalog"));
  }
  Selection s = select_checkpoint(ledger, failure, sweep);
  Verdict v = verify_ckpt_verdict(o.job);
  v.job = ledger.job;
  nlohmann::json selected = nullptr;
  if (s.checkpoint) {
    selected = {{"id", s.checkpoint->id},
                {"role", s.role},
                {"state", checkpoint_state_name(s.checkpoint->state)},
                {"seq", s.checkpoint->seq}};
    v.status = VerdictStatus::healthy;
    v.action = s.role == "verified" ? "rollback_verified" : "resume_latest";
    v.summary = fmt::format("restart from {} ({}): {}", s.checkpoint->id, s.role, s.reason);
  } else {
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::job;
    v.action = "escalate";
    v.summary = fmt::format("no checkpoint to restart from: {}", s.reason);
  }
  v.details = {{"action", "select"},
               {"failure", failure_kind_name(failure)},
               {"selected", selected},
               {"rule", s.rule},
               {"reason", s.reason},
               {"sweep", null_or(o.sweep_file)},
               {"ledger", ledger_summary(ledger, store.path())}};
  return emit_verdict(v, o.format);
}

int run_status(const VerifyCkptOptions& o) {
  auto store = make_store(o);
  auto ledger = value_or_throw(store.load(o.job, false));
  Verdict v = verify_ckpt_verdict(o.job);
  v.job = ledger.job;
  v.status = VerdictStatus::healthy;
  v.action = "none";
  const auto* ver = ledger.verified();
  const auto* lat = ledger.latest();
  std::vector<std::string> bad;
  nlohmann::json outstanding = outstanding_json(ledger, bad);
  v.summary = fmt::format("latest {}, verified {}", lat ? lat->id : "none", ver ? ver->id : "none");
  if (!bad.empty()) {
    v.status = VerdictStatus::attributed;
    v.scope = Scope::rank;
    v.action = "repair_replica";
    v.summary += fmt::format("; CORRUPT (unacknowledged): {}", fmt::join(bad, ", "));
    add_outstanding_suspects(v, ledger);
  }
  v.details = {{"action", "status"},
               {"ledger", ledger_summary(ledger, store.path())},
               {"checkpoints", ledger_to_json(ledger)["checkpoints"]},
               {"outstanding", outstanding}};
  write_side_prometheus(o.prometheus, ledger, std::nullopt, v);
  return emit_verdict(v, o.format);
}

int run_ack(const VerifyCkptOptions& o) {
  if (o.dirs.empty())
    throw FatalError(usage_error("ack needs the checkpoint id(s) to acknowledge", {},
                                 "scout verify-ckpt ack --job J /ckpt/step_300"));
  auto store = make_store(o);
  const std::string now = now_rfc3339();
  std::vector<std::string> notes;
  auto ledger = value_or_throw(store.update(o.job, [&](Ledger& l) -> Result<bool> {
    bool changed = false;
    for (const auto& d : o.dirs) {
      std::error_code ec;
      std::string id = d;
      if (!l.find(id)) id = fs::absolute(d, ec).lexically_normal().string();
      auto c = ledger_acknowledge(l, id, now);
      if (!c) return c.error();
      changed = changed || c->changed;
      notes.push_back(c->note);
    }
    return changed;
  }));
  Verdict v = verify_ckpt_verdict(o.job);
  v.job = ledger.job;
  v.status = VerdictStatus::healthy;
  v.action = "none";
  v.summary = fmt::format("{}", fmt::join(notes, "; "));
  std::vector<std::string> bad;
  v.details = {{"action", "ack"},
               {"ledger", ledger_summary(ledger, store.path())},
               {"outstanding", outstanding_json(ledger, bad)}};
  return emit_verdict(v, o.format);
}

int run_cron(const VerifyCkptOptions& o) {
  if (o.job.empty())
    throw FatalError(
        usage_error("cron form needs --job", {},
                    "scout verify-ckpt --job J [--mesh M] DIR...; or 'verify-ckpt check DIR' for a one-off check"));
  if (o.dirs.empty())
    throw FatalError(usage_error("no checkpoint directories given", {}, "scout verify-ckpt --job J DIR..."));
  auto store = make_store(o);
  CronRequest req;
  req.job = o.job;
  req.layout = layout_request(o);
  req.layout.replicas.clear();
  req.jobs = o.jobs;
  req.settle_s = o.settle_s;
  req.recheck_invalid = o.recheck_invalid;
  std::vector<std::unique_ptr<Progress>> progress;  // one per checkpoint, alive until the pass ends
  req.progress = [&](const std::string& id) -> VerifyProgressFn {
    progress.push_back(std::make_unique<Progress>(o.quiet, id));
    return std::ref(*progress.back());
  };
  auto run = value_or_throw(run_cron_pass(req, o.dirs, store));
  write_side_prometheus(o.prometheus, run.ledger, run.stats, run.verdict);
  int printed = emit_verdict(run.verdict, o.format);
  return run.exit_code != 0 ? run.exit_code : printed;
}

}  // namespace

int run_verify_ckpt(const VerifyCkptOptions& o) {
  if (o.action == "check") return run_check(o);
  if (o.action == "manifest-write") return run_manifest_write(o);
  if (o.action == "manifest-check") return run_manifest_check(o);
  if (o.action == "record") return run_record(o);
  if (o.action == "select") return run_select(o);
  if (o.action == "status") return run_status(o);
  if (o.action == "ack") return run_ack(o);
  if (o.action == "cron") return run_cron(o);
  throw FatalError(internal_error(fmt::format("unknown verify-ckpt action '{}'", o.action)));
}

}  // namespace scout
