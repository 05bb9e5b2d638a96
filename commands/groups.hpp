// `scout groups`: shows how scout understands a job's parallelism mesh.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "commands/common.hpp"

namespace scout {

struct GroupsOptions {
  std::string mesh;                   // e.g. "dp=4,tp=2"
  std::string order;                  // optional placement override, slowest first
  std::int64_t ranks_per_node = 0;    // 0: not given
  bool ranks_per_node_given = false;  // given on the command line (0 is then an error)
  std::string hosts;                  // comma-separated, per node or per rank
  std::int64_t world_size = 0;        // 0: not checked
  std::optional<std::int64_t> rank;   // only this rank
  OutputFormat format = OutputFormat::json;
};

// Adds the options of `groups` to its subcommand and returns its runner.
CommandRunner register_groups(CLI::App& command, const GlobalOptions& globals);

// Prints the peer groups, process groups and nodes; returns the exit code.
int run_groups(const GroupsOptions& options);

}  // namespace scout
