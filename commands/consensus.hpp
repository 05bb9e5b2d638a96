// `scout consensus`: C3 over per-rank evidence an operator already has.
#pragma once

#include <optional>
#include <string>

#include "commands/common.hpp"
#include "lib/consensus/c3.hpp"

namespace scout {

struct ConsensusOptions {
  std::string mode = "exact";         // exact | statistical
  std::optional<std::string> values;  // "v1,v2,..."; absent: read stdin
  std::string ranks;                  // "r1,r2,..." or ranges; empty: positions
  std::string kind = "input";         // label of the group in the verdict
  std::string job;
  StatisticalOptions statistical;
  std::string direction = "both";
  OutputFormat format = OutputFormat::json;
  // Where stdin's text comes from when `values` is absent (tests inject it).
  std::optional<std::string> stdin_text;
};

// Adds the options of `consensus` to its subcommand and returns its runner.
CommandRunner register_consensus(CLI::App& command, const GlobalOptions& globals);

// Runs C3 on the values and prints the verdict; returns the exit code.
int run_consensus(const ConsensusOptions& options);

}  // namespace scout
