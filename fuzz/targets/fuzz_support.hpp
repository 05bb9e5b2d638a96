// Shared by the fuzz targets: a private scratch directory (removed at exit)
// for parsers that read files, and a check that aborts (a finding) when a
// parser's result breaks a property it promises.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace scout::fuzz {

// The scratch directory of this process, created on first use under $TMPDIR
// (or /tmp) and removed when the process exits normally.
inline const std::string& scratch_dir() {
  // Never destroyed: the exit handler that removes the directory runs after
  // static destructors would have run.
  static const std::string* dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/scout-fuzz-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    auto* held = new std::string(tmpl);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return held;
  }();
  return *dir;
}

// Writes `data` to `name` inside the scratch directory with `mode`; returns the path.
inline std::string write_scratch(std::string_view name, const std::uint8_t* data, std::size_t size,
                                 mode_t mode = 0600) {
  std::string path = scratch_dir() + "/" + std::string(name);
  ::unlink(path.c_str());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    std::perror("open scratch");
    std::abort();
  }
  ::fchmod(fd, mode);
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) {
      std::perror("write scratch");
      std::abort();
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return path;
}

// A property the parser promises does not hold: report and abort (libFuzzer
// saves the input as a crash).
#define SCOUT_FUZZ_CHECK(cond)                                                            \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

}  // namespace scout::fuzz
