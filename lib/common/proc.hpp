// The one home of what scout reads about a process from the kernel:
// /proc/<pid>/stat parsing and pid liveness. Header-only and free of
// allocation, because the trainer-side publisher (integrations/publisher)
// uses it too.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string_view>

namespace scout::proc {

// The fields of /proc/<pid>/stat scout uses.
struct Stat {
  char state = '?';               // field 3: R, S, D, T, t, Z, X, ...
  std::uint64_t start_ticks = 0;  // field 22: start time in clock ticks since boot
  bool has_exit_status = false;   // field 52 present (Linux >= 3.5)
  int exit_status = 0;            // field 52: the wait(2) status of an exited process
};

// Parses the text of /proc/<pid>/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted after the last ')'.
// Returns false when the text is not a stat line (fields 3 and 22 required).
inline bool parse_stat(std::string_view text, Stat* out) {
  std::size_t close = text.rfind(')');
  if (close == std::string_view::npos) return false;
  Stat st;
  bool have_start = false;
  std::size_t i = close + 1;
  int field = 2;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n')) ++i;
    if (i >= text.size()) break;
    std::size_t end = text.find_first_of(" \n", i);
    if (end == std::string_view::npos) end = text.size();
    ++field;
    std::string_view tok = text.substr(i, end - i);
    auto number = [&](std::int64_t* v) {
      bool neg = !tok.empty() && tok[0] == '-';
      std::string_view digits = neg ? tok.substr(1) : tok;
      if (digits.empty() || digits.size() > 19) return false;
      std::int64_t x = 0;
      for (char c : digits) {
        if (c < '0' || c > '9') return false;
        x = x * 10 + (c - '0');
      }
      *v = neg ? -x : x;
      return true;
    };
    if (field == 3) {
      if (tok.size() != 1) return false;
      st.state = tok[0];
    } else if (field == 22) {
      std::int64_t v = 0;
      if (!number(&v) || v < 0) return false;
      st.start_ticks = static_cast<std::uint64_t>(v);
      have_start = true;
    } else if (field == 52) {
      std::int64_t v = 0;
      if (number(&v)) {
        st.exit_status = static_cast<int>(v);
        st.has_exit_status = true;
      }
      break;
    }
    i = end;
  }
  if (!have_start) return false;
  *out = st;
  return true;
}

// Reads and parses `<proc_root>/<pid>/stat`. False when the process does not
// exist, /proc hides it, or the text does not parse.
inline bool read_stat(std::int64_t pid, Stat* out, const char* proc_root = "/proc") {
  if (pid <= 0) return false;
  char path[256];
  std::snprintf(path, sizeof path, "%s/%lld/stat", proc_root, static_cast<long long>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[2048];
  std::size_t len = 0;
  while (len < sizeof buf) {
    ssize_t n = ::read(fd, buf + len, sizeof buf - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return len > 0 && parse_stat(std::string_view(buf, len), out);
}

// True when a process with this pid exists (ours or another user's).
inline bool pid_alive(std::int64_t pid) {
  if (pid <= 0 || pid > 0x3fffffff) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace scout::proc
