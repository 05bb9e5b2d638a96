#include "lib/hang/process_state.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <fstream>

#include "lib/common/proc.hpp"

namespace scout::hang {

std::string_view process_state_name(ProcessState state) {
  switch (state) {
    case ProcessState::alive:
      return "alive";
    case ProcessState::stopped:
      return "stopped";
    case ProcessState::disk_sleep:
      return "disk_sleep";
    case ProcessState::exited:
      return "exited";
    case ProcessState::gone:
      return "gone";
    case ProcessState::unknown:
      break;
  }
  return "unknown";
}

bool is_dead(ProcessState state) {
  return state == ProcessState::exited || state == ProcessState::gone;
}

namespace {

// Boot time in CLOCK_REALTIME seconds ("btime" of /proc/stat), 0 when unknown.
std::int64_t boot_time_s(std::string_view proc_root) {
  std::ifstream in(std::string(proc_root) + "/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      std::int64_t v = 0;
      in >> v;
      return v;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return 0;
}

}  // namespace

ProcessEvidence probe_process(std::int64_t pid, std::int64_t writer_start_ns, std::string_view proc_root,
                              std::int64_t reuse_slack_ns) {
  ProcessEvidence ev;
  if (pid <= 0) {
    ev.detail = "the record names no pid";
    return ev;
  }
  proc::Stat st;
  const std::string root(proc_root);
  if (!proc::read_stat(pid, &st, root.c_str())) {
    ev.state = proc::pid_alive(pid) && root == "/proc" ? ProcessState::unknown : ProcessState::gone;
    ev.detail = ev.state == ProcessState::gone ? fmt::format("pid {} does not exist", pid)
                                               : fmt::format("unreadable /proc/{}/stat", pid);
    return ev;
  }
  ev.raw_state = st.state;

  // Field 22: start time in clock ticks since boot; guards against pid reuse.
  if (writer_start_ns > 0) {
    long ticks = sysconf(_SC_CLK_TCK);
    std::int64_t btime = boot_time_s(proc_root);
    if (ticks > 0 && btime > 0) {
      std::int64_t proc_start_ns =
          btime * 1'000'000'000 + static_cast<std::int64_t>(st.start_ticks) * (1'000'000'000 / ticks);
      if (proc_start_ns > writer_start_ns + reuse_slack_ns) {
        ev.state = ProcessState::gone;
        ev.pid_reused = true;
        ev.detail = fmt::format("pid {} now belongs to a process started {:.1f} s after the record's writer", pid,
                                static_cast<double>(proc_start_ns - writer_start_ns) / 1e9);
        return ev;
      }
    }
  }

  switch (ev.raw_state) {
    case 'R':
    case 'S':
    case 'I':
    case 'W':
    case 'P':
    case 'K':
      ev.state = ProcessState::alive;
      break;
    case 'T':
    case 't':
      ev.state = ProcessState::stopped;
      ev.detail = fmt::format("pid {} is stopped (state {})", pid, ev.raw_state);
      break;
    case 'D':
      ev.state = ProcessState::disk_sleep;
      ev.detail = fmt::format("pid {} is in uninterruptible sleep (state D)", pid);
      break;
    case 'Z':
    case 'X':
    case 'x': {
      ev.state = ProcessState::exited;
      // Field 52: the wait status (Linux >= 3.5), readable for our own user's processes.
      if (st.has_exit_status) {
        const int status = st.exit_status;
        if (WIFEXITED(status)) ev.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) ev.signal = WTERMSIG(status);
      }
      if (ev.signal != 0)
        ev.detail = fmt::format("pid {} was killed by signal {} ({})", pid, ev.signal, strsignal(ev.signal));
      else if (ev.exit_code >= 0)
        ev.detail = fmt::format("pid {} exited with code {}", pid, ev.exit_code);
      else
        ev.detail = fmt::format("pid {} has exited", pid);
      break;
    }
    default:
      ev.state = ProcessState::unknown;
      ev.detail = fmt::format("pid {} has unknown state '{}'", pid, ev.raw_state);
  }
  return ev;
}

}  // namespace scout::hang
