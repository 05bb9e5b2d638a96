// The CUDA tensor hash against the CPU reference on seeded data of many
// sizes and alignments, and on the shared test vectors. Skips where no GPU
// (or no CUDA in the build) exists.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
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

// Random dtypes, shapes (0-4 dims, empty ones too), byte offsets on the
// device, and strided views: the GPU hash of a view's contiguous copy (what
// the LibTorch module hashes for a non-contiguous CUDA tensor) equals the CPU
// hash of the view itself (hash_strided). SCOUT_GPU_SEED reproduces a run.
TEST_F(GpuTensorHash, RandomDtypesShapesAndStridesMatchCpu) {
  const char* env = std::getenv("SCOUT_GPU_SEED");
  const std::uint64_t seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::printf("RandomDtypesShapesAndStridesMatchCpu seed %llu (SCOUT_GPU_SEED=%llu reproduces it)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const DType dtypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16,    DType::i64,     DType::i32,
                          DType::i16, DType::i8,  DType::u8,  DType::boolean, DType::f8_e4m3, DType::f8_e5m2,
                          DType::u16, DType::u32, DType::u64, DType::c64,     DType::c128};
  auto uni = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    const DType dtype = dtypes[uni(0, std::size(dtypes) - 1)];
    const std::size_t es = dtype_size(dtype);
    const int rank = static_cast<int>(uni(0, 4));
    std::vector<std::int64_t> shape(static_cast<std::size_t>(rank));
    for (auto& d : shape) d = uni(0, 9) == 0 ? uni(0, 1) : uni(1, trial % 20 == 0 ? 4096 : 64);
    std::int64_t elems = std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
    if (elems > (8 << 20)) continue;
    // A strided view: the logical dims laid out in a random order of a larger storage, with a gap per dim.
    std::vector<int> order(static_cast<std::size_t>(rank));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::int64_t> strides(static_cast<std::size_t>(rank));
    std::int64_t extent = 1;
    for (int k = rank - 1; k >= 0; --k) {
      const int d = order[static_cast<std::size_t>(k)];
      strides[static_cast<std::size_t>(d)] = extent;
      extent *= shape[static_cast<std::size_t>(d)] + uni(0, 2);
    }
    const auto storage = seeded_bytes(static_cast<std::size_t>(std::max<std::int64_t>(extent, 1)) * es, rng());
    const std::uint64_t cpu = hash_strided(dtype, shape, strides, storage.data(), 1);
    // The contiguous copy, row-major.
    std::vector<std::byte> dense(static_cast<std::size_t>(elems) * es);
    std::vector<std::int64_t> idx(static_cast<std::size_t>(rank), 0);
    for (std::int64_t i = 0; i < elems; ++i) {
      std::int64_t off = 0;
      for (int k = 0; k < rank; ++k) off += idx[static_cast<std::size_t>(k)] * strides[static_cast<std::size_t>(k)];
      std::memcpy(dense.data() + static_cast<std::size_t>(i) * es, storage.data() + static_cast<std::size_t>(off) * es,
                  es);
      for (int k = rank - 1; k >= 0; --k) {
        if (++idx[static_cast<std::size_t>(k)] < shape[static_cast<std::size_t>(k)]) break;
        idx[static_cast<std::size_t>(k)] = 0;
      }
    }
    ASSERT_EQ(hash_tensor(dtype, shape, dense), cpu) << "trial " << trial << ": CPU strided vs CPU contiguous";
    const std::size_t offset = static_cast<std::size_t>(uni(0, 15));
    auto gpu = gpu_hash_host_bytes(dtype, shape, dense, offset);
    ASSERT_TRUE(gpu) << gpu.error().message();
    EXPECT_EQ(*gpu, cpu) << "trial " << trial << " dtype " << dtype_name(dtype) << " rank " << rank << " elems "
                         << elems << " offset " << offset;
  }
}

TEST_F(GpuTensorHash, TestVectors) {
  // $SCOUT_SOURCE_DIR where the binary runs from another checkout (scripts/gpu-check.sh on a device machine).
  const char* src = std::getenv("SCOUT_SOURCE_DIR");
  std::ifstream in(std::string(src ? src : SCOUT_SOURCE_DIR) + "/schemas/tensor-hash-vectors.json");
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
