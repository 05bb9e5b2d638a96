#include "lib/hash/tensor_hash.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace scout::hash {

namespace {

constexpr std::uint64_t k_key_mul = 0x9E3779B97F4A7C15ULL;
constexpr std::uint64_t k_round1 = 0x9E3779B1ULL;
constexpr std::uint64_t k_round2 = 0x85EBCA77ULL;
constexpr std::uint64_t k_round3 = 0xC2B2AE3DULL;

std::uint64_t fmix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ULL;
  x ^= x >> 33;
  return x;
}

// One Feistel round: the high half is xored with a function of the low half
// (so the round is its own kind of bijection), then halves swap roles.
inline std::uint64_t round_lo_to_hi(std::uint64_t x, std::uint64_t mul) {
  std::uint64_t p = (x & 0xFFFFFFFFULL) * mul;
  return x ^ ((p ^ (p >> 32)) << 32);
}
inline std::uint64_t round_hi_to_lo(std::uint64_t x, std::uint64_t mul) {
  std::uint64_t p = (x >> 32) * mul;
  return x ^ ((p ^ (p >> 32)) & 0xFFFFFFFFULL);
}

std::uint64_t load_word(const std::byte* p, std::size_t n) {
  std::uint64_t w = 0;
  std::memcpy(&w, p, n);  // little-endian hosts only (x86-64, aarch64)
  return w;
}

constexpr std::size_t k_parallel_threshold = 4u << 20;  // below 4 MiB one thread wins

}  // namespace

std::uint64_t word_term(std::uint64_t word, std::uint64_t k) {
  std::uint64_t x = word ^ ((k + 1) * k_key_mul);
  x = round_lo_to_hi(x, k_round1);
  x = round_hi_to_lo(x, k_round2);
  x = round_lo_to_hi(x, k_round3);
  return x;
}

std::uint64_t partial_sum(std::span<const std::byte> bytes, std::uint64_t first_word) {
  std::uint64_t sum = 0;
  const std::size_t full = bytes.size() / 8;
  const std::byte* p = bytes.data();
  for (std::size_t i = 0; i < full; ++i) sum += word_term(load_word(p + 8 * i, 8), first_word + i);
  if (std::size_t rest = bytes.size() % 8) sum += word_term(load_word(p + 8 * full, rest), first_word + full);
  return sum;
}

std::uint64_t finalize(std::uint64_t sum, DType dtype, std::span<const std::int64_t> shape, std::uint64_t byte_length) {
  std::uint64_t meta = fmix64(0x5C0u ^ (static_cast<std::uint64_t>(dtype) << 8) ^ (shape.size() << 16));
  for (std::int64_t d : shape) meta = fmix64(meta ^ static_cast<std::uint64_t>(d));
  meta = fmix64(meta ^ byte_length);
  return fmix64(sum + meta);
}

std::uint64_t hash_tensor(DType dtype, std::span<const std::int64_t> shape, std::span<const std::byte> bytes,
                          unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  std::uint64_t sum = 0;
  if (threads == 1 || bytes.size() < k_parallel_threshold) {
    sum = partial_sum(bytes, 0);
  } else {
    const std::size_t words = (bytes.size() + 7) / 8;
    const std::size_t per = (words + threads - 1) / threads;
    std::vector<std::uint64_t> parts(threads, 0);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      std::size_t w0 = std::min(words, t * per), w1 = std::min(words, w0 + per);
      if (w0 == w1) break;
      std::size_t b0 = w0 * 8, b1 = std::min(bytes.size(), w1 * 8);
      pool.emplace_back([&, t, b0, b1, w0] { parts[t] = partial_sum(bytes.subspan(b0, b1 - b0), w0); });
    }
    for (auto& th : pool) th.join();
    for (auto p : parts) sum += p;
  }
  return finalize(sum, dtype, shape, bytes.size());
}

TensorHasher::TensorHasher(DType dtype, std::span<const std::int64_t> shape) : m_dtype(dtype) {
  if (shape.size() > 16) throw std::invalid_argument("tensor rank above 16");
  m_rank = shape.size();
  std::copy(shape.begin(), shape.end(), m_shape);
}

void TensorHasher::update(std::span<const std::byte> bytes) {
  std::uint64_t word = m_bytes / 8;  // index of the word the tail belongs to
  if (m_tail_len > 0) {
    std::size_t take = std::min(bytes.size(), 8 - m_tail_len);
    std::memcpy(m_tail + m_tail_len, bytes.data(), take);
    m_tail_len += take;
    m_bytes += take;
    bytes = bytes.subspan(take);
    if (m_tail_len < 8) return;
    m_sum += word_term(load_word(m_tail, 8), word);
    m_tail_len = 0;
    word += 1;
  }
  std::size_t full = bytes.size() / 8 * 8;
  m_sum += partial_sum(bytes.first(full), word);
  m_bytes += full;
  m_tail_len = bytes.size() - full;
  std::memcpy(m_tail, bytes.data() + full, m_tail_len);
  m_bytes += m_tail_len;
}

std::uint64_t TensorHasher::finish() const {
  std::uint64_t sum = m_sum;
  if (m_tail_len > 0) sum += word_term(load_word(m_tail, m_tail_len), m_bytes / 8);
  return finalize(sum, m_dtype, std::span<const std::int64_t>(m_shape, m_rank), m_bytes);
}

}  // namespace scout::hash
