// The tensor hash on a CUDA device (cuda/tensor_hash.cu): bit-identical to
// the CPU's (lib/hash/tensor_hash.hpp). In a build without CUDA
// (SCOUT_WITH_CUDA 0), or where no device is found, every call returns an
// `unavailable` error with the reason; callers fall back to the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "lib/common/error.hpp"
#include "lib/tensor/dtype.hpp"

namespace scout::hash {

// Number of usable CUDA devices, or an unavailable error saying why none is
// (no CUDA in this build, no driver, no device).
Result<int> gpu_device_count();

// The word sum S (equal to partial_sum(bytes, 0)) of the `size` bytes at
// device address `device_bytes` (any alignment), on the current device.
// Synchronous.
Result<std::uint64_t> gpu_word_sum(const void* device_bytes, std::size_t size);

// Hash of a contiguous row-major tensor of `dtype` and `shape` whose `size`
// bytes are at device address `device_bytes`.
Result<std::uint64_t> gpu_hash_tensor(DType dtype, std::span<const std::int64_t> shape, const void* device_bytes,
                                      std::size_t size);

// Copies host `bytes` to a fresh device buffer at byte offset
// `device_offset` (to test unaligned starts) and returns gpu_hash_tensor of
// it with `dtype` and `shape`. For tests and tools that hold host data.
Result<std::uint64_t> gpu_hash_host_bytes(DType dtype, std::span<const std::int64_t> shape,
                                          std::span<const std::byte> bytes, std::size_t device_offset = 0);

// Throughput of the hash kernel and of a device-to-device cudaMemcpy of the
// same bytes, on the current device.
struct GpuBandwidth {
  std::string device;     // device name
  std::size_t bytes = 0;  // buffer size
  double hash_gbps = 0;   // bytes hashed per second / 1e9 (kernels only)
  double copy_gbps = 0;   // bytes copied per second / 1e9 (each byte is read and written)
};

// Measures GpuBandwidth on a `bytes`-sized buffer, best of `repeats` runs.
Result<GpuBandwidth> gpu_measure_bandwidth(std::size_t bytes, int repeats);

}  // namespace scout::hash
