#include "lib/hash/tensor_hash.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace scout::hash {
namespace {

std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

TEST(TensorHash, StreamingEqualsOneShotForAnyChunking) {
  unsigned seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 1000u, 4099u}) {
    auto bytes = random_bytes(n, seed + n);
    std::vector<std::int64_t> shape{static_cast<std::int64_t>(n)};
    std::uint64_t expect = hash_tensor(DType::u8, shape, bytes, 1);
    TensorHasher h(DType::u8, shape);
    std::size_t pos = 0;
    while (pos < n) {
      std::size_t take = std::min<std::size_t>(n - pos, 1 + rng() % 13);
      h.update(std::span(bytes).subspan(pos, take));
      pos += take;
    }
    EXPECT_EQ(h.finish(), expect) << n;
  }
}

TEST(TensorHash, ThreadCountDoesNotMatter) {
  auto bytes = random_bytes(9u << 20, 7);
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(bytes.size())};
  std::uint64_t one = hash_tensor(DType::u8, shape, bytes, 1);
  for (unsigned t : {2u, 3u, 8u}) EXPECT_EQ(hash_tensor(DType::u8, shape, bytes, t), one) << t;
}

TEST(TensorHash, MetadataIsCovered) {
  auto bytes = random_bytes(64, 3);
  std::vector<std::int64_t> a{16}, b{4, 4};
  EXPECT_NE(hash_tensor(DType::f32, a, bytes), hash_tensor(DType::f32, b, bytes));
  EXPECT_NE(hash_tensor(DType::f32, a, bytes), hash_tensor(DType::i32, a, bytes));
}

}  // namespace
}  // namespace scout::hash
