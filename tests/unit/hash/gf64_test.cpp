// The field facts the tensor hash's proofs rest on (lib/hash/tensor_hash.hpp):
// P = x^64 + x^4 + x^3 + x + 1 is primitive, so GF(2)[x]/P is a field and x^64
// has order 2^64 - 1.
#include "lib/hash/gf64.hpp"

#include <gtest/gtest.h>

#include <random>

#include "tests/unit/test_seed.hpp"

namespace scout::hash::gf64 {
namespace {

constexpr std::uint64_t k_x = 2;  // the element x

TEST(Gf64, FactorizationOfTheGroupOrderIsPrime) {
  // 2^64 - 1 = 3 * 5 * 17 * 257 * 641 * 65537 * 6700417, each factor prime.
  const std::uint64_t factors[] = {3, 5, 17, 257, 641, 65537, 6700417};
  unsigned __int128 product = 1;
  for (std::uint64_t q : factors) {
    product *= q;
    for (std::uint64_t d = 2; d * d <= q; ++d) EXPECT_NE(q % d, 0u) << q << " divisible by " << d;
  }
  EXPECT_EQ(product, static_cast<unsigned __int128>(~std::uint64_t{0}));
}

TEST(Gf64, PolynomialIsPrimitive) {
  // x^(2^64-1) = 1 and x^((2^64-1)/q) != 1 for every prime q: the order of x
  // is 2^64 - 1, which is only possible if P is irreducible (a field) and
  // primitive.
  const std::uint64_t n = ~std::uint64_t{0};
  EXPECT_EQ(pow(k_x, n), 1u);
  for (std::uint64_t q : {3ull, 5ull, 17ull, 257ull, 641ull, 65537ull, 6700417ull}) EXPECT_NE(pow(k_x, n / q), 1u) << q;
}

TEST(Gf64, PowersOfXMatchRepeatedShifts) {
  std::uint64_t w = 1;
  for (std::uint64_t k = 0; k < 300; ++k) {
    EXPECT_EQ(x64_pow(k), w) << k;
    EXPECT_EQ(pow(k_x, 64 * k), w) << k;
    EXPECT_EQ(mul(x64_pow_inverse(k), w), 1u) << k;
    w = mul_x64(w);
  }
  EXPECT_EQ(x64_pow(1), k_poly_low);
}

TEST(Gf64, FieldLaws) {
  const unsigned seed = test_support::test_seed32();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t a = rng(), b = rng(), c = rng();
    EXPECT_EQ(mul(a, b), mul(b, a));
    EXPECT_EQ(mul(a, b ^ c), mul(a, b) ^ mul(a, c));
    EXPECT_EQ(mul(mul(a, b), c), mul(a, mul(b, c)));
    if (a != 0 && b != 0) EXPECT_NE(mul(a, b), 0u);
    if (a != 0) EXPECT_EQ(mul(a, pow(a, ~std::uint64_t{0} - 1)), 1u);  // a^(2^64-2) is the inverse
  }
}

}  // namespace
}  // namespace scout::hash::gf64
