// The cudaError_t values lib/common/cuda_error.hpp maps, without the CUDA
// headers (C++17: cuda/tensor_hash.cu includes it to pin each against
// driver_types.h with a static_assert).
#pragma once

namespace scout {

// cudaError_t values (CUDA 11-13).
namespace cuda_code {
inline constexpr int invalid_value = 1;
inline constexpr int memory_allocation = 2;
inline constexpr int initialization_error = 3;
inline constexpr int stub_library = 34;
inline constexpr int insufficient_driver = 35;
inline constexpr int call_requires_newer_driver = 36;
inline constexpr int devices_unavailable = 46;
inline constexpr int no_device = 100;
inline constexpr int invalid_device = 101;
inline constexpr int device_uninitialized = 201;
inline constexpr int no_kernel_image_for_device = 209;
inline constexpr int ecc_uncorrectable = 214;
inline constexpr int invalid_ptx = 218;
inline constexpr int unsupported_ptx_version = 222;
inline constexpr int illegal_address = 700;
inline constexpr int launch_out_of_resources = 701;
inline constexpr int launch_timeout = 702;
inline constexpr int launch_failure = 719;
inline constexpr int not_permitted = 800;
inline constexpr int not_supported = 801;
inline constexpr int system_not_ready = 802;
inline constexpr int system_driver_mismatch = 803;
inline constexpr int compat_not_supported_on_device = 804;
inline constexpr int unknown = 999;
}  // namespace cuda_code

}  // namespace scout
