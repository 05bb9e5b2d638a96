// Cost of one C3 decision over N peers (docs/contracts.md "Performance targets": 100,000 ranks in
// under 100 ms in one process), with std::sort of the same values measured in
// the same run as the reference the ratio is printed against.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "lib/consensus/c3.hpp"

namespace {

std::vector<std::uint64_t> exact_values(std::size_t n) {
  std::mt19937_64 rng(42);
  std::vector<std::uint64_t> v(n, 0xABCDEF);
  for (int k = 0; k < 3; ++k) v[rng() % n] = rng();
  return v;
}

std::vector<double> timing_values(std::size_t n) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> d(1.0, 0.01);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  v[rng() % n] = 2.0;
  return v;
}

void BM_C3Exact(benchmark::State& state) {
  auto v = exact_values(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(scout::c3_exact(v));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_C3Statistical(benchmark::State& state) {
  auto v = timing_values(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(scout::c3_statistical(v));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// Reference: sorting a copy of the same doubles (the floor of any exact median method).
void BM_SortReference(benchmark::State& state) {
  auto v = timing_values(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    auto copy = v;
    std::sort(copy.begin(), copy.end());
    benchmark::DoNotOptimize(copy.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

}  // namespace

BENCHMARK(BM_C3Exact)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_C3Statistical)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SortReference)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
