// Arithmetic in GF(2^64) = GF(2)[x] / P(x), P(x) = x^64 + x^4 + x^3 + x + 1,
// the field of scout's tensor hash (schemas/tensor-hash.md). Portable and
// constexpr: this is the reference every accelerated path is tested against.
//
// An element is a 64-bit word whose bit i is the coefficient of x^i. Addition
// is XOR. P is primitive (x has multiplicative order 2^64 - 1; checked by
// tests/unit/hash/gf64_test.cpp from the factorization of 2^64 - 1), hence
// irreducible, so the product of two non-zero elements is never zero.
#pragma once

#include <array>
#include <cstdint>

namespace scout::hash::gf64 {

// The low terms of P: x^64 = x^4 + x^3 + x + 1 (mod P).
inline constexpr std::uint64_t k_poly_low = 0x1B;

// Carry-less product of `a` and `b` as a 128-bit polynomial: `lo` holds the
// coefficients of x^0..x^63, `hi` those of x^64..x^127.
struct Wide {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
};

// Carry-less (polynomial over GF(2)) product of `a` and `b`, bit by bit.
constexpr Wide clmul(std::uint64_t a, std::uint64_t b) {
  Wide r;
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t m = 0 - ((b >> i) & 1);
    r.lo ^= (a << i) & m;
    if (i > 0) r.hi ^= (a >> (64 - i)) & m;
  }
  return r;
}

// Reduces lo + hi * x^64 modulo P. Since x^64 = Q = x^4 + x^3 + x + 1,
// hi * x^64 = hi * Q, whose bits past x^63 (at most 4, `over`) are folded once
// more; over * Q has degree <= 7, so two steps always suffice.
constexpr std::uint64_t reduce(std::uint64_t lo, std::uint64_t hi) {
  const std::uint64_t over = (hi >> 63) ^ (hi >> 61) ^ (hi >> 60);
  return lo ^ hi ^ (hi << 1) ^ (hi << 3) ^ (hi << 4) ^ over ^ (over << 1) ^ (over << 3) ^ (over << 4);
}

// a * b in GF(2^64).
constexpr std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  const Wide w = clmul(a, b);
  return reduce(w.lo, w.hi);
}

// a * x^64 in GF(2^64): one Horner step of the hash (a 64-bit shift of the
// data polynomial), without any multiplication.
constexpr std::uint64_t mul_x64(std::uint64_t a) {
  return reduce(0, a);
}

// k_x64_pow2[i] = x^(64 * 2^i) mod P, i = 0..63: squares of x^64.
inline constexpr std::array<std::uint64_t, 64> k_x64_pow2 = [] {
  std::array<std::uint64_t, 64> t{};
  t[0] = k_poly_low;
  for (int i = 1; i < 64; ++i) t[i] = mul(t[i - 1], t[i - 1]);
  return t;
}();

// x^(64 k) mod P: the weight of word index `k`. Because x^(2^64 - 1) = 1 in
// GF(2^64), x^(-64 k) = x64_pow(2^64 - 1 - k) (used for backward constants).
constexpr std::uint64_t x64_pow(std::uint64_t k) {
  std::uint64_t r = 1;
  for (int i = 0; k != 0; ++i, k >>= 1)
    if (k & 1) r = mul(r, k_x64_pow2[static_cast<std::size_t>(i)]);
  return r;
}

// x^(-64 k) mod P.
constexpr std::uint64_t x64_pow_inverse(std::uint64_t k) {
  return x64_pow(~std::uint64_t{0} - k);
}

// a^e in GF(2^64) (square and multiply).
constexpr std::uint64_t pow(std::uint64_t a, std::uint64_t e) {
  std::uint64_t r = 1;
  while (e != 0) {
    if (e & 1) r = mul(r, a);
    a = mul(a, a);
    e >>= 1;
  }
  return r;
}

}  // namespace scout::hash::gf64
