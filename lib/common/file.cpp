#include "lib/common/file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace scout {

namespace {

Error io_error(const std::string& what, int err) {
  return unavailable_error(what, std::strerror(err), "check that the directory exists, is writable and has free space");
}

bool write_all(int fd, std::string_view data) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

Status atomic_write_file(const std::string& path, std::string_view content, unsigned mode) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..")
    return unavailable_error(fmt::format("cannot write {}", path), "the path names a directory, not a file",
                             "give a file name");
  std::random_device rd;
  const std::string tmp = fmt::format("{}/.{}.tmp.{}.{:x}", dir, base, ::getpid(), rd());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return io_error(fmt::format("cannot write {}: cannot create {}", path, tmp), errno);
  if (::fchmod(fd, mode) != 0 || !write_all(fd, content) || ::fsync(fd) != 0) {
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
  if (dfd < 0) return io_error(fmt::format("cannot open directory {} to sync it", dir), errno);
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0) return io_error(fmt::format("cannot sync directory {}", dir), err);
  return Ok{};
}

Result<std::string> read_small_file(const std::string& path, std::size_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return input_error(fmt::format("cannot open {}", path), std::strerror(errno), "check the path and its permissions");
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return input_error(fmt::format("{} is a directory", path), {}, "give a file");
  }
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

}  // namespace scout
