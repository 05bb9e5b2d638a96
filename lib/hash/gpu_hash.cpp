#include "lib/hash/gpu_hash.hpp"

#include <fmt/format.h>

#include "lib/common/cuda_error.hpp"
#include "lib/hash/gpu_hash_cuda.hpp"
#include "lib/hash/tensor_hash.hpp"
#include "scout/config.hpp"

namespace scout::hash {

#if SCOUT_WITH_CUDA

namespace {
// `code`: the cudaError_t a cuda_detail call returned (cause and advice: lib/common/cuda_error).
Error cuda_failure(int code, const char* what, const char* message) {
  return cuda_error(code, what, message, "hash on the CPU instead", cuda_detail::runtime_version());
}
}  // namespace

Result<int> gpu_device_count() {
  int count = 0;
  char message[256] = {};
  if (int rc = cuda_detail::device_count(&count, message, sizeof message); rc != 0)
    return cuda_failure(rc, "no usable CUDA device", message);
  if (count == 0) return cuda_failure(cuda_code::no_device, "no usable CUDA device", "the driver reports 0 devices");
  return count;
}

Result<std::uint64_t> gpu_word_sum(const void* device_bytes, std::size_t size) {
  std::uint64_t sum = 0;
  char message[256] = {};
  if (int rc = cuda_detail::word_sum(device_bytes, size, &sum, message, sizeof message); rc != 0)
    return cuda_failure(rc, "the GPU tensor hash failed", message);
  return sum;
}

Result<std::uint64_t> gpu_hash_tensor(DType dtype, std::span<const std::int64_t> shape, const void* device_bytes,
                                      std::size_t size) {
  auto sum = gpu_word_sum(device_bytes, size);
  if (!sum) return sum.error();
  return finalize(*sum, dtype, shape, size);
}

Result<std::uint64_t> gpu_hash_host_bytes(DType dtype, std::span<const std::int64_t> shape,
                                          std::span<const std::byte> bytes, std::size_t device_offset) {
  std::uint64_t sum = 0;
  char message[256] = {};
  if (int rc =
          cuda_detail::host_bytes_word_sum(bytes.data(), bytes.size(), device_offset, &sum, message, sizeof message);
      rc != 0)
    return cuda_failure(rc, "the GPU tensor hash failed", message);
  return finalize(sum, dtype, shape, bytes.size());
}

Result<GpuBandwidth> gpu_measure_bandwidth(std::size_t bytes, int repeats) {
  GpuBandwidth out;
  out.bytes = bytes;
  char name[256] = {};
  char message[256] = {};
  if (int rc = cuda_detail::measure_bandwidth(bytes, repeats, &out.hash_gbps, &out.copy_gbps, name, sizeof name,
                                              message, sizeof message);
      rc != 0)
    return cuda_failure(rc, "the GPU bandwidth measurement failed", message);
  out.device = name;
  return out;
}

#else  // !SCOUT_WITH_CUDA: CPU-only build

namespace {
Error no_cuda() {
  return unavailable_error("no GPU support in this build", "scout was built without CUDA (SCOUT_WITH_CUDA=0)",
                           "hash on the CPU, or rebuild with a CUDA toolkit");
}
}  // namespace

Result<int> gpu_device_count() {
  return no_cuda();
}
Result<std::uint64_t> gpu_word_sum(const void*, std::size_t) {
  return no_cuda();
}
Result<std::uint64_t> gpu_hash_tensor(DType, std::span<const std::int64_t>, const void*, std::size_t) {
  return no_cuda();
}
Result<std::uint64_t> gpu_hash_host_bytes(DType, std::span<const std::int64_t>, std::span<const std::byte>,
                                          std::size_t) {
  return no_cuda();
}
Result<GpuBandwidth> gpu_measure_bandwidth(std::size_t, int) {
  return no_cuda();
}

#endif

}  // namespace scout::hash
