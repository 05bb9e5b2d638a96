// scout's tensor evidence hash, construction v2 (specification, test vectors:
// schemas/tensor-hash.md, schemas/tensor-hash-vectors.json).
//
//   H = fmix64(S ^ M ^ k_hash_tag)
//   S = XOR over word index k of  w_k * x^(64 k)   in GF(2^64) = GF(2)[x]/P(x)
//   P = x^64 + x^4 + x^3 + x + 1 (primitive; lib/hash/gf64.hpp)
//
// w_k is the k-th little-endian 8-byte word of the tensor's logical row-major
// bytes, the last word zero-padded. S is the data polynomial reduced mod P (a
// CRC-64 without pre/post conditioning). M = header_code(dtype, shape, byte
// length). fmix64 is MurmurHash3's 64-bit finalizer, a bijection.
//
// Proofs of the requirements (tested in tests/unit/hash/):
// 1. Any change of one word changes H. Changing only w_k to w_k ^ d (d != 0)
//    changes S by d * x^(64k). GF(2^64) is a field and neither factor is zero,
//    so the product is non-zero: S changes; M does not; fmix64 is a bijection
//    and XOR with a fixed value is too, so H changes. No probability involved.
// 2. Swapping two different words changes H. Swapping a != b at positions
//    i < j changes S by (a ^ b) * x^(64i) * (1 + x^(64(j-i))). The last factor
//    is zero only if x^(64(j-i)) = 1, i.e. only if 2^64 - 1 divides 64(j-i),
//    i.e. (64 being prime to 2^64 - 1) if 2^64 - 1 divides j - i; but
//    0 < j - i < 2^61 for any tensor that fits in memory. So the product is
//    non-zero and H changes.
//    (Why not the sum mod 2^64 of v1: with addition mod 2^64 no family of
//    per-position bijections can detect every swap. For positions i != j let
//    g(w) = f_i(w) - f_j(w); a swap of a, b goes unseen iff g(a) = g(b). If g
//    were injective it would be a permutation of Z/2^64, so the sum of g over
//    all w would be 2^63 (mod 2^64); but it is sum f_i - sum f_j = 0. XOR over
//    GF(2)^64, whose group has no such obstruction, is what makes 2 provable.)
// 3. Header. For equal data, S is equal and H differs iff M differs. M is an
//    injective code of (dtype, shape, byte length) over every header that fits
//    the compact encoding (see header_code: ranks <= 15 whose dims need at
//    most 54 bits together, e.g. any [a, b] with a, b < 2^23, any rank-3
//    shape with dims < 2^14, any rank-4 shape with dims < 2^9, with the byte
//    length that dtype and shape imply); there a reshape or a dtype
//    reinterpretation always
//    changes H. Headers outside it get a 63-bit digest with bit 63 set, so
//    they never equal a compact code, and two of them collide with probability
//    2^-63. No 64-bit hash can do better for all shapes: e.g. there are more
//    than 2^64 rank-16 shapes with 2^30 * 3^19 elements.
// 4. Associativity. S is an XOR (addition in GF(2^64)) of per-word terms, so
//    any split into ranges, summed in any order, gives the same S: a range of
//    words starting at word s contributes x^(64 s) * (its own local S).
// 5. Length. Trailing zero bytes of the last word are padding; the byte length
//    is part of M (explicitly, or through the shape in the compact code), so
//    [1,2,3] and [1,2,3,0] differ. An empty tensor has S = 0 and H = fmix64(M
//    ^ k_hash_tag).
// Not cryptographic: S is GF(2)-linear, so a deliberate forger can match it.
// It guards against faults (bit flips, stale or torn copies), not adversaries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "lib/tensor/dtype.hpp"

namespace scout::hash {

inline constexpr int k_hash_spec_version = 2;
// Xored into the finalizer's input so that v2 hashes never equal v1's by design.
inline constexpr std::uint64_t k_hash_tag = 0x73636F7574683032ULL;  // "scouth02"

// The term of word `word` at word index `k`: word * x^(64 k) in GF(2^64).
// A bijection of 64-bit words for every k.
std::uint64_t word_term(std::uint64_t word, std::uint64_t k);

// Combines two partial sums (of disjoint word ranges): XOR.
constexpr std::uint64_t combine(std::uint64_t a, std::uint64_t b) {
  return a ^ b;
}

// XOR of word_term over `bytes`, whose first byte is at byte offset
// `first_word * 8` of the tensor. `bytes.size()` may end mid-word only for the
// tensor's last word (it is zero-padded). Single-threaded, fastest kernel.
std::uint64_t partial_sum(std::span<const std::byte> bytes, std::uint64_t first_word);

// The header code M of `dtype`, `shape` and `byte_length` (see proof 3).
std::uint64_t header_code(DType dtype, std::span<const std::int64_t> shape, std::uint64_t byte_length);

// Combines the word sum `sum` with dtype, shape and total byte length into the hash.
std::uint64_t finalize(std::uint64_t sum, DType dtype, std::span<const std::int64_t> shape, std::uint64_t byte_length);

// Hash of a contiguous row-major tensor given its `dtype`, `shape` and
// `bytes` (zero-copy). `threads` = 0 picks the hardware concurrency; inputs
// below k_parallel_threshold use one thread. Same value for any `threads`.
std::uint64_t hash_tensor(DType dtype, std::span<const std::int64_t> shape, std::span<const std::byte> bytes,
                          unsigned threads = 0);

// Inputs smaller than this are hashed by one thread.
inline constexpr std::size_t k_parallel_threshold = std::size_t{2} << 20;

// A word sum like partial_sum that may fail (nullopt), e.g. a read of a file
// mapping that faults (guarded_partial_sum in file_hash.hpp).
using PartialSumFn = std::optional<std::uint64_t> (*)(std::span<const std::byte> bytes, std::uint64_t first_word);
// hash_tensor with each thread's word range summed by `part`; nullopt when any range's is.
std::optional<std::uint64_t> hash_tensor_with(DType dtype, std::span<const std::int64_t> shape,
                                              std::span<const std::byte> bytes, unsigned threads, PartialSumFn part);

// Hash of a possibly non-contiguous tensor: element (i0, i1, ...) lives at
// `base + (i0*strides[0] + i1*strides[1] + ...) * dtype_size(dtype)`
// (`strides` in elements, any sign, as LibTorch and NumPy/itemsize give them).
// Hashes the logical row-major order, so a transposed view hashes like its
// contiguous copy. Row-major strides take the zero-copy path of hash_tensor
// with `threads`; others are gathered in chunks.
std::uint64_t hash_strided(DType dtype, std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                           const std::byte* base, unsigned threads = 0);

// Reads `size` bytes at byte `offset` of a storage into `dst`; false when it cannot (a short or failed read).
using StorageReader = std::function<bool(std::byte* dst, std::size_t size, std::uint64_t offset)>;

// hash_strided of a view whose storage is not in memory: element (i0, i1, ...)
// is at element `storage_offset + i0*strides[0] + ...` of a storage of
// `storage_bytes` bytes that `read` gives. Memory is bounded by two buffers
// of `window_bytes` (a multiple of 64), whatever the storage's size: a view
// whose span fits one window is read once; a larger one is gathered in output
// chunks of `window_bytes`, each from the windows of the storage it touches
// (a transposed matrix larger than a window is then read several times).
// Same value as hash_strided over the storage in memory. nullopt when `read`
// fails; std::invalid_argument when the view reaches outside the storage.
inline constexpr std::size_t k_strided_window_bytes = std::size_t{16} << 20;
std::optional<std::uint64_t> hash_strided_windowed(DType dtype, std::span<const std::int64_t> shape,
                                                   std::span<const std::int64_t> strides, std::int64_t storage_offset,
                                                   std::uint64_t storage_bytes, const StorageReader& read,
                                                   unsigned threads = 0,
                                                   std::size_t window_bytes = k_strided_window_bytes);

// The implementations of the word-sum loop. All give bit-identical results;
// `scalar` is the portable reference.
enum class HashKernel { scalar, pclmul, avx2_vpclmul, avx512_vpclmul };

// Name of a kernel, e.g. "avx2_vpclmul".
std::string_view kernel_name(HashKernel kernel);
// Kernels this CPU can run (always includes scalar), slowest first.
std::vector<HashKernel> available_kernels();
// The kernel partial_sum uses (the fastest available; SCOUT_HASH_KERNEL=<name>
// in the environment forces one, for benchmarks and debugging).
HashKernel active_kernel();
// partial_sum with a chosen `kernel` (must be in available_kernels()).
std::uint64_t partial_sum_with(HashKernel kernel, std::span<const std::byte> bytes, std::uint64_t first_word);

// Incremental hashing for streams (files read in chunks). Feed the logical
// row-major bytes in order, in chunks of any size.
class TensorHasher {
 public:
  // Hashes a tensor of `dtype` and `shape` (any rank).
  TensorHasher(DType dtype, std::span<const std::int64_t> shape);
  // Feeds the next `bytes` of the tensor (chunks of k_parallel_threshold or
  // more are hashed by all cores).
  void update(std::span<const std::byte> bytes);
  // The hash of everything fed so far (does not reset).
  std::uint64_t finish() const;
  // Number of bytes fed so far.
  std::uint64_t bytes_seen() const { return m_bytes; }

 private:
  DType m_dtype;
  std::vector<std::int64_t> m_shape;
  std::uint64_t m_sum = 0;
  std::uint64_t m_bytes = 0;
  std::byte m_tail[8] = {};
  std::size_t m_tail_len = 0;
};

}  // namespace scout::hash
