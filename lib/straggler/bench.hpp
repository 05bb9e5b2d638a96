// The controlled probe of `scout straggler --bench` (lib/straggler/README.md
// "Stragglers"): every local rank's device runs the same fixed unit of work,
// timed, so a slow device is confirmed without the live job's noise.
//
// CPU path (this one): a plain C++ GEMM (n x n float, i-k-j order) and a
// streaming read of a buffer, run in a child process placed where the rank
// runs: the rank's CPU affinity and, where the kernel lets us, the rank's cpu
// cgroup (v1 `cpu` hierarchy or v2), so a CPU quota or a throttled core that
// slows the rank slows its probe too. LibTorch is not needed for this: the
// unit must be the same bytes and flops on every rank, not a torch kernel.
// A GPU path (a GEMM on the rank's device through the LibTorch module) would
// sit behind run_unit_fn below; it is not built here (no GPU on this host).
// Ranks are probed `parallel` at a time (1 by default: on a shared CPU,
// probes running together would measure each other).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/common/error.hpp"

namespace scout::straggler {

struct BenchOptions {
  std::int64_t gemm_n = 160;
  std::int64_t gemm_reps = 2;
  std::size_t sweep_bytes = std::size_t{16} << 20;
  std::int64_t repeats = 3;   // per rank; the median counts
  std::int64_t parallel = 1;  // ranks probed at the same time
  std::chrono::milliseconds per_rank_timeout{10000};
  bool join_cgroup = true;  // place the child in the rank's cpu cgroup when permitted
};

struct BenchTarget {
  std::int64_t rank = -1;
  std::int64_t pid = 0;  // the rank's process (0: probe here, unplaced)
};

struct BenchResult {
  std::int64_t rank = -1;
  double gemm_ns = 0;
  double sweep_ns = 0;
  double total_ns = 0;    // median over repeats of gemm + sweep
  std::string placement;  // "cgroup+affinity", "affinity", "unplaced"
  std::string error;      // non-empty when the probe failed
};

// The unit of work once, in this process; returns {gemm_ns, sweep_ns}.
std::pair<double, double> run_unit(const BenchOptions& options, float* a, float* b, float* c,
                                   const std::uint64_t* sweep);

// Probes every target; never fails as a whole (a rank whose probe failed has `error`).
std::vector<BenchResult> run_bench(const std::vector<BenchTarget>& targets, const BenchOptions& options);

}  // namespace scout::straggler
