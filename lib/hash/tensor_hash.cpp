#include "lib/hash/tensor_hash.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lib/hash/gf64.hpp"
#include "lib/hash/tensor_hash_simd.hpp"

namespace scout::hash {

namespace {

std::uint64_t fmix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ULL;
  x ^= x >> 33;
  return x;
}

std::uint64_t load_word(const std::byte* p, std::size_t n) {
  std::uint64_t w = 0;
  std::memcpy(&w, p, n);  // little-endian hosts only (x86-64, aarch64): the spec's byte order
  return w;
}

}  // namespace

namespace detail {

std::uint64_t local_sum_scalar(const std::byte* p, std::size_t n) {
  // Horner from the last word down: acc = acc * x^64 + w_i gives
  // sum_i w_i x^(64 i) with one shift-and-reduce per word.
  const std::size_t full = n / 8;
  std::uint64_t acc = (n % 8) ? load_word(p + 8 * full, n % 8) : 0;
  for (std::size_t i = full; i-- > 0;) acc = gf64::mul_x64(acc) ^ load_word(p + 8 * i, 8);
  return acc;
}

}  // namespace detail

std::uint64_t word_term(std::uint64_t word, std::uint64_t k) {
  return gf64::mul(word, gf64::x64_pow(k));
}

std::string_view kernel_name(HashKernel kernel) {
  switch (kernel) {
    case HashKernel::scalar:
      return "scalar";
    case HashKernel::pclmul:
      return "pclmul";
    case HashKernel::avx2_vpclmul:
      return "avx2_vpclmul";
    case HashKernel::avx512_vpclmul:
      return "avx512_vpclmul";
  }
  return "unknown";
}

std::vector<HashKernel> available_kernels() {
  std::vector<HashKernel> out{HashKernel::scalar};
  for (HashKernel k : {HashKernel::pclmul, HashKernel::avx2_vpclmul, HashKernel::avx512_vpclmul})
    if (detail::cpu_supports(k)) out.push_back(k);
  return out;
}

HashKernel active_kernel() {
  static const HashKernel chosen = [] {
    std::vector<HashKernel> ks = available_kernels();
    if (const char* forced = std::getenv("SCOUT_HASH_KERNEL")) {
      for (HashKernel k : ks)
        if (kernel_name(k) == forced) return k;
    }
    return ks.back();
  }();
  return chosen;
}

std::uint64_t partial_sum_with(HashKernel kernel, std::span<const std::byte> bytes, std::uint64_t first_word) {
  if (kernel == HashKernel::scalar || !detail::cpu_supports(kernel))
    return gf64::mul(detail::local_sum_scalar(bytes.data(), bytes.size()), gf64::x64_pow(first_word));
  return detail::partial_sum_simd(kernel, bytes.data(), bytes.size(), first_word);
}

std::uint64_t partial_sum(std::span<const std::byte> bytes, std::uint64_t first_word) {
  return partial_sum_with(active_kernel(), bytes, first_word);
}

std::uint64_t header_code(DType dtype, std::span<const std::int64_t> shape, std::uint64_t byte_length) {
  // Compact code, bit 63 clear (proof 3 in the header): dtype code (5 bits),
  // rank (4 bits), then per dim d: len = bit_width(d) in 5 bits and the
  // len - 1 bits of d below its leading one. It is prefix-free given the rank,
  // so it decodes uniquely: injective. Used only when it fits in 63 bits and
  // byte_length is the one dtype and shape imply (then it is determined).
  const auto code = static_cast<std::uint64_t>(dtype);
  bool compact = code < 32 && shape.size() <= 15 && dtype_size(dtype) != 0;
  std::uint64_t bits = code | (static_cast<std::uint64_t>(shape.size()) << 5);
  int pos = 9;
  std::uint64_t numel = 1;
  for (std::int64_t d : shape) {
    if (!compact) break;
    if (d < 0 || d >= (std::int64_t{1} << 31)) {
      compact = false;
      break;
    }
    const auto u = static_cast<std::uint64_t>(d);
    const int len = std::bit_width(u);
    const int cost = 5 + std::max(len - 1, 0);
    if (pos + cost > 63) {
      compact = false;
      break;
    }
    bits |= static_cast<std::uint64_t>(len) << pos;
    pos += 5;
    if (len > 1) {
      bits |= (u & ((std::uint64_t{1} << (len - 1)) - 1)) << pos;
      pos += len - 1;
    }
    if (__builtin_mul_overflow(numel, u, &numel)) compact = false;
  }
  std::uint64_t implied = 0;
  if (compact && !__builtin_mul_overflow(numel, std::uint64_t{dtype_size(dtype)}, &implied) && implied == byte_length)
    return bits;

  std::uint64_t h = fmix64(0xD16E57ULL ^ code);
  h = fmix64(h ^ shape.size());
  for (std::int64_t d : shape) h = fmix64(h ^ static_cast<std::uint64_t>(d));
  h = fmix64(h ^ byte_length);
  return h | (std::uint64_t{1} << 63);
}

std::uint64_t finalize(std::uint64_t sum, DType dtype, std::span<const std::int64_t> shape, std::uint64_t byte_length) {
  return fmix64(sum ^ header_code(dtype, shape, byte_length) ^ k_hash_tag);
}

namespace {

// `part` of `bytes` (starting at word `first_word`) split into contiguous
// word ranges over `threads` threads. Ranges combine by XOR in any order
// (proof 4), so the value does not depend on `threads`. nullopt when any
// range's `part` is nullopt.
std::optional<std::uint64_t> parallel_sum_with(std::span<const std::byte> bytes, std::uint64_t first_word,
                                               unsigned threads, PartialSumFn part) {
  // hardware_concurrency() reads /sys on every call: ask once.
  static const unsigned k_cores = std::max(1u, std::thread::hardware_concurrency());
  if (threads == 0) threads = k_cores;
  const std::size_t words = (bytes.size() + 7) / 8;
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, std::max<std::size_t>(1, words)));
  if (threads == 1 || bytes.size() < k_parallel_threshold) return part(bytes, first_word);
  const std::size_t per = (words + threads - 1) / threads;
  std::vector<std::optional<std::uint64_t>> parts(threads, std::uint64_t{0});
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned t = 1; t < threads; ++t) {
    const std::size_t w0 = std::min(words, t * per), w1 = std::min(words, w0 + per);
    if (w0 == w1) break;
    const std::size_t b0 = w0 * 8, b1 = std::min(bytes.size(), w1 * 8);
    pool.emplace_back([&parts, bytes, t, b0, b1, w0, first_word, part] {
      parts[t] = part(bytes.subspan(b0, b1 - b0), first_word + w0);
    });
  }
  parts[0] = part(bytes.first(std::min(bytes.size(), per * 8)), first_word);
  for (auto& th : pool) th.join();
  std::uint64_t sum = 0;
  for (const auto& p : parts) {
    if (!p) return std::nullopt;
    sum = combine(sum, *p);
  }
  return sum;
}

std::uint64_t parallel_partial_sum(std::span<const std::byte> bytes, std::uint64_t first_word, unsigned threads) {
  return *parallel_sum_with(
      bytes, first_word, threads,
      [](std::span<const std::byte> b, std::uint64_t w) -> std::optional<std::uint64_t> { return partial_sum(b, w); });
}

}  // namespace

std::uint64_t hash_tensor(DType dtype, std::span<const std::int64_t> shape, std::span<const std::byte> bytes,
                          unsigned threads) {
  return finalize(parallel_partial_sum(bytes, 0, threads), dtype, shape, bytes.size());
}

std::optional<std::uint64_t> hash_tensor_with(DType dtype, std::span<const std::int64_t> shape,
                                              std::span<const std::byte> bytes, unsigned threads, PartialSumFn part) {
  auto sum = parallel_sum_with(bytes, 0, threads, part);
  if (!sum) return std::nullopt;
  return finalize(*sum, dtype, shape, bytes.size());
}

std::uint64_t hash_strided(DType dtype, std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                           const std::byte* base, unsigned threads) {
  if (shape.size() != strides.size()) throw std::invalid_argument("shape and strides differ in rank");
  const std::size_t esize = dtype_size(dtype);
  if (esize == 0) throw std::invalid_argument("unknown dtype");
  std::size_t numel = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative dimension");
    numel *= static_cast<std::size_t>(d);
  }
  // Row-major strides (dims of size 1 may have any stride): zero-copy.
  bool contiguous = true;
  std::int64_t expect = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) contiguous = false;
    expect *= shape[i];
  }
  if (contiguous || numel == 0)
    return hash_tensor(dtype, shape, std::span(base, contiguous ? numel * esize : 0), threads);

  // Gather the logical order into a buffer whose size is a multiple of 8, so
  // every flush starts on a word boundary (word index = bytes hashed / 8).
  constexpr std::size_t k_buffer = std::size_t{1} << 18;
  std::vector<std::byte> buffer(k_buffer);
  std::size_t fill = 0;
  std::uint64_t sum = 0, flushed = 0;
  auto flush = [&] {
    sum = combine(sum, parallel_partial_sum(std::span(buffer.data(), fill), flushed / 8, threads));
    flushed += fill;
    fill = 0;
  };
  const std::size_t rank = shape.size();
  const std::size_t inner = rank == 0 ? 1 : static_cast<std::size_t>(shape[rank - 1]);
  const std::int64_t inner_stride = rank == 0 ? 1 : strides[rank - 1];
  std::vector<std::int64_t> index(rank, 0);
  const std::size_t rows = numel / inner;
  for (std::size_t row = 0; row < rows; ++row) {
    std::int64_t offset = 0;
    for (std::size_t i = 0; i + 1 < rank; ++i) offset += index[i] * strides[i];
    const std::byte* src = base + offset * static_cast<std::int64_t>(esize);
    if (inner_stride == 1) {
      std::size_t left = inner * esize;
      while (left > 0) {
        const std::size_t take = std::min(left, k_buffer - fill);
        std::memcpy(buffer.data() + fill, src, take);
        fill += take;
        src += take;
        left -= take;
        if (fill == k_buffer) flush();
      }
    } else {
      for (std::size_t j = 0; j < inner; ++j) {
        std::memcpy(buffer.data() + fill,
                    src + static_cast<std::int64_t>(j) * inner_stride * static_cast<std::int64_t>(esize), esize);
        fill += esize;
        if (fill == k_buffer) flush();  // k_buffer is a multiple of every element size
      }
    }
    for (std::size_t i = rank >= 1 ? rank - 1 : 0; i-- > 0;) {  // odometer over all dims but the last
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
  if (fill > 0) flush();
  return finalize(sum, dtype, shape, flushed);
}

namespace {

std::int64_t floor_div(std::int64_t a, std::int64_t b) {  // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// The j in [j0, j1) whose element offset `row + j * s` lies in [lo, hi).
std::pair<std::int64_t, std::int64_t> inside_window(std::int64_t row, std::int64_t s, std::int64_t j0, std::int64_t j1,
                                                    std::int64_t lo, std::int64_t hi) {
  std::int64_t a = j0, b = j1;
  if (s == 0) {
    if (row < lo || row >= hi) b = a;
  } else if (s > 0) {
    a = std::max(a, floor_div(lo - row + s - 1, s));
    b = std::min(b, floor_div(hi - 1 - row, s) + 1);
  } else {
    a = std::max(a, floor_div(row - (hi - 1) + (-s) - 1, -s));
    b = std::min(b, floor_div(row - lo, -s) + 1);
  }
  return {a, std::max(a, b)};
}

}  // namespace

std::optional<std::uint64_t> hash_strided_windowed(DType dtype, std::span<const std::int64_t> shape,
                                                   std::span<const std::int64_t> strides, std::int64_t storage_offset,
                                                   std::uint64_t storage_bytes, const StorageReader& read,
                                                   unsigned threads, std::size_t window_bytes) {
  if (shape.size() != strides.size()) throw std::invalid_argument("shape and strides differ in rank");
  const std::size_t esize = dtype_size(dtype);
  if (esize == 0) throw std::invalid_argument("unknown dtype");
  if (window_bytes < 64 || window_bytes % 64 != 0) throw std::invalid_argument("window is not a multiple of 64");
  std::size_t numel = 1;
  std::int64_t lo = storage_offset, hi = storage_offset;  // element offsets the view reaches, [lo, hi]
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) throw std::invalid_argument("negative dimension");
    numel *= static_cast<std::size_t>(shape[i]);
    if (shape[i] > 0) (strides[i] >= 0 ? hi : lo) += (shape[i] - 1) * strides[i];
  }
  if (numel == 0) return hash_strided(dtype, shape, strides, nullptr, threads);
  const std::int64_t storage_elems = static_cast<std::int64_t>(storage_bytes / esize);
  if (lo < 0 || hi >= storage_elems) throw std::invalid_argument("the view reaches outside its storage");
  const std::size_t span_bytes = static_cast<std::size_t>(hi - lo + 1) * esize;

  // A view whose span fits a window: read it once, gather in memory.
  std::vector<std::byte> window(std::min(span_bytes, window_bytes));
  if (span_bytes <= window_bytes) {
    if (!read(window.data(), span_bytes, static_cast<std::uint64_t>(lo) * esize)) return std::nullopt;
    return hash_strided(dtype, shape, strides, window.data() + (storage_offset - lo) * static_cast<std::int64_t>(esize),
                        threads);
  }

  // Larger: the logical order in output chunks of window_bytes (a multiple of 8 and of every element size, so
  // each chunk starts on a word boundary), each gathered from the storage windows its elements touch.
  const std::size_t rank = shape.size();
  const std::int64_t inner = static_cast<std::int64_t>(shape[rank - 1]);
  const std::int64_t s = strides[rank - 1];
  const std::size_t chunk_elems = window_bytes / esize, window_elems = window_bytes / esize;
  std::vector<std::byte> out(window_bytes);
  // Calls f(row_offset, j0, j1, out_index) for each row piece of logical elements [e0, e1).
  auto for_each_row = [&](std::size_t e0, std::size_t e1, auto&& f) {
    std::size_t row = e0 / static_cast<std::size_t>(inner);
    std::vector<std::int64_t> index(rank, 0);
    for (std::size_t i = rank - 1, r = row; i-- > 0;) {
      index[i] = static_cast<std::int64_t>(r % static_cast<std::size_t>(shape[i]));
      r /= static_cast<std::size_t>(shape[i]);
    }
    for (std::size_t e = e0; e < e1; ++row) {
      std::int64_t offset = storage_offset;
      for (std::size_t i = 0; i + 1 < rank; ++i) offset += index[i] * strides[i];
      const std::int64_t j0 = static_cast<std::int64_t>(e - row * static_cast<std::size_t>(inner));
      const std::int64_t j1 = std::min<std::int64_t>(inner, j0 + static_cast<std::int64_t>(e1 - e));
      f(offset, j0, j1, e - e0);
      e += static_cast<std::size_t>(j1 - j0);
      for (std::size_t i = rank - 1; i-- > 0;) {
        if (++index[i] < shape[i]) break;
        index[i] = 0;
      }
    }
  };
  std::uint64_t sum = 0, hashed = 0;
  for (std::size_t e0 = 0; e0 < numel; e0 += chunk_elems) {
    const std::size_t e1 = std::min(numel, e0 + chunk_elems);
    std::int64_t clo = hi, chi = lo;  // the chunk's own span
    for_each_row(e0, e1, [&](std::int64_t row, std::int64_t j0, std::int64_t j1, std::size_t) {
      const std::int64_t a = row + j0 * s, b = row + (j1 - 1) * s;
      clo = std::min({clo, a, b});
      chi = std::max({chi, a, b});
    });
    for (std::int64_t w = clo; w <= chi; w += static_cast<std::int64_t>(window_elems)) {
      const std::int64_t we = std::min(chi + 1, w + static_cast<std::int64_t>(window_elems));
      if (!read(window.data(), static_cast<std::size_t>(we - w) * esize, static_cast<std::uint64_t>(w) * esize))
        return std::nullopt;
      for_each_row(e0, e1, [&](std::int64_t row, std::int64_t j0, std::int64_t j1, std::size_t at) {
        const auto [a, b] = inside_window(row, s, j0, j1, w, we);
        if (a >= b) return;
        std::byte* dst = out.data() + (at + static_cast<std::size_t>(a - j0)) * esize;
        const auto src = [&](std::int64_t j) { return window.data() + (row + j * s - w) * std::int64_t(esize); };
        if (s == 1) {
          std::memcpy(dst, src(a), static_cast<std::size_t>(b - a) * esize);
          return;
        }
        for (std::int64_t j = a; j < b; ++j, dst += esize) std::memcpy(dst, src(j), esize);
      });
    }
    const std::size_t bytes = (e1 - e0) * esize;
    sum = combine(sum, parallel_partial_sum(std::span(out.data(), bytes), hashed / 8, threads));
    hashed += bytes;
  }
  return finalize(sum, dtype, shape, hashed);
}

TensorHasher::TensorHasher(DType dtype, std::span<const std::int64_t> shape)
    : m_dtype(dtype), m_shape(shape.begin(), shape.end()) {}

void TensorHasher::update(std::span<const std::byte> bytes) {
  if (bytes.empty()) return;         // an empty tensor's chunk may have no data pointer (memcpy needs one)
  std::uint64_t word = m_bytes / 8;  // index of the word the tail belongs to
  if (m_tail_len > 0) {
    const std::size_t take = std::min(bytes.size(), 8 - m_tail_len);
    std::memcpy(m_tail + m_tail_len, bytes.data(), take);
    m_tail_len += take;
    m_bytes += take;
    bytes = bytes.subspan(take);
    if (m_tail_len < 8) return;
    m_sum = combine(m_sum, partial_sum(std::span<const std::byte>(m_tail, 8), word));
    m_tail_len = 0;
    word += 1;
  }
  const std::size_t full = bytes.size() / 8 * 8;
  if (full > 0) m_sum = combine(m_sum, parallel_partial_sum(bytes.first(full), word, 0));
  m_bytes += full;
  m_tail_len = bytes.size() - full;
  std::memcpy(m_tail, bytes.data() + full, m_tail_len);
  m_bytes += m_tail_len;
}

std::uint64_t TensorHasher::finish() const {
  std::uint64_t sum = m_sum;
  if (m_tail_len > 0) sum = combine(sum, partial_sum(std::span<const std::byte>(m_tail, m_tail_len), m_bytes / 8));
  return finalize(sum, m_dtype, m_shape, m_bytes);
}

}  // namespace scout::hash
