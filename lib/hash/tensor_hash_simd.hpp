// Internal to lib/hash: the accelerated word-sum kernels (x86-64 carry-less
// multiply) behind partial_sum, selected at run time. Not a public interface.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/hash/tensor_hash.hpp"

namespace scout::hash::detail {

// sum over i of w_i * x^(64 i) for the `n` bytes at `p` (last word zero-padded),
// by Horner's rule: the portable reference loop.
std::uint64_t local_sum_scalar(const std::byte* p, std::size_t n);

// Whether this CPU (and OS) can run `kernel`.
bool cpu_supports(HashKernel kernel);

// partial_sum of the `n` bytes at `p` starting at word `first_word` with an
// accelerated `kernel` (not scalar; the caller checked cpu_supports).
std::uint64_t partial_sum_simd(HashKernel kernel, const std::byte* p, std::size_t n, std::uint64_t first_word);

}  // namespace scout::hash::detail
