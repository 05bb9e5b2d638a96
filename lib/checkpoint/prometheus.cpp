#include "lib/checkpoint/prometheus.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace scout::checkpoint {

std::string prometheus_text(const Ledger& l, const std::optional<RunStats>& run, std::int64_t now_unix_seconds) {
  PrometheusText t;
  const PrometheusLabels job{{"job", l.job}};
  auto metric = [&](const char* name, const char* help, double value) { t.metric(name, "gauge", help, job, value); };
  metric("scout_ckpt_ledger_revision", "Revision of the verify-ckpt ledger.", static_cast<double>(l.revision));
  t.family("scout_ckpt_checkpoints", "gauge", "Checkpoints in the ledger by state.");
  for (auto s :
       {CheckpointState::pending, CheckpointState::verified, CheckpointState::superseded, CheckpointState::rejected,
        CheckpointState::corrupt, CheckpointState::inconclusive, CheckpointState::invalid}) {
    auto n = std::count_if(l.checkpoints.begin(), l.checkpoints.end(),
                           [s](const LedgerCheckpoint& c) { return c.state == s; });
    t.sample("scout_ckpt_checkpoints", {{"job", l.job}, {"state", std::string(checkpoint_state_name(s))}},
             static_cast<double>(n));
  }
  t.family("scout_ckpt_info", "gauge",
           "The latest, candidate and verified checkpoints (value: ledger sequence number).");
  for (auto [role, c] :
       {std::pair{"latest", l.latest()}, std::pair{"candidate", l.candidate()}, std::pair{"verified", l.verified()}})
    if (c)
      t.sample("scout_ckpt_info", {{"job", l.job}, {"role", role}, {"checkpoint", c->id}}, static_cast<double>(c->seq));
  metric("scout_ckpt_verified_present", "1 when a verified checkpoint exists.", l.verified() ? 1 : 0);
  metric("scout_ckpt_candidate_clean_cycles", "Consecutive clean replay cycles after the candidate (2 verifies it).",
         l.candidate() ? static_cast<double>(l.candidate()->clean_cycles) : 0.0);
  metric("scout_ckpt_replay_last_cycle", "Last replay cycle recorded (-1: none).",
         l.last_cycle ? static_cast<double>(*l.last_cycle) : -1.0);
  if (run) {
    metric("scout_ckpt_last_run_timestamp_seconds", "When verify-ckpt last ran.",
           static_cast<double>(now_unix_seconds));
    metric("scout_ckpt_last_run_exit_code", "Exit code of the last verify-ckpt run.", run->exit_code);
    metric("scout_ckpt_last_run_checked", "Checkpoints checked by the last run.", static_cast<double>(run->checked));
    metric("scout_ckpt_last_run_bytes", "Bytes hashed by the last run.", static_cast<double>(run->bytes));
    metric("scout_ckpt_last_run_seconds", "Duration of the last run's hashing.", run->seconds);
  }
  return t.text();
}

Status write_prometheus(const std::string& file, const Ledger& l, const std::optional<RunStats>& run) {
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return write_prometheus_textfile(file, prometheus_text(l, run, now));
}

}  // namespace scout::checkpoint
