// The GPU side of the catalog: what device and versions this machine has, and
// the instrumented persistent grouped GEMM whose recorded work-item roles
// validate the model (lib/catalog/model.hpp). Builds without CUDA report
// "no GPU in this build" instead of failing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lib/catalog/model.hpp"
#include "lib/common/error.hpp"

namespace scout::catalog {

// Device 0 and the CUDA stack as the runtime reports them.
struct GpuInfo {
  bool present = false;
  std::string model;               // "" when absent
  std::int64_t sm_count = 0;       // 0 when absent
  std::string compute_capability;  // "8.0"; "" when absent
  std::string driver;              // CUDA driver API version, "12.4"; "" without a driver
  std::string cuda_runtime;        // runtime scout was linked with, "13.0"; "" without CUDA
  std::string why_absent;          // the runtime's reason when no device was found
};

// Queries device 0; never throws. Without CUDA in the build, present is false.
GpuInfo query_gpu();

// "MAJOR.MINOR.PATCH" of the nccl.h scout was compiled against, "" when none.
std::string nccl_header_version();

// One run of the instrumented kernel: the work items it recorded (in model
// terms) and its numerical error against a CPU reference.
struct InstrumentedRun {
  std::vector<WorkItem> items;      // all three kernels
  std::vector<std::int32_t> smids;  // the SM each item ran on, same order
  std::array<double, 3> max_abs_error{};
  std::array<double, 3> max_abs_reference{};
};

// Runs the instrumented grouped GEMM for `rows` (config.experts entries) on
// device 0 with seeded data; unavailable_error without a GPU or CUDA build.
Result<InstrumentedRun> run_instrumented_grouped_gemm(const KernelConfig& config, std::span<const std::int64_t> rows,
                                                      std::uint64_t seed);

}  // namespace scout::catalog
