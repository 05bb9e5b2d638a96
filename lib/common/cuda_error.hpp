// What a CUDA runtime error means for the person running scout: the cause in
// words and what to do, for the errors a GPU path meets on a machine that is
// not ready (no device, no or too old a driver, out of memory, a kernel built
// for another GPU). Pure: the codes are cudaError_t values (pinned against
// driver_types.h by static_asserts in cuda/tensor_hash.cu; cuda_codes.hpp), so this compiles
// and is unit-tested without CUDA.
#pragma once

#include <string>

#include "lib/common/cuda_codes.hpp"
#include "lib/common/error.hpp"

namespace scout {

// The cause of `code` in words ("why") and what to do ("hint"), and the exit
// code it deserves: unavailable (5) for the machine's state (no device or
// driver, a driver older than the runtime, memory, a busy or faulty GPU),
// internal (70) for a fault of scout's own kernels (illegal address, a launch
// that fails on a healthy device).
struct CudaErrorAdvice {
  ExitCode code = ExitCode::unavailable;
  std::string why;
  std::string hint;
};
CudaErrorAdvice cuda_error_advice(int code);

// An Error for a failed CUDA call: what = `what`, why = the runtime's own
// `message` (e.g. "cudaMalloc: out of memory (cudaErrorMemoryAllocation)")
// then the advice's cause, hint = the advice's (or `fallback_hint` where the
// advice has none). `runtime_version` (1000 * major + 10 * minor, 0 if
// unknown) names the runtime in driver advice.
Error cuda_error(int code, const std::string& what, const std::string& message, const std::string& fallback_hint = {},
                 int runtime_version = 0);

}  // namespace scout
