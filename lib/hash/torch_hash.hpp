// The tensor hash of a LibTorch tensor, exported by the LibTorch module
// (lib/torch_module/tensor_hash_torch.cpp) for the checkpoint reader and
// anything else holding an at::Tensor. Reach it with
// torch_module_symbol(k_torch_hash_symbol) and cast to TorchHashFn, or call
// scout_torch_hash_tensor directly from code inside the module.
#pragma once

#include <cstddef>
#include <cstdint>

namespace scout::hash {

inline constexpr const char* k_torch_hash_symbol = "scout_torch_hash_tensor";
inline constexpr const char* k_torch_hash_selftest_symbol = "scout_torch_hash_selftest";

// Hashes the tensor `tensor` (a const at::Tensor*) as hash_tensor does:
// contiguous CPU tensors zero-copy, other CPU tensors through the strided path
// (same value as their contiguous copy), CUDA tensors with the GPU kernel
// (made contiguous on the device first). `threads` as in hash_tensor (0 =
// all). Returns 0 and sets *hash, or returns 1 and writes a reason into
// `message` (`message_size` bytes). Never throws.
using TorchHashFn = int (*)(const void* tensor, unsigned threads, std::uint64_t* hash, char* message,
                            std::size_t message_size);

// Self-test run inside the module with real LibTorch tensors: transposed,
// sliced and expanded views must hash like their .contiguous() copies, for
// every dtype scout maps. Returns the number of failures (0 = pass), and a
// description of the first one in `message`.
using TorchHashSelftestFn = int (*)(char* message, std::size_t message_size);

}  // namespace scout::hash

extern "C" {
// See scout::hash::TorchHashFn.
int scout_torch_hash_tensor(const void* tensor, unsigned threads, std::uint64_t* hash, char* message,
                            std::size_t message_size);
// See scout::hash::TorchHashSelftestFn.
int scout_torch_hash_selftest(char* message, std::size_t message_size);
}
