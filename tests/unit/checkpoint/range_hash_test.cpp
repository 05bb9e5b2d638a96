// RangeHashJob (lib/checkpoint/checkpoint_file.hpp): word sums of ranges read
// in pieces on the shared pool equal partial_sum over the same bytes, for
// ranges inside a segment at word-aligned and unaligned starts, across piece
// boundaries (pread in blocks, or hashed in place from a mapping when cached); a segment's
// CRC-32 is checked; a range past the end of the file, or a file cut under its mapping, is an error, not a fault.
// AsideReads: reads of bytes outside the page cache give the file's bytes and
// leave no page behind (where the file system takes O_DIRECT); small reads
// served from the thread's window give the same bytes, cold or warm.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "lib/checkpoint/checkpoint_file.hpp"
#include "lib/hash/crc32.hpp"
#include "lib/hash/tensor_hash.hpp"
#include "tests/unit/test_seed.hpp"

namespace scout::checkpoint {
namespace {

class RangeHashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed = test_support::test_seed32();
    std::mt19937_64 rng(seed);
    bytes.resize((std::size_t{19} << 20) + 12345);  // more than two 8 MiB pieces
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    path = (std::filesystem::temp_directory_path() / ("scout_range_hash_" + std::to_string(::getpid()))).string();
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
    fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
  }
  void TearDown() override {
    if (fd >= 0) ::close(fd);
    std::remove(path.c_str());
  }
  // The file's pages dropped from the page cache (cold) or all read into it (warm).
  void set_cache(bool cold) {
    if (cold) {
      ASSERT_EQ(::fdatasync(fd), 0);
      ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    } else {
      std::vector<std::byte> all(bytes.size());
      ASSERT_TRUE(read_exact(fd, all.data(), all.size(), 0));
    }
  }
  std::uint64_t expected(std::uint64_t off, std::uint64_t n) const {
    return hash::partial_sum(std::span(bytes.data() + off, static_cast<std::size_t>(n)), 0);
  }
  unsigned seed = 0;
  std::vector<std::byte> bytes;
  std::string path;
  int fd = -1;
};

TEST_F(RangeHashTest, RangesInsideASegmentHashLikeTheirBytesAndTheCrcIsChecked) {
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed + 1);
  const std::uint64_t seg_off = 1 + rng() % 4096, seg_len = bytes.size() - seg_off - rng() % 4096;
  const std::uint32_t crc = hash::crc32(std::span(bytes.data() + seg_off, static_cast<std::size_t>(seg_len)));
  RangeHashJob job(fd, "test");
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  std::vector<ByteRange> ranges;
  // The whole segment, a word-aligned view crossing piece boundaries, an unaligned one, an empty one.
  spans.emplace_back(seg_off, seg_len);
  spans.emplace_back(seg_off + 8 * (1 + rng() % 1000), (std::uint64_t{9} << 20) + rng() % 100000);
  spans.emplace_back(seg_off + 8 * (rng() % 1000) + 1 + rng() % 7, (std::uint64_t{8} << 20) + 3);
  spans.emplace_back(seg_off + 40, 0);
  for (const auto& [o, n] : spans) ranges.push_back({o, n, job.new_target(), 0});
  const std::size_t seg = job.add(seg_off, seg_len, ranges, crc, "entry");
  // A second segment whose CRC is wrong.
  const std::size_t bad = job.add(0, 4096, {}, crc ^ 1u, "broken");
  ASSERT_TRUE(job.wait().ok());
  for (std::size_t i = 0; i < spans.size(); ++i)
    EXPECT_EQ(job.sum(ranges[i].target), expected(spans[i].first, spans[i].second)) << i;
  EXPECT_FALSE(job.crc_failure(seg).has_value());
  auto f = job.crc_failure(bad);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->entry, "broken");
  EXPECT_EQ(f->expected, crc ^ 1u);
  EXPECT_EQ(f->actual, hash::crc32(std::span(bytes.data(), 4096)));
}

TEST_F(RangeHashTest, RangesPastTheEndAreAnErrorNotAFault) {
  RangeHashJob job(fd, "short.pt");
  const ByteRange r{bytes.size() - 100, 200, job.new_target(), 0};
  EXPECT_EQ(job.add(r.offset, r.size, std::span(&r, 1)), RangeHashJob::k_no_segment);
  auto st = job.wait();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ExitCode::bad_input);
  EXPECT_NE(st.error().message().find("short.pt"), std::string::npos);
}

TEST_F(RangeHashTest, CachedPiecesHashedInPlaceAndReadPiecesGiveTheSameSums) {
  // Warm, the file's windows are mapped and hashed where they lie; cold, they are read with pread.
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed + 4);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  spans.emplace_back(0, bytes.size());
  for (int i = 0; i < 6; ++i) {
    const std::uint64_t off = rng() % (bytes.size() - 1);
    spans.emplace_back(off, rng() % (bytes.size() - off));
  }
  for (const bool cold : {false, true}) {
    SCOPED_TRACE(cold ? "cold" : "warm");
    ASSERT_NO_FATAL_FAILURE(set_cache(cold));
    if (!cold) EXPECT_NE(pages_cached(fd, 0, bytes.size()), std::optional<bool>(false));
    RangeHashJob job(fd, "test");
    std::vector<std::size_t> targets, segments;
    for (const auto& [o, n] : spans) {
      const ByteRange r{o, n, job.new_target(), 0};
      targets.push_back(r.target);
      segments.push_back(
          job.add(o, n, std::span(&r, 1), hash::crc32(std::span(bytes.data() + o, static_cast<std::size_t>(n)))));
    }
    ASSERT_TRUE(job.wait().ok());
    for (std::size_t i = 0; i < spans.size(); ++i) {
      EXPECT_EQ(job.sum(targets[i]), expected(spans[i].first, spans[i].second)) << i;
      EXPECT_FALSE(job.crc_failure(segments[i]).has_value()) << i;
    }
  }
}

TEST_F(RangeHashTest, AFileTruncatedUnderItsMappedWindowIsAReadErrorNotAFault) {
  // The file is cached, so its first window is mapped and populated when its first piece is queued; one piece is in
  // flight at a time, and the first one's progress cuts the file to a random length inside that window. A later
  // piece of the window then faults (SIGBUS) when it is hashed: the guard makes that a read error.
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed + 5);
  std::vector<std::byte> all(bytes.size());
  ASSERT_TRUE(read_exact(fd, all.data(), all.size(), 0));
  const long page = ::sysconf(_SC_PAGESIZE);
  const auto cut = static_cast<off_t>(page) * static_cast<off_t>(1 + rng() % ((std::uint64_t{14} << 20) / page));
  const int writer = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(writer, 0);
  bool truncated = false;
  RangeHashJob job(
      fd, "cut.pt",
      [&](std::uint64_t) {
        if (!truncated) truncated = ::ftruncate(writer, cut) == 0;
      },
      1);
  const ByteRange r{0, bytes.size(), job.new_target(), 0};
  job.add(r.offset, r.size, std::span(&r, 1), 0u, "archive/data/0");
  auto st = job.wait();
  ::close(writer);
  EXPECT_TRUE(truncated);
  ASSERT_FALSE(st.ok()) << "cut at " << cut;
  EXPECT_EQ(st.error().code, ExitCode::bad_input);
  EXPECT_NE(st.error().message().find("cut.pt"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("file truncated"), std::string::npos) << st.error().message();
}

TEST_F(RangeHashTest, ManyJobsShareThePool) {
  // Several files in flight at once (as digest_files runs them) all complete with the right sums.
  std::vector<std::thread> threads;
  std::vector<std::uint64_t> got(6, 0);
  for (std::size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      RangeHashJob job(fd, "test", {}, 2);
      const ByteRange r{8 * t, bytes.size() - 8 * t, job.new_target(), 0};
      job.add(r.offset, r.size, std::span(&r, 1));
      if (job.wait().ok()) got[t] = job.sum(r.target);
    });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < got.size(); ++t) EXPECT_EQ(got[t], expected(8 * t, bytes.size() - 8 * t)) << t;
}

TEST_F(RangeHashTest, ThePoolsThreadsEndWhenIdle) {
  {
    RangeHashJob job(fd, "test");
    const ByteRange r{0, bytes.size(), job.new_target(), 0};
    job.add(r.offset, r.size, std::span(&r, 1));
    ASSERT_TRUE(job.wait().ok());
    EXPECT_EQ(job.sum(r.target), expected(0, bytes.size()));
  }
  // Idle threads end after 2 s; allow 30 s on a loaded machine.
  for (int i = 0; i < 300 && hashing_threads_alive() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(hashing_threads_alive(), 0u);
  // A later job starts them again.
  RangeHashJob job(fd, "test");
  const ByteRange r{8, bytes.size() - 8, job.new_target(), 0};
  job.add(r.offset, r.size, std::span(&r, 1));
  ASSERT_TRUE(job.wait().ok());
  EXPECT_EQ(job.sum(r.target), expected(8, bytes.size() - 8));
}

// Pages of bytes [offset, offset + n) of `fd` in the page cache (mincore over a mapping).
std::size_t resident_pages(int fd, std::uint64_t offset, std::size_t n) {
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t begin = offset / page * page;
  const std::size_t len = static_cast<std::size_t>(offset + n - begin);
  void* map = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(begin));
  if (map == MAP_FAILED) return static_cast<std::size_t>(-1);
  std::vector<unsigned char> vec((len + page - 1) / page);
  std::size_t resident = 0;
  if (::mincore(map, len, vec.data()) == 0)
    for (auto v : vec) resident += v & 1;
  ::munmap(map, len);
  return resident;
}

TEST_F(RangeHashTest, AsideReadsGiveTheBytesAndLeaveNoPagesBehind) {
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed + 2);
  ASSERT_EQ(::fdatasync(fd), 0);
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  const bool evicted = resident_pages(fd, 0, bytes.size()) == 0;  // tmpfs keeps every page
  AsideReads aside(fd);
  // Unaligned reads inside the file, one ending at its last byte, one across a page boundary, an empty one.
  std::vector<std::pair<std::uint64_t, std::size_t>> reads;
  for (int i = 0; i < 8; ++i) {
    const std::uint64_t off = rng() % (bytes.size() - 70000);
    reads.emplace_back(off, 1 + rng() % 70000);
  }
  reads.emplace_back(bytes.size() - 30, 30);
  reads.emplace_back(4096 * (1 + rng() % 1000) - 7, 30);
  reads.emplace_back(12345, 0);
  for (const auto& [off, n] : reads) {
    std::vector<std::byte> got(n);
    ASSERT_TRUE(read_aside(fd, got.data(), n, off)) << off << " " << n;
    EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes.begin() + static_cast<std::ptrdiff_t>(off))) << off;
    if (evicted && n > 0) EXPECT_EQ(resident_pages(fd, off, n), 0u) << "read at " << off << " left pages cached";
  }
  // Past the end: false, as read_exact.
  std::byte b[16];
  EXPECT_FALSE(read_aside(fd, b, sizeof b, bytes.size() - 8));
  // Cached bytes are read normally, and the same.
  std::vector<std::byte> all(bytes.size());
  ASSERT_TRUE(read_exact(fd, all.data(), all.size(), 0));
  std::vector<std::byte> got(5000);
  ASSERT_TRUE(read_aside(fd, got.data(), got.size(), 777));
  EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes.begin() + 777));
  // Without an AsideReads on this thread the reads are read_exact's.
  std::thread([&] {
    std::vector<std::byte> other(100);
    EXPECT_TRUE(read_aside(fd, other.data(), other.size(), 4000));
    EXPECT_TRUE(std::equal(other.begin(), other.end(), bytes.begin() + 4000));
  }).join();
}

TEST_F(RangeHashTest, AsideReadsFromTheWindowGiveTheBytes) {
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed + 3);
  for (const bool cold : {true, false}) {
    SCOPED_TRACE(cold ? "cold" : "warm");
    ASSERT_NO_FATAL_FAILURE(set_cache(cold));
    AsideReads aside(fd);
    // As a zip's reader does: its end (one read), the central directory and last local headers inside it, a cluster
    // of small reads near a start, small reads anywhere, and one reaching the file's last byte.
    std::vector<std::pair<std::uint64_t, std::size_t>> reads;
    const std::uint64_t end = bytes.size();
    reads.emplace_back(end - 65557, 65557);
    reads.emplace_back(end - 463 - 22, 463);
    reads.emplace_back(end - 3000, 30);
    const std::uint64_t start = rng() % (end / 2);
    for (std::uint64_t at : {0, 92, 209, 338, 470, 594, 64, 192, 320, 448, 576, 704, 8190, 8192, 20000})
      reads.emplace_back(start + at, 1 + rng() % 40);
    for (int i = 0; i < 40; ++i) reads.emplace_back(rng() % (end - 4096), 1 + rng() % 4096);
    reads.emplace_back(end - 5, 5);
    reads.emplace_back(end - 4096, 4096);
    for (const auto& [off, n] : reads) {
      std::vector<std::byte> got(n);
      ASSERT_TRUE(read_aside(fd, got.data(), n, off)) << off << " " << n;
      EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes.begin() + static_cast<std::ptrdiff_t>(off))) << off;
    }
    std::byte b[16];
    EXPECT_FALSE(read_aside(fd, b, sizeof b, end - 8));  // past the end: false, window or not
    EXPECT_FALSE(read_aside(fd, b, 1, end));
  }
}

}  // namespace
}  // namespace scout::checkpoint
