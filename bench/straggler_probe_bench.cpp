// The cost of one round of `scout straggler --bench`: the controlled probe on
// 8 and 64 local ranks (each a child process placed like the rank, here this
// process's own affinity and cgroup), against a reference measured in the same
// run: the unit of work once in this process. Prints wall time per round and
// its ratio to ranks x reference (probe overhead: fork, placement, pipes).
// Then the cost the scheduler counters add to every read of a round (each rank's
// /proc/PID/task/*/schedstat; here every "rank" is this process with its threads),
// against the same read without them.
//
//   build/bench/straggler_probe_bench [--ranks 8,64] [--parallel 1]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lib/straggler/bench.hpp"
#include "lib/straggler/probe.hpp"

using namespace scout::straggler;

int main(int argc, char** argv) {
  std::vector<int> sizes = {8, 64};
  std::int64_t parallel = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--parallel") == 0) parallel = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--ranks") == 0) {
      sizes.clear();
      std::string s = argv[i + 1];
      for (std::size_t p = 0; p < s.size();) {
        auto q = s.find(',', p);
        sizes.push_back(std::atoi(s.substr(p, q - p).c_str()));
        p = q == std::string::npos ? s.size() : q + 1;
      }
    }
  }
  BenchOptions o;
  o.parallel = parallel;
  // Reference: the unit of work (repeats times, as a probe runs it) in this process.
  std::vector<float> a(static_cast<std::size_t>(o.gemm_n * o.gemm_n), 0.5f), b(a.size(), 0.25f), c(a.size());
  std::vector<std::uint64_t> sweep(o.sweep_bytes / 8, 3);
  double ref = 0;
  for (int k = 0; k < 3; ++k) {
    auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t r = 0; r < o.repeats; ++r) run_unit(o, a.data(), b.data(), c.data(), sweep.data());
    double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ref = k == 0 ? t : std::min(ref, t);
  }
  std::printf("reference: one rank's unit of work x%lld repeats in-process: %.2f ms\n",
              static_cast<long long>(o.repeats), ref);
  for (int n : sizes) {
    std::vector<BenchTarget> targets;
    for (int r = 0; r < n; ++r) targets.push_back(BenchTarget{r, static_cast<std::int64_t>(getpid())});
    auto t0 = std::chrono::steady_clock::now();
    auto res = run_bench(targets, o);
    double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    int failed = 0;
    for (auto& r : res) failed += r.error.empty() ? 0 : 1;
    std::printf(
        "probe round, %d local ranks, parallel %lld: %.1f ms wall (%.2f x ranks x reference; %d failed; placement "
        "%s)\n",
        n, static_cast<long long>(parallel), wall, wall / (n * ref), failed,
        res.empty() ? "-" : res[0].placement.c_str());
  }
  // Scheduler counters: this process stands for every rank, with 24 threads like a trainer's.
  std::vector<std::thread> idle;
  std::atomic<bool> stop{false};
  for (int t = 0; t < 23; ++t)
    idle.emplace_back([&] {
      while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
  LiveOptions lo;
  for (int n : sizes) {
    std::vector<scout::records::RecordRead> reads(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      scout::records::RankSnapshot s;
      s.rank = r;
      s.world_size = n;
      s.pid = getpid();
      s.recent.resize(64);
      reads[static_cast<std::size_t>(r)].snapshot = s;
    }
    auto timed = [&](bool alive) {
      for (auto& x : reads) x.writer_alive = alive;
      double best = 1e300;
      for (int k = 0; k < 20; ++k) {
        auto t0 = std::chrono::steady_clock::now();
        auto e = local_evidence(reads, lo, 0, nullptr);
        best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        if (alive && (e.ranks.empty() || e.ranks[0].cpu_ns < 0)) std::printf("scheduler counters unreadable here\n");
      }
      return best;
    };
    const double without = timed(false), with = timed(true);
    std::printf(
        "round read, %d local ranks x 24 threads: %.3f ms with scheduler counters, %.3f ms without "
        "(+%.3f ms, %.2f%% of the default 1 s interval)\n",
        n, with, without, with - without, (with - without) / 10.0);
  }
  stop = true;
  for (auto& t : idle) t.join();
  return 0;
}
