// Process evidence from the OS: what /proc says about a rank's process.
// A dead or stopped rank is a fact, not a vote: the hang decision uses it
// next to progress consensus (lib/hang/decide.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace scout::hang {

// What the OS says about a process.
enum class ProcessState : std::uint8_t {
  unknown = 0,     // no pid to look at, or /proc unreadable
  alive = 1,       // running or sleeping (R, S, I, W)
  stopped = 2,     // job-control or ptrace stop (T, t): SIGSTOP and friends
  disk_sleep = 3,  // uninterruptible sleep (D): stuck in the kernel, usually I/O
  exited = 4,      // zombie: exited, not yet reaped; exit code/signal known
  gone = 5,        // no such process (or the pid was reused by another process)
};

// Stable name for JSON ("alive", "stopped", ...).
std::string_view process_state_name(ProcessState state);

// True for states in which the process can never make progress again.
bool is_dead(ProcessState state);

struct ProcessEvidence {
  ProcessState state = ProcessState::unknown;
  char raw_state = '?';     // the state letter of /proc/<pid>/stat, '?' when none
  int exit_code = -1;       // exited normally with this code (-1 unknown)
  int signal = 0;           // killed by this signal (0 none/unknown)
  bool pid_reused = false;  // a process with this pid exists but started after the record's writer
  std::string detail;       // for people, e.g. "pid 123 started 4.2 s after the record"

  bool operator==(const ProcessEvidence&) const = default;
};

// Looks at process `pid` in /proc (`proc_root`, normally "/proc").
// `writer_start_ns` is the record's writer start time (CLOCK_REALTIME ns, 0 when
// unknown): a process with this pid that started more than `reuse_slack_ns`
// after it is another process (pid reuse) and the writer counts as gone.
ProcessEvidence probe_process(std::int64_t pid, std::int64_t writer_start_ns, std::string_view proc_root = "/proc",
                              std::int64_t reuse_slack_ns = 2'000'000'000);

}  // namespace scout::hang
