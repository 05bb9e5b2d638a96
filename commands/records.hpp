// `scout records list|gc|trace`: the operator's view of the progress records on
// this host (what the hang observer reads), removal of dead writers' ones, and
// their collective rings as a timeline trace (lib/trace).
#pragma once

#include <cstdint>
#include <string>

#include "commands/common.hpp"

namespace scout {

enum class RecordsAction { list, gc, trace };

struct RecordsOptions {
  RecordsAction action = RecordsAction::list;
  std::string job;                 // "" = every job
  bool dry_run = false;            // gc: report only
  std::string trace_out;           // trace: the file the trace is written to
  bool allow_other_owner = false;  // read segments of other users too
  double read_timeout_s = 0.1;     // per-segment budget for a consistent read
  std::string shm_dir = "/dev/shm";
  OutputFormat format = OutputFormat::json;
};

// Adds `records list`, `records gc` and `records trace` to `command` and returns its runner.
CommandRunner register_records(CLI::App& command, const GlobalOptions& globals);

// Lists or collects records per `options`; returns the exit code.
int run_records(const RecordsOptions& options);

}  // namespace scout
