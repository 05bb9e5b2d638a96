// The x86-64 kernels of the word sum: CRC-style folding with carry-less
// multiplies (PCLMULQDQ on 128-bit, VPCLMULQDQ on 256/512-bit registers),
// chosen at run time. Each computes exactly gf64's definition (tests compare
// every kernel with the scalar reference on many sizes and offsets).
//
// Folding. A 128-bit lane holds two consecutive words (a, b) as the
// polynomial a + b x^64. The kernel keeps R registers of lanes covering T
// consecutive words; for every further block of T words it sets
//   acc = acc * x^(-64 T) + block     (per lane)
// where acc * x^(-64T) = lo * K0 + hi * K1 with K0 = x^(-64T), K1 = x^(64-64T)
// mod P: two carry-less multiplies and an XOR per 16 bytes, no reduction in
// the loop (the 127-bit products stay congruent mod P). After B blocks lane q
// holds sum_b pair(b, q) x^(-64T(B-1-b)), so the sum of the B*T words is
//   x^(64T(B-1)) * sum_q x^(128 q) * reduce(lane q).
// The registers are first folded onto one with their weights (two vector
// carry-less multiplies each), then its few lanes are combined.
#include <array>
#include <cstring>

#include "lib/hash/gf64.hpp"
#include "lib/hash/tensor_hash_simd.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace scout::hash::detail {

#if defined(__x86_64__)

namespace {

#define SCOUT_TARGET_PCLMUL __attribute__((target("pclmul,sse4.1")))
#define SCOUT_TARGET_AVX2 __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.1")))
#define SCOUT_TARGET_AVX512 __attribute__((target("avx512f,vpclmulqdq,avx2,pclmul,sse4.1")))

SCOUT_TARGET_PCLMUL inline std::uint64_t mul_fast(std::uint64_t a, std::uint64_t b) {
  const __m128i p = _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(a)),
                                         _mm_cvtsi64_si128(static_cast<long long>(b)), 0x00);
  return gf64::reduce(static_cast<std::uint64_t>(_mm_cvtsi128_si64(p)),
                      static_cast<std::uint64_t>(_mm_extract_epi64(p, 1)));
}

SCOUT_TARGET_PCLMUL inline std::uint64_t x64_pow_fast(std::uint64_t k) {
  std::uint64_t r = 1;
  for (int i = 0; k != 0; ++i, k >>= 1)
    if (k & 1) r = mul_fast(r, gf64::k_x64_pow2[static_cast<std::size_t>(i)]);
  return r;
}

// Reduces the 2*lanes qwords of `lanes` (lane q = words 2q, 2q+1 of a block)
// to sum_q x^(128 q) * lane q.
SCOUT_TARGET_PCLMUL std::uint64_t combine_lanes(const std::uint64_t* lanes, std::size_t count) {
  std::uint64_t acc = 0;
  for (std::size_t q = count; q-- > 0;) {
    // Horner over lanes: acc = acc * x^128 + lane q.
    acc = mul_fast(acc, gf64::k_x64_pow2[1]) ^ gf64::reduce(lanes[2 * q], lanes[2 * q + 1]);
  }
  return acc;
}

// Weights that fold register r (covering words W*r .. W*r+W-1 of a block)
// onto register 0: lo * x^(64 W r) + hi * x^(64 (W r + 1)).
template <std::size_t W>
struct RegisterWeights {
  static constexpr std::array<std::uint64_t, 16> lo = [] {
    std::array<std::uint64_t, 16> a{};
    for (std::size_t r = 0; r < 16; ++r) a[r] = gf64::x64_pow(W * r);
    return a;
  }();
  static constexpr std::array<std::uint64_t, 16> hi = [] {
    std::array<std::uint64_t, 16> a{};
    for (std::size_t r = 0; r < 16; ++r) a[r] = gf64::x64_pow(W * r + 1);
    return a;
  }();
};

template <std::size_t T>
struct FoldConstants {
  static constexpr std::uint64_t k0 = gf64::x64_pow_inverse(T);      // x^(-64T)
  static constexpr std::uint64_t k1 = gf64::x64_pow_inverse(T - 1);  // x^(64-64T)
};

// 8 xmm accumulators: T = 16 words (128 bytes) per step.
SCOUT_TARGET_PCLMUL std::uint64_t fold_pclmul(const std::byte* p, std::size_t words, std::size_t& done) {
  constexpr std::size_t R = 8, T = 2 * R;
  const std::size_t blocks = words / T;
  done = blocks * T;
  if (blocks == 0) return 0;
  const __m128i k =
      _mm_set_epi64x(static_cast<long long>(FoldConstants<T>::k1), static_cast<long long>(FoldConstants<T>::k0));
  __m128i acc[R];
#pragma GCC unroll 16
  for (std::size_t r = 0; r < R; ++r) acc[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * r));
  for (std::size_t b = 1; b < blocks; ++b) {
    const std::byte* q = p + b * T * 8;
#pragma GCC unroll 16
    for (std::size_t r = 0; r < R; ++r) {
      const __m128i lo = _mm_clmulepi64_si128(acc[r], k, 0x00);
      const __m128i hi = _mm_clmulepi64_si128(acc[r], k, 0x11);
      acc[r] = _mm_xor_si128(_mm_xor_si128(lo, hi), _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * r)));
    }
  }
  using RW = RegisterWeights<2>;
  __m128i f = acc[0];
#pragma GCC unroll 16
  for (std::size_t r = 1; r < R; ++r) {
    const __m128i w = _mm_set_epi64x(static_cast<long long>(RW::hi[r]), static_cast<long long>(RW::lo[r]));
    f = _mm_xor_si128(f, _mm_xor_si128(_mm_clmulepi64_si128(acc[r], w, 0x00), _mm_clmulepi64_si128(acc[r], w, 0x11)));
  }
  alignas(64) std::uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), f);
  return mul_fast(combine_lanes(lanes, 1), x64_pow_fast(T * (blocks - 1)));
}

// 8 ymm accumulators: T = 32 words (256 bytes) per step.
SCOUT_TARGET_AVX2 std::uint64_t fold_avx2(const std::byte* p, std::size_t words, std::size_t& done) {
  constexpr std::size_t R = 8, T = 4 * R;
  const std::size_t blocks = words / T;
  done = blocks * T;
  if (blocks == 0) return 0;
  const __m256i k =
      _mm256_set_epi64x(static_cast<long long>(FoldConstants<T>::k1), static_cast<long long>(FoldConstants<T>::k0),
                        static_cast<long long>(FoldConstants<T>::k1), static_cast<long long>(FoldConstants<T>::k0));
  __m256i acc[R];
#pragma GCC unroll 16
  for (std::size_t r = 0; r < R; ++r) acc[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * r));
  for (std::size_t b = 1; b < blocks; ++b) {
    const std::byte* q = p + b * T * 8;
#pragma GCC unroll 16
    for (std::size_t r = 0; r < R; ++r) {
      const __m256i lo = _mm256_clmulepi64_epi128(acc[r], k, 0x00);
      const __m256i hi = _mm256_clmulepi64_epi128(acc[r], k, 0x11);
      acc[r] =
          _mm256_xor_si256(_mm256_xor_si256(lo, hi), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * r)));
    }
  }
  using RW = RegisterWeights<4>;
  __m256i f = acc[0];
#pragma GCC unroll 16
  for (std::size_t r = 1; r < R; ++r) {
    const __m256i w = _mm256_set_epi64x(static_cast<long long>(RW::hi[r]), static_cast<long long>(RW::lo[r]),
                                        static_cast<long long>(RW::hi[r]), static_cast<long long>(RW::lo[r]));
    f = _mm256_xor_si256(
        f, _mm256_xor_si256(_mm256_clmulepi64_epi128(acc[r], w, 0x00), _mm256_clmulepi64_epi128(acc[r], w, 0x11)));
  }
  alignas(64) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), f);
  return mul_fast(combine_lanes(lanes, 2), x64_pow_fast(T * (blocks - 1)));
}

// 8 zmm accumulators: T = 64 words (512 bytes) per step; XOR3 in one vpternlogq.
SCOUT_TARGET_AVX512 std::uint64_t fold_avx512(const std::byte* p, std::size_t words, std::size_t& done) {
  constexpr std::size_t R = 8, T = 8 * R;
  const std::size_t blocks = words / T;
  done = blocks * T;
  if (blocks == 0) return 0;
  const __m512i k =
      _mm512_set_epi64(static_cast<long long>(FoldConstants<T>::k1), static_cast<long long>(FoldConstants<T>::k0),
                       static_cast<long long>(FoldConstants<T>::k1), static_cast<long long>(FoldConstants<T>::k0),
                       static_cast<long long>(FoldConstants<T>::k1), static_cast<long long>(FoldConstants<T>::k0),
                       static_cast<long long>(FoldConstants<T>::k1), static_cast<long long>(FoldConstants<T>::k0));
  __m512i acc[R];
#pragma GCC unroll 16
  for (std::size_t r = 0; r < R; ++r) acc[r] = _mm512_loadu_si512(p + 64 * r);
  for (std::size_t b = 1; b < blocks; ++b) {
    const std::byte* q = p + b * T * 8;
#pragma GCC unroll 16
    for (std::size_t r = 0; r < R; ++r) {
      const __m512i lo = _mm512_clmulepi64_epi128(acc[r], k, 0x00);
      const __m512i hi = _mm512_clmulepi64_epi128(acc[r], k, 0x11);
      acc[r] = _mm512_ternarylogic_epi64(lo, hi, _mm512_loadu_si512(q + 64 * r), 0x96);
    }
  }
  using RW = RegisterWeights<8>;
  __m512i f = acc[0];
#pragma GCC unroll 16
  for (std::size_t r = 1; r < R; ++r) {
    const auto h = static_cast<long long>(RW::hi[r]), l = static_cast<long long>(RW::lo[r]);
    const __m512i w = _mm512_set_epi64(h, l, h, l, h, l, h, l);
    f = _mm512_ternarylogic_epi64(f, _mm512_clmulepi64_epi128(acc[r], w, 0x00),
                                  _mm512_clmulepi64_epi128(acc[r], w, 0x11), 0x96);
  }
  alignas(64) std::uint64_t lanes[8];
  _mm512_store_si512(lanes, f);
  return mul_fast(combine_lanes(lanes, 4), x64_pow_fast(T * (blocks - 1)));
}

SCOUT_TARGET_PCLMUL std::uint64_t finish(std::uint64_t main, const std::byte* p, std::size_t n, std::size_t done,
                                         std::uint64_t first_word) {
  // The words past the last full block (and a partial last word) by Horner,
  // weighted by their position after the folded blocks.
  const std::uint64_t tail = local_sum_scalar(p + 8 * done, n - 8 * done);
  const std::uint64_t local = main ^ (tail == 0 ? 0 : mul_fast(tail, x64_pow_fast(done)));
  return first_word == 0 ? local : mul_fast(local, x64_pow_fast(first_word));
}

}  // namespace

bool cpu_supports(HashKernel kernel) {
  __builtin_cpu_init();
  switch (kernel) {
    case HashKernel::scalar:
      return true;
    case HashKernel::pclmul:
      return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    case HashKernel::avx2_vpclmul:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul");
    case HashKernel::avx512_vpclmul:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul");
  }
  return false;
}

std::uint64_t partial_sum_simd(HashKernel kernel, const std::byte* p, std::size_t n, std::uint64_t first_word) {
  std::size_t done = 0;
  std::uint64_t main = 0;
  switch (kernel) {
    case HashKernel::pclmul:
      main = fold_pclmul(p, n / 8, done);
      break;
    case HashKernel::avx2_vpclmul:
      main = fold_avx2(p, n / 8, done);
      break;
    case HashKernel::avx512_vpclmul:
      main = fold_avx512(p, n / 8, done);
      break;
    case HashKernel::scalar:
      break;
  }
  return finish(main, p, n, done, first_word);
}

#else  // not x86-64: the scalar reference only

bool cpu_supports(HashKernel kernel) {
  return kernel == HashKernel::scalar;
}

std::uint64_t partial_sum_simd(HashKernel, const std::byte* p, std::size_t n, std::uint64_t first_word) {
  return gf64::mul(local_sum_scalar(p, n), gf64::x64_pow(first_word));
}

#endif

}  // namespace scout::hash::detail
