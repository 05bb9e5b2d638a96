// Cost of the hang decision (lib/hang/decide.hpp) for large worlds, one
// process: docs/contracts.md "Performance targets" is a C3 decision for 100,000 ranks under 100 ms.
// Reference in the same run: bare C3 exact over the same number of 64-bit keys.
// The world is N ranks on N/8 nodes, dp=N/8 x tp=8, one rank behind.
#include <benchmark/benchmark.h>

#include <random>

#include "lib/consensus/c3.hpp"
#include "lib/hang/decide.hpp"

namespace {

using namespace scout;
using namespace scout::hang;

constexpr std::int64_t k_s = 1'000'000'000;

DecisionInput make_world(std::int64_t n) {
  const std::int64_t now = 1'800'000'000 * k_s;
  DecisionInput in;
  in.job = "bench";
  in.now_ns = now;
  in.threshold_ns = 5 * k_s;
  in.mesh = *Mesh::parse("dp=" + std::to_string(n / 8) + ",tp=8");
  const std::int64_t bad = std::mt19937_64(42)() % static_cast<std::uint64_t>(n);
  for (std::int64_t node = 0; node < n / 8; ++node) {
    NodeEvidence e;
    e.observer = node;
    e.node = "node" + std::to_string(node);
    e.job = "bench";
    e.collected_ns = now;
    for (std::int64_t r = node * 8; r < node * 8 + 8; ++r) {
      RankEvidence re;
      auto& s = re.snapshot;
      s.job = "bench";
      s.rank = r;
      s.world_size = n;
      s.coords = {r / 8, 0, r % 8, 0, 0, 0};
      s.pid = 1;
      s.step = 9;
      s.op_seq = 200;  // a rank that never published an event is starting up, not stalled
      s.pending = {
          static_cast<std::uint64_t>(r % 8), records::CollectiveType::all_reduce, 2, 4096, 0, r == bad ? 40u : 41u};
      s.collective_state = r == bad ? records::CollectiveState::done : records::CollectiveState::inside;
      s.progress_ns = now - 10 * k_s;
      re.process.state = ProcessState::alive;
      e.ranks.push_back(std::move(re));
    }
    in.nodes.push_back(std::move(e));
  }
  return in;
}

void BM_C3ExactReference(benchmark::State& state) {
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(state.range(0)), 7);
  keys[keys.size() / 3] = 8;
  for (auto _ : state) benchmark::DoNotOptimize(c3_exact(keys));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_HangDecide(benchmark::State& state) {
  DecisionInput in = make_world(state.range(0));
  for (auto _ : state) {
    Verdict v = decide(in);
    if (v.suspects.size() != 1) {
      state.SkipWithError(("expected one suspect: " + v.summary).c_str());
      break;
    }
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(BM_C3ExactReference)->Arg(1024)->Arg(16384)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HangDecide)->Arg(1024)->Arg(16384)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
