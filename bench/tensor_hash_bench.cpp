// Tensor hash throughput against XXH3-64 (Debian's libxxhash) on the same
// buffers in the same run, single thread and all threads, plus the CUDA kernel
// against a device-to-device cudaMemcpy where a GPU exists. Prints a summary
// of ratios after Google Benchmark's table.
//
//   build/bench/tensor_hash_bench                      # everything
//   build/bench/tensor_hash_bench --benchmark_filter=1MiB
//   SCOUT_HASH_KERNEL=pclmul build/bench/tensor_hash_bench   # force a kernel
//   build/bench/tensor_hash_bench --gpu [--bytes N]    # the GPU part only, one JSON line
//                                                      # (scripts/gpu-check.sh); exit 5 without a GPU
#include <benchmark/benchmark.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lib/hash/crc32.hpp"
#include "lib/hash/gpu_hash.hpp"
#include "lib/hash/tensor_hash.hpp"

// The runtime-dispatched XXH3 in Debian's libxxhash (AVX2/AVX-512 where the
// CPU has them); the header that declares it is not installed.
extern "C" XXH64_hash_t XXH3_64bits_dispatch(const void* input, size_t len);

namespace {

using scout::DType;

struct Size {
  const char* name;
  std::size_t bytes;
};
const Size k_sizes[] = {{"4KiB", 4u << 10}, {"1MiB", 1u << 20}, {"64MiB", 64u << 20}, {"1GiB", std::size_t{1} << 30}};

const std::vector<std::byte>& buffer(std::size_t n) {
  static std::map<std::size_t, std::unique_ptr<std::vector<std::byte>>> cache;
  auto& slot = cache[n];
  if (!slot) {
    slot = std::make_unique<std::vector<std::byte>>(n);
    std::mt19937_64 rng(n);
    for (std::size_t i = 0; i + 8 <= n; i += 8) {
      const std::uint64_t v = rng();
      std::memcpy(slot->data() + i, &v, 8);
    }
  }
  return *slot;
}

unsigned all_threads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

void bm_xxh3(benchmark::State& state, std::size_t n) {
  const auto& b = buffer(n);
  for (auto _ : state) benchmark::DoNotOptimize(XXH3_64bits(b.data(), n));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void bm_xxh3_dispatch(benchmark::State& state, std::size_t n) {
  const auto& b = buffer(n);
  for (auto _ : state) benchmark::DoNotOptimize(XXH3_64bits_dispatch(b.data(), n));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void bm_scout(benchmark::State& state, std::size_t n, unsigned threads) {
  const auto& b = buffer(n);
  const std::int64_t shape[] = {static_cast<std::int64_t>(n)};
  for (auto _ : state) benchmark::DoNotOptimize(scout::hash::hash_tensor(DType::u8, shape, b, threads));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void bm_kernel(benchmark::State& state, std::size_t n, scout::hash::HashKernel kernel) {
  const auto& b = buffer(n);
  for (auto _ : state) benchmark::DoNotOptimize(scout::hash::partial_sum_with(kernel, b, 0));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

// CRC-32 (zip entries are checked while they are hashed: its cost adds to
// the tensor hash's on every torch.save and DCP byte).
void bm_crc(benchmark::State& state, std::size_t n, scout::hash::Crc32Kernel kernel) {
  const auto& b = buffer(n);
  for (auto _ : state) benchmark::DoNotOptimize(scout::hash::crc32_with(kernel, b, 0));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

const char* crc_kernel_name(scout::hash::Crc32Kernel k) {
  using scout::hash::Crc32Kernel;
  return k == Crc32Kernel::table        ? "table"
         : k == Crc32Kernel::clmul128   ? "clmul128"
         : k == Crc32Kernel::vpclmul256 ? "vpclmul256"
                                        : "vpclmul512";
}

// Memory read bandwidth with all threads: each sums its share of 64-bit words
// (the least work any hash must do); the ceiling for multi-threaded hashing.
void bm_read_all(benchmark::State& state, std::size_t n) {
  const auto& b = buffer(n);
  const unsigned threads = all_threads();
  for (auto _ : state) {
    std::vector<std::uint64_t> sums(threads);
    std::vector<std::thread> pool;
    const std::size_t words = n / 8, per = (words + threads - 1) / threads;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const auto* w = reinterpret_cast<const std::uint64_t*>(b.data());
        std::uint64_t s = 0;
        for (std::size_t i = t * per; i < std::min(words, (t + 1) * per); ++i) s += w[i];
        sums[t] = s;
      });
    }
    for (auto& th : pool) th.join();
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

// Remembers every run's bytes per second for the summary.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> rate;  // name -> bytes/s
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      auto it = r.counters.find("bytes_per_second");
      if (it == r.counters.end() || r.run_type != Run::RT_Iteration) continue;
      std::string name = r.benchmark_name();
      if (auto cut = name.find("/real_time"); cut != std::string::npos) name.erase(cut);
      rate[name] = it->second.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

std::string fmt_size(std::size_t bytes, double hash_gbps, double copy_gbps, bool first) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s{\"bytes\": %zu, \"hash_gbps\": %.3f, \"copy_gbps\": %.3f, \"hash_over_copy\": %.4f, "
                "\"hash_over_traffic\": %.4f}",
                first ? "" : ", ", bytes, hash_gbps, copy_gbps, copy_gbps > 0 ? hash_gbps / copy_gbps : 0,
                copy_gbps > 0 ? hash_gbps / (2 * copy_gbps) : 0);
  return buf;
}

}  // namespace

// --gpu: the CUDA kernel against a device-to-device cudaMemcpy of the same
// bytes, best of 20 each, at 64 MiB, 1 GiB and 4 GiB; one JSON line on
// stdout. hash_over_copy compares bytes per second (the copy's rate counts
// each byte once, though it reads and writes it); hash_over_traffic compares
// the hash's reads with the copy's reads plus writes (the memory system's
// rate). Exit 5 (unavailable) with the reason on stderr without a GPU.
int gpu_only(std::size_t only_bytes) {
  auto gpu = scout::hash::gpu_device_count();
  if (!gpu) {
    std::fprintf(stderr, "tensor_hash_bench --gpu: error: %s\n", gpu.error().message().c_str());
    return static_cast<int>(gpu.error().code);
  }
  std::string device;
  std::string sizes;
  std::vector<std::size_t> all = {std::size_t{64} << 20, std::size_t{1} << 30, std::size_t{4} << 30};
  if (only_bytes != 0) all = {only_bytes};
  for (std::size_t bytes : all) {
    auto bw = scout::hash::gpu_measure_bandwidth(bytes, 20);
    if (!bw) {
      std::fprintf(stderr, "tensor_hash_bench --gpu: error: %s\n", bw.error().message().c_str());
      return static_cast<int>(bw.error().code);
    }
    device = bw->device;
    std::fprintf(stderr, "%s %5zu MiB: hash %8.1f GB/s, memcpy %8.1f GB/s (traffic %8.1f GB/s), hash/traffic %.3f\n",
                 bw->device.c_str(), bytes >> 20, bw->hash_gbps, bw->copy_gbps, 2 * bw->copy_gbps,
                 bw->hash_gbps / (2 * bw->copy_gbps));
    sizes += fmt_size(bytes, bw->hash_gbps, bw->copy_gbps, sizes.empty());
  }
  std::printf("{\"device\": \"%s\", \"sizes\": [%s]}\n", device.c_str(), sizes.c_str());
  return 0;
}

int main(int argc, char** argv) {
  using scout::hash::HashKernel;
  bool gpu_mode = false;
  std::size_t gpu_bytes = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--gpu") gpu_mode = true;
    if (a == "--bytes" && i + 1 < argc) {
      char* end = nullptr;
      gpu_bytes = std::strtoull(argv[++i], &end, 10);
      if (*end != '\0' || gpu_bytes == 0) {
        std::fprintf(stderr, "tensor_hash_bench: error: --bytes %s; give a positive byte count\n", argv[i]);
        return 2;
      }
    }
    if (a == "--help")
      std::printf(
          "tensor_hash_bench [Google Benchmark flags]: CPU hash benchmarks, then the GPU's where one is\n"
          "tensor_hash_bench --gpu [--bytes N]: the GPU hash against a device-to-device copy only (64 MiB, 1 GiB,\n"
          "  4 GiB, or N bytes), one JSON line on stdout; exit 5 with the reason without a GPU\n");
  }
  if (gpu_mode) return gpu_only(gpu_bytes);
  for (const Size& s : k_sizes) {
    const std::string n = s.name;
    // Single-thread rates use CPU time (robust on a shared machine), the
    // multi-threaded ones wall time.
    benchmark::RegisterBenchmark(("xxh3_64/" + n).c_str(), bm_xxh3, s.bytes);
    benchmark::RegisterBenchmark(("xxh3_64_dispatch/" + n).c_str(), bm_xxh3_dispatch, s.bytes);
    benchmark::RegisterBenchmark(("scout_1thread/" + n).c_str(), bm_scout, s.bytes, 1u);
    benchmark::RegisterBenchmark(("scout_all_threads/" + n).c_str(), bm_scout, s.bytes, 0u)->UseRealTime();
    benchmark::RegisterBenchmark(("read_all_threads/" + n).c_str(), bm_read_all, s.bytes)->UseRealTime();
    if (s.bytes == (1u << 20)) {
      using scout::hash::Crc32Kernel;
      for (auto k : {Crc32Kernel::table, Crc32Kernel::clmul128, Crc32Kernel::vpclmul256, Crc32Kernel::vpclmul512})
        if (scout::hash::crc32_kernel_available(k))
          benchmark::RegisterBenchmark(("crc32_" + std::string(crc_kernel_name(k)) + "/" + n).c_str(), bm_crc, s.bytes,
                                       k);
    }
    if (s.bytes == (1u << 20))
      for (HashKernel k : scout::hash::available_kernels())
        benchmark::RegisterBenchmark(("kernel_" + std::string(scout::hash::kernel_name(k)) + "/" + n).c_str(),
                                     bm_kernel, s.bytes, k);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::printf(
      "\nxxh3 = XXH3_64bits, xxh3_disp = XXH3_64bits_dispatch (AVX2/AVX-512 where present); single-thread\n"
      "rates from CPU time, all-thread rates from wall time; read_all = all threads summing the words.\n");
  std::printf("Tensor hash v%d summary (active kernel %s, %u threads; GB/s = 1e9 bytes/s)\n",
              scout::hash::k_hash_spec_version,
              std::string(scout::hash::kernel_name(scout::hash::active_kernel())).c_str(), all_threads());
  std::printf("%-6s %9s %9s %9s %9s %11s %9s %9s %9s %9s\n", "size", "xxh3", "xxh3_disp", "scout_1t", "1t/xxh3",
              "1t/xxh3disp", "scout_all", "all/xxh3", "read_all", "all/read");
  for (const Size& s : k_sizes) {
    const std::string n = s.name;
    auto get = [&](const std::string& name) {
      auto it = reporter.rate.find(name + "/" + n);
      return it == reporter.rate.end() ? 0.0 : it->second / 1e9;
    };
    const double x = get("xxh3_64"), xd = get("xxh3_64_dispatch"), one = get("scout_1thread"),
                 all = get("scout_all_threads"), rd = get("read_all_threads");
    if (x == 0 && one == 0) continue;
    std::printf("%-6s %9.2f %9.2f %9.2f %9.3f %11.3f %9.2f %9.3f %9.2f %9.3f\n", s.name, x, xd, one, x ? one / x : 0,
                xd ? one / xd : 0, all, x ? all / x : 0, rd, rd ? all / rd : 0);
  }

  {
    // CRC-32 kernels on 1 MiB against the single-thread tensor hash: the CRC's share of a zip entry's hashing.
    using scout::hash::Crc32Kernel;
    const auto one = reporter.rate.find("scout_1thread/1MiB");
    std::printf("\nCRC-32 on 1 MiB (single thread, CPU time):");
    for (auto k : {Crc32Kernel::table, Crc32Kernel::clmul128, Crc32Kernel::vpclmul256, Crc32Kernel::vpclmul512}) {
      auto it = reporter.rate.find("crc32_" + std::string(crc_kernel_name(k)) + "/1MiB");
      if (it == reporter.rate.end()) continue;
      std::printf(" %s %.2f GB/s", crc_kernel_name(k), it->second / 1e9);
      if (one != reporter.rate.end()) std::printf(" (x%.2f of scout_1t)", it->second / one->second);
    }
    std::printf("\n");
  }

  auto gpu = scout::hash::gpu_device_count();
  if (!gpu) {
    std::printf("\nGPU: skipped: %s\n", gpu.error().message().c_str());
    return 0;
  }
  std::printf("\nGPU hash vs device-to-device cudaMemcpy of the same bytes\n");
  for (std::size_t bytes : {std::size_t{64} << 20, std::size_t{1} << 30}) {
    auto bw = scout::hash::gpu_measure_bandwidth(bytes, 10);
    if (!bw) {
      std::printf("GPU: failed: %s\n", bw.error().message().c_str());
      return 1;
    }
    // A copy reads and writes every byte: its memory traffic is 2x its rate.
    std::printf("%s %5zu MiB: hash %8.1f GB/s, memcpy %8.1f GB/s (traffic %8.1f GB/s), hash/traffic %.3f\n",
                bw->device.c_str(), bytes >> 20, bw->hash_gbps, bw->copy_gbps, 2 * bw->copy_gbps,
                bw->hash_gbps / (2 * bw->copy_gbps));
  }
  return 0;
}
