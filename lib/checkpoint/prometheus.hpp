// The verify-ckpt ledger and the last run as a node_exporter textfile
// (gauges labelled by job; written atomically so the collector never reads
// half a file), through lib/common/prometheus.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lib/checkpoint/ledger.hpp"
#include "lib/common/error.hpp"
#include "lib/common/prometheus.hpp"

namespace scout::checkpoint {

// What one cron run did, for the scout_ckpt_last_run_* gauges.
struct RunStats {
  int exit_code = 0;
  std::size_t checked = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
};

// The textfile: the ledger's gauges, and the last run's when `run` is given
// (its timestamp is `now_unix_seconds`).
std::string prometheus_text(const Ledger& ledger, const std::optional<RunStats>& run, std::int64_t now_unix_seconds);

// Writes prometheus_text(ledger, run, now) to `file` atomically.
Status write_prometheus(const std::string& file, const Ledger& ledger, const std::optional<RunStats>& run);

}  // namespace scout::checkpoint
