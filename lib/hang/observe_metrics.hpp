// What `scout observe --prometheus FILE` exports each round, as a
// node_exporter textfile (lib/common/prometheus): the daemon is up, what it
// has seen and said, and how long the local ranks have been silent.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/hang/silence.hpp"
#include "lib/report/verdict.hpp"

namespace scout::hang {

// The state of one observe daemon after a round.
struct ObserveMetrics {
  std::string job;
  bool up = true;                   // false in the file written as it stops
  std::int64_t rounds = 0;          // reads of the local records
  std::int64_t stalls_seen = 0;     // distinct stalls probed (healthy probes included)
  std::int64_t verdicts = 0;        // verdicts reported (hang and straggler)
  std::int64_t probe_failures = 0;  // probes that ended in an error
  std::int64_t records = 0;         // local records (and unreadable segments) at the last read
  // The last verdict reported (absent when none yet): its command, status and exit code.
  bool has_verdict = false;
  std::string verdict_command;
  std::string verdict_status;
  int verdict_exit_code = 0;
  double verdict_unix_seconds = 0;
  double silence_seconds = 0;  // since the newest progress of any local rank (0: none published)
  struct RankSilence {
    std::int64_t rank = 0;
    double seconds = 0;
  };
  std::vector<RankSilence> ranks;  // each local rank's silence
  double round_unix_seconds = 0;   // when the last round read the records
};

// The textfile of `m` (gauges and counters, every sample labelled by job).
std::string observe_metrics_text(const ObserveMetrics& m);

// The daemon's --prometheus file: the metrics kept up to date by the loop's
// calls and written atomically by write() (a failing write is logged once,
// when it starts failing; watching goes on). An empty file name writes nothing.
class ObserveMetricsFile {
 public:
  ObserveMetricsFile(std::string file, const std::string& job);
  // One read of the records: their count, the silence rule over them, each
  // rank's (rank, last progress ns), at `now_ns` (CLOCK_REALTIME).
  void round(const Silence& silence, const std::vector<std::pair<std::int64_t, std::int64_t>>& last_progress,
             std::size_t records, std::int64_t now_ns);
  // A stall about to be probed: counted once per signature (a failed probe is retried).
  void stall(const std::string& signature);
  void probe_failed() { ++m_metrics.probe_failures; }
  // A verdict reported (now).
  void verdict(const Verdict& verdict);
  // Writes the file; false when it could not be written.
  bool write();
  // The daemon stops: up 0, written.
  void stopped();
  const ObserveMetrics& metrics() const { return m_metrics; }

 private:
  std::string m_file;
  std::string m_stall;
  bool m_ok = true;
  ObserveMetrics m_metrics;
};

}  // namespace scout::hang
