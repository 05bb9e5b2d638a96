#include "lib/hang/process_state.hpp"

#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace scout::hang {

std::string_view process_state_name(ProcessState state) {
  switch (state) {
    case ProcessState::alive: return "alive";
    case ProcessState::stopped: return "stopped";
    case ProcessState::disk_sleep: return "disk_sleep";
    case ProcessState::exited: return "exited";
    case ProcessState::gone: return "gone";
    case ProcessState::unknown: break;
  }
  return "unknown";
}

bool is_dead(ProcessState state) { return state == ProcessState::exited || state == ProcessState::gone; }

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
  std::ifstream in(fmt::format("{}/{}/stat", proc_root, pid));
  std::string line;
  if (!in || !std::getline(in, line)) {
    ev.state = ProcessState::gone;
    ev.detail = fmt::format("pid {} does not exist", pid);
    return ev;
  }
  // "pid (comm) S f4 f5 ...": comm may hold spaces and parentheses; it ends at the last ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) {
    ev.detail = fmt::format("unparsable /proc/{}/stat", pid);
    return ev;
  }
  std::istringstream fields(line.substr(close + 2));
  std::vector<std::string> f;  // f[0] is field 3 (state)
  for (std::string tok; fields >> tok;) f.push_back(tok);
  if (f.empty()) {
    ev.detail = fmt::format("unparsable /proc/{}/stat", pid);
    return ev;
  }
  ev.raw_state = f[0].empty() ? '?' : f[0][0];

  // Field 22: start time in clock ticks since boot; guards against pid reuse.
  if (writer_start_ns > 0 && f.size() > 19) {
    long ticks = sysconf(_SC_CLK_TCK);
    std::int64_t btime = boot_time_s(proc_root);
    std::int64_t start_ticks = 0;
    try {
      start_ticks = std::stoll(f[19]);
    } catch (...) {
      start_ticks = -1;
    }
    if (ticks > 0 && btime > 0 && start_ticks >= 0) {
      std::int64_t proc_start_ns = btime * 1'000'000'000 + start_ticks * (1'000'000'000 / ticks);
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
    case 'R': case 'S': case 'I': case 'W': case 'P': case 'K':
      ev.state = ProcessState::alive;
      break;
    case 'T': case 't':
      ev.state = ProcessState::stopped;
      ev.detail = fmt::format("pid {} is stopped (state {})", pid, ev.raw_state);
      break;
    case 'D':
      ev.state = ProcessState::disk_sleep;
      ev.detail = fmt::format("pid {} is in uninterruptible sleep (state D)", pid);
      break;
    case 'Z': case 'X': case 'x': {
      ev.state = ProcessState::exited;
      // Field 52: the wait status (Linux >= 3.5), readable for our own user's processes.
      if (f.size() > 49) {
        try {
          int status = std::stoi(f[49]);
          if (WIFEXITED(status)) ev.exit_code = WEXITSTATUS(status);
          if (WIFSIGNALED(status)) ev.signal = WTERMSIG(status);
        } catch (...) {
        }
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
