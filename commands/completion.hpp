// `scout completion SHELL`: completion scripts generated from the command table.
#pragma once

#include <string>

#include "commands/common.hpp"

namespace scout {

// Adds the options of `completion` and returns its runner.
CommandRunner register_completion(CLI::App& command, const GlobalOptions& globals);

// The completion script for `shell` ("bash", "zsh" or "fish") describing `root`.
std::string completion_script(const CLI::App& root, const std::string& shell);

}  // namespace scout
