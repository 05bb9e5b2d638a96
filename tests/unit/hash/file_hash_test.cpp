// hash --raw's file hash: equal to the tensor hash of the bytes; a file
// truncated under its mapping is an error, not a SIGBUS that ends the process.
#include "lib/hash/file_hash.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lib/hash/tensor_hash.hpp"

namespace scout::hash {
namespace {

// Random per run; SCOUT_TEST_SEED=<seed> repeats a run (the failures print it).
unsigned test_seed() {
  static const unsigned seed = [] {
    if (const char* env = std::getenv("SCOUT_TEST_SEED")) return static_cast<unsigned>(std::strtoul(env, nullptr, 10));
    return static_cast<unsigned>(std::random_device{}());
  }();
  return seed;
}

class TempFile {
 public:
  explicit TempFile(const std::vector<std::byte>& bytes) {
    char name[] = "/tmp/scout_file_hash_XXXXXX";
    m_fd = ::mkstemp(name);
    m_path = name;
    if (m_fd >= 0 && !bytes.empty()) m_ok = ::write(m_fd, bytes.data(), bytes.size()) == ssize_t(bytes.size());
    if (bytes.empty()) m_ok = m_fd >= 0;
  }
  ~TempFile() {
    if (m_fd >= 0) ::close(m_fd);
    ::unlink(m_path.c_str());
  }
  int fd() const { return m_fd; }
  bool ok() const { return m_ok; }
  const std::string& path() const { return m_path; }

 private:
  int m_fd = -1;
  bool m_ok = false;
  std::string m_path;
};

std::vector<std::byte> random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

TEST(FileHash, IsTheTensorHashOfTheBytesForAnyThreads) {
  SCOPED_TRACE(testing::Message() << "seed " << test_seed());
  std::mt19937_64 rng(test_seed());
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{4097}, std::size_t{5} << 20,
                           (std::size_t{3} << 20) + 1 + rng() % 4096}) {
    const auto bytes = random_bytes(size, rng);
    TempFile f(bytes);
    ASSERT_TRUE(f.ok());
    const std::int64_t shape[] = {static_cast<std::int64_t>(size)};
    const std::uint64_t expect = hash_tensor(DType::u8, shape, bytes, 1);
    for (unsigned threads : {0u, 1u, 3u}) {
      auto h = hash_raw_file(f.path(), threads);
      ASSERT_TRUE(h) << h.error().message();
      EXPECT_EQ(h->size, size);
      EXPECT_EQ(h->hash, expect) << "size " << size << " threads " << threads;
    }
  }
}

TEST(FileHash, AReadPastAFileTruncatedUnderItsMappingIsCaught) {
  SCOPED_TRACE(testing::Message() << "seed " << test_seed());
  std::mt19937_64 rng(test_seed());
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t size = static_cast<std::size_t>(page) * (4 + rng() % 8);
  TempFile f(random_bytes(size, rng));
  ASSERT_TRUE(f.ok());
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, f.fd(), 0);
  ASSERT_NE(map, MAP_FAILED);
  const std::span bytes(static_cast<const std::byte*>(map), size);
  ASSERT_TRUE(guarded_partial_sum(bytes, 0).has_value());
  // Cut the file a random number of whole pages short: reading the tail faults.
  const std::size_t keep = static_cast<std::size_t>(page) * (rng() % 3);
  ASSERT_EQ(::ftruncate(f.fd(), static_cast<off_t>(keep)), 0);
  EXPECT_EQ(guarded_partial_sum(bytes, 0), std::nullopt);
  // The guard is per read: the bytes still there hash, and a second fault is caught too.
  if (keep > 0) EXPECT_EQ(guarded_partial_sum(bytes.first(keep), 0), partial_sum(bytes.first(keep), 0));
  EXPECT_EQ(guarded_partial_sum(bytes.subspan(keep), keep / 8), std::nullopt);
  ::munmap(map, size);
}

TEST(FileHash, ASigbusOutsideAGuardedReadStillEndsTheProcess) {
  // The handler installed by the guard hands other faults to the default action.
  std::vector<std::byte> one(64, std::byte{1});
  ASSERT_TRUE(guarded_partial_sum(one, 0).has_value());
  EXPECT_EXIT(
      {
        const long page = ::sysconf(_SC_PAGESIZE);
        TempFile f(std::vector<std::byte>(static_cast<std::size_t>(page) * 2, std::byte{7}));
        void* map = ::mmap(nullptr, static_cast<std::size_t>(page) * 2, PROT_READ, MAP_SHARED, f.fd(), 0);
        if (map == MAP_FAILED || ::ftruncate(f.fd(), 0) != 0) std::_Exit(3);
        volatile const char* p = static_cast<const char*>(map);
        std::_Exit(p[page] == 7 ? 4 : 5);
      },
      testing::KilledBySignal(SIGBUS), "");
}

}  // namespace
}  // namespace scout::hash
