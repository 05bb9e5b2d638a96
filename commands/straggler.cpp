#include "commands/straggler.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cmath>

#include "lib/common/file.hpp"
#include "lib/common/parse.hpp"
#include "lib/records/reader.hpp"
#include "lib/straggler/evidence.hpp"
#include "lib/trace/sources.hpp"

namespace scout {

void add_straggler_decision_flags(CLI::App& cmd, StragglerFlags& f, const std::string& prefix) {
  cmd.add_option("--" + prefix + "rounds", f.rounds,
                 "Rounds of ring samples; a rank or group is named only when flagged in a strict majority")
      ->default_str("3");
  cmd.add_option(
         "--" + prefix + "interval", f.interval_s,
         "Seconds between rounds (each round compares calls no earlier round used; on one node a round with fewer "
         "than 4 calls per rank goes on, up to 4x)")
      ->default_str("1");
  cmd.add_option("--" + prefix + "min-ratio", f.min_ratio,
                 "A compute straggler computes at least this times its peers' median, call by call")
      ->default_str("1.12");
  cmd.add_option("--" + prefix + "link-ratio", f.link_ratio,
                 "A slow process group's collectives take at least this times the other groups' median")
      ->default_str("1.5");
  cmd.add_option("--" + prefix + "drift", f.drift,
                 "Fleet slowdown: a group at least this fraction above its own history's median")
      ->default_str("0.3");
  cmd.add_option(
      "--" + prefix + "history", f.history,
      "Per-job history file of each group's median times (created when absent; locked, replaced atomically)");
}

void add_straggler_flags(CLI::App& cmd, StragglerFlags& f) {
  add_observer_flags(cmd, f.observer,
                     "Seconds each round's gather may take; observers that do not answer are left out of the round");
  cmd.get_option("--node-index")->description("This node's 0-based index (required with --nodes > 1)");
  cmd.get_option("--job")->required(false)->description(
      "Job id whose records are probed (as the trainers' publisher names it; required unless --evidence-in, "
      "whose file names it)");
  cmd.add_option("--mesh", f.mesh,
                 "Parallelism mesh, e.g. dp=4,tp=2 (default: from the records' coordinates, else dp=world)");
  cmd.add_option("--order", f.order, "Placement order override of --mesh, slowest first");
  cmd.add_option("--local-ranks", f.local_ranks,
                 "Only these ranks' records belong to this node, e.g. 0-3 (for nodes sharing one /dev/shm)");
  cmd.add_option("--shm-dir", f.shm_dir, "Directory of the record segments")->default_str("/dev/shm");
  cmd.add_flag("--allow-other-owner", f.allow_other_owner, "Read records owned by other users too");
  cmd.add_flag("--bench", f.bench,
               "Also run the controlled probe: the same GEMM and memory sweep on every local rank's CPUs (and cpu "
               "cgroup), timed");
  cmd.add_option("--evidence-out", f.evidence_out,
                 "Also write the rounds' ring evidence to this file (JSON, for --evidence-in and benchmarks)");
  cmd.add_option("--evidence-in", f.evidence_in,
                 "Decide on evidence recorded by --evidence-out instead of reading records");
  cmd.add_option("--trace-out", f.trace_out,
                 "Also write the rounds as a timeline trace (Chrome / Perfetto trace-event JSON): a track per rank, "
                 "a slice per collective, the named rank's flagged rounds marked");
  add_straggler_decision_flags(cmd, f, "");
}

namespace {

// --job, or with --evidence-in and no --job the job its file names.
std::string job_of(const StragglerFlags& f) {
  if (!f.observer.job.empty() || f.evidence_in.empty()) {
    if (f.observer.job.empty())
      throw FatalError(usage_error("--job is required", "", "pass --job ID, the job id the trainers publish under"));
    return f.observer.job;
  }
  auto text = read_small_file(f.evidence_in, std::size_t{256} << 20);
  if (!text) throw FatalError(text.error());
  return value_or_throw(straggler::evidence_job(*text, f.evidence_in));
}

}  // namespace

straggler::LiveOptions to_live_options(const StragglerFlags& flags, const std::string& command) {
  StragglerFlags f = flags;
  f.observer.job = job_of(flags);
  const ObserverSettings obs = to_observer_settings(f.observer);
  straggler::LiveOptions o;
  o.command = command;
  o.job = obs.job;
  o.attempt = obs.attempt;
  if (f.rounds < 1 || f.rounds > 1000) throw FatalError(usage_error("--rounds must be between 1 and 1000"));
  o.rounds = f.rounds;
  if (!std::isfinite(f.interval_s) || f.interval_s < 0 || f.interval_s > 3600)
    throw FatalError(usage_error("--interval must be a number of seconds in [0, 3600]"));
  o.interval = std::chrono::milliseconds(static_cast<std::int64_t>(f.interval_s * 1000));
  o.round_timeout = obs.timeout;
  if (!std::isfinite(f.min_ratio) || f.min_ratio <= 1 || f.min_ratio > 100)
    throw FatalError(usage_error("--min-ratio must be a number in (1, 100]", "", "e.g. --min-ratio 1.2"));
  o.decide.min_relative = f.min_ratio - 1;
  if (!std::isfinite(f.link_ratio) || f.link_ratio <= 1 || f.link_ratio > 1000)
    throw FatalError(usage_error("--link-ratio must be a number in (1, 1000]"));
  o.decide.link_min_ratio = f.link_ratio;
  if (!std::isfinite(f.drift) || f.drift <= 0 || f.drift > 100)
    throw FatalError(usage_error("--drift must be a number in (0, 100]"));
  o.drift.min_relative = f.drift;
  o.nodes = obs.nodes;
  o.node_index = obs.node_index;
  if (o.nodes > 1 && !o.node_index)
    throw FatalError(
        usage_error("--node-index is required with --nodes > 1", "", "pass --node-index I (0-based) on each node"));
  if (o.nodes == 1 && (obs.store || f.observer.store_host || f.observer.no_store_host))
    throw FatalError(usage_error("--store, --store-host and --no-store-host need --nodes > 1"));
  o.store = obs.store;
  o.host_store = obs.host_store;
  if (!f.order.empty() && f.mesh.empty()) throw FatalError(usage_error("--order needs --mesh"));
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
  o.token_file = obs.token_file;
  o.listen_address = obs.listen_address;
  o.bench = f.bench;
  o.history_path = f.history;
  o.evidence_in = f.evidence_in;
  o.evidence_out = f.evidence_out;
  if (!o.evidence_in.empty() && (o.bench || o.nodes > 1))
    throw FatalError(usage_error("--evidence-in decides on recorded rounds: it takes neither --bench nor --nodes"));
  return o;
}

void add_straggler_watch_flags(CLI::App& cmd, StragglerWatchFlags& w) {
  cmd.add_flag(
      "--straggler", w.enabled,
      "Also watch for stragglers while the job makes progress (this node's ranks); a verdict per distinct finding");
  cmd.add_option("--straggler-every", w.every_s, "Seconds between straggler checks")->default_str("30");
  add_straggler_decision_flags(cmd, w.flags, "straggler-");
}

StragglerWatch::StragglerWatch(const StragglerWatchFlags& w, const std::string& job, const std::string& attempt,
                               const std::string& mesh, const std::string& order, const std::string& local_ranks,
                               const std::string& shm_dir, bool allow_other_owner) {
  m_enabled = w.enabled;
  if (!m_enabled) return;
  if (!std::isfinite(w.every_s) || w.every_s <= 0 || w.every_s > 86400)
    throw FatalError(usage_error("--straggler-every must be a number of seconds in (0, 86400]"));
  StragglerFlags f = w.flags;
  f.observer.job = job;
  f.observer.attempt = attempt;
  f.mesh = mesh;
  f.order = order;
  f.local_ranks = local_ranks;
  m_options = to_live_options(f, "straggler");  // the verdict is a straggler verdict (its schema), written by observe
  m_every = std::chrono::milliseconds(static_cast<std::int64_t>(w.every_s * 1000));
  m_next = std::chrono::steady_clock::now() + m_every;
  m_reader.job = job;
  m_reader.shm_dir = shm_dir;
  m_reader.owner = allow_other_owner ? records::OwnerPolicy::any_user : records::OwnerPolicy::same_user;
}

std::optional<Verdict> StragglerWatch::poll() {
  if (!m_enabled || std::chrono::steady_clock::now() < m_next) return std::nullopt;
  auto ro = m_reader;
  auto v = straggler::run_straggler(
      m_options, [ro]() { return records::read_records(ro); }, &m_rounds);
  m_next = std::chrono::steady_clock::now() + m_every;
  if (!v) {
    spdlog::warn("straggler check: {}", v.error().message());
    return std::nullopt;
  }
  // What the finding is, independent of the numbers: who, why, which groups, fleet or not.
  std::string sig =
      std::string(verdict_status_name(v->status)) + "|" + v->details["straggler"].value("diagnosis", "") + "|";
  for (const auto& s : v->suspects) sig += fmt::format("{}:{}:{};", s.rank, s.node, s.reason);
  for (const auto& g : v->details["straggler"]["slow_groups"]) sig += g.value("id", "") + ";";
  const bool fleet = v->details.contains("temporal") && v->details["temporal"].value("status", "") == "fleet_slowdown";
  sig += fleet ? "fleet" : "";
  const bool finding = !v->suspects.empty() || fleet || !v->details["straggler"]["slow_groups"].empty();
  if (!finding) {
    spdlog::info("straggler check: {}", v->summary);
    m_last.clear();
    return std::nullopt;
  }
  if (sig == m_last) return std::nullopt;
  m_last = sig;
  v->details["straggler"]["watch"] = "observe --straggler";
  return std::move(*v);
}

CommandRunner register_straggler(CLI::App& cmd, const GlobalOptions& globals) {
  auto o = std::make_shared<StragglerOptions>();
  add_straggler_flags(cmd, o->flags);
  cmd.footer(
      "Examples:\n"
      "  scout straggler --job J --rounds 3 --interval 2\n"
      "  scout straggler --job J --bench --history /var/lib/scout/J.history.json\n"
      "  scout straggler --job J --nodes 4 --node-index 0 --store tcp://node0:29600 --mesh dp=8,tp=4");
  return make_runner(o, globals, run_straggler);
}

int run_straggler(const StragglerOptions& options) {
  auto o = to_live_options(options.flags, "straggler");
  records::ReaderOptions ro;
  ro.job = options.flags.observer.job;
  ro.shm_dir = options.flags.shm_dir;
  ro.owner = options.flags.allow_other_owner ? records::OwnerPolicy::any_user : records::OwnerPolicy::same_user;
  const std::string& trace_out = options.flags.trace_out;
  std::vector<straggler::RoundEvidence> rounds;
  Verdict v = value_or_throw(straggler::run_straggler(
      o, [ro]() { return records::read_records(ro); }, trace_out.empty() ? nullptr : &rounds));
  std::optional<Error> trace_error;
  if (!trace_out.empty()) trace_error = trace::write_for_verdict(trace::from_straggler(rounds, v), trace_out, v);
  const int code = emit_verdict(v, options.format);
  if (trace_error) throw FatalError(*trace_error);  // the verdict is out; the missing trace is exit 5
  return code;
}

}  // namespace scout
