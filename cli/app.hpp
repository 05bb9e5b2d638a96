// Builds the scout command line from the command table (cli/commands.def).
#pragma once

#include <map>
#include <string>

#include "commands/common.hpp"

namespace scout {

// Adds global flags and every subcommand of the table to `app`; fills
// `runners` with each subcommand's runner, keyed by name.
void build_app(CLI::App& app, GlobalOptions& globals, std::map<std::string, CommandRunner>& runners);

// The version banner: version and what this build compiled in.
std::string version_text();

}  // namespace scout
