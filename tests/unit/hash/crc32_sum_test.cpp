// The one-pass CRC-32 and word sum (crc32_and_partial_sum, crc32_and_partial_sums
// in lib/hash/crc32.hpp) against the table CRC and the scalar word sum, bit for
// bit: random lengths across the kernel's 512-byte steps, every alignment,
// random initial CRCs and first words, every path this CPU runs, and blocks
// holding several slices with bytes outside them. Random per run;
// SCOUT_TEST_SEED=<seed> repeats a run (the seed is printed).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "lib/hash/crc32.hpp"
#include "lib/hash/tensor_hash.hpp"

namespace scout::hash {
namespace {

unsigned test_seed() {
  static const unsigned seed = [] {
    unsigned s = std::random_device{}();
    if (const char* env = std::getenv("SCOUT_TEST_SEED")) s = static_cast<unsigned>(std::strtoul(env, nullptr, 10));
    std::printf("crc32_sum_test: SCOUT_TEST_SEED=%u\n", s);
    return s;
  }();
  return seed;
}

std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

// A length near a multiple of the fused kernel's 512-byte step, or anywhere up to `max`.
std::size_t random_length(std::mt19937_64& rng, std::size_t max) {
  if (rng() % 2 == 0) {
    const std::size_t steps = rng() % (max / 512);
    const std::size_t n = steps * 512 + (rng() % 17) - 8;
    return std::min(n, max);  // wraps to a huge value below 0: min keeps it in range
  }
  return rng() % (max + 1);
}

std::uint64_t random_first_word(std::mt19937_64& rng) {
  switch (rng() % 3) {
    case 0:
      return 0;
    case 1:
      return rng() % 100000;
    default:
      return rng() >> (rng() % 64);
  }
}

std::vector<FusedKernel> runnable_paths() {
  std::vector<FusedKernel> out;
  for (auto k : {FusedKernel::separate, FusedKernel::vpclmul512})
    if (fused_kernel_available(k)) out.push_back(k);
  return out;
}

TEST(Crc32AndPartialSum, EveryPathMatchesTheReferences) {
  SCOPED_TRACE(testing::Message() << "SCOUT_TEST_SEED=" << test_seed());
  std::printf("paths run: %zu (vpclmul512 %s), hash kernel %s\n", runnable_paths().size(),
              fused_kernel_available(FusedKernel::vpclmul512) ? "yes" : "absent",
              std::string(kernel_name(active_kernel())).c_str());
  const auto data = random_bytes((std::size_t{64} << 10) + 64, test_seed());
  std::mt19937_64 rng(test_seed() + 1);
  for (int iter = 0; iter < 3000; ++iter) {
    const std::size_t n = random_length(rng, std::size_t{64} << 10);
    const std::size_t off = rng() % 64;
    const auto s = std::span(data).subspan(off, n);
    const auto init = static_cast<std::uint32_t>(rng());
    const std::uint64_t first_word = random_first_word(rng);
    const std::uint32_t crc = crc32_reference(s, init);
    const std::uint64_t sum = partial_sum_with(HashKernel::scalar, s, first_word);
    for (FusedKernel k : runnable_paths()) {
      const CrcAndSum got = crc32_and_partial_sum_with(k, s, init, first_word);
      ASSERT_EQ(got.crc, crc) << "path " << static_cast<int>(k) << " n=" << n << " off=" << off;
      ASSERT_EQ(got.sum, sum) << "path " << static_cast<int>(k) << " n=" << n << " off=" << off << " fw=" << first_word;
    }
    const CrcAndSum got = crc32_and_partial_sum(s, init, first_word);
    ASSERT_EQ(got.crc, crc) << "n=" << n << " off=" << off;
    ASSERT_EQ(got.sum, sum) << "n=" << n << " off=" << off << " fw=" << first_word;
  }
  // Every length up to a few steps at a rotating alignment.
  for (std::size_t n = 0; n <= 2100; ++n) {
    const std::size_t off = n % 61;
    const auto s = std::span(data).subspan(off, n);
    for (FusedKernel k : runnable_paths()) {
      const CrcAndSum got = crc32_and_partial_sum_with(k, s, static_cast<std::uint32_t>(n), n);
      ASSERT_EQ(got.crc, crc32_reference(s, static_cast<std::uint32_t>(n))) << "n=" << n;
      ASSERT_EQ(got.sum, partial_sum_with(HashKernel::scalar, s, n)) << "n=" << n;
    }
  }
}

TEST(Crc32AndPartialSum, LargeInputs) {
  SCOPED_TRACE(testing::Message() << "SCOUT_TEST_SEED=" << test_seed());
  const auto big = random_bytes((std::size_t{3} << 20) + 77, test_seed() + 2);
  for (FusedKernel k : runnable_paths()) {
    const CrcAndSum got = crc32_and_partial_sum_with(k, big, 0, 12345);
    EXPECT_EQ(got.crc, crc32_reference(big));
    EXPECT_EQ(got.sum, partial_sum_with(HashKernel::scalar, big, 12345));
  }
}

// Blocks as verify-ckpt walks them: slices (sorted, disjoint, some adjacent,
// some at the block's ends) with gaps between; and overlapping slices, which
// take the separate calls.
TEST(Crc32AndPartialSum, BlocksWithSlicesAndGaps) {
  SCOPED_TRACE(testing::Message() << "SCOUT_TEST_SEED=" << test_seed());
  const auto data = random_bytes((std::size_t{300} << 10) + 64, test_seed() + 3);
  std::mt19937_64 rng(test_seed() + 4);
  for (int iter = 0; iter < 400; ++iter) {
    const std::size_t n = random_length(rng, std::size_t{300} << 10);
    const auto block = std::span(data).subspan(rng() % 64, n);
    std::vector<SumRange> ranges;
    const bool overlapping = iter % 5 == 4;
    for (std::size_t at = 0; at < n;) {
      const std::size_t gap = rng() % 3 == 0 ? 0 : rng() % (rng() % 2 ? 64 : 5000);
      const std::size_t begin = std::min(n, at + gap);
      const std::size_t size = std::min(n - begin, random_length(rng, rng() % 2 ? 4096 : std::size_t{80} << 10));
      ranges.push_back({begin, size, random_first_word(rng)});
      at = overlapping && size > 16 ? begin + size / 2 : begin + size + (size == 0);
    }
    const auto init = static_cast<std::uint32_t>(rng());
    std::vector<std::uint64_t> want(ranges.size()), got(ranges.size());
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      want[i] = got[i] = rng();
      want[i] ^=
          partial_sum_with(HashKernel::scalar, block.subspan(ranges[i].begin, ranges[i].size), ranges[i].first_word);
    }
    ASSERT_EQ(crc32_and_partial_sums(block, init, ranges, got.data()), crc32_reference(block, init))
        << "iter " << iter << " n=" << n << " ranges " << ranges.size();
    ASSERT_EQ(got, want) << "iter " << iter << " n=" << n << " ranges " << ranges.size();
  }
}

}  // namespace
}  // namespace scout::hash
