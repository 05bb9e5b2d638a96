// What every subcommand shares: global options, the runner type registration
// returns, output of verdicts in the chosen format, and input helpers.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lib/common/error.hpp"
#include "lib/report/verdict.hpp"

namespace CLI {
class App;
}

namespace scout {

enum class OutputFormat { json, text };

// Flags that apply to every command (given before or after the subcommand).
struct GlobalOptions {
  std::string format = "auto";  // json | text | auto (text on a terminal, json otherwise)
  std::string log_level = "warn";
};

// Resolves "auto" against whether stdout is a terminal.
OutputFormat resolve_format(const std::string& format);

// Invoked by main when its subcommand was chosen; returns the exit code.
using CommandRunner = std::function<int()>;

// Prints `verdict` on stdout in `format` and returns its documented exit code.
// A verdict that cannot be written (full disk, closed pipe) throws an
// `unavailable` FatalError (exit 5): a lost verdict is never a success.
int emit_verdict(const Verdict& verdict, OutputFormat format);

// Writes `text` to stdout and flushes it; throws an `unavailable` FatalError
// when it does not all get there. Every command prints through this.
void write_stdout(std::string_view text);

// Flushes stdout and reports an earlier failed write; main calls it after
// every command, so no failed write of any output goes unnoticed.
Status flush_stdout();

// Reads all of stdin, failing with a bad-input error past `limit` bytes.
std::string read_stdin(std::size_t limit = std::size_t{64} << 20);

// Wraps a CLI-free run_* call: turns the options-filling step and the run
// into a CommandRunner that resolves the output format first.
template <typename Options, typename Run>
CommandRunner make_runner(std::shared_ptr<Options> options, const GlobalOptions& globals, Run run) {
  return [options, &globals, run]() {
    options->format = resolve_format(globals.format);
    return run(*options);
  };
}

}  // namespace scout
