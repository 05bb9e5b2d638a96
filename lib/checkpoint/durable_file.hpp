// Crash-safe file updates: write a temporary file in the same directory,
// fsync it, rename it over the target, fsync the directory. A reader (or a
// process restarted after SIGKILL or power loss) sees either the old content
// or the new, never a mix. Concurrent writers serialize with FileLock.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "lib/common/error.hpp"

namespace scout::checkpoint {

// Replaces `path` with `content` atomically and durably (temp file, fsync,
// rename, directory fsync). `mode` is the new file's permission bits. On
// failure the old file is untouched and the temp file removed; the error is
// `unavailable` (disk full, permissions) and names the path.
Status atomic_write_file(const std::string& path, std::string_view content, unsigned mode = 0644);

// Reads a whole small file (at most `limit` bytes); bad input when larger.
Result<std::string> read_small_file(const std::string& path, std::size_t limit = std::size_t{64} << 20);

// An exclusive advisory lock (flock) on a lock file next to the data it
// guards, held for the object's lifetime. The kernel drops it when the
// process dies, so a SIGKILLed holder never leaves a stale lock.
class FileLock {
 public:
  // Locks `lock_path` (created 0644 when absent), waiting at most `timeout`;
  // `unavailable` when another holder keeps it longer.
  static Result<FileLock> acquire(const std::string& lock_path, std::chrono::milliseconds timeout);

  FileLock(FileLock&& other) noexcept : m_fd(other.m_fd) { other.m_fd = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : m_fd(fd) {}
  int m_fd = -1;
};

}  // namespace scout::checkpoint
