// The CUDA error advice (lib/common/cuda_error): every error a GPU path meets
// on a machine that is not ready gets a cause in words, what to do, and exit
// code 5; faults of scout's own kernels exit 70. Pure: no GPU needed.
#include "lib/common/cuda_error.hpp"

#include <gtest/gtest.h>

namespace scout {
namespace {

TEST(CudaErrorAdvice, MachineStatesAreUnavailableWithACauseAndAHint) {
  for (int code :
       {cuda_code::memory_allocation, cuda_code::no_device, cuda_code::invalid_device, cuda_code::insufficient_driver,
        cuda_code::call_requires_newer_driver, cuda_code::stub_library, cuda_code::system_driver_mismatch,
        cuda_code::compat_not_supported_on_device, cuda_code::initialization_error, cuda_code::devices_unavailable,
        cuda_code::system_not_ready, cuda_code::no_kernel_image_for_device, cuda_code::unsupported_ptx_version,
        cuda_code::invalid_ptx, cuda_code::ecc_uncorrectable, cuda_code::unknown}) {
    const CudaErrorAdvice a = cuda_error_advice(code);
    EXPECT_EQ(a.code, ExitCode::unavailable) << code;
    EXPECT_FALSE(a.why.empty()) << code;
    EXPECT_FALSE(a.hint.empty()) << code;
  }
}

TEST(CudaErrorAdvice, EachCauseSaysWhatHappened) {
  EXPECT_NE(cuda_error_advice(cuda_code::memory_allocation).why.find("out of memory"), std::string::npos);
  EXPECT_NE(cuda_error_advice(cuda_code::no_device).why.find("no GPU"), std::string::npos);
  EXPECT_NE(cuda_error_advice(cuda_code::insufficient_driver).why.find("driver"), std::string::npos);
  EXPECT_NE(cuda_error_advice(cuda_code::system_driver_mismatch).why.find("differ in version"), std::string::npos);
  EXPECT_NE(cuda_error_advice(cuda_code::no_kernel_image_for_device).hint.find("CMAKE_CUDA_ARCHITECTURES"),
            std::string::npos);
}

TEST(CudaErrorAdvice, KernelFaultsAreInternal) {
  for (int code : {cuda_code::illegal_address, cuda_code::launch_failure, cuda_code::launch_out_of_resources})
    EXPECT_EQ(cuda_error_advice(code).code, ExitCode::internal) << code;
}

TEST(CudaErrorAdvice, UnknownCodesKeepTheCallersHint) {
  const Error e = cuda_error(12345, "the GPU tensor hash failed", "cudaFoo: odd (cudaErrorOdd)", "hash on the CPU");
  EXPECT_EQ(e.code, ExitCode::unavailable);
  EXPECT_EQ(e.message(), "the GPU tensor hash failed; cudaFoo: odd (cudaErrorOdd); hash on the CPU");
}

TEST(CudaErrorAdvice, ErrorJoinsTheRuntimesMessageAndTheAdvice) {
  const Error oom = cuda_error(cuda_code::memory_allocation, "the GPU tensor hash failed",
                               "cudaMalloc: out of memory (cudaErrorMemoryAllocation)", "hash on the CPU");
  EXPECT_EQ(oom.code, ExitCode::unavailable);
  EXPECT_EQ(oom.what, "the GPU tensor hash failed");
  EXPECT_EQ(oom.why, "cudaMalloc: out of memory (cudaErrorMemoryAllocation): the GPU is out of memory");
  EXPECT_NE(oom.hint.find("free GPU memory"), std::string::npos);
  const Error drv = cuda_error(cuda_code::insufficient_driver, "no usable CUDA device", "", "", 13000);
  EXPECT_NE(drv.why.find("CUDA error 35"), std::string::npos);
  EXPECT_NE(drv.why.find("older than CUDA runtime 13.0"), std::string::npos);
  EXPECT_NE(drv.hint.find(">= 580"), std::string::npos);
}

}  // namespace
}  // namespace scout
