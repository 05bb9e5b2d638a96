// scout's entry point: parse, dispatch to the chosen subcommand, and map
// every failure to the documented exit codes. The only place FatalError is caught.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli/app.hpp"
#include "cli/diagnose.hpp"
#include "commands/common.hpp"
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

// Whatever a command printed must have reached stdout: a verdict lost to a
// full disk or a closed pipe is an error (exit 5, unavailable), never a
// silent success (docs/contracts.md "Exit codes").
int finish(const std::string& command, int code) {
  if (auto st = scout::flush_stdout(); !st) return fail(command, st.error().message(), st.error().code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "scout: find the rank, GPU, node or link to blame when a synchronous training job hangs, "
      "slows down, computes wrong numbers or is about to restart from a corrupted checkpoint.",
      "scout"};
  scout::GlobalOptions globals;
  std::map<std::string, scout::CommandRunner> runners;
  std::vector<std::string> args(argv + 1, argv + argc);
  // Only the chosen subcommand's options are built (the others by name), unless none is plainly chosen.
  scout::build_app(app, globals, runners, scout::chosen_command(args));

  if (scout::Diagnosis d; !scout::check_help_words(app, args, &d))
    return fail(d.command, d.message, scout::ExitCode::usage);
  args = scout::rewrite_help(args);  // `scout help CMD` is `scout CMD --help`

  std::string command;
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
    app.parse(reversed);
  } catch (const CLI::Success& e) {
    return finish("", app.exit(e));  // --help, --version
  } catch (const CLI::ParseError& e) {
    scout::Diagnosis d = scout::diagnose(app, args, e);
    return fail(d.command, d.message, scout::ExitCode::usage);
  }
  for (const CLI::App* sub : app.get_subcommands()) command = sub->get_name();

  try {
    setup_logging(globals.log_level);
    return finish(command, runners.at(command)());
  } catch (const scout::FatalError& e) {
    std::fflush(stdout);
    return fail(command, e.error().message(), e.error().code);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    return fail(command, fmt::format("internal error: {}; please report this with the command line", e.what()),
                scout::ExitCode::internal);
  }
}
