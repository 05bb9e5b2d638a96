#include "commands/verify_ckpt.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mutex>
#include <unistd.h>

#include "lib/checkpoint/durable_file.hpp"
#include "lib/checkpoint/ledger.hpp"
#include "lib/checkpoint/verify.hpp"

namespace scout {

namespace fs = std::filesystem;
using namespace scout::checkpoint;

CommandRunner register_verify_ckpt(CLI::App& cmd, const GlobalOptions& globals) {
  auto o = std::make_shared<VerifyCkptOptions>();
  auto ledger_opts = [o](CLI::App* c) {
    c->add_option("--ledger", o->ledger, "Ledger file (default: $SCOUT_STATE_DIR or /var/lib/scout, then verify-ckpt/<job>.ledger.json)");
    c->add_option("--job", o->job, "Job id; must match the ledger's");
    c->add_option("--lock-timeout", o->lock_timeout_s, "Seconds to wait for the ledger lock")->default_str("30");
  };
  auto layout_opts = [o](CLI::App* c) {
    c->add_option("--mesh", o->mesh, "Mesh the checkpoint was saved with, e.g. dp=4,tp=2: replicas are ranks that differ only in dp");
    c->add_option("--pattern", o->pattern, "Per-rank file name with {rank}, e.g. 'model_rank{rank}.safetensors' (default: 'rank<N>' in the name)");
    c->add_option("--jobs", o->jobs, "Files hashed at once (0: automatic)")->default_str("0");
    c->add_flag("--quiet", o->quiet, "No progress lines on stderr");
  };

  cmd.require_subcommand(0, 1);
  cmd.add_option("dirs", o->dirs, "Cron form: checkpoint directories, or roots whose subdirectories are checkpoints");
  cmd.add_option("--replicas", o->replicas, "Files holding copies of the same state: compare them tensor by tensor (same as 'check --replicas')");
  layout_opts(&cmd);
  ledger_opts(&cmd);
  cmd.add_option("--settle", o->settle_s, "Cron: skip checkpoints with files modified less than this many seconds ago")->default_str("60");
  cmd.add_option("--prometheus", o->prometheus, "Write the ledger's state and this run's result as a node_exporter textfile (atomically)");
  cmd.add_flag("--no-manifest", o->no_manifest, "Do not compare with DIR/scout-ckpt.json");
  cmd.add_flag("--recheck-invalid", o->recheck_invalid, "Cron: check again checkpoints the ledger records as invalid (e.g. incomplete when first seen)");

  auto* check = cmd.add_subcommand("check", "Certify one checkpoint: replica consensus per tensor, and its hash manifest when present");
  check->add_option("dir", o->dirs, "Checkpoint directory (per-rank files)")->expected(0, 1);
  check->add_option("--replicas", o->replicas, "Files holding copies of the same state");
  check->add_flag("--no-manifest", o->no_manifest, "Do not compare with DIR/scout-ckpt.json");
  layout_opts(check);

  auto* manifest = cmd.add_subcommand("manifest", "Write or check a checkpoint's hash manifest (scout-ckpt.json), to detect bit rot later");
  manifest->require_subcommand(1);
  auto* mwrite = manifest->add_subcommand("write", "Hash every file of DIR and write DIR/scout-ckpt.json (run right after saving)");
  mwrite->add_option("dir", o->dirs, "Checkpoint directory")->required()->expected(1);
  layout_opts(mwrite);
  auto* mcheck = manifest->add_subcommand("check", "Re-hash every file of DIR and compare with DIR/scout-ckpt.json");
  mcheck->add_option("dir", o->dirs, "Checkpoint directory")->required()->expected(1);
  mcheck->add_option("--jobs", o->jobs, "Files hashed at once (0: automatic)")->default_str("0");
  mcheck->add_flag("--quiet", o->quiet, "No progress lines on stderr");

  auto* record = cmd.add_subcommand("record", "Record replay verdicts (scout replay's JSON) in the ledger: promote or reject checkpoints");
  record->add_option("--replay", o->replay_files, "Replay verdict files, in cycle order")->required();
  ledger_opts(record);

  auto* select = cmd.add_subcommand("select", "Print the checkpoint to restart from after a failure, and why");
  select->add_option("--failure", o->failure, "What failed")
      ->required()->check(CLI::IsMember({"sdc", "hang", "straggler", "machine-lost", "unknown"}));
  select->add_option("--sweep", o->sweep_file, "Hang/unknown: verdict of a full-catalog replay sweep run after the failure");
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
    if (check->parsed()) o->action = "check";
    else if (mwrite->parsed()) o->action = "manifest-write";
    else if (mcheck->parsed()) o->action = "manifest-check";
    else if (record->parsed()) o->action = "record";
    else if (select->parsed()) o->action = "select";
    else if (status->parsed()) o->action = "status";
    else if (ack->parsed()) o->action = "ack";
    else if (!o->replicas.empty()) o->action = "check";
    else o->action = "cron";
    return run_verify_ckpt(*o);
  };
}

namespace {

// Progress lines on stderr for long work (256 MiB or more): first after 1 s, then every 2 s.
class Progress {
 public:
  Progress(bool quiet, std::string label) : m_quiet(quiet), m_label(std::move(label)), m_start(std::chrono::steady_clock::now()) {}
  void operator()(std::uint64_t done, std::uint64_t total) {
    if (m_quiet || total < (std::uint64_t{256} << 20)) return;  // small work finishes before anyone waits
    std::lock_guard lock(m_mutex);
    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - m_start).count();
    if (elapsed < 1.0 || std::chrono::duration<double>(now - m_last).count() < 2.0) return;
    m_last = now;
    double gib = 1024.0 * 1024.0 * 1024.0;
    std::fprintf(stderr, "scout verify-ckpt: %s: hashed %.2f of %.2f GiB (%.0f%%), %.0f MiB/s\n", m_label.c_str(), done / gib, total / gib,
                 total ? 100.0 * done / total : 100.0, done / elapsed / (1024.0 * 1024.0));
  }

 private:
  bool m_quiet;
  std::string m_label;
  std::chrono::steady_clock::time_point m_start;
  std::chrono::steady_clock::time_point m_last{};
  std::mutex m_mutex;
};

nlohmann::json null_or(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }
nlohmann::json rank_json(std::int64_t r) { return r >= 0 ? nlohmann::json(r) : nlohmann::json(nullptr); }

// The layout of a checkpoint for `check`/cron: explicit replicas, the
// manifest (when present and no --mesh), or the naming pattern with --mesh.
Result<CheckpointLayout> resolve_layout(const VerifyCkptOptions& o, const std::string& dir, std::optional<Manifest>& manifest) {
  if (!o.replicas.empty()) return layout_from_replicas(o.replicas);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return input_error(fmt::format("{} is not a directory", dir), {}, "give a checkpoint directory or --replicas FILE...");
  const bool has_manifest = fs::exists(fs::path(dir) / k_manifest_file_name, ec);
  if (has_manifest && !o.no_manifest) {
    auto m = read_manifest(dir);
    if (!m) return m.error();
    manifest = std::move(*m);
    if (o.mesh.empty()) return layout_from_manifest(*manifest);
  }
  if (o.mesh.empty())
    return usage_error(fmt::format("{}: no --mesh and no {} to say which files are replicas", dir, k_manifest_file_name), {},
                       "give --mesh (e.g. --mesh dp=4,tp=2), --replicas FILE..., or write a manifest with 'scout verify-ckpt manifest write'");
  return layout_from_directory(dir, o.mesh, o.pattern);
}

// The file inside a directory checkpoint (DCP .distcp, HF shard) that holds `tensor`; empty for single files.
std::string source_of(const FileDigest& d, const std::string& tensor) {
  auto it = std::lower_bound(d.tensors.begin(), d.tensors.end(), tensor, [](const TensorDigest& t, const std::string& n) { return t.name < n; });
  return it != d.tensors.end() && it->name == tensor ? it->source : std::string();
}

// The verdict of one checkpoint check.
Verdict check_verdict(const VerifyReport& r, const std::string& checkpoint) {
  Verdict v;
  v.command = "verify-ckpt";
  nlohmann::json files = nlohmann::json::array();
  nlohmann::json disagreements = nlohmann::json::array();
  nlohmann::json crc_json = nlohmann::json::array();
  std::size_t k = 0, compared = 0, single = 0, inconclusive = 0;
  for (std::size_t s = 0; s < r.layout.sets.size(); ++s) {
    const auto& set = r.layout.sets[s];
    const auto& shard = r.shards[s];
    bool ranks_known = std::all_of(set.files.begin(), set.files.end(), [](const ReplicaFile& f) { return f.rank >= 0; });
    const std::size_t first_suspect = v.suspects.size();
    std::vector<std::pair<std::size_t, const CrcFailure*>> crc_failed;  // (replica, failure)
    for (std::size_t i = 0; i < set.files.size(); ++i, ++k) {
      const auto& d = r.digests[k];
      files.push_back({{"path", set.files[i].path}, {"rank", rank_json(set.files[i].rank)}, {"shard", set.shard}, {"replica", i},
                       {"format", file_format_name(d.format)}, {"bytes", d.size}, {"tensors", d.tensors.size()}});
      for (const auto& f : d.crc_failures) {
        crc_failed.emplace_back(i, &f);
        crc_json.push_back({{"file", set.files[i].path}, {"shard", set.shard}, {"replica", i}, {"source", null_or(f.source)}, {"entry", f.entry},
                            {"tensors", f.tensors}, {"expected_crc32", fmt::format("0x{:08x}", f.expected)}, {"actual_crc32", fmt::format("0x{:08x}", f.actual)}});
      }
    }
    // A zip entry that fails its CRC-32 is corruption in that file, with or without replicas: it marks the
    // suspect that consensus names for the same tensor, or is a suspect of its own.
    auto add_crc_suspects = [&] {
      for (const auto& [i, f] : crc_failed) {
        nlohmann::json crc = {{"entry", f->entry}, {"expected_crc32", fmt::format("0x{:08x}", f->expected)}, {"actual_crc32", fmt::format("0x{:08x}", f->actual)}};
        bool marked = false;
        for (std::size_t s2 = first_suspect; s2 < v.suspects.size(); ++s2) {
          auto& ev = v.suspects[s2].evidence;
          if (ev.value("file", "") == set.files[i].path && std::find(f->tensors.begin(), f->tensors.end(), ev.value("tensor", "")) != f->tensors.end()) {
            ev["zip_crc"] = crc;
            marked = true;
          }
        }
        if (marked) continue;
        Suspect sp;
        sp.rank = set.files[i].rank;
        sp.reason = "zip_entry_fails_crc";
        sp.evidence = {{"file", set.files[i].path}, {"tensor", f->tensors.empty() ? f->entry : f->tensors.front()}, {"tensors", f->tensors},
                       {"shard", set.shard}, {"replica", i}, {"source", null_or(f->source)}, {"replicas", set.files.size()}, {"zip_crc", crc}};
        v.suspects.push_back(std::move(sp));
      }
    };
    if (set.files.size() < 2) {
      ++single;
      add_crc_suspects();
      continue;
    }
    compared += shard.tensors;
    for (const auto& dis : shard.disagreements) {
      std::vector<std::int64_t> members;
      nlohmann::json values = nlohmann::json::array();
      nlohmann::json replicas = nlohmann::json::array();
      for (std::size_t i = 0; i < set.files.size(); ++i) {
        members.push_back(ranks_known ? set.files[i].rank : static_cast<std::int64_t>(i));
        values.push_back(hash_hex(dis.hashes[i]));
        replicas.push_back({{"file", set.files[i].path}, {"source", null_or(source_of(r.digests[k - set.files.size() + i], dis.tensor))},
                            {"replica", i}, {"rank", rank_json(set.files[i].rank)},
                            {"hash", hash_hex(dis.hashes[i])}, {"outlier", dis.result.status == C3Status::attributed && dis.result.outliers[i]}});
      }
      v.groups.push_back(make_group_run("checkpoint_replica", members, C3Mode::exact, dis.result, values));
      disagreements.push_back({{"shard", set.shard}, {"tensor", dis.tensor}, {"status", c3_status_name(dis.result.status)}, {"replicas", replicas}});
      if (dis.result.status != C3Status::attributed) {
        ++inconclusive;
        continue;
      }
      const auto maj = static_cast<std::size_t>(dis.result.majority_peer);
      for (std::size_t i = 0; i < set.files.size(); ++i) {
        if (!dis.result.outliers[i]) continue;
        Suspect sp;
        sp.rank = set.files[i].rank;
        sp.reason = "replica_differs_from_majority";
        sp.evidence = {{"file", set.files[i].path}, {"tensor", dis.tensor}, {"shard", set.shard}, {"replica", i},
                       {"source", null_or(source_of(r.digests[k - set.files.size() + i], dis.tensor))},
                       {"hash", hash_hex(dis.hashes[i])}, {"majority_hash", hash_hex(dis.hashes[maj])},
                       {"majority_count", dis.result.majority_count}, {"replicas", set.files.size()}};
        v.suspects.push_back(std::move(sp));
      }
    }
    add_crc_suspects();
  }
  nlohmann::json manifest = nullptr;
  if (r.manifest_checked) {
    nlohmann::json mm = nlohmann::json::array();
    for (const auto& m : r.manifest_mismatches) {
      mm.push_back({{"file", m.file}, {"rank", rank_json(m.rank)}, {"tensor", m.tensor}, {"expected", hash_hex(m.expected)}, {"actual", hash_hex(m.actual)}});
      Suspect sp;
      sp.rank = m.rank;
      sp.reason = "hash_differs_from_manifest";
      sp.evidence = {{"file", m.file}, {"tensor", m.tensor}, {"expected", hash_hex(m.expected)}, {"actual", hash_hex(m.actual)}};
      v.suspects.push_back(std::move(sp));
    }
    manifest = {{"path", (fs::path(r.layout.dir) / k_manifest_file_name).string()}, {"mismatches", mm}};
  }
  const double mib_s = r.seconds > 0 ? r.bytes_read / r.seconds / (1024.0 * 1024.0) : 0.0;
  v.details = {{"action", "check"},
               {"checkpoint", null_or(checkpoint)},
               {"layout", {{"source", r.layout.source}, {"mesh", null_or(r.layout.mesh)}, {"shards", r.layout.sets.size()}, {"files", r.layout.file_count()}}},
               {"files", files},
               {"tensors_compared", compared},
               {"single_copy_shards", single},
               {"disagreements", disagreements},
               {"crc_failures", crc_json},
               {"manifest", manifest},
               {"bytes_read", r.bytes_read},
               {"seconds", std::round(r.seconds * 1000.0) / 1000.0},
               {"throughput_mib_s", std::round(mib_s * 10.0) / 10.0}};
  const std::string what = checkpoint.empty() ? "the replicas" : checkpoint;
  if (!v.suspects.empty()) {
    v.status = VerdictStatus::attributed;
    v.scope = Scope::rank;
    v.action = "repair_replica";
    const auto& ev = v.suspects.front().evidence;
    v.summary = fmt::format("{} corrupted tensor cop{} in {}; first: tensor '{}' of {}{}{}", v.suspects.size(), v.suspects.size() == 1 ? "y" : "ies",
                            what, ev.value("tensor", ""), ev.value("file", ""),
                            ev.contains("replica") ? fmt::format(" (replica {})", ev["replica"].get<std::size_t>()) : std::string(" (differs from its manifest)"),
                            ev.contains("zip_crc") ? fmt::format(", whose zip entry {} fails its CRC-32", ev["zip_crc"].value("entry", "")) : std::string());
  } else if (inconclusive > 0) {
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::group;
    v.action = "escalate";
    const auto& d0 = disagreements.front();
    std::vector<std::string> names;
    for (const auto& rep : d0["replicas"]) names.push_back(rep["file"].get<std::string>());
    v.summary = fmt::format("{} tensor(s) differ with no strict majority; first: '{}' differs between {} (which copy is right is unknown)",
                            inconclusive, d0["tensor"].get<std::string>(), fmt::format("{}", fmt::join(names, " and ")));
  } else {
    v.status = VerdictStatus::healthy;
    v.scope = Scope::job;
    v.action = "none";
    v.summary = fmt::format("{} intact: {} file(s), {} tensor(s) agree across replicas{}{}", what, r.layout.file_count(), compared,
                            single ? fmt::format(", {} single-copy shard(s) not compared", single) : std::string(),
                            r.manifest_checked ? ", manifest matches" : "");
  }
  return v;
}

std::string default_ledger(const VerifyCkptOptions& o) {
  if (!o.ledger.empty()) return o.ledger;
  if (o.job.empty())
    throw FatalError(usage_error("no ledger given", "--ledger and --job are both absent", "give --job J (default ledger path) or --ledger FILE"));
  for (char c : o.job)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      throw FatalError(usage_error(fmt::format("--job '{}' has characters not allowed in a file name", o.job), {}, "use letters, digits, '-', '_', '.' or give --ledger"));
  const char* base = std::getenv("SCOUT_STATE_DIR");
  return (fs::path(base && *base ? base : "/var/lib/scout") / "verify-ckpt" / (o.job + ".ledger.json")).string();
}

LedgerStore make_store(const VerifyCkptOptions& o) {
  if (!(o.lock_timeout_s >= 0) || o.lock_timeout_s > 86400)
    throw FatalError(usage_error("--lock-timeout must be between 0 and 86400 seconds"));
  return LedgerStore(default_ledger(o), std::chrono::milliseconds(static_cast<std::int64_t>(o.lock_timeout_s * 1000)));
}

nlohmann::json ledger_summary(const Ledger& l, const std::string& path) {
  auto id = [](const LedgerCheckpoint* c) { return c ? nlohmann::json(c->id) : nlohmann::json(nullptr); };
  const auto* cand = l.candidate();
  return {{"path", path},
          {"job", l.job},
          {"revision", l.revision},
          {"latest", id(l.latest())},
          {"candidate", id(cand)},
          {"verified", id(l.verified())},
          {"candidate_clean_cycles", cand ? cand->clean_cycles : 0},
          {"last_cycle", l.last_cycle ? nlohmann::json(*l.last_cycle) : nlohmann::json(nullptr)},
          {"clean_streak", l.clean_streak},
          {"checkpoints", l.checkpoints.size()}};
}

std::string prom_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

struct RunStats {
  int exit_code = 0;
  std::size_t checked = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
};

Status write_prometheus(const std::string& file, const Ledger& l, const std::optional<RunStats>& run) {
  const std::string job = prom_escape(l.job);
  std::string t;
  auto metric = [&](const char* name, const char* help, const std::string& labels, double value) {
    t += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{{job=\"{}\"{}}} {}\n", name, help, name, name, job, labels, value);
  };
  metric("scout_ckpt_ledger_revision", "Revision of the verify-ckpt ledger.", "", static_cast<double>(l.revision));
  t += "# HELP scout_ckpt_checkpoints Checkpoints in the ledger by state.\n# TYPE scout_ckpt_checkpoints gauge\n";
  for (auto s : {CheckpointState::pending, CheckpointState::verified, CheckpointState::superseded, CheckpointState::rejected,
                 CheckpointState::corrupt, CheckpointState::inconclusive, CheckpointState::invalid}) {
    auto n = std::count_if(l.checkpoints.begin(), l.checkpoints.end(), [s](const LedgerCheckpoint& c) { return c.state == s; });
    t += fmt::format("scout_ckpt_checkpoints{{job=\"{}\",state=\"{}\"}} {}\n", job, checkpoint_state_name(s), n);
  }
  t += "# HELP scout_ckpt_info The latest, candidate and verified checkpoints (value: ledger sequence number).\n# TYPE scout_ckpt_info gauge\n";
  for (auto [role, c] : {std::pair{"latest", l.latest()}, std::pair{"candidate", l.candidate()}, std::pair{"verified", l.verified()}})
    if (c) t += fmt::format("scout_ckpt_info{{job=\"{}\",role=\"{}\",checkpoint=\"{}\"}} {}\n", job, role, prom_escape(c->id), c->seq);
  metric("scout_ckpt_verified_present", "1 when a verified checkpoint exists.", "", l.verified() ? 1 : 0);
  metric("scout_ckpt_candidate_clean_cycles", "Consecutive clean replay cycles after the candidate (2 verifies it).", "",
         l.candidate() ? static_cast<double>(l.candidate()->clean_cycles) : 0.0);
  metric("scout_ckpt_replay_last_cycle", "Last replay cycle recorded (-1: none).", "", l.last_cycle ? static_cast<double>(*l.last_cycle) : -1.0);
  if (run) {
    metric("scout_ckpt_last_run_timestamp_seconds", "When verify-ckpt last ran.", "",
           static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()));
    metric("scout_ckpt_last_run_exit_code", "Exit code of the last verify-ckpt run.", "", run->exit_code);
    metric("scout_ckpt_last_run_checked", "Checkpoints checked by the last run.", "", static_cast<double>(run->checked));
    metric("scout_ckpt_last_run_bytes", "Bytes hashed by the last run.", "", static_cast<double>(run->bytes));
    metric("scout_ckpt_last_run_seconds", "Duration of the last run's hashing.", "", run->seconds);
  }
  return atomic_write_file(file, t);
}

// Writes the textfile when asked; a failure never changes the verdict or its
// exit code: it is reported on stderr and in details.side_outputs.
void write_side_prometheus(const std::string& file, const Ledger& l, const std::optional<RunStats>& run, Verdict& v) {
  if (file.empty()) return;
  auto st = write_prometheus(file, l, run);
  nlohmann::json out = {{"path", file}, {"written", st.ok()}, {"error", st.ok() ? nlohmann::json(nullptr) : nlohmann::json(st.error().message())}};
  if (!st) std::fprintf(stderr, "scout verify-ckpt: warning: prometheus textfile not written: %s (the verdict below stands)\n", st.error().message().c_str());
  v.details["side_outputs"] = {{"prometheus", out}};
}

// Suspects for outstanding corrupt checkpoints that `v` does not already name (found by an earlier run).
void add_outstanding_suspects(Verdict& v, const Ledger& l) {
  for (const auto* c : outstanding_corrupt(l)) {
    const bool named = std::any_of(v.suspects.begin(), v.suspects.end(), [&](const Suspect& s) {
      return s.evidence.contains("checkpoint") && s.evidence["checkpoint"] == c->id;
    });
    if (named) continue;
    Suspect sp;
    sp.reason = "checkpoint_recorded_corrupt";
    sp.evidence = {{"checkpoint", c->id}, {"recorded_at", c->recorded_at}, {"summary", c->summary}};
    v.suspects.push_back(std::move(sp));
  }
}

// The ledger's corrupt checkpoints still to report, as JSON, and their ids.
nlohmann::json outstanding_json(const Ledger& l, std::vector<std::string>& ids) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto* c : outstanding_corrupt(l)) {
    ids.push_back(c->id);
    out.push_back({{"id", c->id}, {"state", checkpoint_state_name(c->state)}, {"recorded_at", c->recorded_at}, {"summary", c->summary}});
  }
  return out;
}

Verdict base_verdict(const VerifyCkptOptions& o) {
  Verdict v;
  v.command = "verify-ckpt";
  v.job = o.job;
  return v;
}

int run_check(const VerifyCkptOptions& o) {
  if (!o.replicas.empty() && !o.dirs.empty())
    throw FatalError(usage_error("give either --replicas FILE... or a checkpoint directory, not both"));
  if (o.replicas.empty() && o.dirs.size() != 1)
    throw FatalError(usage_error("check needs one checkpoint directory or --replicas FILE FILE...", {},
                                 "e.g. scout verify-ckpt check /ckpt/step_100 --mesh dp=4"));
  if (!o.replicas.empty()) {
    // Options of the directory and cron forms mean nothing for explicit replicas: refuse them rather than ignore them.
    for (auto [given, name] : {std::pair{!o.mesh.empty(), "--mesh"}, std::pair{!o.pattern.empty(), "--pattern"},
                               std::pair{!o.prometheus.empty(), "--prometheus"}, std::pair{o.settle_given, "--settle"},
                               std::pair{o.recheck_invalid, "--recheck-invalid"}, std::pair{!o.ledger.empty(), "--ledger"}})
      if (given)
        throw FatalError(usage_error(fmt::format("{} does not apply to --replicas", name),
                                     "--replicas compares the files given, in order; it reads no mesh and keeps no ledger",
                                     "drop the option, or run the cron form: scout verify-ckpt --job J [--mesh M] [--prometheus F] DIR..."));
  }
  const std::string dir = o.dirs.empty() ? std::string() : o.dirs.front();
  std::optional<Manifest> manifest;
  auto layout = value_or_throw(resolve_layout(o, dir, manifest));
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
    throw FatalError(usage_error("manifest write needs --mesh to know which files are replicas", {}, "e.g. --mesh dp=4,tp=2 (dp=1 for unreplicated shards)"));
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
    if (j.is_discarded()) throw FatalError(input_error(fmt::format("{}: not valid JSON", f), {}, "pass the JSON that 'scout replay' printed"));
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
      recorded.push_back({{"file", c.source}, {"cycle", c.cycle},
                          {"outcome", c.outcome == ReplayOutcome::clean ? "clean" : c.outcome == ReplayOutcome::sdc ? "sdc" : "unclear"},
                          {"sweep", c.full_sweep ? "full" : "periodic"}, {"note", change->note},
                          {"verified", change->verified}, {"rejected", change->rejected}});
    }
    return changed;
  }));
  Verdict v = base_verdict(o);
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
      throw FatalError(input_error(fmt::format("{}: details.sweep is not \"full\"", o.sweep_file), "only a full-catalog sweep can clear a hang",
                                   "run the replay with the full catalog"));
  }
  Selection s = select_checkpoint(ledger, failure, sweep);
  Verdict v = base_verdict(o);
  v.job = ledger.job;
  nlohmann::json selected = nullptr;
  if (s.checkpoint) {
    selected = {{"id", s.checkpoint->id}, {"role", s.role}, {"state", checkpoint_state_name(s.checkpoint->state)}, {"seq", s.checkpoint->seq}};
    v.status = VerdictStatus::healthy;
    v.action = s.role == "verified" ? "rollback_verified" : "resume_latest";
    v.summary = fmt::format("restart from {} ({}): {}", s.checkpoint->id, s.role, s.reason);
  } else {
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::job;
    v.action = "escalate";
    v.summary = fmt::format("no checkpoint to restart from: {}", s.reason);
  }
  v.details = {{"action", "select"}, {"failure", failure_kind_name(failure)}, {"selected", selected}, {"rule", s.rule},
               {"reason", s.reason}, {"sweep", null_or(o.sweep_file)}, {"ledger", ledger_summary(ledger, store.path())}};
  return emit_verdict(v, o.format);
}

int run_status(const VerifyCkptOptions& o) {
  auto store = make_store(o);
  auto ledger = value_or_throw(store.load(o.job, false));
  Verdict v = base_verdict(o);
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
  v.details = {{"action", "status"}, {"ledger", ledger_summary(ledger, store.path())}, {"checkpoints", ledger_to_json(ledger)["checkpoints"]},
               {"outstanding", outstanding}};
  write_side_prometheus(o.prometheus, ledger, std::nullopt, v);
  return emit_verdict(v, o.format);
}

int run_ack(const VerifyCkptOptions& o) {
  if (o.dirs.empty()) throw FatalError(usage_error("ack needs the checkpoint id(s) to acknowledge", {}, "scout verify-ckpt ack --job J /ckpt/step_300"));
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
  Verdict v = base_verdict(o);
  v.job = ledger.job;
  v.status = VerdictStatus::healthy;
  v.action = "none";
  v.summary = fmt::format("{}", fmt::join(notes, "; "));
  std::vector<std::string> bad;
  v.details = {{"action", "ack"}, {"ledger", ledger_summary(ledger, store.path())}, {"outstanding", outstanding_json(ledger, bad)}};
  return emit_verdict(v, o.format);
}

// Natural order for checkpoint directories: by the last number in the name, then by name.
bool natural_less(const fs::path& a, const fs::path& b) {
  auto key = [](const std::string& s) {
    std::int64_t n = -1;
    std::size_t end = s.find_last_of("0123456789");
    if (end != std::string::npos) {
      std::size_t begin = end;
      while (begin > 0 && std::isdigit(static_cast<unsigned char>(s[begin - 1]))) --begin;
      if (end - begin < 18) n = std::stoll(s.substr(begin, end - begin + 1));
    }
    return n;
  };
  auto ka = key(a.filename().string()), kb = key(b.filename().string());
  return ka != kb ? ka < kb : a < b;
}

bool looks_like_checkpoint(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / k_manifest_file_name, ec)) return true;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && is_checkpoint_file_name(e.path().filename().string())) return true;
  return false;
}

// Seconds since the newest file of `dir` was modified.
double age_seconds(const fs::path& dir) {
  std::error_code ec;
  auto newest = fs::file_time_type::min();
  for (const auto& e : fs::directory_iterator(dir, ec)) newest = std::max(newest, e.last_write_time(ec));
  return std::chrono::duration<double>(fs::file_time_type::clock::now() - newest).count();
}

int run_cron(const VerifyCkptOptions& o) {
  if (o.job.empty())
    throw FatalError(usage_error("cron form needs --job", {}, "scout verify-ckpt --job J [--mesh M] DIR...; or 'verify-ckpt check DIR' for a one-off check"));
  if (o.dirs.empty()) throw FatalError(usage_error("no checkpoint directories given", {}, "scout verify-ckpt --job J DIR..."));
  auto store = make_store(o);
  auto known = value_or_throw(store.load(o.job, true));
  std::vector<fs::path> found;
  for (const auto& d : o.dirs) {
    std::error_code ec;
    fs::path p = fs::absolute(d, ec).lexically_normal();
    if (!fs::is_directory(p, ec)) throw FatalError(input_error(fmt::format("{} is not a directory", d), {}, "give checkpoint directories or their parent"));
    if (p.has_filename() == false) p = p.parent_path();
    if (looks_like_checkpoint(p)) {
      found.push_back(p);
      continue;
    }
    std::vector<fs::path> subs;
    for (const auto& e : fs::directory_iterator(p, ec))
      if (e.is_directory() && e.path().filename().string().front() != '.') subs.push_back(e.path());
    std::sort(subs.begin(), subs.end(), natural_less);
    for (auto& s : subs)
      if (looks_like_checkpoint(s)) found.push_back(s);
  }
  nlohmann::json results = nlohmann::json::array();
  std::vector<Suspect> suspects;
  RunStats stats;
  bool any_attributed = false, any_inconclusive = false, any_invalid = false;
  for (const auto& cp : found) {
    const std::string id = cp.string();
    const LedgerCheckpoint* seen = known.find(id);
    const bool recheck = seen && seen->id == id && o.recheck_invalid && seen->state == CheckpointState::invalid;
    if (seen && seen->id == id && !recheck) continue;
    if (o.settle_s > 0 && age_seconds(cp) < o.settle_s) {
      results.push_back({{"id", id}, {"result", "settling"}, {"summary", "modified recently; checked on a later run"}});
      continue;
    }
    VerifyCkptOptions one = o;
    one.replicas.clear();
    std::optional<Manifest> manifest;
    std::string summary;
    CheckpointState state = CheckpointState::invalid;
    nlohmann::json entry = {{"id", id}};
    auto layout = resolve_layout(one, id, manifest);
    Result<VerifyReport> report = layout ? Result<VerifyReport>(internal_error("unset")) : Result<VerifyReport>(layout.error());
    if (layout) {
      Progress progress(o.quiet, id);
      VerifyOptions vo;
      vo.jobs = o.jobs;
      vo.manifest = manifest ? &*manifest : nullptr;
      vo.progress = std::ref(progress);
      report = verify_layout(*layout, vo);
    }
    if (!report) {
      const Error& e = report.error();
      if (e.code != ExitCode::bad_input && e.code != ExitCode::usage) throw FatalError(e);  // unavailable/internal: record nothing
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
    known = value_or_throw(store.update(o.job, [&](Ledger& l) -> Result<bool> {
      if (recheck) return ledger_recheck_invalid(l, id, state, summary, now).changed;
      return ledger_add_checkpoint(l, id, state, summary, now).changed;
    }));
    results.push_back(std::move(entry));
  }
  Verdict v = base_verdict(o);
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
    if (r["result"] == "invalid" || r["result"] == "inconclusive") invalid.push_back(fmt::format("{} {}", r["result"].get<std::string>(), r["id"].get<std::string>()));
  v.summary = fmt::format("{} new checkpoint(s) checked, {} intact; latest {}, verified {}", stats.checked, intact,
                          known.latest() ? known.latest()->id : "none", known.verified() ? known.verified()->id : "none");
  if (!bad.empty()) v.summary += fmt::format("; CORRUPT: {} (scout verify-ckpt ack --job {} ID once handled)", fmt::join(bad, ", "), o.job);
  if (!invalid.empty()) v.summary += fmt::format("; {}", fmt::join(invalid, "; "));
  v.details = {{"action", "cron"}, {"checkpoints", results}, {"ledger", ledger_summary(known, store.path())}, {"outstanding", outstanding},
               {"bytes_read", stats.bytes}, {"seconds", std::round(stats.seconds * 1000.0) / 1000.0}};
  stats.exit_code = code;
  write_side_prometheus(o.prometheus, known, stats, v);
  int printed = emit_verdict(v, o.format);
  return code != 0 ? code : printed;
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
