#include "lib/checkpoint/durable_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <random>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace scout::checkpoint {

namespace {

Error io_error(const std::string& what, int err, std::string hint = "check free space and permissions of the directory") {
  return unavailable_error(what, std::strerror(err), std::move(hint));
}

bool write_all(int fd, std::string_view data) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

Status atomic_write_file(const std::string& path, std::string_view content, unsigned mode) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::random_device rd;
  std::string tmp = (dir / fmt::format(".{}.tmp.{}.{:x}", target.filename().string(), ::getpid(), rd())).string();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return io_error(fmt::format("cannot create {}", tmp), errno);
  if (!write_all(fd, content) || ::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return io_error(fmt::format("cannot write {}", tmp), err);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return io_error(fmt::format("cannot write {}", tmp), err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return io_error(fmt::format("cannot rename {} to {}", tmp, path), err);
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return io_error(fmt::format("cannot open directory {} to sync it", dir.string()), errno);
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0) return io_error(fmt::format("cannot sync directory {}", dir.string()), err);
  return Ok{};
}

Result<std::string> read_small_file(const std::string& path, std::size_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return input_error(fmt::format("cannot open {}", path), std::strerror(errno), "check the path and permissions");
  std::string data;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return input_error(fmt::format("cannot read {}", path), std::strerror(err));
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    if (data.size() > limit) {
      ::close(fd);
      return input_error(fmt::format("{} is larger than {} bytes", path, limit), {}, "is this the right file?");
    }
  }
  ::close(fd);
  return data;
}

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
