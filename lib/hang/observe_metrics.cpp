#include "lib/hang/observe_metrics.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "lib/common/clock.hpp"
#include "lib/common/prometheus.hpp"

namespace scout::hang {

std::string observe_metrics_text(const ObserveMetrics& m) {
  PrometheusText t;
  const PrometheusLabels job{{"job", m.job}};
  t.metric("scout_observe_up", "gauge", "1 while scout observe runs; 0 once it stopped cleanly.", job, m.up ? 1 : 0);
  t.metric("scout_observe_rounds_total", "counter", "Reads of the local progress records.", job,
           static_cast<double>(m.rounds));
  t.metric("scout_observe_stalls_seen_total", "counter", "Distinct stalls probed (including those found healthy).", job,
           static_cast<double>(m.stalls_seen));
  t.metric("scout_observe_verdicts_total", "counter", "Verdicts reported (hang and straggler).", job,
           static_cast<double>(m.verdicts));
  t.metric("scout_observe_probe_failures_total", "counter", "Probes that ended in an error (see the daemon's log).",
           job, static_cast<double>(m.probe_failures));
  t.metric("scout_observe_records", "gauge", "Local progress records at the last read.", job,
           static_cast<double>(m.records));
  if (m.has_verdict) {
    t.metric("scout_observe_last_verdict", "gauge",
             "The last verdict reported (labels: command, status, exit code; value always 1).",
             {{"job", m.job},
              {"command", m.verdict_command},
              {"status", m.verdict_status},
              {"exit_code", std::to_string(m.verdict_exit_code)}},
             1);
    t.metric("scout_observe_last_verdict_timestamp_seconds", "gauge", "When the last verdict was reported.", job,
             m.verdict_unix_seconds);
  }
  t.metric("scout_observe_silence_seconds", "gauge",
           "Seconds since the newest progress of any local rank (0: no rank published yet).", job, m.silence_seconds);
  if (!m.ranks.empty()) {
    t.family("scout_observe_rank_silence_seconds", "gauge", "Seconds since each local rank's last progress.");
    for (const auto& r : m.ranks)
      t.sample("scout_observe_rank_silence_seconds", {{"job", m.job}, {"rank", std::to_string(r.rank)}}, r.seconds);
  }
  t.metric("scout_observe_last_round_timestamp_seconds", "gauge", "When the records were last read.", job,
           m.round_unix_seconds);
  return t.text();
}

namespace {

double to_seconds(std::int64_t ns) {
  return static_cast<double>(ns) / 1e9;
}

}  // namespace

ObserveMetricsFile::ObserveMetricsFile(std::string file, const std::string& job) : m_file(std::move(file)) {
  m_metrics.job = job;
}

void ObserveMetricsFile::round(const Silence& silence,
                               const std::vector<std::pair<std::int64_t, std::int64_t>>& last_progress,
                               std::size_t records, std::int64_t now_ns) {
  ++m_metrics.rounds;
  m_metrics.records = static_cast<std::int64_t>(records);
  m_metrics.silence_seconds = to_seconds(silence.silent_ns(now_ns));
  m_metrics.ranks.clear();
  for (auto [rank, ns] : last_progress)
    m_metrics.ranks.push_back({rank, to_seconds(std::max<std::int64_t>(0, now_ns - ns))});
  m_metrics.round_unix_seconds = to_seconds(now_ns);
}

void ObserveMetricsFile::stall(const std::string& signature) {
  if (signature != m_stall) ++m_metrics.stalls_seen;
  m_stall = signature;
}

void ObserveMetricsFile::verdict(const Verdict& v) {
  ++m_metrics.verdicts;
  m_metrics.has_verdict = true;
  m_metrics.verdict_command = v.command;
  m_metrics.verdict_status = std::string(verdict_status_name(v.status));
  m_metrics.verdict_exit_code = to_int(exit_code_for(v));
  m_metrics.verdict_unix_seconds = to_seconds(realtime_ns());
}

bool ObserveMetricsFile::write() {
  if (m_file.empty()) return true;
  auto w = write_prometheus_textfile(m_file, observe_metrics_text(m_metrics));
  if (!w && m_ok) spdlog::error("--prometheus: {}", w.error().message());
  m_ok = w.ok();
  return m_ok;
}

void ObserveMetricsFile::stopped() {
  m_metrics.up = false;
  write();
}

}  // namespace scout::hang
