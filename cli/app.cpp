#include "cli/app.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "lib/hash/tensor_hash.hpp"
#include "lib/plugin/module_loader.hpp"
#include "lib/report/verdict.hpp"
#include "scout/config.hpp"

namespace scout {

#define SCOUT_COMMAND(id, name, summary) CommandRunner register_##id(CLI::App& command, const GlobalOptions& globals);
#include "cli/commands.def"
#undef SCOUT_COMMAND

std::string chosen_command(const std::vector<std::string>& args) {
  static const char* const names[] = {
#define SCOUT_COMMAND(id, name, summary) name,
#include "cli/commands.def"
#undef SCOUT_COMMAND
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--format" || a == "--log-level") {
      ++i;  // its value
      continue;
    }
    if (a.rfind("--format=", 0) == 0 || a.rfind("--log-level=", 0) == 0) continue;
    for (const char* n : names)
      if (a == n) return a == "completion" ? std::string() : a;
    return {};  // help words, --help, --version, a mistyped name or option
  }
  return {};
}

void build_app(CLI::App& app, GlobalOptions& globals, std::map<std::string, CommandRunner>& runners,
               const std::string& only) {
  app.require_subcommand(1);
  app.fallthrough();  // global flags work after the subcommand too
  app.set_version_flag("--version", std::function<std::string()>(version_text),
                       "Print the version and what was compiled in, then exit");
  app.add_option("--format", globals.format,
                 "Output format: json, text, or auto (text on a terminal, json when stdout is a pipe or file)")
      ->check(CLI::IsMember({"json", "text", "auto"}))
      ->default_str("auto");
  app.add_option("--log-level", globals.log_level,
                 "Log level on stderr: trace, debug, info, warn, error, critical, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->default_str("warn");
  app.footer(
      "Exit status: 0 healthy, 1 fault attributed, 2 usage error, 3 inconclusive or group-scoped,\n"
      "4 bad input data, 5 unavailable, 70 internal error. See man scout(1).");
#define SCOUT_COMMAND(id, name, summary)                                        \
  if (only.empty() || only == name)                                             \
    runners[name] = register_##id(*app.add_subcommand(name, summary), globals); \
  else                                                                          \
    app.add_subcommand(name, summary);
#include "cli/commands.def"
#undef SCOUT_COMMAND
}

std::string version_text() {
  std::string cuda = SCOUT_WITH_CUDA ? fmt::format("yes (archs {})", SCOUT_CUDA_ARCHS) : std::string("no");
  std::string torch = "no";
  if (SCOUT_WITH_TORCH) {
    torch = "yes (module: LibTorch " SCOUT_TORCH_VERSION "; loaded on demand, another by SCOUT_TORCH_MODULE=PATH)";
  }
  // The module commands would load, found but not loaded: loading LibTorch takes ~0.4 s and 17,000 page
  // faults, and --version must stay within the start-up target (docs/contracts.md "Performance targets").
  std::string loaded = SCOUT_WITH_TORCH ? torch_module_candidate_description() +
                                              "; loaded by the commands that need it, not by --version"
                                        : std::string("none");
  return fmt::format(
      "scout {}\n"
      "compiled in: cuda {}, nccl {}, torch {}\n"
      "torch module: {}\n"
      "hash spec v{}, verdict schema scout.verdict {}",
      SCOUT_VERSION, cuda, SCOUT_WITH_NCCL ? "yes" : "no", torch, loaded, hash::k_hash_spec_version,
      k_verdict_schema_version);
}

}  // namespace scout
