// The boundary between lib/catalog (C++20) and cuda/grouped_gemm_instrumented.cu
// (compiled by nvcc as C++17): plain structs and noexcept functions only, so no
// exception and no C++20 type crosses it. Only lib/catalog/gpu.cpp calls these;
// everything else uses lib/catalog/gpu.hpp.
#pragma once

#include <cstdint>
#include <vector>

namespace scout::catalog::gpu_abi {

// What the CUDA runtime reports about device 0 and the installed driver.
struct DeviceInfo {
  int status = -1;       // 0: a device was found; otherwise the cudaError_t code
  char error[256] = {};  // cudaGetErrorString of `status` when it is not 0
  char name[256] = {};   // e.g. "NVIDIA A100-SXM4-80GB"
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int driver_version = 0;   // cudaDriverGetVersion: 1000 * major + 10 * minor, 0 without a driver
  int runtime_version = 0;  // cudaRuntimeGetVersion of the runtime scout was linked with
};

// Fills `out` for device 0; never throws, never aborts without a driver.
void query_device(DeviceInfo* out) noexcept;

// NCCL_VERSION_CODE of the nccl.h scout was compiled against (0 when none).
int nccl_header_version_code() noexcept;

// The problem one instrumented run computes, rows[e] per expert.
struct Problem {
  std::int64_t tile_m = 64, tile_n = 64, tile_k = 32, sms = 108;
  std::int64_t hidden = 128, output_dim = 128, experts = 1;
  std::vector<std::int64_t> rows;
  std::uint64_t seed = 1;
};

// One executed work item as the kernel saw it. kernel: 0 forward, 1
// input_grad, 2 weight_grad. Linear kernels: tail_a = m_tail, tail_b = n_tail,
// position_a = position in the expert, position_b unused. weight_grad: tail_a =
// reduction_tail, position_a = reduction position, position_b = output-tile
// position. Positions: 0 single, 1 first, 2 last, 3 interior.
struct ItemRecord {
  std::int32_t kernel = 0, expert = 0;
  std::int64_t slot = 0, tile = 0, chunk = 0;
  std::int32_t cta = 0, iteration = 0, smid = 0;
  std::int32_t tail_a = 0, tail_b = 0, position_a = 0, position_b = 0, queue_repeat = 0;
  std::int32_t written = 0;  // 1 once the kernel wrote this record
};

// What a run produced: every work item of the three kernels and how far each
// kernel's output is from a double-precision CPU reference.
struct RunResult {
  int status = -1;  // 0 ok; otherwise a cudaError_t code or -1 for a bad problem
  char error[256] = {};
  std::vector<ItemRecord> items;
  double max_abs_error[3] = {0, 0, 0};
  double max_abs_reference[3] = {0, 0, 0};
};

// Runs forward, input_grad and weight_grad on device 0 with `problem.sms`
// persistent CTAs on seeded random data, recording every work item.
void run_instrumented(const Problem& problem, RunResult* out) noexcept;

}  // namespace scout::catalog::gpu_abi
