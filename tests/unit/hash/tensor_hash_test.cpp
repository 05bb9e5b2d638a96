// Tests of the tensor hash's requirements (proofs in lib/hash/tensor_hash.hpp).
#include "lib/hash/tensor_hash.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "lib/hash/gf64.hpp"

namespace scout::hash {
namespace {

std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(out.data() + i, &v, std::min<std::size_t>(8, n - i));
  }
  return out;
}

std::uint64_t get_word(const std::vector<std::byte>& b, std::size_t k) {
  std::uint64_t w = 0;
  std::memcpy(&w, b.data() + 8 * k, std::min<std::size_t>(8, b.size() - 8 * k));
  return w;
}

std::span<const std::byte> word_bytes(const std::uint64_t& w) {
  return {reinterpret_cast<const std::byte*>(&w), 8};
}

// Random per run; SCOUT_TEST_SEED=<seed> repeats a run (the failures print it).
unsigned test_seed() {
  static const unsigned seed = [] {
    if (const char* env = std::getenv("SCOUT_TEST_SEED")) return static_cast<unsigned>(std::strtoul(env, nullptr, 10));
    return static_cast<unsigned>(std::random_device{}());
  }();
  return seed;
}

TEST(TensorHash, PartialSumIsTheDefinition) {
  // partial_sum (Horner, folding kernels) equals the XOR of word_term over the
  // words: the definition, computed term by term with field multiplications.
  SCOPED_TRACE(testing::Message() << "seed " << test_seed());
  for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 64u, 129u, 1000u, 4103u}) {
    auto bytes = random_bytes(n, test_seed() + n);
    for (std::uint64_t first : {0ull, 1ull, 12345ull, 1ull << 40}) {
      std::uint64_t expect = 0;
      for (std::size_t k = 0; 8 * k < n; ++k) expect ^= gf64::mul(get_word(bytes, k), gf64::x64_pow(first + k));
      for (HashKernel kernel : available_kernels())
        EXPECT_EQ(partial_sum_with(kernel, bytes, first), expect)
            << kernel_name(kernel) << " n=" << n << " first=" << first;
    }
  }
}

TEST(TensorHash, EveryKernelMatchesTheScalarReference) {
  SCOPED_TRACE(testing::Message() << "seed " << test_seed());
  auto kernels = available_kernels();
  std::cout << "kernels:";
  for (HashKernel k : kernels) std::cout << ' ' << kernel_name(k);
  std::cout << " (active " << kernel_name(active_kernel()) << ")\n";
  auto big = random_bytes((1u << 20) + 4096, test_seed());
  std::vector<std::size_t> sizes;
  for (std::size_t n = 0; n <= 1100; ++n) sizes.push_back(n);
  for (std::size_t n : {2047u, 2048u, 2049u, 4095u, 4096u, 4100u, 65536u + 3u, 1u << 20}) sizes.push_back(n);
  std::mt19937_64 rng(test_seed());
  for (std::size_t n : sizes) {
    const std::size_t offset = rng() % 64;  // unaligned starts too
    const std::uint64_t first = rng() % 3 == 0 ? 0 : rng() >> (rng() % 64);
    std::span<const std::byte> s(big.data() + offset, n);
    const std::uint64_t ref = partial_sum_with(HashKernel::scalar, s, first);
    for (HashKernel k : kernels)
      ASSERT_EQ(partial_sum_with(k, s, first), ref) << kernel_name(k) << " n=" << n << " offset=" << offset;
  }
}

TEST(TensorHash, ExhaustiveBitFlips64KiB) {
  // Every bit of every word of a 64 KiB tensor, flipped alone, changes the hash.
  // The hash of each modified tensor is computed incrementally and exactly: S
  // is the XOR of one term per word (proof 4), so replacing word k replaces
  // one term: S' = S ^ term_k(old) ^ term_k(new), each term from partial_sum
  // over that word's 8 bytes at index k. Every 61st flip is also rehashed in
  // full from the modified buffer, which must give the same value.
  SCOPED_TRACE(testing::Message() << "seed " << test_seed());
  auto bytes = random_bytes(64 << 10, test_seed());
  const std::int64_t shape[] = {16384};
  const std::uint64_t sum = partial_sum(bytes, 0);
  const std::uint64_t h0 = finalize(sum, DType::f32, shape, bytes.size());
  ASSERT_EQ(h0, hash_tensor(DType::f32, shape, bytes, 1));
  std::size_t unchanged = 0, checked_full = 0, flips = 0;
  for (std::size_t k = 0; k < bytes.size() / 8; ++k) {
    const std::uint64_t old = get_word(bytes, k);
    const std::uint64_t old_term = partial_sum(word_bytes(old), k);
    for (int bit = 0; bit < 64; ++bit, ++flips) {
      const std::uint64_t w = old ^ (std::uint64_t{1} << bit);
      const std::uint64_t h = finalize(sum ^ old_term ^ partial_sum(word_bytes(w), k), DType::f32, shape, bytes.size());
      if (h == h0) ++unchanged;
      if (flips % 61 == 0) {
        auto copy = bytes;
        std::memcpy(copy.data() + 8 * k, &w, 8);
        ASSERT_EQ(hash_tensor(DType::f32, shape, copy, 1), h) << "word " << k << " bit " << bit;
        ++checked_full;
      }
    }
  }
  EXPECT_EQ(flips, 64u * 8192u);
  EXPECT_EQ(unchanged, 0u);
  EXPECT_GT(checked_full, 8000u);
}

TEST(TensorHash, EverySignFlipOf1MFloatTensor) {
  // The Python reference's blind spot: a sign flip of one element of a
  // 1M-element fp32 tensor. Same exact incremental method as above (element
  // e lives in word e/2, its sign is bit 31 or 63); 64 random elements are
  // also rehashed in full.
  SCOPED_TRACE(testing::Message() << "seed " << test_seed());
  constexpr std::size_t n = 1 << 20;
  std::vector<float> values(n);
  std::mt19937 rng(test_seed());
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : values) v = dist(rng);
  std::vector<std::byte> bytes(n * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  const std::int64_t shape[] = {1024, 1024};
  const std::uint64_t sum = partial_sum(bytes, 0);
  const std::uint64_t h0 = finalize(sum, DType::f32, shape, bytes.size());
  ASSERT_EQ(h0, hash_tensor(DType::f32, shape, bytes));
  std::size_t unchanged = 0;
  std::set<std::size_t> full_check;
  while (full_check.size() < 64) full_check.insert(rng() % n);
  for (std::size_t k = 0; k < n / 2; ++k) {
    const std::uint64_t old = get_word(bytes, k);
    const std::uint64_t old_term = partial_sum(word_bytes(old), k);
    for (int half = 0; half < 2; ++half) {
      const std::uint64_t w = old ^ (std::uint64_t{1} << (31 + 32 * half));
      const std::uint64_t h = finalize(sum ^ old_term ^ partial_sum(word_bytes(w), k), DType::f32, shape, bytes.size());
      if (h == h0) ++unchanged;
      if (full_check.count(2 * k + half)) {
        std::vector<float> copy = values;
        copy[2 * k + half] = -copy[2 * k + half];
        ASSERT_EQ(hash_tensor(DType::f32, shape, std::as_bytes(std::span(copy))), h) << "element " << 2 * k + half;
      }
    }
  }
  EXPECT_EQ(unchanged, 0u);
}

TEST(TensorHash, SwappingTwoDifferentWordsChangesIt) {
  SCOPED_TRACE(testing::Message() << "seed " << test_seed());
  auto bytes = random_bytes(8 << 10, test_seed());
  const std::int64_t shape[] = {static_cast<std::int64_t>(bytes.size())};
  const std::uint64_t h0 = hash_tensor(DType::u8, shape, bytes, 1);
  std::mt19937_64 rng(test_seed());
  const std::size_t words = bytes.size() / 8;
  for (int t = 0; t < 3000; ++t) {
    std::size_t i = rng() % words, j = t % 3 == 0 ? (i + 1) % words : rng() % words;
    if (i == j) continue;
    auto copy = bytes;
    std::swap_ranges(copy.begin() + 8 * i, copy.begin() + 8 * i + 8, copy.begin() + 8 * j);
    EXPECT_NE(hash_tensor(DType::u8, shape, copy, 1), h0) << i << " <-> " << j;
  }
  // Swapping words that differ in one bit only, far apart.
  auto copy = bytes;
  std::uint64_t a = get_word(copy, 3) ^ 1;
  std::memcpy(copy.data() + 8 * 1000, &a, 8);
  const std::uint64_t h1 = hash_tensor(DType::u8, shape, copy, 1);
  std::swap_ranges(copy.begin() + 24, copy.begin() + 32, copy.begin() + 8000);
  EXPECT_NE(hash_tensor(DType::u8, shape, copy, 1), h1);
  // Swapping equal words is no change at all.
  std::memcpy(copy.data() + 8 * 5, copy.data() + 8 * 9, 8);
  const std::uint64_t h2 = hash_tensor(DType::u8, shape, copy, 1);
  std::swap_ranges(copy.begin() + 40, copy.begin() + 48, copy.begin() + 72);
  EXPECT_EQ(hash_tensor(DType::u8, shape, copy, 1), h2);
}

TEST(TensorHash, ReshapeAndDtypeReinterpretationChangeIt) {
  auto bytes = random_bytes(64, test_seed());
  struct Case {
    DType dtype;
    std::vector<std::int64_t> shape;
  };
  std::vector<Case> cases = {
      {DType::f32, {16}},    {DType::f32, {4, 4}},  {DType::f32, {2, 8}},    {DType::f32, {8, 2}},
      {DType::f32, {1, 16}}, {DType::f32, {16, 1}}, {DType::f32, {2, 2, 4}}, {DType::i32, {16}},
      {DType::u32, {16}},    {DType::bf16, {32}},   {DType::f16, {32}},      {DType::i16, {4, 8}},
      {DType::u8, {64}},     {DType::i8, {64}},     {DType::boolean, {64}},  {DType::f64, {8}},
      {DType::i64, {8}},     {DType::u64, {2, 4}},  {DType::f8_e4m3, {64}},  {DType::f8_e5m2, {64}},
  };
  std::map<std::uint64_t, std::size_t> seen;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::uint64_t h = hash_tensor(cases[i].dtype, cases[i].shape, bytes);
    auto [it, fresh] = seen.emplace(h, i);
    EXPECT_TRUE(fresh) << "case " << i << " collides with case " << it->second;
  }
}

TEST(TensorHash, HeaderCodeIsInjectiveOnCompactHeaders) {
  // Proof 3's injectivity, exhaustively over every dtype and every shape of
  // rank <= 3 with dims 0..11 (with the byte length the shape implies).
  std::set<std::uint64_t> codes;
  std::size_t count = 0;
  auto add = [&](DType d, std::vector<std::int64_t> shape) {
    std::uint64_t numel = 1;
    for (auto x : shape) numel *= static_cast<std::uint64_t>(x);
    const std::uint64_t code = header_code(d, shape, numel * dtype_size(d));
    EXPECT_EQ(code >> 63, 0u);
    codes.insert(code);
    ++count;
  };
  for (int c = 1; c <= 15; ++c) {
    const auto d = static_cast<DType>(c);
    add(d, {});
    for (int a = 0; a < 12; ++a) {
      add(d, {a});
      for (int b = 0; b < 12; ++b) {
        add(d, {a, b});
        for (int e = 0; e < 12; ++e) add(d, {a, b, e});
      }
    }
  }
  EXPECT_EQ(codes.size(), count);
  // Shapes that do not fit, or a byte length the shape does not imply, take
  // the digest (bit 63 set), so they never equal a compact code.
  const std::int64_t wide[] = {1 << 30, 1 << 30, 1 << 30};
  EXPECT_EQ(header_code(DType::u8, wide, std::uint64_t{1} << 62) >> 63, 1u);  // dims too wide for 54 bits
  const std::int64_t four[] = {4};
  EXPECT_EQ(header_code(DType::f32, four, 15) >> 63, 1u);
  EXPECT_NE(header_code(DType::f32, four, 15), header_code(DType::f32, four, 17));
  // Typical large weights fit: [32000, 4096], [151936, 8192], [8, 128, 128].
  const std::int64_t emb[] = {32000, 4096}, big[] = {151936, 8192}, r3[] = {8, 128, 128};
  EXPECT_EQ(header_code(DType::bf16, emb, 32000ull * 4096 * 2) >> 63, 0u);
  EXPECT_EQ(header_code(DType::bf16, big, 151936ull * 8192 * 2) >> 63, 0u);
  EXPECT_EQ(header_code(DType::f32, r3, 8ull * 128 * 128 * 4) >> 63, 0u);
}

TEST(TensorHash, EmptyAndOddLengthsAreDefined) {
  const std::int64_t zero[] = {0}, zero3[] = {0, 3}, scalar_shape[] = {1};
  const std::uint64_t e = hash_tensor(DType::f32, zero, {});
  EXPECT_EQ(e, finalize(0, DType::f32, zero, 0));
  EXPECT_NE(e, hash_tensor(DType::f32, zero3, {}));
  EXPECT_NE(e, hash_tensor(DType::u8, zero, {}));
  EXPECT_NE(hash_tensor(DType::f32, {}, {}), e);  // rank 0 with no bytes: inconsistent, still defined
  TensorHasher empty(DType::f32, zero);
  EXPECT_EQ(empty.finish(), e);
  // An empty chunk with no data pointer (how the safetensors reader hands over
  // an empty tensor; found by fuzzing: memcpy from null) changes nothing.
  empty.update(std::span<const std::byte>());
  EXPECT_EQ(empty.finish(), e);
  // Every prefix length 0..40 of the same bytes hashes differently (the zero
  // padding of the last word is told apart by the length).
  std::vector<std::byte> bytes(40, std::byte{0});
  bytes[0] = std::byte{1};
  std::set<std::uint64_t> seen;
  for (std::size_t n = 0; n <= bytes.size(); ++n) {
    const std::int64_t shape[] = {static_cast<std::int64_t>(n)};
    seen.insert(hash_tensor(DType::u8, shape, std::span(bytes).first(n)));
  }
  EXPECT_EQ(seen.size(), bytes.size() + 1);
  (void)scalar_shape;
}

TEST(TensorHash, ThreadCountDoesNotMatter) {
  const unsigned hw = std::max(2u, std::thread::hardware_concurrency());
  for (std::size_t n : {k_parallel_threshold - 1, k_parallel_threshold + 5, (std::size_t{9} << 20) + 3}) {
    auto bytes = random_bytes(n, test_seed() + n);
    const std::int64_t shape[] = {static_cast<std::int64_t>(n)};
    const std::uint64_t one = hash_tensor(DType::u8, shape, bytes, 1);
    for (unsigned t = 2; t <= std::max(hw, 9u); ++t)
      EXPECT_EQ(hash_tensor(DType::u8, shape, bytes, t), one) << t << " threads, n=" << n;
    EXPECT_EQ(hash_tensor(DType::u8, shape, bytes, 0), one);
  }
}

TEST(TensorHash, StreamingEqualsOneShotForAnyChunking) {
  SCOPED_TRACE(testing::Message() << "seed " << test_seed());
  std::mt19937 rng(test_seed());
  for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 1000u, 4099u, 70001u}) {
    auto bytes = random_bytes(n, test_seed() + n);
    const std::int64_t shape[] = {static_cast<std::int64_t>(n)};
    const std::uint64_t expect = hash_tensor(DType::u8, shape, bytes, 1);
    TensorHasher h(DType::u8, shape);
    std::size_t pos = 0;
    while (pos < n) {
      const std::size_t take = std::min<std::size_t>(n - pos, rng() % 2 ? 1 + rng() % 13 : 1 + rng() % 5000);
      h.update(std::span(bytes).subspan(pos, take));
      pos += take;
    }
    EXPECT_EQ(h.bytes_seen(), n);
    EXPECT_EQ(h.finish(), expect) << n;
  }
}

TEST(TensorHash, HighRankTensorsStream) {
  // Rank 20 (digest header): streaming and one-shot agree, and a reshape
  // still changes the value.
  std::vector<std::int64_t> shape(20, 1);
  shape[3] = 8;
  auto bytes = random_bytes(32, test_seed());
  TensorHasher h(DType::f32, shape);
  h.update(bytes);
  EXPECT_EQ(h.finish(), hash_tensor(DType::f32, shape, bytes));
  shape[3] = 1;
  shape[19] = 8;
  EXPECT_NE(h.finish(), hash_tensor(DType::f32, shape, bytes));
}

TEST(TensorHash, StridedViewsHashLikeTheirContiguousCopies) {
  SCOPED_TRACE(testing::Message() << "seed " << test_seed());
  std::mt19937 rng(test_seed());
  // A 37 x 53 x 5 float tensor, then every permutation of its axes as a view.
  const std::int64_t d0 = 37, d1 = 53, d2 = 5;
  std::vector<float> base(d0 * d1 * d2);
  for (float& v : base) v = static_cast<float>(rng()) / 7.0f;
  const std::int64_t dims[3] = {d0, d1, d2}, strides[3] = {d1 * d2, d2, 1};
  int perm[3] = {0, 1, 2};
  do {
    const std::int64_t shape[3] = {dims[perm[0]], dims[perm[1]], dims[perm[2]]};
    const std::int64_t vstrides[3] = {strides[perm[0]], strides[perm[1]], strides[perm[2]]};
    std::vector<float> copy;
    for (std::int64_t i = 0; i < shape[0]; ++i)
      for (std::int64_t j = 0; j < shape[1]; ++j)
        for (std::int64_t k = 0; k < shape[2]; ++k)
          copy.push_back(base[i * vstrides[0] + j * vstrides[1] + k * vstrides[2]]);
    const std::uint64_t expect = hash_tensor(DType::f32, shape, std::as_bytes(std::span(copy)));
    EXPECT_EQ(hash_strided(DType::f32, shape, vstrides, reinterpret_cast<const std::byte*>(base.data())), expect)
        << perm[0] << perm[1] << perm[2];
  } while (std::next_permutation(perm, perm + 3));
  // Every other row and column (a sliced view), and a broadcast (stride 0).
  {
    const std::int64_t shape[2] = {(d0 + 1) / 2, (d1 * d2 + 2) / 3}, vs[2] = {2 * d1 * d2, 3};
    std::vector<float> copy;
    for (std::int64_t i = 0; i < shape[0]; ++i)
      for (std::int64_t j = 0; j < shape[1]; ++j) copy.push_back(base[i * vs[0] + j * vs[1]]);
    EXPECT_EQ(hash_strided(DType::f32, shape, vs, reinterpret_cast<const std::byte*>(base.data())),
              hash_tensor(DType::f32, shape, std::as_bytes(std::span(copy))));
    const std::int64_t bshape[2] = {1000, 7}, bs[2] = {0, 1};
    std::vector<float> bcopy;
    for (int i = 0; i < 1000; ++i) bcopy.insert(bcopy.end(), base.begin(), base.begin() + 7);
    EXPECT_EQ(hash_strided(DType::f32, bshape, bs, reinterpret_cast<const std::byte*>(base.data())),
              hash_tensor(DType::f32, bshape, std::as_bytes(std::span(bcopy))));
  }
  // A large transposed view crosses the gather buffer many times.
  {
    const std::int64_t r = 700, c = 300;
    std::vector<std::uint16_t> m(r * c);
    for (auto& v : m) v = static_cast<std::uint16_t>(rng());
    const std::int64_t shape[2] = {c, r}, vs[2] = {1, c};
    std::vector<std::uint16_t> t;
    for (std::int64_t i = 0; i < c; ++i)
      for (std::int64_t j = 0; j < r; ++j) t.push_back(m[j * c + i]);
    EXPECT_EQ(hash_strided(DType::bf16, shape, vs, reinterpret_cast<const std::byte*>(m.data())),
              hash_tensor(DType::bf16, shape, std::as_bytes(std::span(t))));
    const std::int64_t cs[2] = {r, c}, cstr[2] = {c, 1};
    EXPECT_EQ(hash_strided(DType::bf16, cs, cstr, reinterpret_cast<const std::byte*>(m.data())),
              hash_tensor(DType::bf16, cs, std::as_bytes(std::span(m))));
  }
}

// Views of random rank, shape, strides (any sign, zero for broadcasts) and
// storage offset, read through small windows, hash like hash_strided over the
// storage in memory; a failed read is nullopt, a view past its storage throws.
TEST(TensorHash, WindowedStridedViewsHashLikeTheViewInMemory) {
  SCOPED_TRACE(testing::Message() << "seed " << test_seed());
  std::mt19937_64 rng(test_seed());
  const DType dtypes[] = {DType::u8, DType::bf16, DType::f32, DType::f64};
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE(testing::Message() << "round " << round);
    const DType dtype = dtypes[rng() % 4];
    const std::int64_t esize = static_cast<std::int64_t>(dtype_size(dtype));
    const std::size_t rank = 1 + rng() % 4;
    std::vector<std::int64_t> shape(rank), strides(rank);
    std::int64_t extent = 1;  // a contiguous layout's size, then permuted, sliced, negated or broadcast
    for (std::size_t i = rank; i-- > 0;) {
      shape[i] = 1 + static_cast<std::int64_t>(rng() % 24);
      strides[i] = extent * (1 + static_cast<std::int64_t>(rng() % 2));
      extent = strides[i] * shape[i];
    }
    std::shuffle(strides.begin(), strides.end(), rng);
    if (rng() % 4 == 0) strides[rng() % rank] = 0;
    std::int64_t low = 0, high = 0;
    for (std::size_t i = 0; i < rank; ++i) {
      if (rng() % 5 == 0) strides[i] = -strides[i];
      (strides[i] < 0 ? low : high) += (shape[i] - 1) * strides[i];
    }
    const std::int64_t offset = -low + static_cast<std::int64_t>(rng() % 17);
    const std::int64_t elems = offset + high + 1 + static_cast<std::int64_t>(rng() % 9);
    const auto storage = random_bytes(static_cast<std::size_t>(elems * esize), rng());
    const std::uint64_t expect = hash_strided(dtype, shape, strides, storage.data() + offset * esize, 1);
    const StorageReader read = [&](std::byte* dst, std::size_t n, std::uint64_t at) {
      if (at + n > storage.size()) return false;
      std::memcpy(dst, storage.data() + at, n);
      return true;
    };
    const std::size_t window = 64 * (1 + rng() % 40);
    EXPECT_EQ(hash_strided_windowed(dtype, shape, strides, offset, storage.size(), read, 1, window), expect)
        << "window " << window << " elements " << elems;
    EXPECT_EQ(hash_strided_windowed(dtype, shape, strides, offset, storage.size(), read, 2), expect);
    const StorageReader fails = [](std::byte*, std::size_t, std::uint64_t) { return false; };
    EXPECT_EQ(hash_strided_windowed(dtype, shape, strides, offset, storage.size(), fails, 1, window), std::nullopt);
    EXPECT_THROW((void)hash_strided_windowed(dtype, shape, strides, offset, static_cast<std::uint64_t>(high * esize),
                                             read, 1, window),
                 std::invalid_argument);
  }
}

// The generator of schemas/tensor-hash-vectors.json.
std::vector<std::byte> splitmix64_bytes(std::uint64_t seed, std::size_t length) {
  std::vector<std::byte> out(length);
  std::uint64_t state = seed;
  for (std::size_t i = 0; i < length; i += 8) {
    state += 0x9E3779B97F4A7C15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    std::memcpy(out.data() + i, &z, std::min<std::size_t>(8, length - i));
  }
  return out;
}

TEST(TensorHash, TestVectorsPassOnEveryKernel) {
  std::ifstream in(std::string(SCOUT_SOURCE_DIR) + "/schemas/tensor-hash-vectors.json");
  ASSERT_TRUE(in) << "schemas/tensor-hash-vectors.json not found";
  const auto doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc.at("spec_version").get<int>(), k_hash_spec_version);
  ASSERT_GE(doc.at("vectors").size(), 20u);
  for (const auto& v : doc.at("vectors")) {
    const auto dtype = parse_dtype(v.at("dtype").get<std::string>());
    ASSERT_TRUE(dtype) << v.dump();
    const auto shape = v.at("shape").get<std::vector<std::int64_t>>();
    std::vector<std::byte> bytes;
    if (v.contains("bytes_hex")) {
      const auto hex = v.at("bytes_hex").get<std::string>();
      for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
        bytes.push_back(static_cast<std::byte>(std::stoul(hex.substr(i, 2), nullptr, 16)));
    } else {
      const auto& g = v.at("generator");
      ASSERT_EQ(g.at("kind"), "splitmix64");
      bytes = splitmix64_bytes(g.at("seed").get<std::uint64_t>(), g.at("length").get<std::size_t>());
    }
    const std::uint64_t expect = std::stoull(v.at("hash").get<std::string>(), nullptr, 16);
    for (HashKernel k : available_kernels())
      EXPECT_EQ(finalize(partial_sum_with(k, bytes, 0), *dtype, shape, bytes.size()), expect)
          << v.at("name") << " with " << kernel_name(k);
    EXPECT_EQ(hash_tensor(*dtype, shape, bytes), expect) << v.at("name");
  }
}

}  // namespace
}  // namespace scout::hash
