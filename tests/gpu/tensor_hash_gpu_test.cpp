// The CUDA tensor hash against the CPU reference on seeded data of many
// sizes and alignments, and on the shared test vectors. Skips where no GPU
// (or no CUDA in the build) exists.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "lib/hash/gpu_hash.hpp"
#include "lib/hash/tensor_hash.hpp"

namespace scout::hash {
namespace {

class GpuTensorHash : public testing::Test {
 protected:
  void SetUp() override {
    auto count = gpu_device_count();
    if (!count) GTEST_SKIP() << "no GPU: " << count.error().message();
  }
};

std::vector<std::byte> seeded_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(out.data() + i, &v, std::min<std::size_t>(8, n - i));
  }
  return out;
}

TEST_F(GpuTensorHash, MatchesCpuOnManySizesAndAlignments) {
  const std::uint64_t seed = 20240611;  // fixed: seeded, repeatable data
  std::vector<std::size_t> sizes = {0, 1, 2, 7, 8, 9, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097};
  for (std::size_t base : {32768u, 65536u, 1u << 20, 3u << 20}) {
    for (int d : {-9, -8, -1, 0, 1, 7, 8, 9}) sizes.push_back(base + d);
  }
  sizes.push_back((64u << 20) + 5);
  sizes.push_back((256u << 20) + 13);
  std::mt19937_64 rng(seed);
  for (std::size_t n : sizes) {
    auto bytes = seeded_bytes(n, seed + n);
    const std::int64_t shape[] = {static_cast<std::int64_t>(n)};
    const std::uint64_t cpu = hash_tensor(DType::u8, shape, bytes);
    for (std::size_t offset : {0u, 1u, 3u, 4u, 7u, 8u, static_cast<unsigned>(rng() % 256)}) {
      auto gpu = gpu_hash_host_bytes(DType::u8, shape, bytes, offset);
      ASSERT_TRUE(gpu) << gpu.error().message();
      EXPECT_EQ(*gpu, cpu) << "n=" << n << " offset=" << offset;
    }
  }
}

TEST_F(GpuTensorHash, TestVectors) {
  std::ifstream in(std::string(SCOUT_SOURCE_DIR) + "/schemas/tensor-hash-vectors.json");
  ASSERT_TRUE(in);
  const auto doc = nlohmann::json::parse(in);
  for (const auto& v : doc.at("vectors")) {
    const auto dtype = parse_dtype(v.at("dtype").get<std::string>());
    const auto shape = v.at("shape").get<std::vector<std::int64_t>>();
    std::vector<std::byte> bytes;
    if (v.contains("bytes_hex")) {
      const auto hex = v.at("bytes_hex").get<std::string>();
      for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
        bytes.push_back(static_cast<std::byte>(std::stoul(hex.substr(i, 2), nullptr, 16)));
    } else {
      std::uint64_t state = v.at("generator").at("seed").get<std::uint64_t>();
      const auto length = v.at("generator").at("length").get<std::size_t>();
      bytes.resize(length);
      for (std::size_t i = 0; i < length; i += 8) {
        state += 0x9E3779B97F4A7C15ULL;
        std::uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        std::memcpy(bytes.data() + i, &z, std::min<std::size_t>(8, length - i));
      }
    }
    auto gpu = gpu_hash_host_bytes(*dtype, shape, bytes, 0);
    ASSERT_TRUE(gpu) << gpu.error().message();
    EXPECT_EQ(*gpu, std::stoull(v.at("hash").get<std::string>(), nullptr, 16)) << v.at("name");
  }
}

}  // namespace
}  // namespace scout::hash
