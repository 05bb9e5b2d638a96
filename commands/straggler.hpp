// `scout straggler`: one straggler verdict from R rounds of the job's
// collective rings (every node's, gathered when --nodes > 1), optionally with
// the controlled probe (--bench) and the per-job temporal baseline (--history).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "commands/common.hpp"
#include "commands/observer_flags.hpp"
#include "lib/records/reader.hpp"
#include "lib/straggler/probe.hpp"

namespace scout {

struct StragglerFlags {
  ObserverFlags observer;  // --job ... --listen (observer_flags.hpp); its timeout bounds each round's gather
  std::string mesh;
  std::string order;
  std::string local_ranks;
  std::string shm_dir = "/dev/shm";
  bool allow_other_owner = false;
  std::int64_t rounds = 3;
  double interval_s = 1;
  bool bench = false;
  std::string history;
  std::string evidence_in;
  std::string evidence_out;
  std::string trace_out;    // --trace-out FILE: the rounds' timeline trace
  double min_ratio = 1.12;  // compute straggler: at least this times the peers' median
  double link_ratio = 1.5;  // slow group: at least this times the other groups' median
  double drift = 0.3;       // fleet slowdown: at least this fraction above the history's median
};

struct StragglerOptions {
  StragglerFlags flags;
  OutputFormat format = OutputFormat::json;
};

// Adds the straggler flags to `cmd` (straggler; observe --straggler reuses the decision flags).
void add_straggler_flags(CLI::App& cmd, StragglerFlags& flags);
// Adds only the decision flags (--rounds, --interval, --min-ratio, --link-ratio, --drift, --history, --bench).
void add_straggler_decision_flags(CLI::App& cmd, StragglerFlags& flags, const std::string& prefix);

// Validates the flags; throws FatalError (usage) when invalid.
straggler::LiveOptions to_live_options(const StragglerFlags& flags, const std::string& command);

// `scout observe --straggler`: a straggler check every `every_s` seconds while
// the job makes progress, on this node's ranks (with several observe daemons,
// each decides on its own node's ranks); a verdict per distinct finding.
struct StragglerWatchFlags {
  bool enabled = false;
  double every_s = 30;
  StragglerFlags flags;  // decision flags only (--straggler-rounds, ...)
};

// Adds --straggler, --straggler-every and the --straggler-* decision flags to observe.
void add_straggler_watch_flags(CLI::App& cmd, StragglerWatchFlags& flags);

class StragglerWatch {
 public:
  // `job`, `shm_dir`, ... are observe's own flags; throws FatalError (usage) on bad flags.
  StragglerWatch(const StragglerWatchFlags& watch, const std::string& job, const std::string& attempt,
                 const std::string& mesh, const std::string& order, const std::string& local_ranks,
                 const std::string& shm_dir, bool allow_other_owner);
  // When a check is due, runs it; returns its verdict when it holds a finding
  // (suspects, a slow group, a fleet slowdown) other than the last one reported.
  std::optional<Verdict> poll();
  bool enabled() const { return m_enabled; }
  // The rounds the last check decided on (for observe --trace-out).
  const std::vector<straggler::RoundEvidence>& last_rounds() const { return m_rounds; }

 private:
  bool m_enabled = false;
  std::chrono::steady_clock::time_point m_next{};
  std::chrono::milliseconds m_every{30000};
  straggler::LiveOptions m_options;
  records::ReaderOptions m_reader;
  std::string m_last;  // signature of the last finding reported
  std::vector<straggler::RoundEvidence> m_rounds;
};

CommandRunner register_straggler(CLI::App& command, const GlobalOptions& globals);
int run_straggler(const StragglerOptions& options);

}  // namespace scout
