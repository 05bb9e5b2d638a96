// CRC-32 (lib/hash/crc32.hpp). Polynomials over GF(2) are kept "reflected",
// as the zip CRC defines its bit order: in a 32-bit value, bit 31 - d holds the
// coefficient of x^d; in a block of message bytes, the first byte's lowest bit
// is the highest power.
//
// Folding (the kernel). A 128-bit block A of the message followed by D more
// bits contributes A * x^D. Split A = H * x^64 + L (H: its first 8 bytes,
// the low qword of the register). Then A * x^D = H * x^(D+64) + L * x^D, and
// replacing the powers by K_H = x^(D+64) mod P and K_L = x^D mod P (degree
// < 32) gives a congruent value of degree < 96 that lines up with the block D
// bits later, so it is XORed into that block. A carry-less multiply of a
// reflected 64-bit qword by a 33-bit constant c, read as a reflected 128-bit
// block, is the product times x^32 when c's bit 32 - d holds x^d; so the
// constants are x^(D+32) and x^(D-32) mod P, each a reflected 32-bit value
// shifted left by one. Four registers fold by D = 512 bits per 64 bytes; at
// the end they fold onto one by D = 128, and its 16 bytes (the message's
// remainder, congruent mod P) and the last < 16 bytes go through the table.
// The initial value is XORed into the first 4 bytes, as the table does.
#include "lib/hash/crc32.hpp"

#include <array>

#include "lib/hash/gf64.hpp"
#include "lib/hash/tensor_hash.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace scout::hash {

namespace {

constexpr std::uint32_t k_poly = 0xEDB88320u;  // x^32 + x^26 + ... + 1 without x^32, reflected

// a * b mod P, both reflected.
constexpr std::uint32_t mul_mod(std::uint32_t a, std::uint32_t b) {
  std::uint32_t p = 0;
  for (int d = 0; d < 32; ++d) {
    if (a & (0x80000000u >> d)) p ^= b;
    b = (b & 1) ? (b >> 1) ^ k_poly : b >> 1;  // b *= x
  }
  return p;
}

// x^n mod P, reflected.
constexpr std::uint32_t x_pow(std::uint64_t n) {
  std::uint32_t r = 0x80000000u, base = 0x40000000u;  // x^0, x^1
  for (; n != 0; n >>= 1) {
    if (n & 1) r = mul_mod(r, base);
    base = mul_mod(base, base);
  }
  return r;
}

constexpr std::array<std::uint32_t, 256> k_table = [] {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c & 1) ? (c >> 1) ^ k_poly : c >> 1;
    t[i] = c;
  }
  return t;
}();

// The CRC register after `n` bytes from register value `state` (no conditioning).
std::uint32_t table_run(std::uint32_t state, const unsigned char* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) state = k_table[(state ^ p[i]) & 0xFF] ^ (state >> 8);
  return state;
}

#if defined(__x86_64__)

#define SCOUT_TARGET_CRC __attribute__((target("pclmul,sse4.1")))

// The folding constant for distance D bits and half `high` (see the top).
constexpr long long fold_constant(std::uint64_t power) {
  return static_cast<long long>(std::uint64_t{x_pow(power)} << 1);
}

SCOUT_TARGET_CRC inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

SCOUT_TARGET_CRC inline __m128i load(const unsigned char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// The CRC from the folded register `x` (congruent to the message so far) and
// the `n` bytes left at `p`: folds whole 16-byte blocks in, then the table.
SCOUT_TARGET_CRC std::uint32_t finish(__m128i x, const unsigned char* p, std::size_t n) {
  const __m128i k128 = _mm_set_epi64x(fold_constant(128 - 32), fold_constant(128 + 32));
  for (; n >= 16; p += 16, n -= 16) x = fold(x, k128, load(p));
  alignas(16) unsigned char rest[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(rest), x);
  return ~table_run(table_run(0, rest, sizeof rest), p, n);
}

// n >= 64.
SCOUT_TARGET_CRC std::uint32_t crc32_fold(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  // _mm_set_epi64x(high qword, low qword): the low qword (H) takes x^(D+32).
  const __m128i k512 = _mm_set_epi64x(fold_constant(512 - 32), fold_constant(512 + 32));
  const __m128i k128 = _mm_set_epi64x(fold_constant(128 - 32), fold_constant(128 + 32));
  __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(~crc)));
  __m128i x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    x0 = fold(x0, k512, load(p));
    x1 = fold(x1, k512, load(p + 16));
    x2 = fold(x2, k512, load(p + 32));
    x3 = fold(x3, k512, load(p + 48));
  }
  x1 = fold(x0, k128, x1);
  x2 = fold(x1, k128, x2);
  return finish(fold(x2, k128, x3), p, n);
}

#define SCOUT_TARGET_CRC_AVX2 __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.1")))

SCOUT_TARGET_CRC_AVX2 inline __m256i fold2(__m256i y, __m256i k, __m256i next) {
  return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(y, k, 0x00), _mm256_clmulepi64_epi128(y, k, 0x11)),
                          next);
}

SCOUT_TARGET_CRC_AVX2 inline __m256i load2(const unsigned char* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The same folding on 256-bit registers (two 128-bit lanes each, VPCLMULQDQ):
// four registers cover 128 bytes, folded by D = 1024 bits; the eight lanes,
// in memory order, then fold onto one by D = 128. n >= 128.
SCOUT_TARGET_CRC_AVX2 std::uint32_t crc32_fold_avx2(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  // _mm256_set_epi64x(q3, q2, q1, q0): in each lane the low qword (H) takes x^(D+32).
  const __m256i k1024 = _mm256_set_epi64x(fold_constant(1024 - 32), fold_constant(1024 + 32), fold_constant(1024 - 32),
                                          fold_constant(1024 + 32));
  const __m128i k128 = _mm_set_epi64x(fold_constant(128 - 32), fold_constant(128 + 32));
  __m256i y0 = _mm256_xor_si256(load2(p), _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, static_cast<int>(~crc)));
  __m256i y1 = load2(p + 32), y2 = load2(p + 64), y3 = load2(p + 96);
  p += 128;
  n -= 128;
  for (; n >= 128; p += 128, n -= 128) {
    y0 = fold2(y0, k1024, load2(p));
    y1 = fold2(y1, k1024, load2(p + 32));
    y2 = fold2(y2, k1024, load2(p + 64));
    y3 = fold2(y3, k1024, load2(p + 96));
  }
  const __m128i lanes[8] = {_mm256_castsi256_si128(y0), _mm256_extracti128_si256(y0, 1),
                            _mm256_castsi256_si128(y1), _mm256_extracti128_si256(y1, 1),
                            _mm256_castsi256_si128(y2), _mm256_extracti128_si256(y2, 1),
                            _mm256_castsi256_si128(y3), _mm256_extracti128_si256(y3, 1)};
  __m128i x = lanes[0];
  for (int i = 1; i < 8; ++i) x = fold(x, k128, lanes[i]);
  return finish(x, p, n);
}

#define SCOUT_TARGET_CRC_AVX512 __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.1")))

SCOUT_TARGET_CRC_AVX512 inline __m512i fold4(__m512i z, __m512i k, __m512i next) {
  // 0x96: a ^ b ^ c in one instruction.
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, k, 0x00), _mm512_clmulepi64_epi128(z, k, 0x11), next,
                                   0x96);
}

SCOUT_TARGET_CRC_AVX512 inline __m512i load4(const unsigned char* p) {
  return _mm512_loadu_si512(p);
}

// The same folding on 512-bit registers (four 128-bit lanes each): four
// registers cover 256 bytes, folded by D = 2048 bits, twice the bytes per
// carry-less multiply of the 256-bit kernel (measured here: 33 against 17
// GB/s on a cached block); the sixteen lanes, in memory order, then fold onto
// one by D = 128. n >= 256.
SCOUT_TARGET_CRC_AVX512 std::uint32_t crc32_fold_avx512(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  const long long hi = fold_constant(2048 - 32), lo = fold_constant(2048 + 32);
  const __m512i k2048 = _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
  const __m128i k128 = _mm_set_epi64x(fold_constant(128 - 32), fold_constant(128 + 32));
  __m512i z0 = _mm512_xor_si512(load4(p), _mm512_castsi128_si512(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  __m512i z1 = load4(p + 64), z2 = load4(p + 128), z3 = load4(p + 192);
  p += 256;
  n -= 256;
  for (; n >= 256; p += 256, n -= 256) {
    z0 = fold4(z0, k2048, load4(p));
    z1 = fold4(z1, k2048, load4(p + 64));
    z2 = fold4(z2, k2048, load4(p + 128));
    z3 = fold4(z3, k2048, load4(p + 192));
  }
  alignas(64) __m128i lanes[16];
  _mm512_store_si512(lanes + 0, z0);
  _mm512_store_si512(lanes + 4, z1);
  _mm512_store_si512(lanes + 8, z2);
  _mm512_store_si512(lanes + 12, z3);
  __m128i x = lanes[0];
  for (int i = 1; i < 16; ++i) x = fold(x, k128, lanes[i]);
  return finish(x, p, n);
}

// The fused pass (crc32_and_partial_sum): eight zmm registers of the CRC
// folding (each by D = 4096 bits, 512 bytes per step) and eight of the word
// sum's (tensor_hash_x86.cpp, T = 64 words per step) are fed by the same eight
// loads per 512 bytes. At the end neither is reduced here: the eight CRC
// registers, stored in order, are 512 bytes congruent to the message so far
// (its initial value XORed in), so their CRC from register 0, crc32(buffer,
// ~0), is the CRC of the folded bytes; the eight sum registers, stored in
// order, are 64 words whose own word sum, weighted by x^(64 (64 (B - 1))) for
// B steps, is the folded bytes' sum (lane q = lo + hi x^64, register r at word
// 8 r: exactly the weights of a word sequence), i.e. partial_sum(buffer,
// first_word + 64 (B - 1)). Both then continue over the bytes past the last
// step with the separate kernels. n >= 512.
SCOUT_TARGET_CRC_AVX512 CrcAndSum crc32_sum_fold_avx512(std::uint32_t crc, const unsigned char* p, std::size_t n,
                                                        std::uint64_t first_word) {
  constexpr std::size_t R = 8, step = 64 * R, T = step / 8;
  const long long ch = fold_constant(8 * step - 32), cl = fold_constant(8 * step + 32);
  const __m512i kc = _mm512_set_epi64(ch, cl, ch, cl, ch, cl, ch, cl);
  constexpr auto s0 = static_cast<long long>(gf64::x64_pow_inverse(T));
  constexpr auto s1 = static_cast<long long>(gf64::x64_pow_inverse(T - 1));
  const __m512i ks = _mm512_set_epi64(s1, s0, s1, s0, s1, s0, s1, s0);
  const std::size_t blocks = n / step;
  __m512i z[R], s[R];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) z[r] = s[r] = load4(p + 64 * r);
  z[0] = _mm512_xor_si512(z[0], _mm512_castsi128_si512(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  for (std::size_t b = 1; b < blocks; ++b) {
    const unsigned char* q = p + b * step;
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      const __m512i v = load4(q + 64 * r);
      z[r] = fold4(z[r], kc, v);
      s[r] = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(s[r], ks, 0x00),
                                       _mm512_clmulepi64_epi128(s[r], ks, 0x11), v, 0x96);
    }
  }
  alignas(64) std::byte cbuf[step], sbuf[step];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) {
    _mm512_store_si512(cbuf + 64 * r, z[r]);
    _mm512_store_si512(sbuf + 64 * r, s[r]);
  }
  const std::size_t done = blocks * step;
  const std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(p) + done, n - done);
  const std::uint32_t c = crc32(rest, crc32(cbuf, 0xFFFFFFFFu));
  const std::uint64_t sum = partial_sum(sbuf, first_word + T * (blocks - 1)) ^ partial_sum(rest, first_word + done / 8);
  return {c, sum};
}

bool has_clmul() {
  static const bool yes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return yes;
}

bool has_vpclmul() {
  static const bool yes = has_clmul() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq");
  return yes;
}

bool has_vpclmul512() {
  static const bool yes = has_vpclmul() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  return yes;
}

#else

bool has_clmul() {
  return false;
}

#endif

}  // namespace

std::uint32_t crc32_reference(std::span<const std::byte> bytes, std::uint32_t crc) {
  return ~table_run(~crc, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

bool crc32_kernel_available(Crc32Kernel kernel) {
  switch (kernel) {
    case Crc32Kernel::table:
      return true;
#if defined(__x86_64__)
    case Crc32Kernel::clmul128:
      return has_clmul();
    case Crc32Kernel::vpclmul256:
      return has_vpclmul();
    case Crc32Kernel::vpclmul512:
      return has_vpclmul512();
#endif
    default:
      return false;
  }
}

std::uint32_t crc32_with(Crc32Kernel kernel, std::span<const std::byte> bytes, std::uint32_t crc) {
#if defined(__x86_64__)
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (crc32_kernel_available(kernel)) {
    if (kernel == Crc32Kernel::vpclmul512 && bytes.size() >= 256) return crc32_fold_avx512(crc, p, bytes.size());
    if (kernel == Crc32Kernel::vpclmul256 && bytes.size() >= 128) return crc32_fold_avx2(crc, p, bytes.size());
    if (kernel == Crc32Kernel::clmul128 && bytes.size() >= 64) return crc32_fold(crc, p, bytes.size());
  }
#else
  (void)kernel;
#endif
  return crc32_reference(bytes, crc);
}

std::uint32_t crc32(std::span<const std::byte> bytes, std::uint32_t crc) {
#if defined(__x86_64__)
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() >= 1024 && has_vpclmul512()) return crc32_fold_avx512(crc, p, bytes.size());
  if (bytes.size() >= 256 && has_vpclmul()) return crc32_fold_avx2(crc, p, bytes.size());
  if (bytes.size() >= 64 && has_clmul()) return crc32_fold(crc, p, bytes.size());
#endif
  return crc32_reference(bytes, crc);
}

std::uint32_t crc32_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t length_b) {
  // crc(A B) = crc(A) * x^(8 |B|) + crc(B) mod P: the conditioning terms cancel.
  return mul_mod(x_pow(8 * length_b), crc_a) ^ crc_b;
}

bool crc32_accelerated() {
  return has_clmul();
}

bool fused_kernel_available(FusedKernel kernel) {
  switch (kernel) {
    case FusedKernel::separate:
      return true;
#if defined(__x86_64__)
    case FusedKernel::vpclmul512:
      return has_vpclmul512();
#endif
    default:
      return false;
  }
}

CrcAndSum crc32_and_partial_sum_with(FusedKernel kernel, std::span<const std::byte> bytes, std::uint32_t crc,
                                     std::uint64_t first_word) {
#if defined(__x86_64__)
  if (kernel == FusedKernel::vpclmul512 && bytes.size() >= 512 && fused_kernel_available(kernel))
    return crc32_sum_fold_avx512(crc, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), first_word);
#else
  (void)kernel;
#endif
  return {crc32(bytes, crc), partial_sum(bytes, first_word)};
}

CrcAndSum crc32_and_partial_sum(std::span<const std::byte> bytes, std::uint32_t crc, std::uint64_t first_word) {
#if defined(__x86_64__)
  // The dispatch of crc32 (its 512-bit kernel from 1 KiB) and partial_sum (active_kernel, SCOUT_HASH_KERNEL).
  static const bool fused =
      fused_kernel_available(FusedKernel::vpclmul512) && active_kernel() == HashKernel::avx512_vpclmul;
  if (fused && bytes.size() >= 1024)
    return crc32_sum_fold_avx512(crc, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), first_word);
#endif
  return {crc32(bytes, crc), partial_sum(bytes, first_word)};
}

std::uint32_t crc32_and_partial_sums(std::span<const std::byte> bytes, std::uint32_t crc,
                                     std::span<const SumRange> ranges, std::uint64_t* sums) {
  bool ordered = true;
  for (std::size_t i = 0, end = 0; i < ranges.size(); end = ranges[i].begin + ranges[i].size, ++i)
    ordered = ordered && ranges[i].begin >= end && ranges[i].begin <= bytes.size() &&
              ranges[i].size <= bytes.size() - ranges[i].begin;
  if (!ordered) {
    crc = crc32(bytes, crc);
    for (std::size_t i = 0; i < ranges.size(); ++i)
      sums[i] ^= partial_sum(bytes.subspan(ranges[i].begin, ranges[i].size), ranges[i].first_word);
    return crc;
  }
  std::size_t at = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const SumRange& r = ranges[i];
    if (r.begin > at) crc = crc32(bytes.subspan(at, r.begin - at), crc);
    const CrcAndSum both = crc32_and_partial_sum(bytes.subspan(r.begin, r.size), crc, r.first_word);
    crc = both.crc;
    sums[i] ^= both.sum;
    at = r.begin + r.size;
  }
  return at < bytes.size() ? crc32(bytes.subspan(at), crc) : crc;
}

}  // namespace scout::hash
