// CRC-32 as zip (and zlib, PNG, Ethernet) define it: the reflected
// polynomial 0xEDB88320, initial value and final XOR 0xFFFFFFFF. Used to check
// the entries of torch.save zip archives while they are streamed for hashing.
//
// crc32 runs a carry-less-multiply folding kernel where the CPU has one
// (VPCLMULQDQ on 4 x 512 or 4 x 256 bits, or PCLMULQDQ on 4 x 128 bits, per
// step) and a table otherwise; all give the same value (tests compare them and
// check the standard vector "123456789" -> 0xCBF43926). crc32_combine joins
// the CRCs of two adjacent pieces, so pieces hashed by different threads give
// the CRC of the whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace scout::hash {

// CRC-32 of `bytes` continuing from `crc` (0 to start), as zlib's crc32().
std::uint32_t crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0);

// The table-driven reference (one byte per step): the same value as crc32.
std::uint32_t crc32_reference(std::span<const std::byte> bytes, std::uint32_t crc = 0);

// CRC-32 of A followed by B, from crc32(A), crc32(B) and B's length in bytes.
std::uint32_t crc32_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t length_b);

// The kernels crc32 chooses from (by the CPU and the length), each callable
// alone for tests and benchmarks: crc32_with falls back to the table where the
// CPU lacks the kernel or the input is shorter than one step.
enum class Crc32Kernel { table, clmul128, vpclmul256, vpclmul512 };
bool crc32_kernel_available(Crc32Kernel kernel);
std::uint32_t crc32_with(Crc32Kernel kernel, std::span<const std::byte> bytes, std::uint32_t crc = 0);

// Whether crc32 uses the carry-less-multiply kernel on this CPU.
bool crc32_accelerated();

// crc32(bytes, crc) and partial_sum(bytes, first_word) (lib/hash/tensor_hash.hpp)
// of the same bytes in one pass: where the CPU has VPCLMULQDQ on 512 bits and
// partial_sum's kernel is avx512_vpclmul, each 64-byte line is loaded once and
// feeds both foldings; otherwise (and for inputs under 1 KiB) the two separate
// calls. Bit for bit the same values as the separate calls (tests compare them).
// `bytes` may end mid-word only where partial_sum allows it (a tensor's end).
struct CrcAndSum {
  std::uint32_t crc;
  std::uint64_t sum;
};
CrcAndSum crc32_and_partial_sum(std::span<const std::byte> bytes, std::uint32_t crc, std::uint64_t first_word);

// The paths crc32_and_partial_sum chooses from, each callable alone for tests
// and benchmarks: `separate` is crc32 then partial_sum; crc32_and_partial_sum_with
// falls back to it where the CPU lacks the kernel or the input is short.
enum class FusedKernel { separate, vpclmul512 };
bool fused_kernel_available(FusedKernel kernel);
CrcAndSum crc32_and_partial_sum_with(FusedKernel kernel, std::span<const std::byte> bytes, std::uint32_t crc,
                                     std::uint64_t first_word);

// A range of a block whose bytes are summed: `size` bytes from byte `begin` of
// the block, the range's first byte at word `first_word` of its tensor.
struct SumRange {
  std::size_t begin;
  std::size_t size;
  std::uint64_t first_word;
};

// A block of a CRC-checked file holding the slices `ranges` of tensors: the
// CRC of every byte of `bytes`, continuing from `crc`, is returned; sums[i] is
// XORed with partial_sum of range i (bytes outside every range are CRCed, not
// summed). Ranges sorted by `begin` and disjoint take one pass
// (crc32_and_partial_sum over each range, crc32 over the gaps); others the
// separate calls. The same values either way.
std::uint32_t crc32_and_partial_sums(std::span<const std::byte> bytes, std::uint32_t crc,
                                     std::span<const SumRange> ranges, std::uint64_t* sums);

}  // namespace scout::hash
