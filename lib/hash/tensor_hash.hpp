// scout's tensor evidence hash (specification: schemas/tensor-hash.md).
//
// H = fmix64(S + meta) where S = sum over word index k of f_k(w_k) mod 2^64,
// w_k the k-th little-endian 8-byte word of the tensor's logical row-major
// bytes (the last word zero-padded), f_k(w) = feistel(w ^ key(k)) a bijection
// of 64-bit words for every k, and meta a digest of dtype, shape and byte
// length.
//
// Single-word guarantee: changing only w_k changes S by f_k(w') - f_k(w),
// which is non-zero mod 2^64 because f_k is a bijection; fmix64(. + meta) is a
// bijection too, so H changes. Partial sums add, so any split of the words
// across threads or GPU blocks yields the same S.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "lib/tensor/dtype.hpp"

namespace scout::hash {

inline constexpr int k_hash_spec_version = 1;

// f_k(w): the per-position bijection applied to word `w` at word index `k`.
std::uint64_t word_term(std::uint64_t word, std::uint64_t k);

// Sum of word_term over `bytes`, whose first byte is at byte offset
// `first_word * 8` of the tensor. `bytes.size()` may end mid-word only for
// the tensor's last word (it is zero-padded).
std::uint64_t partial_sum(std::span<const std::byte> bytes, std::uint64_t first_word);

// Combines the word sum with dtype, shape and total byte length into the hash.
std::uint64_t finalize(std::uint64_t sum, DType dtype, std::span<const std::int64_t> shape, std::uint64_t byte_length);

// Hash of a contiguous row-major tensor. `threads` = 0 picks automatically.
std::uint64_t hash_tensor(DType dtype, std::span<const std::int64_t> shape, std::span<const std::byte> bytes,
                          unsigned threads = 0);

// Incremental hashing for streams (files read in chunks). Feed the logical
// row-major bytes in order, in chunks of any size.
class TensorHasher {
 public:
  TensorHasher(DType dtype, std::span<const std::int64_t> shape);
  void update(std::span<const std::byte> bytes);
  // The hash of everything fed so far (does not reset).
  std::uint64_t finish() const;
  std::uint64_t bytes_seen() const { return m_bytes; }

 private:
  DType m_dtype;
  std::int64_t m_shape[16] = {};
  std::size_t m_rank = 0;
  std::uint64_t m_sum = 0;
  std::uint64_t m_bytes = 0;
  std::byte m_tail[8] = {};
  std::size_t m_tail_len = 0;
};

}  // namespace scout::hash
