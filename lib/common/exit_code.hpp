// The documented exit codes of every scout command (docs/contracts.md "Exit codes", man pages).
#pragma once

#include <string_view>

namespace scout {

enum class ExitCode : int {
  healthy = 0,       // no fault found
  attributed = 1,    // a fault was attributed to a strict minority
  usage = 2,         // bad flags or arguments
  inconclusive = 3,  // no strict majority, or a group-scoped fault: escalate
  bad_input = 4,     // bad or incompatible input data
  unavailable = 5,   // peers, store or device out of reach: no verdict possible
  internal = 70,     // a bug in scout
};

constexpr int to_int(ExitCode code) {
  return static_cast<int>(code);
}

// Short name of an exit code, e.g. "bad_input".
std::string_view exit_code_name(ExitCode code);

}  // namespace scout
