#include "commands/observe.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <thread>

#include "lib/common/clock.hpp"
#include "lib/common/file.hpp"
#include "lib/hang/observe_metrics.hpp"
#include "lib/hang/silence.hpp"
#include "lib/trace/sources.hpp"

namespace scout {

CommandRunner register_observe(CLI::App& cmd, const GlobalOptions& globals) {
  auto o = std::make_shared<ObserveOptions>();
  add_hang_probe_flags(cmd, o->probe);
  cmd.add_option("--verdict-dir", o->verdict_dir,
                 "Directory the verdicts are written to, one file each, atomically (default: stdout only)");
  cmd.add_option("--trace-out", o->trace_dir,
                 "Directory for a timeline trace per verdict (trace-<time>-<n>.json beside verdict-<time>-<n>.json; "
                 "Chrome / Perfetto trace-event JSON)");
  cmd.add_option("--prometheus", o->prometheus,
                 "node_exporter textfile of the daemon's state (up, stalls, last verdict, silence), rewritten "
                 "atomically every round");
  cmd.add_option("--interval", o->interval_s, "Seconds between reads of the local records")->default_str("1");
  cmd.add_option("--max-verdicts", o->max_verdicts, "Stop after this many verdicts (0: never)")->default_str("0");
  cmd.add_option("--duration", o->duration_s, "Stop after this many seconds (0: never)")->default_str("0");
  add_straggler_watch_flags(cmd, o->straggler);
  cmd.footer("Example: scout observe --job J --threshold 30 --verdict-dir /var/lib/scout/verdicts");
  return make_runner(o, globals, run_observe);
}

namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int) {
  g_stop.store(true);
}

// Probes of one stall (the first included) while they miss an observer and name no one (run_observe).
constexpr int k_partial_probes = 2;

// Whether a probe's verdict was decided without every observer: the store out of reach, an observer
// unreachable, or fewer reached than --nodes.
bool missed_an_observer(const Verdict& v) {
  const auto& d = v.details;
  if (!d.is_object()) return false;
  const auto t = d.find("transport");
  if (t != d.end() && t->is_object() && t->value("store_unreachable", false)) return true;
  const auto obs = d.find("observers");
  if (obs == d.end() || !obs->is_object()) return false;
  const auto unreachable = obs->find("unreachable");
  if (unreachable != obs->end() && unreachable->is_array() && !unreachable->empty()) return true;
  const auto reached = obs->find("reached");
  const std::int64_t nodes = t != d.end() && t->is_object() ? t->value("nodes", std::int64_t{1}) : 1;
  return reached != obs->end() && reached->is_array() && static_cast<std::int64_t>(reached->size()) < nodes;
}

// What this node can see of the job's progress: the silence rule over its
// records (lib/hang/silence.hpp, the rule decide() applies) and a signature
// of where every rank is.
struct LocalView {
  hang::Silence silence;
  std::string signature;
  std::size_t records = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> last_progress;  // (rank, last progress ns)
};

LocalView look(const std::vector<records::RecordRead>& reads, const hang::ProbeOptions& po) {
  LocalView v;
  hang::NodeEvidence e = hang::collect_evidence(reads, po, 0, realtime_ns());
  v.silence = hang::silence_of(e);
  for (const auto& r : e.ranks) {
    const auto& s = r.snapshot;
    v.last_progress.emplace_back(s.rank, hang::last_progress_ns(s));
    v.signature += fmt::format("{}:{}:{}:{}:{}:{};", s.rank, s.step, s.op_seq, s.pending.group_seq,
                               static_cast<int>(s.collective_state), static_cast<int>(r.process.state));
  }
  for (const auto& i : e.issues) v.signature += fmt::format("{}:{};", i.segment, i.problem);
  v.records = e.ranks.size() + e.issues.size();
  return v;
}

}  // namespace

int run_observe(const ObserveOptions& o) {
  hang::ProbeOptions po = to_probe_options(o.probe, "observe");
  if (!std::isfinite(o.interval_s) || o.interval_s <= 0 || o.interval_s > 3600)
    throw FatalError(usage_error("--interval must be a number of seconds in (0, 3600]"));
  if (!std::isfinite(o.duration_s) || o.duration_s < 0)
    throw FatalError(usage_error("--duration must not be negative"));
  if (o.max_verdicts < 0) throw FatalError(usage_error("--max-verdicts must not be negative"));
  if (!o.verdict_dir.empty()) {
    if (::mkdir(o.verdict_dir.c_str(), 0755) != 0 && errno != EEXIST)
      throw FatalError(
          unavailable_error(fmt::format("cannot create --verdict-dir {}", o.verdict_dir), std::strerror(errno)));
    if (::access(o.verdict_dir.c_str(), W_OK | X_OK) != 0)
      throw FatalError(
          unavailable_error(fmt::format("--verdict-dir {} is not writable", o.verdict_dir), std::strerror(errno)));
  }
  if (!o.trace_dir.empty() &&
      ((::mkdir(o.trace_dir.c_str(), 0755) != 0 && errno != EEXIST) || ::access(o.trace_dir.c_str(), W_OK | X_OK) != 0))
    throw FatalError(unavailable_error(fmt::format("--trace-out {} is not a writable directory", o.trace_dir),
                                       std::strerror(errno)));
  auto source = make_record_source(o.probe);
  hang::ObserveMetricsFile metrics(o.prometheus, po.job);
  if (!metrics.write())
    throw FatalError(unavailable_error(fmt::format("cannot write --prometheus {}", o.prometheus),
                                       "its directory is missing or not writable",
                                       "give a file in a writable directory (node_exporter's textfile directory)"));

  g_stop.store(false);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto interval = std::chrono::milliseconds(static_cast<std::int64_t>(o.interval_s * 1000));
  const std::int64_t threshold_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(po.threshold).count();
  std::string last_stall;  // signature of the stall the last verdict was about
  std::string previous;    // signature seen by the previous read
  std::string partial;     // signature of a stall whose probe missed an observer and named no one
  int partial_probes = 0;  // probes of that stall so far
  // Whether a stall whose probe missed an observer and named no one is probed once more (k_partial_probes).
  const auto probe_again = [&partial, &partial_probes](const std::string& stall) {
    partial_probes = partial == stall ? partial_probes + 1 : 1;
    partial = stall;
    return partial_probes < k_partial_probes;
  };
  std::int64_t verdicts = 0;
  StragglerWatch watch(o.straggler, po.job, o.probe.observer.attempt, o.probe.mesh, o.probe.order, o.probe.local_ranks,
                       o.probe.shm_dir, o.probe.allow_other_owner);
  auto report = [&](Verdict& v, const trace::TraceInput& trace_input) {
    ++verdicts;
    metrics.verdict(v);
    v.created_at = now_rfc3339();
    std::string stamp = v.created_at;
    std::erase_if(stamp, [](char c) { return c == ':' || c == '-'; });
    if (!o.trace_dir.empty())  // a daemon keeps going: the error is logged and in details.trace
      if (auto e = trace::write_for_verdict(trace_input,
                                            fmt::format("{}/trace-{}-{}.json", o.trace_dir, stamp, verdicts), v))
        spdlog::error("{}", e->message());
    std::string text = to_json(v).dump(2) + "\n";
    if (!o.verdict_dir.empty()) {
      auto w = atomic_write_file(fmt::format("{}/verdict-{}-{}.json", o.verdict_dir, stamp, verdicts), text);
      if (!w) spdlog::error("{}", w.error().message());
    }
    emit_verdict(v, o.format);
  };
  spdlog::info("observing job {} every {:.1f} s, threshold {:.1f} s", po.job, o.interval_s, o.probe.threshold_s);

  while (!g_stop.load()) {
    if (o.duration_s > 0 && Clock::now() - start >= std::chrono::duration<double>(o.duration_s)) break;
    auto reads = source();
    if (!reads) {
      spdlog::warn("{}", reads.error().message());
    } else {
      LocalView view = look(*reads, po);
      const std::int64_t now = realtime_ns();
      metrics.round(view.silence, view.last_progress, view.records, now);
      const bool silent = view.records > 0 && view.silence.stalled(now, threshold_ns);
      // Probe only a settled picture: when one rank stops or dies, its peers on
      // this node may still be on their way into the collective; probing at once
      // would give a second verdict for the same stall a moment later.
      const bool settled = view.signature == previous;
      previous = view.signature;
      if (!silent) {
        last_stall.clear();  // progress resumed (or nothing to watch): the next stall is a new one
        if (auto sv = watch.poll()) {
          report(*sv, trace::from_straggler(watch.last_rounds(), *sv));
          if (o.max_verdicts > 0 && verdicts >= o.max_verdicts) break;
        }
      } else if (view.signature != last_stall && settled) {
        auto cached = std::move(*reads);
        hang::ProbeEvidence seen;
        metrics.stall(view.signature);
        auto v = hang::run_probe(
            po, [cached]() -> Result<std::vector<records::RecordRead>> { return cached; }, &seen);
        if (!v) {
          metrics.probe_failed();
          spdlog::warn("probe failed: {}", v.error().message());
        } else if (v->status == VerdictStatus::healthy) {
          spdlog::info("probe: healthy ({})", v->summary);
          last_stall = view.signature;
        } else if (missed_an_observer(*v) && v->suspects.empty() && probe_again(view.signature)) {
          // An observer that starts late (its node's daemon started after this one, its module still loading on
          // a loaded host) is missed by the first probe, which then names no one: the same stall is probed
          // again before a verdict is written (a lost node is named by the first, and written at once).
          spdlog::info("probe: {} without every observer; probing again", v->summary);
        } else {
          last_stall = view.signature;
          report(*v, trace::from_hang(seen, *v));
          if (o.max_verdicts > 0 && verdicts >= o.max_verdicts) break;
        }
      }
    }
    metrics.write();
    // Sleep in small steps so SIGTERM is answered promptly.
    auto wake = Clock::now() + interval;
    while (!g_stop.load() && Clock::now() < wake) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  metrics.stopped();
  spdlog::info("observe stopped after {} verdict(s)", verdicts);
  return 0;
}

}  // namespace scout
