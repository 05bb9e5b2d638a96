#include "commands/records.hpp"

#include <fmt/format.h>
#include <time.h>

#include <CLI/CLI.hpp>

#include "lib/common/clock.hpp"
#include "lib/records/json.hpp"
#include "lib/records/reader.hpp"
#include "lib/tensor/dtype.hpp"
#include "lib/trace/sources.hpp"

namespace scout {

CommandRunner register_records(CLI::App& cmd, const GlobalOptions& globals) {
  auto opts = std::make_shared<RecordsOptions>();
  cmd.require_subcommand(1, 1);
  auto add_common = [&](CLI::App& sub) {
    sub.add_option("--job", opts->job, "Only this job's records (default: every job)");
    sub.add_flag("--allow-other-owner", opts->allow_other_owner,
                 "Also read segments owned by other users or not 0600 (refused by default)");
    sub.add_option("--read-timeout", opts->read_timeout_s, "Seconds to get a consistent read of one record")
        ->check(CLI::Range(0.001, 60.0));
    sub.add_option("--shm-dir", opts->shm_dir, "Where the segments live")->default_str("/dev/shm");
  };
  CLI::App* list = cmd.add_subcommand("list", "Show every rank's record: step, op sequence, phase, pending collective");
  add_common(*list);
  list->callback([opts] { opts->action = RecordsAction::list; });
  CLI::App* gc = cmd.add_subcommand("gc", "Remove records whose writer process is gone (never a live writer's)");
  add_common(*gc);
  gc->add_flag("--dry-run", opts->dry_run, "Only report what would be removed");
  gc->callback([opts] { opts->action = RecordsAction::gc; });
  CLI::App* trace = cmd.add_subcommand(
      "trace", "Write every rank's collective ring as a timeline trace (Chrome / Perfetto trace-event JSON)");
  add_common(*trace);
  trace->add_option("--out", opts->trace_out, "The trace file (written atomically)")->required();
  trace->callback([opts] { opts->action = RecordsAction::trace; });
  cmd.footer(
      "Examples:\n  scout records list --job J\n  scout records gc --job J --dry-run\n"
      "  scout records trace --job J --out J.trace.json   # open in ui.perfetto.dev");
  return make_runner(opts, globals, run_records);
}

namespace {

using records::fingerprint_json;

nlohmann::json read_json(const records::RecordRead& r, std::int64_t now) {
  nlohmann::json j;
  j["segment"] = r.segment;
  j["problem"] = records::record_problem_name(r.problem);
  j["message"] = r.message.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.message);
  j["writer_alive"] = r.writer_alive;
  j["stale"] = r.stale;
  if (!r.snapshot) {
    j["record"] = nullptr;
    return j;
  }
  const auto& s = *r.snapshot;
  nlohmann::json rec;
  rec["job"] = s.job;
  rec["attempt"] = s.attempt;
  rec["rank"] = s.rank;
  rec["world_size"] = s.world_size;
  rec["coords"] = s.coords;
  rec["host"] = s.host;
  rec["pid"] = s.pid;
  rec["start_ns"] = s.start_ns;
  rec["step"] = s.step;
  rec["op_seq"] = s.op_seq;
  rec["phase"] = records::phase_name(s.phase);
  rec["collective_state"] = records::collective_state_name(s.collective_state);
  rec["pending"] =
      s.pending.type == records::CollectiveType::none ? nlohmann::json(nullptr) : fingerprint_json(s.pending);
  rec["heartbeat_ns"] = s.heartbeat_ns;
  rec["progress_ns"] = s.progress_ns;
  rec["silent_s"] = s.progress_ns > 0 ? static_cast<double>(now - s.progress_ns) / 1e9 : 0.0;
  nlohmann::json recent = nlohmann::json::array();
  for (const auto& e : s.recent) {
    nlohmann::json ej = fingerprint_json(e.fingerprint);
    ej["op_seq"] = e.op_seq;
    ej["enter_ns"] = e.enter_ns;
    ej["exit_ns"] = e.exit_ns == 0 ? nlohmann::json(nullptr) : nlohmann::json(e.exit_ns);
    if (e.failed) ej["failed"] = true;
    if (e.exit_ns != 0) ej["exit_kind"] = records::exit_kind_name(e.exit_kind);
    recent.push_back(std::move(ej));
  }
  rec["recent"] = std::move(recent);
  rec["ring_events"] = s.events;
  rec["dropped_events"] = s.dropped;
  j["record"] = std::move(rec);
  return j;
}

std::string list_text(const std::vector<records::RecordRead>& reads, std::int64_t now) {
  std::string out = fmt::format("{:<34} {:>5} {:>6} {:>8} {:<10} {:<28} {:<7} {:<6} {:>8}\n", "segment", "rank", "step",
                                "op_seq", "phase", "pending (type/count/seq)", "state", "writer", "silent");
  for (const auto& r : reads) {
    if (!r.snapshot) {
      out += fmt::format("{:<34} {}: {}\n", r.segment, records::record_problem_name(r.problem), r.message);
      continue;
    }
    const auto& s = *r.snapshot;
    std::string pending = s.pending.type == records::CollectiveType::none
                              ? "-"
                              : fmt::format("{}/{}/{}", records::collective_type_name(s.pending.type), s.pending.count,
                                            s.pending.group_seq);
    out += fmt::format("{:<34} {:>5} {:>6} {:>8} {:<10} {:<28} {:<7} {:<6} {:>7.1f}s{}\n", r.segment, s.rank, s.step,
                       s.op_seq, records::phase_name(s.phase), pending,
                       records::collective_state_name(s.collective_state), r.writer_alive ? "alive" : "gone",
                       static_cast<double>(now - s.progress_ns) / 1e9, r.stale ? " (stale)" : "");
  }
  if (reads.empty()) out += "(no records)\n";
  return out;
}

}  // namespace

int run_records(const RecordsOptions& o) {
  records::ReaderOptions ro;
  ro.job = o.job;
  ro.shm_dir = o.shm_dir;
  ro.read_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.read_timeout_s * 1000.0));
  ro.owner = o.allow_other_owner ? records::OwnerPolicy::any_user : records::OwnerPolicy::same_user;
  std::int64_t now = realtime_ns();

  Verdict v;
  v.command = "records";
  v.job = o.job;
  nlohmann::json d;
  if (o.action == RecordsAction::list) {
    auto reads = value_or_throw(records::read_records(ro));
    if (o.format == OutputFormat::text) {
      std::string out = list_text(reads, now);
      write_stdout(out);
      return to_int(ExitCode::healthy);
    }
    std::size_t refused = 0;
    d["action"] = "list";
    d["records"] = nlohmann::json::array();
    for (const auto& r : reads) {
      if (r.problem != records::RecordProblem::none) ++refused;
      d["records"].push_back(read_json(r, now));
    }
    v.summary = fmt::format("{} record(s){}, {} refused or unreadable", reads.size(),
                            o.job.empty() ? "" : fmt::format(" of job {}", o.job), refused);
  } else if (o.action == RecordsAction::trace) {
    auto reads = value_or_throw(records::read_records(ro));
    trace::TraceInput in = trace::from_records(reads, o.job, now);
    if (in.tracks.empty())
      throw FatalError(unavailable_error(
          fmt::format("no readable progress record{} in {}", o.job.empty() ? "" : fmt::format(" of job '{}'", o.job),
                      o.shm_dir),
          "there is nothing to trace", "check `scout records list`, or the job id the publisher was given"));
    v.details = {{"action", "trace"}, {"records_read", reads.size()}};
    auto error = trace::write_for_verdict(in, o.trace_out, v);
    v.summary = error ? fmt::format("could not write the trace of {} rank(s) to {}", in.tracks.size(), o.trace_out)
                      : fmt::format("trace of {} rank(s), {} call(s) written to {}", in.tracks.size(),
                                    v.details["trace"].value("slices", 0), o.trace_out);
    if (o.format == OutputFormat::text)
      write_stdout(v.summary + "\n");
    else
      emit_verdict(v, o.format);
    if (error) throw FatalError(*error);  // the verdict is out; the missing trace is exit 5
    return to_int(ExitCode::healthy);
  } else {
    auto entries =
        value_or_throw(records::gc_records(ro, o.dry_run ? records::GcMode::dry_run : records::GcMode::remove));
    d["action"] = "gc";
    d["dry_run"] = o.dry_run;
    d["segments"] = nlohmann::json::array();
    std::size_t removed = 0;
    for (const auto& e : entries) {
      removed += e.removed ? 1 : 0;
      d["segments"].push_back({{"segment", e.segment}, {"removed", e.removed}, {"reason", e.reason}});
    }
    v.summary = fmt::format("{} {} of {} segment(s)", o.dry_run ? "would remove" : "removed", removed, entries.size());
    if (o.format == OutputFormat::text) {
      std::string out = v.summary + "\n";
      for (const auto& e : entries)
        out += fmt::format("  {:<40} {:<14} {}\n", e.segment,
                           e.removed ? (o.dry_run ? "would remove" : "removed") : "kept", e.reason);
      write_stdout(out);
      return to_int(ExitCode::healthy);
    }
  }
  v.details = std::move(d);
  return emit_verdict(v, o.format);
}

}  // namespace scout
