#include "commands/probe_hang.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>

#include "lib/common/parse.hpp"
#include "lib/hang/flight_recorder.hpp"
#include "lib/records/reader.hpp"
#include "lib/trace/sources.hpp"

namespace scout {

void add_hang_probe_flags(CLI::App& cmd, HangProbeFlags& f) {
  add_observer_flags(cmd, f.observer);
  cmd.add_option("--mesh", f.mesh,
                 "Parallelism mesh, e.g. dp=4,tp=2 (default: from the records' coordinates, else dp=world)");
  cmd.add_option("--order", f.order, "Placement order override of --mesh, slowest first");
  cmd.add_option("--threshold", f.threshold_s, "Seconds of silence after which the job counts as stalled")
      ->default_str("10");
  cmd.add_option("--local-ranks", f.local_ranks,
                 "Only these ranks' records belong to this node, e.g. 0-3 (for nodes sharing one /dev/shm)");
  cmd.add_option("--shm-dir", f.shm_dir, "Directory of the record segments")->default_str("/dev/shm");
  cmd.add_flag("--allow-other-owner", f.allow_other_owner, "Read records owned by other users too");
  cmd.add_option("--observer-group-size", f.observer_group_size,
                 "Observers per group of the two-level gather (0: automatic, one flat group up to 64 observers; "
                 "a value >= --nodes: one flat group)")
      ->default_str("0");
}

hang::ProbeOptions to_probe_options(const HangProbeFlags& f, const std::string& command) {
  const ObserverSettings s = to_observer_settings(f.observer);
  hang::ProbeOptions o;
  o.command = command;
  o.job = s.job;
  o.attempt = s.attempt;
  if (!std::isfinite(f.threshold_s) || f.threshold_s < 0 || f.threshold_s > hang::k_max_silence_threshold_s)
    throw FatalError(usage_error(
        fmt::format("--threshold must be a number of seconds in [0, {}]", hang::k_max_silence_threshold_s)));
  o.timeout = s.timeout;
  o.threshold = std::chrono::milliseconds(static_cast<std::int64_t>(f.threshold_s * 1000));
  o.nodes = s.nodes;
  o.node_index = s.node_index;
  o.store = s.store;
  o.host_store = s.host_store;
  if (!f.mesh.empty()) {
    auto m = Mesh::parse(f.mesh, f.order);
    if (!m) throw FatalError(usage_error(m.error().what, m.error().why, m.error().hint));
    o.mesh = *m;
  }
  if (!f.local_ranks.empty()) {
    auto list = parse_int_list(f.local_ranks, "--local-ranks");
    if (!list) throw FatalError(usage_error(list.error().what, list.error().why, list.error().hint));
    o.local_ranks = std::set<std::int64_t>(list->begin(), list->end());
  }
  if (f.observer_group_size < 0 || f.observer_group_size > k_max_observers)
    throw FatalError(usage_error(fmt::format("--observer-group-size must be in [0, {}]", k_max_observers)));
  o.observer_group_size = f.observer_group_size;
  o.token_file = s.token_file;
  o.listen_address = s.listen_address;
  return o;
}

hang::RecordSource make_record_source(const HangProbeFlags& f) {
  records::ReaderOptions ro;
  ro.job = f.observer.job;
  ro.shm_dir = f.shm_dir;
  ro.owner = f.allow_other_owner ? records::OwnerPolicy::any_user : records::OwnerPolicy::same_user;
  return [ro]() { return records::read_records(ro); };
}

CommandRunner register_probe_hang(CLI::App& cmd, const GlobalOptions& globals) {
  auto o = std::make_shared<ProbeHangOptions>();
  add_hang_probe_flags(cmd, o->probe);
  cmd.get_option("--job")->required(false)->description(
      "Job id whose records are probed (as the trainers' publisher names it; required unless --flight-recorder, "
      "where it only names the job in the verdict: default, the dump directory's name)");
  cmd.add_option("--flight-recorder", o->flight_recorder,
                 "Directory of torch Flight Recorder dumps, pickled (dump on timeout) or JSON, one per rank with the "
                 "rank at the end of the name, to use as the evidence instead of scout's records");
  cmd.add_option("--world", o->world,
                 "World size of the job whose --flight-recorder dumps these are (gloo's dumps do not carry it; "
                 "default: --mesh's, else the largest rank the dumps name), so a rank that left no dump is missing");
  cmd.add_option("--trace-out", o->trace_out,
                 "Also write the evidence decided on as a timeline trace (Chrome / Perfetto trace-event JSON): a "
                 "track per rank, a slice per collective, the suspect and its stalled call marked");
  cmd.footer(
      "Examples:\n"
      "  scout probe-hang --job J --threshold 5\n"
      "  scout probe-hang --job J --nodes 4 --store tcp://node0:29600 --mesh dp=8,tp=4\n"
      "  scout probe-hang --flight-recorder /tmp/fr-dumps --world 8\n"
      "  scout probe-hang --job J --trace-out hang.trace.json   # open in ui.perfetto.dev");
  return make_runner(o, globals, run_probe_hang);
}

int run_probe_hang(const ProbeHangOptions& given) {
  ProbeHangOptions options = given;
  // Dumps of a job that ran without scout's publisher have no scout job id: the directory names it.
  auto& job = options.probe.observer.job;
  if (job.empty() && options.flight_recorder.empty())
    throw FatalError(usage_error("--job is required", "",
                                 "pass --job ID, the job id the trainers publish under (or --flight-recorder DIR)"));
  if (job.empty()) {
    const auto dir = std::filesystem::path(options.flight_recorder).lexically_normal();
    job = dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
    if (job.empty() || job == "." || job == "..") job = "flight-recorder";
  }
  hang::ProbeOptions po = to_probe_options(options.probe, "probe-hang");
  auto source = make_record_source(options.probe);
  // The world of the dumps: --world, else --mesh's (they must agree), else what the dumps name.
  std::optional<std::int64_t> world = options.world;
  if (world && (*world <= 0 || *world > hang::k_max_flight_recorder_world))
    throw FatalError(
        usage_error(fmt::format("--world must be a number of ranks in [1, {}]", hang::k_max_flight_recorder_world)));
  if (world && options.flight_recorder.empty())
    throw FatalError(usage_error("--world is for --flight-recorder dumps", "scout's records carry their world size",
                                 "drop --world, or give --flight-recorder DIR"));
  if (po.mesh) {
    if (world && *world != po.mesh->world_size())
      throw FatalError(usage_error(fmt::format("--world {} disagrees with --mesh {} ({} ranks)", *world,
                                               options.probe.mesh, po.mesh->world_size()),
                                   "", "give one of them, or a mesh over the same world"));
    world = po.mesh->world_size();
  }
  std::optional<hang::DumpsWorld> read_with;  // the dumps' world: what the verdict must say it leaves open
  if (!options.flight_recorder.empty()) {
    if (po.nodes != 1)
      throw FatalError(usage_error("--flight-recorder reads every rank's dump: use it with --nodes 1"));
    read_with.emplace();
    auto reads = value_or_throw(hang::read_flight_recorder_dir(options.flight_recorder, po.job, world, &*read_with));
    source = [reads]() -> Result<std::vector<records::RecordRead>> { return reads; };
  } else if (po.nodes == 1) {
    // Alone, an empty shm directory is a mistake (wrong job id or host), not a verdict.
    auto reads = source();
    if (!reads) throw FatalError(reads.error());
    if (reads->empty())
      throw FatalError(
          unavailable_error(fmt::format("no progress records of job '{}' in {}", po.job, options.probe.shm_dir),
                            "the trainers did not publish on this host, or the job id differs",
                            "check `scout records list`, or the job id the publisher was given"));
    auto cached = std::move(*reads);
    source = [cached]() -> Result<std::vector<records::RecordRead>> { return cached; };
  }
  hang::ProbeEvidence seen;
  Verdict v = value_or_throw(hang::run_probe(po, source, options.trace_out.empty() ? nullptr : &seen));
  if (read_with) hang::qualify_verdict(*read_with, v);
  std::optional<Error> trace_error;
  if (!options.trace_out.empty())
    trace_error = trace::write_for_verdict(trace::from_hang(seen, v), options.trace_out, v);
  const int code = emit_verdict(v, options.format);
  if (trace_error) throw FatalError(*trace_error);  // the verdict is out; the missing trace is exit 5
  return code;
}

}  // namespace scout
