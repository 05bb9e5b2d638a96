// Internal to lib/hash: the C-style entry points cuda/tensor_hash.cu exports
// to lib/hash/gpu_hash.cpp. Plain types only: no exception and no C++ object
// crosses the CUDA boundary. Each returns 0 or a cudaError_t value and
// writes a message into `message` (of `message_size` bytes) on failure.
#pragma once

#include <cstddef>
#include <cstdint>

namespace scout::hash::cuda_detail {

// cudaRuntimeGetVersion of the runtime linked in (1000 * major + 10 * minor).
int runtime_version();

int device_count(int* count, char* message, std::size_t message_size);

int word_sum(const void* device_bytes, std::size_t size, std::uint64_t* sum, char* message, std::size_t message_size);

int host_bytes_word_sum(const void* host_bytes, std::size_t size, std::size_t device_offset, std::uint64_t* sum,
                        char* message, std::size_t message_size);

int measure_bandwidth(std::size_t bytes, int repeats, double* hash_gbps, double* copy_gbps, char* device_name,
                      std::size_t name_size, char* message, std::size_t message_size);

}  // namespace scout::hash::cuda_detail
