// `scout replay`: in-situ replay and SDC localization (Algorithm 2): the
// standard battery on N local peer processes (new-image qualification), with
// drill injections and golden hashes across images.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "commands/common.hpp"

namespace scout {

struct ReplayOptions {
  std::string battery;                    // "standard"
  std::optional<std::string> recipe_dir;  // exported recipes (the trainer's RecipeExporter)
  std::optional<std::string> store;       // --recipe across nodes: the shared rendezvous store
  std::int64_t nodes = 1;
  std::optional<std::int64_t> node_index;
  std::optional<std::string> evidence_dir;  // in-job replay evidence (the Python package)
  bool peers_given = false;
  std::vector<std::string> recipes;  // subset of the battery (empty: all)
  std::string size = "small";
  std::int64_t peers = 4;
  std::uint64_t seed = 1;
  int threads = 1;
  int repeat = 3;
  std::string device = "cpu";
  std::optional<std::string> catalog;
  std::optional<std::string> golden;
  std::vector<std::string> inject;
  double timeout_s = 30;
  std::optional<std::int64_t> cycle;
  std::optional<std::string> checkpoint;
  std::string sweep = "periodic";
  std::string job;
  double straggler_factor = 2.0;
  OutputFormat format = OutputFormat::json;
};

CommandRunner register_replay(CLI::App& command, const GlobalOptions& globals);
int run_replay(const ReplayOptions& options);

}  // namespace scout
