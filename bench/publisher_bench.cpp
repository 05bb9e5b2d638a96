// Cost of publishing one event through libscout_publisher.so (target: under
// 1 microsecond on the trainer's hot path, docs/contracts.md), against references
// measured in the same run: clock_gettime(CLOCK_REALTIME) alone (every event
// reads the clock once) and one relaxed atomic store to shared memory. Also
// the reader's cost for one consistent snapshot (what the observer pays per rank).
#include <benchmark/benchmark.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <string>

#include "integrations/publisher/scout_publisher.h"
#include "lib/records/layout.hpp"
#include "lib/records/reader.hpp"

namespace {

std::string g_job = "bench-publisher-" + std::to_string(getpid());
scout_record* g_rec = nullptr;

void BM_ReferenceClockGettime(benchmark::State& state) {
  timespec ts{};
  for (auto _ : state) {
    clock_gettime(CLOCK_REALTIME, &ts);
    benchmark::DoNotOptimize(ts);
  }
}
BENCHMARK(BM_ReferenceClockGettime);

void BM_ReferenceRelaxedStore(benchmark::State& state) {
  static scout::records::layout::Word word{0};
  std::uint64_t i = 0;
  for (auto _ : state) {
    word.store(++i, std::memory_order_relaxed);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ReferenceRelaxedStore);

void BM_CollectiveEnterExit(benchmark::State& state) {
  std::uint64_t seq = 0;
  for (auto _ : state) {
    std::uint64_t token = 0;
    scout_collective_enter(g_rec, 0x1234, SCOUT_COLL_ALL_REDUCE, 2, 1024, 0, ++seq, &token);
    scout_collective_exit(g_rec, token);
  }
  state.counters["events"] = benchmark::Counter(2.0 * static_cast<double>(state.iterations()));
}
BENCHMARK(BM_CollectiveEnterExit);

void BM_Phase(benchmark::State& state) {
  std::uint8_t p = 0;
  for (auto _ : state) scout_phase(g_rec, static_cast<std::uint8_t>(++p & 3));
}
BENCHMARK(BM_Phase);

void BM_StepBegin(benchmark::State& state) {
  std::uint64_t s = 0;
  for (auto _ : state) scout_step_begin(g_rec, ++s);
}
BENCHMARK(BM_StepBegin);

void BM_Heartbeat(benchmark::State& state) {
  for (auto _ : state) scout_heartbeat(g_rec);
}
BENCHMARK(BM_Heartbeat);

void BM_ReadSnapshot(benchmark::State& state) {
  scout::records::ReaderOptions o;
  o.job = g_job;
  std::string name = scout::records::layout::segment_name(g_job, 0);
  for (auto _ : state) benchmark::DoNotOptimize(scout::records::read_segment(name, o));
}
BENCHMARK(BM_ReadSnapshot);

// Console output plus the per-iteration CPU time of each benchmark, in ns (CPU
// time, not wall time: the machine may be shared, and preemption is not a
// cost of publishing).
class Collector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs)
      if (r.run_type == Run::RT_Iteration && r.iterations > 0)
        m_ns[r.benchmark_name()] = r.cpu_accumulated_time * 1e9 / static_cast<double>(r.iterations);
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> m_ns;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  scout_record_options o{g_job.c_str(), "0", 0, 1, nullptr, "bench"};
  int status = scout_record_create(&o, &g_rec);
  if (status != SCOUT_OK) {
    std::fprintf(stderr, "publisher_bench: cannot create a record: %s\n", scout_strerror(status));
    return 1;
  }
  Collector reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  scout_record_close(g_rec, 1);
  auto& ns = reporter.m_ns;
  double clock = ns["BM_ReferenceClockGettime"], store = ns["BM_ReferenceRelaxedStore"];
  if (clock <= 0 || store <= 0) return 0;  // filtered run
  std::printf("\nreferences: clock_gettime %.1f ns, relaxed store %.2f ns\n", clock, store);
  auto line = [&](const char* what, const char* bench, double events) {
    if (!ns.count(bench)) return;
    double per = ns[bench] / events;
    std::printf("%-28s %8.1f ns/event  = %5.2fx clock_gettime  %6.1fx relaxed store  target < 1000 ns: %s\n", what, per,
                per / clock, per / store, per < 1000.0 ? "met" : "MISSED");
  };
  line("collective enter/exit", "BM_CollectiveEnterExit", 2.0);
  line("phase", "BM_Phase", 1.0);
  line("step begin", "BM_StepBegin", 1.0);
  line("heartbeat", "BM_Heartbeat", 1.0);
  if (ns.count("BM_ReadSnapshot"))
    std::printf("%-28s %8.1f ns/record (observer side, incl. open/mmap/liveness)\n", "reader snapshot",
                ns["BM_ReadSnapshot"]);
  return 0;
}
