#include "lib/catalog/gpu.hpp"

#include <fmt/format.h>

#include "lib/common/cuda_error.hpp"
#include "scout/config.hpp"

#if SCOUT_WITH_CUDA
#include "lib/catalog/gpu_abi.hpp"
#endif

namespace scout::catalog {

namespace {

[[maybe_unused]] std::string version_string(int code) {
  if (code <= 0) return {};
  return fmt::format("{}.{}", code / 1000, (code % 1000) / 10);
}

}  // namespace

#if SCOUT_WITH_CUDA

GpuInfo query_gpu() {
  gpu_abi::DeviceInfo d;
  gpu_abi::query_device(&d);
  GpuInfo g;
  g.driver = version_string(d.driver_version);
  g.cuda_runtime = version_string(d.runtime_version);
  if (d.status != 0) {
    const CudaErrorAdvice a = cuda_error_advice(d.status);
    g.why_absent = fmt::format("CUDA error {}: {}", d.status, d.error);
    if (!a.why.empty()) g.why_absent += fmt::format(" ({}. To fix: {})", a.why, a.hint);
    return g;
  }
  g.present = true;
  g.model = d.name;
  g.sm_count = d.sm_count;
  g.compute_capability = fmt::format("{}.{}", d.cc_major, d.cc_minor);
  return g;
}

std::string nccl_header_version() {
  const int code = gpu_abi::nccl_header_version_code();
  if (code <= 0) return {};
  // NCCL >= 2.9 encodes MAJOR * 10000 + MINOR * 100 + PATCH.
  if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, (code / 100) % 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, (code / 100) % 10, code % 100);
}

Result<InstrumentedRun> run_instrumented_grouped_gemm(const KernelConfig& config, std::span<const std::int64_t> rows,
                                                      std::uint64_t seed) {
  if (auto s = validate(config); !s) return s.error();
  if (static_cast<std::int64_t>(rows.size()) != config.experts)
    return usage_error(fmt::format("{} row counts for {} experts", rows.size(), config.experts));
  gpu_abi::Problem p;
  p.tile_m = config.tile_m;
  p.tile_n = config.tile_n;
  p.tile_k = config.tile_k;
  p.sms = config.sms;
  p.hidden = config.hidden;
  p.output_dim = config.output_dim;
  p.experts = config.experts;
  p.rows.assign(rows.begin(), rows.end());
  p.seed = seed;
  gpu_abi::RunResult r;
  gpu_abi::run_instrumented(p, &r);
  if (r.status != 0)
    return cuda_error(r.status, "the instrumented grouped GEMM did not run", r.error,
                      "run it on a machine with a CUDA GPU and driver");
  InstrumentedRun out;
  out.items.reserve(r.items.size());
  for (const auto& rec : r.items) {
    if (!rec.written)
      return internal_error("the instrumented kernel skipped a work item",
                            fmt::format("kernel {} slot {}", rec.kernel, rec.slot));
    WorkItem w;
    w.kernel = static_cast<Kernel>(rec.kernel);
    w.expert = rec.expert;
    w.slot = rec.slot;
    w.cta = rec.cta;
    w.iteration = rec.iteration;
    w.tile = rec.tile;
    w.chunk = rec.chunk;
    if (w.kernel == Kernel::weight_grad) {
      w.role = role_index(WeightGradRole{rec.tail_a != 0, static_cast<Position>(rec.position_a),
                                         static_cast<Position>(rec.position_b), rec.queue_repeat != 0});
    } else {
      w.role = role_index(
          LinearRole{rec.tail_a != 0, rec.tail_b != 0, static_cast<Position>(rec.position_a), rec.queue_repeat != 0});
    }
    out.items.push_back(w);
    out.smids.push_back(rec.smid);
  }
  for (int k = 0; k < 3; ++k) {
    out.max_abs_error[static_cast<std::size_t>(k)] = r.max_abs_error[k];
    out.max_abs_reference[static_cast<std::size_t>(k)] = r.max_abs_reference[k];
  }
  return out;
}

#else  // !SCOUT_WITH_CUDA

GpuInfo query_gpu() {
  GpuInfo g;
  g.why_absent = "this scout was built without CUDA";
  return g;
}

std::string nccl_header_version() {
  return {};
}

Result<InstrumentedRun> run_instrumented_grouped_gemm(const KernelConfig&, std::span<const std::int64_t>,
                                                      std::uint64_t) {
  return unavailable_error("the instrumented grouped GEMM is not available", "this scout was built without CUDA",
                           "rebuild with CUDA (-DSCOUT_WITH_CUDA=ON) on a machine with the toolkit");
}

#endif

}  // namespace scout::catalog
