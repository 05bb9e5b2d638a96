// Crash-safe file updates: atomic_write_file (lib/common/file.hpp) replaces a
// file so that a reader sees the old content or the new, never a mix;
// concurrent writers serialize with FileLock.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "lib/common/error.hpp"
#include "lib/common/file.hpp"

namespace scout::checkpoint {

// atomic_write_file and read_small_file live in lib/common/file.hpp.

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
