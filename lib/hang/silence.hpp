// The silence rule of a hang: when a job counts as stalled. One rule, used by
// the hang decision (decide.cpp, over every observer's evidence) and by
// `scout observe` (over one node's records, to choose when to probe), so the
// two can never disagree about what a stall is.
//
// A job is stalled when a rank's process is stopped or dead (or a record is
// torn and its writer dead), or when no rank has made progress for at least
// the threshold. A rank that never published an event is still starting up:
// its silence is no stall and it does not count toward the newest progress.
// The threshold is the caller's (--threshold; its default and the model behind
// it: k_default_silence_threshold in thresholds.hpp).
#pragma once

#include <cstdint>

#include "lib/hang/evidence.hpp"
#include "lib/hang/process_state.hpp"
#include "lib/records/snapshot.hpp"

namespace scout::hang {

// A rank's last sign of progress: its last event, else its last heartbeat,
// else its writer's start (CLOCK_REALTIME ns).
std::int64_t last_progress_ns(const records::RankSnapshot& snapshot);

// Accumulates the silence rule over ranks and unreadable records.
class Silence {
 public:
  void add_rank(const records::RankSnapshot& snapshot, ProcessState process);
  void add_rank(const RankEvidence& rank) { add_rank(rank.snapshot, rank.process.state); }
  void add_issue(const RecordIssue& issue) { add_issue(issue.problem, issue.writer_alive); }
  void add_issue(std::string_view problem, bool writer_alive);

  // Newest last progress among ranks that published an event; 0 when none did.
  std::int64_t newest_progress_ns() const { return m_newest; }
  // A rank stopped or dead, or a torn record whose writer is dead.
  bool bad_process() const { return m_bad_process; }
  // How long the job has been silent at `now_ns` (0 when no rank published).
  std::int64_t silent_ns(std::int64_t now_ns) const { return m_newest > 0 ? now_ns - m_newest : 0; }
  // Silent for at least `threshold_ns`.
  bool silent(std::int64_t now_ns, std::int64_t threshold_ns) const {
    return m_newest > 0 && silent_ns(now_ns) >= threshold_ns;
  }
  // Silent, or a bad process: a probe is due and a stall is to be explained.
  bool stalled(std::int64_t now_ns, std::int64_t threshold_ns) const {
    return m_bad_process || silent(now_ns, threshold_ns);
  }

 private:
  std::int64_t m_newest = 0;
  bool m_bad_process = false;
};

// The rule over one observer's evidence.
Silence silence_of(const NodeEvidence& evidence);

}  // namespace scout::hang
