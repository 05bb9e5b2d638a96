// `scout observe`: a per-node daemon that watches the local records' progress
// and, on every distinct stall past the threshold, runs the same probe as
// probe-hang and writes its verdict atomically to the verdict directory.
#pragma once

#include <string>

#include "commands/probe_hang.hpp"
#include "commands/straggler.hpp"

namespace scout {

struct ObserveOptions {
  HangProbeFlags probe;
  std::string verdict_dir;        // "" = stdout only
  std::string trace_dir;          // --trace-out DIR: a timeline trace per verdict ("" = none)
  std::string prometheus;         // --prometheus FILE: node_exporter textfile, rewritten each round ("" = none)
  double interval_s = 1;          // how often the records are read
  std::int64_t max_verdicts = 0;  // stop after this many verdicts (0 = never)
  double duration_s = 0;          // stop after this long (0 = never)
  StragglerWatchFlags straggler;  // --straggler: also watch for stragglers
  OutputFormat format = OutputFormat::json;
};

// Adds the options of `observe` to its subcommand and returns its runner.
CommandRunner register_observe(CLI::App& command, const GlobalOptions& globals);

// Watches until SIGTERM/SIGINT or a bound is reached; returns 0 on a clean stop.
int run_observe(const ObserveOptions& options);

}  // namespace scout
