// scout's entry point: parse, dispatch to the chosen subcommand, and map
// every failure to the documented exit codes. The only place FatalError is caught.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/app.hpp"
#include "lib/common/error.hpp"

namespace {

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("scout");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

int fail(const std::string& command, const std::string& message, scout::ExitCode code) {
  std::fprintf(stderr, "scout%s%s: error: %s\n", command.empty() ? "" : " ", command.c_str(), message.c_str());
  return scout::to_int(code);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"scout: find the rank, GPU, node or link to blame when a synchronous training job hangs, "
               "slows down, computes wrong numbers or is about to restart from a corrupted checkpoint.",
               "scout"};
  scout::GlobalOptions globals;
  std::map<std::string, scout::CommandRunner> runners;
  scout::build_app(app, globals, runners);

  std::string command;
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    for (const CLI::App* sub : app.get_subcommands()) command = sub->get_name();
    if (command.empty() && argc > 1 && argv[1][0] != '-')
      return fail("", fmt::format("unknown command '{}'; run 'scout --help' for the list of commands", argv[1]),
                  scout::ExitCode::usage);
    std::string hint = command.empty() ? "run 'scout --help'" : fmt::format("run 'scout {} --help'", command);
    return fail(command, fmt::format("{}; {}", e.what(), hint), scout::ExitCode::usage);
  }
  for (const CLI::App* sub : app.get_subcommands()) command = sub->get_name();

  try {
    setup_logging(globals.log_level);
    return runners.at(command)();
  } catch (const scout::FatalError& e) {
    return fail(command, e.error().message(), e.error().code);
  } catch (const std::exception& e) {
    return fail(command, fmt::format("internal error: {}; please report this with the command line", e.what()),
                scout::ExitCode::internal);
  }
}
