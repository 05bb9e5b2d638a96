// CRC-32 (lib/hash/crc32.hpp): the standard check value, the folding kernel
// against the table on every length up to a few blocks at every alignment,
// continuation from a running CRC, and combining pieces.
#include "lib/hash/crc32.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string_view>
#include <vector>

namespace scout::hash {
namespace {

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

TEST(Crc32, StandardCheckValues) {
  EXPECT_EQ(crc32(bytes_of("123456789")), 0xCBF43926u);
  EXPECT_EQ(crc32_reference(bytes_of("123456789")), 0xCBF43926u);
  EXPECT_EQ(crc32({}), 0u);
  // 64 bytes and more go through the folding kernel (where the CPU has one).
  const std::string fox = "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog.";
  EXPECT_EQ(crc32(bytes_of(fox)), crc32_reference(bytes_of(fox)));
  EXPECT_EQ(crc32(bytes_of("The quick brown fox jumps over the lazy dog")), 0x414FA339u);
}

TEST(Crc32, KernelMatchesTableOnEveryLengthAndAlignment) {
  const auto data = random_bytes(4096 + 64, 11);
  std::mt19937_64 rng(12);
  for (std::size_t n = 0; n <= 2200; ++n) {
    const std::size_t off = n % 61;
    const auto s = std::span(data).subspan(off, n);
    const auto init = static_cast<std::uint32_t>(rng());
    ASSERT_EQ(crc32(s, init), crc32_reference(s, init)) << "n=" << n << " off=" << off;
  }
  const auto big = random_bytes(std::size_t{3} << 20, 13);
  EXPECT_EQ(crc32(big), crc32_reference(big));
}

// Every kernel this CPU has, alone, on every length across its thresholds
// (crc32 itself picks one by length, so a kernel it prefers here would hide
// the others).
TEST(Crc32, EveryKernelMatchesTheTable) {
  const auto data = random_bytes(4096 + 64, 15);
  std::mt19937_64 rng(16);
  int ran = 0;
  for (auto kernel : {Crc32Kernel::clmul128, Crc32Kernel::vpclmul256, Crc32Kernel::vpclmul512}) {
    if (!crc32_kernel_available(kernel)) continue;
    ++ran;
    for (std::size_t n = 0; n <= 2200; n += 1 + n / 300) {
      const std::size_t off = n % 63;
      const auto s = std::span(data).subspan(off, n);
      const auto init = static_cast<std::uint32_t>(rng());
      ASSERT_EQ(crc32_with(kernel, s, init), crc32_reference(s, init))
          << "kernel " << static_cast<int>(kernel) << " n=" << n << " off=" << off;
    }
  }
  if (ran == 0) GTEST_SKIP() << "this CPU has no carry-less multiply: only the table runs";
}

TEST(Crc32, ContinuesAndCombines) {
  const auto data = random_bytes(100000, 21);
  const std::uint32_t whole = crc32(data);
  std::mt19937_64 rng(22);
  for (int i = 0; i < 200; ++i) {
    const std::size_t cut = rng() % (data.size() + 1);
    const auto a = std::span(data).first(cut), b = std::span(data).subspan(cut);
    ASSERT_EQ(crc32(b, crc32(a)), whole) << cut;
    ASSERT_EQ(crc32_combine(crc32(a), crc32(b), b.size()), whole) << cut;
  }
  EXPECT_EQ(crc32_combine(whole, 0, 0), whole);
}

TEST(Crc32, DetectsEveryOneBitFlip) {
  auto data = random_bytes(300, 31);
  const std::uint32_t clean = crc32(data);
  for (std::size_t bit = 0; bit < data.size() * 8; ++bit) {
    data[bit / 8] ^= std::byte{static_cast<unsigned char>(1u << (bit % 8))};
    ASSERT_NE(crc32(data), clean) << bit;
    data[bit / 8] ^= std::byte{static_cast<unsigned char>(1u << (bit % 8))};
  }
}

}  // namespace
}  // namespace scout::hash
