#include "lib/hash/file_hash.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <span>

#include "lib/hash/tensor_hash.hpp"

namespace scout::hash {

Result<RawFileHash> hash_raw_file(const std::string& path, unsigned threads) {
  auto fail = [&](const char* what, int err) {
    return input_error(fmt::format("cannot read {}", path), fmt::format("{}: {}", what, std::strerror(err)),
                       "check the path and permissions");
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail("open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return fail("fstat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return input_error(fmt::format("cannot hash {}", path), "not a regular file", "give a file");
  }
  RawFileHash out;
  out.size = static_cast<std::uint64_t>(st.st_size);
  const std::int64_t shape[] = {static_cast<std::int64_t>(out.size)};
  if (out.size == 0) {
    out.hash = hash_tensor(DType::u8, shape, {}, threads);
  } else {
    void* map = ::mmap(nullptr, out.size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return fail("mmap", err);
    }
    ::madvise(map, out.size, MADV_SEQUENTIAL);
    out.hash = hash_tensor(DType::u8, shape, std::span(static_cast<const std::byte*>(map), out.size), threads);
    ::munmap(map, out.size);
  }
  ::close(fd);
  return out;
}

}  // namespace scout::hash
