// `scout hash`: the tensor evidence hash (schemas/tensor-hash.md) of every
// tensor in safetensors files, or of raw files' bytes. The operator's way to
// compare two replicas' files by hand.
#pragma once

#include <string>
#include <vector>

#include "commands/common.hpp"

namespace scout {

struct HashOptions {
  std::vector<std::string> files;  // safetensors files (or any files with raw)
  bool raw = false;                // hash each file's bytes as one U8 tensor of shape [size]
  unsigned threads = 0;            // hashing threads; 0 = all cores
  OutputFormat format = OutputFormat::json;
};

// Adds the options of `hash` to its subcommand and returns its runner.
CommandRunner register_hash(CLI::App& command, const GlobalOptions& globals);

// Hashes the files of `options` and prints them; returns the exit code
// (0, or throws FatalError: 4 for unreadable or malformed files).
int run_hash(const HashOptions& options);

}  // namespace scout
