// Catalog build cost: the paper's 3,457 shapes (target < 100 ms) and 1,000,000
// shapes (target: seconds), with two references measured in the same run: the
// all-pairs dominance the skyline pass replaces, and the model's counting pass
// alone (the floor any compression has to pay).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "lib/catalog/compress.hpp"
#include "lib/catalog/model.hpp"

namespace {

using namespace scout::catalog;

std::vector<std::int64_t> range(std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> v;
  for (std::int64_t r = lo; r <= hi; ++r) v.push_back(r);
  return v;
}

const ShapeSpace& paper_space() {
  static const ShapeSpace s = ShapeSpace::uniform(1, range(1, 3457));
  return s;
}

const ShapeSpace& million_uniform() {
  static const ShapeSpace s = ShapeSpace::uniform(1, range(1, 1'000'000));
  return s;
}

// 1,000,000 distinct routing vectors over 8 experts (seeded, printed).
const ShapeSpace& million_heterogeneous() {
  static const ShapeSpace s = [] {
    const unsigned seed = 20261129;
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> rows(0, 4096);
    std::vector<std::int64_t> flat;
    flat.reserve(8'000'000);
    for (int i = 0; i < 1'000'000; ++i)
      for (int e = 0; e < 8; ++e) flat.push_back(e == 0 ? rows(rng) + 1 : rows(rng));
    return ShapeSpace::heterogeneous(8, std::move(flat));
  }();
  return s;
}

KernelConfig paper_config(std::int64_t experts = 1) {
  KernelConfig c;
  c.experts = experts;
  return c;
}

void BM_Paper3457(benchmark::State& state) {
  for (auto _ : state) {
    auto c = compress(paper_config(), paper_space());
    if (!c.ok() || c->representatives != 16) state.SkipWithError("paper case did not give 16 representatives");
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_Paper3457)->Unit(benchmark::kMillisecond);

void BM_AllPairs3457(benchmark::State& state) {
  const auto& space = paper_space();
  KernelConfig cfg = paper_config();
  for (auto _ : state) {
    std::vector<CountVector> c(space.size());
    std::vector<int> f(space.size());
    std::vector<std::int64_t> scratch;
    for (std::size_t i = 0; i < space.size(); ++i) {
      c[i] = count_vector(cfg, space.rows(i, scratch));
      f[i] = fingerprint_of(c[i], cfg.sms).id();
    }
    std::size_t kept = 0;
    for (std::size_t b = 0; b < c.size(); ++b) {
      bool dominated = false;
      for (std::size_t a = 0; a < c.size() && !dominated; ++a)
        dominated = a != b && f[a] == f[b] && covers(c[a], c[b]) && (c[a] != c[b] || a > b);
      kept += !dominated;
    }
    if (kept != 16) state.SkipWithError("all-pairs did not give 16");
    benchmark::DoNotOptimize(kept);
  }
}
BENCHMARK(BM_AllPairs3457)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_ModelOnly1M(benchmark::State& state) {
  const auto& space = million_uniform();
  KernelConfig cfg = paper_config();
  for (auto _ : state) {
    std::uint64_t total = 0;
    std::vector<std::int64_t> scratch;
    for (std::size_t i = 0; i < space.size(); ++i) total += total_work_items(count_vector(cfg, space.rows(i, scratch)));
    benchmark::DoNotOptimize(total);
  }
}
BENCHMARK(BM_ModelOnly1M)->Unit(benchmark::kMillisecond)->Iterations(2);

void BM_Uniform1M(benchmark::State& state) {
  for (auto _ : state) {
    auto c = compress(paper_config(), million_uniform());
    if (!c.ok()) state.SkipWithError("compress failed");
    state.counters["representatives"] = static_cast<double>(c->representatives);
  }
}
BENCHMARK(BM_Uniform1M)->Unit(benchmark::kMillisecond)->Iterations(2);

void BM_Heterogeneous1M(benchmark::State& state) {
  const auto& space = million_heterogeneous();
  for (auto _ : state) {
    auto c = compress(paper_config(8), space);
    if (!c.ok()) state.SkipWithError("compress failed");
    state.counters["representatives"] = static_cast<double>(c->representatives);
  }
}
BENCHMARK(BM_Heterogeneous1M)->Unit(benchmark::kMillisecond)->Iterations(1);

// Keeps every run's real time (ms) so the summary can print ratios.
class Collect : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> ms;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      ms[r.benchmark_name()] = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit) * 1e3;
    ConsoleReporter::ReportRuns(runs);
  }
};

double get(const Collect& c, const std::string& prefix) {
  for (const auto& [name, v] : c.ms)
    if (name.rfind(prefix, 0) == 0) return v;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Collect reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double paper = get(reporter, "BM_Paper3457"), pairs = get(reporter, "BM_AllPairs3457"),
               model = get(reporter, "BM_ModelOnly1M"), uni = get(reporter, "BM_Uniform1M"),
               het = get(reporter, "BM_Heterogeneous1M");
  std::printf("\ncatalog build, 3,457 shapes (paper case, 16 representatives): %.2f ms (target < 100 ms)\n", paper);
  if (pairs > 0 && paper > 0)
    std::printf("  all-pairs dominance over the same shapes, same run: %.1f ms -> skyline pass %.0fx faster\n", pairs,
                pairs / paper);
  std::printf("catalog build, 1,000,000 shapes, one expert: %.3f s\n", uni / 1e3);
  if (model > 0 && uni > 0)
    std::printf("  model counting pass alone, same run: %.3f s -> compression costs %.2fx the counting pass\n",
                model / 1e3, uni / model);
  std::printf("catalog build, 1,000,000 shapes, 8 experts, random routing vectors (seed 20261129): %.3f s\n",
              het / 1e3);
  benchmark::Shutdown();
  return 0;
}
