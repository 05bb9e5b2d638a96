// `scout records list|gc`: the operator's view of the progress records on
// this host (what the hang observer reads), and removal of dead writers' ones.
#pragma once

#include <cstdint>
#include <string>

#include "commands/common.hpp"

namespace scout {

enum class RecordsAction { list, gc };

struct RecordsOptions {
  RecordsAction action = RecordsAction::list;
  std::string job;                 // "" = every job
  bool dry_run = false;            // gc: report only
  bool allow_other_owner = false;  // read segments of other users too
  double read_timeout_s = 0.1;     // per-segment budget for a consistent read
  std::string shm_dir = "/dev/shm";
  OutputFormat format = OutputFormat::json;
};

// Adds `records list` and `records gc` to `command` and returns its runner.
CommandRunner register_records(CLI::App& command, const GlobalOptions& globals);

// Lists or collects records per `options`; returns the exit code.
int run_records(const RecordsOptions& options);

}  // namespace scout
