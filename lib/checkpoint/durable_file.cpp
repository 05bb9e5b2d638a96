#include "lib/checkpoint/durable_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace scout::checkpoint {

namespace {

Error io_error(const std::string& what, int err,
               std::string hint = "check free space and permissions of the directory") {
  return unavailable_error(what, std::strerror(err), std::move(hint));
}

}  // namespace

Result<FileLock> FileLock::acquire(const std::string& lock_path, std::chrono::milliseconds timeout) {
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(fmt::format("cannot open lock file {}", lock_path), errno);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int err = errno;
      ::close(fd);
      return io_error(fmt::format("cannot lock {}", lock_path), err);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::close(fd);
      return unavailable_error(fmt::format("{} is locked by another scout process", lock_path),
                               fmt::format("waited {} ms", timeout.count()),
                               "another verify-ckpt run is updating the ledger; retry later or raise --lock-timeout");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return FileLock(fd);
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = other.m_fd;
    other.m_fd = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (m_fd >= 0) ::close(m_fd);  // closing the last descriptor releases the flock
}

}  // namespace scout::checkpoint
