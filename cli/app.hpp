// Builds the scout command line from the command table (cli/commands.def).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "commands/common.hpp"

namespace scout {

// Adds global flags and every subcommand of the table to `app`; fills
// `runners` with each subcommand's runner, keyed by name. With `only` (a
// name of the table), only that subcommand gets its options and runner; the
// others are added by name and summary alone (their option trees are what
// start-up spent most of its CLI time on).
void build_app(CLI::App& app, GlobalOptions& globals, std::map<std::string, CommandRunner>& runners,
               const std::string& only = {});

// The subcommand `args` (argv without the program) run, when it is the first
// word after the global options and a name of the table other than
// `completion` (which describes every subcommand); empty otherwise (help
// words, a mistyped name, an unknown option first: build everything, so that
// help and diagnoses see the whole tree).
std::string chosen_command(const std::vector<std::string>& args);

// The version banner: version and what this build compiled in.
std::string version_text();

}  // namespace scout
