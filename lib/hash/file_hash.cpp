#include "lib/hash/file_hash.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <span>
#include <thread>
#include <vector>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/hash/tensor_hash.hpp"

namespace scout::hash {

namespace {
constexpr std::uint64_t k_block = std::uint64_t{4} << 20;  // a multiple of 8: blocks start on words
}  // namespace

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
  // Threads read and hash interleaved blocks with pread, each into a buffer of
  // its own; the blocks' sums combine by XOR in any order. Nothing is mapped,
  // so a file truncated while it is read is a short read, not SIGBUS.
  static const unsigned k_cores = std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t blocks = (out.size + k_block - 1) / k_block;
  const auto workers = static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(threads == 0 ? k_cores : threads, blocks)));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<std::uint64_t> sums(workers, 0);
  std::vector<int> errs(workers, 0);
  std::vector<char> short_read(workers, 0);
  auto work = [&](unsigned w) {
    std::vector<std::byte> buffer(static_cast<std::size_t>(std::min<std::uint64_t>(k_block, out.size)));
    for (std::uint64_t b = w; b < blocks; b += workers) {
      const std::uint64_t at = b * k_block, n = std::min(k_block, out.size - at);
      std::uint64_t got = 0;
      while (got < n) {
        const ssize_t r = ::pread(fd, buffer.data() + got, static_cast<std::size_t>(n - got), static_cast<off_t>(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
          errs[w] = errno;
          return;
        }
        if (r == 0) {
          short_read[w] = 1;
          return;
        }
        got += static_cast<std::uint64_t>(r);
      }
      sums[w] = combine(sums[w], partial_sum(std::span(buffer.data(), static_cast<std::size_t>(n)), at / 8));
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& t : pool) t.join();
  std::uint64_t sum = 0;
  for (unsigned w = 0; w < workers; ++w) {
    if (errs[w] != 0) {
      ::close(fd);
      return fail("read", errs[w]);
    }
    if (short_read[w]) {
      ::close(fd);
      return input_error(fmt::format("cannot hash {}", path), fmt::format("the file shrank below {} bytes while it was read", out.size),
                         "hash it again when no writer is active");
    }
    sum = combine(sum, sums[w]);
  }
  out.hash = finalize(sum, DType::u8, shape, out.size);
  ::close(fd);
  return out;
}

}  // namespace scout::hash
