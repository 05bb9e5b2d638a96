// The straggler decision (lib/straggler/decide.hpp, unchanged, default options) scored on a simulated GPU
// cluster (bench/cluster_sim.hpp states the model): clean runs, one slow GPU (1.05-2x) and one slow NIC
// (bandwidth / 2 to / 10), meshes dp x tp and dp x pp x tp, at the sizes asked (default 1k, 10k, 100k ranks).
// Prints every run with its seed (--only SEED reruns one), then per size and scenario: precision, recall, the
// innocent ranks named, slow groups found, the measure that named each suspect, and the decision's time
// (analyse(): the tables, every round and the decision; the simulation's own time apart), beside the reference
// measured in the same run: the exact C3 decision (lib/consensus/c3.hpp c3_exact, the hang verdict's) over one 64-bit
// key per rank at the same size, and the ratio of the two CPU times.
//
//   straggler_sim_bench [--seed BASE] [--seeds S] [--sizes 1024,10240,102400] [--steps N] [--rounds R]
//                       [--large-seeds S] [--large-steps N] [--only SEED] [--gpu-factors LO,HI (1.05,2)]
//                       [--scenarios clean,slow-gpu,slow-nic]
//
// The seed of run i of scenario j at size index k (1024, 10240, 102400: 0, 1, 2; any other size 3 + its place in
// --sizes) is BASE + 1000000 k + 1000 j + i; it draws the mesh shape,
// the fault's rank and factor, and the simulation's noise. Sizes of 65536 ranks and more run --large-seeds
// seeds of --large-steps steps per round (the evidence of 100k ranks is a few GB). Not a Google Benchmark: a
// campaign with counts, like bench/straggler_campaign.py.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/cluster_sim.hpp"
#include "lib/common/parse.hpp"
#include "lib/consensus/c3.hpp"
#include "lib/straggler/decide.hpp"

namespace {

using namespace scout;
using namespace scout::bench::cluster;

const char* const k_scenarios[] = {"clean", "slow-gpu", "slow-nic"};

struct Options {
  std::uint64_t base = 1676755283;
  std::int64_t seeds = 3, large_seeds = 1, steps = 8, large_steps = 4, rounds = 3;
  std::vector<std::int64_t> sizes = {1024, 10240, 102400};
  std::int64_t only = -1;
  double gpu_lo = 1.05, gpu_hi = 2.0;                                      // the slow GPU's factor range
  std::vector<std::string> scenarios = {"clean", "slow-gpu", "slow-nic"};  // those run
};

struct Outcome {
  std::string scenario, mesh;
  std::int64_t size = 0;
  std::uint64_t seed = 0;
  std::int64_t truth_rank = -1;  // the slow GPU (-1: none)
  std::int64_t fault_rank = -1;  // the slow GPU or the GPU whose NIC is slow
  double factor = 1;
  std::vector<std::int64_t> named;
  std::map<std::int64_t, std::string> measure;
  std::int64_t tp = 0, fp = 0, fn = 0;
  std::int64_t groups_right = 0, groups_wrong = 0, groups_truth = 0;
  std::string diagnosis;
  std::string slow_kinds;  // the kinds of the slow groups found, in order ("dp,pp")
  double sim_s = 0, decide_s = 0, decide_cpu_s = 0, step_ms = 0;
  double c3_cpu_s = 0;  // the reference: one exact C3 decision over `size` ranks (CPU)
  std::int64_t calls_per_round = 0;
};

// This process's CPU time (the decision is single-threaded: on a loaded host its wall time is its share of a CPU).
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double peak_rss_gb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / (1024.0 * 1024.0);
}

// The reference: the CPU time of one exact C3 decision over n ranks' 64-bit keys (the fault's rank, if any, holding
// another), the mean over enough repetitions for 0.2 s of CPU.
double c3_exact_cpu_s(std::int64_t n, std::int64_t odd_rank) {
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(n), 0x5C0A7F1A9E3779B9ULL);
  if (odd_rank >= 0) keys[static_cast<std::size_t>(odd_rank)] ^= 1;
  std::int64_t reps = 0;
  std::int64_t outliers = 0;
  const double c0 = cpu_seconds();
  double spent = 0;
  while (spent < 0.2) {
    outliers += c3_exact(keys).outlier_count();
    ++reps;
    spent = cpu_seconds() - c0;
  }
  if (outliers != reps * (odd_rank >= 0 ? 1 : 0))
    std::fprintf(stderr, "straggler_sim_bench: c3_exact missed the odd key\n");
  return spent / static_cast<double>(reps);
}

std::string shape(std::int64_t n, int which) {
  if (which == 0) return "dp=" + std::to_string(n / 8) + ",tp=8";
  const std::int64_t pp = n <= 2048 ? 4 : 8;
  return "dp=" + std::to_string(n / (8 * pp)) + ",pp=" + std::to_string(pp) + ",tp=8";
}

// A size's index in the seed: its place among 1024, 10240, 102400 (the held-out split's), else 3 + its place in
// --sizes: a size's seeds do not depend on the other sizes asked.
std::uint64_t size_index(const Options& o, std::size_t k) {
  const std::int64_t canonical[] = {1024, 10240, 102400};
  for (std::uint64_t c = 0; c < 3; ++c)
    if (o.sizes[k] == canonical[c]) return c;
  return 3 + k;
}

std::uint64_t seed_of(const Options& o, std::size_t k, int scenario, std::int64_t i) {
  return o.base + 1'000'000 * size_index(o, k) + 1000 * static_cast<std::uint64_t>(scenario) +
         static_cast<std::uint64_t>(i);
}

Result<Outcome> run_one(const Options& o, std::size_t k, int scenario, std::int64_t i) {
  Outcome out;
  out.size = o.sizes[k];
  out.scenario = k_scenarios[scenario];
  out.seed = seed_of(o, k, scenario, i);
  std::mt19937_64 draw(out.seed);
  Spec spec;
  spec.mesh = shape(out.size, static_cast<int>(draw() % 2));
  out.mesh = spec.mesh;
  spec.seed = out.seed ^ 0x9E3779B97F4A7C15ULL;
  const bool large = out.size >= 65536;
  spec.program.steps_per_round = large ? o.large_steps : o.steps;
  spec.program.rounds = o.rounds;
  std::uniform_real_distribution<double> u01(0, 1);
  const std::int64_t victim = static_cast<std::int64_t>(draw() % static_cast<std::uint64_t>(out.size));
  if (out.scenario == "slow-gpu") {
    spec.fault = {FaultKind::slow_gpu, victim, o.gpu_lo + (o.gpu_hi - o.gpu_lo) * u01(draw)};
  } else if (out.scenario == "slow-nic") {
    spec.fault = {FaultKind::slow_nic, victim, 2 + 8 * u01(draw)};
  }
  out.truth_rank = spec.fault.kind == FaultKind::slow_gpu ? victim : -1;
  out.factor = spec.fault.factor;
  out.fault_rank = spec.fault.kind == FaultKind::none ? -1 : victim;
  const auto t0 = std::chrono::steady_clock::now();
  auto run = simulate(spec);
  if (!run) return run.error();
  const auto t1 = std::chrono::steady_clock::now();
  const double c1 = cpu_seconds();
  const auto analysis = straggler::analyse(run->evidence, run->mesh, straggler::DecideOptions{});
  const auto t2 = std::chrono::steady_clock::now();
  out.decide_cpu_s = cpu_seconds() - c1;
  out.c3_cpu_s = c3_exact_cpu_s(out.size, out.fault_rank);
  out.sim_s = std::chrono::duration<double>(t1 - t0).count();
  out.decide_s = std::chrono::duration<double>(t2 - t1).count();
  out.step_ms = run->step_ms;
  out.calls_per_round = spec.program.steps_per_round * run->calls_per_step;
  const auto& d = analysis.decision;
  out.diagnosis = std::string(straggler::diagnosis_name(d.diagnosis));
  for (const auto& s : d.suspects)
    if (s.reason == "compute" && s.rank >= 0) {
      out.named.push_back(s.rank);
      out.measure[s.rank] = s.evidence.value("measure", "?");
    }
  const bool hit = out.truth_rank >= 0 && std::count(out.named.begin(), out.named.end(), out.truth_rank) > 0;
  out.tp = hit ? 1 : 0;
  out.fn = out.truth_rank >= 0 && !hit ? 1 : 0;
  out.fp = static_cast<std::int64_t>(out.named.size()) - out.tp;
  // Slow groups: right where a slow NIC's groups are found, wrong anywhere else.
  std::set<std::uint64_t> truth_groups;
  if (spec.fault.kind == FaultKind::slow_nic)
    for (auto gi : groups_through_nic(spec, *run, victim)) truth_groups.insert(run->groups[gi].id);
  out.groups_truth = static_cast<std::int64_t>(truth_groups.size());
  for (const auto& g : d.slow_groups) {
    (truth_groups.count(g.group.id) ? out.groups_right : out.groups_wrong) += 1;
    out.slow_kinds += (out.slow_kinds.empty() ? "" : ",") + g.group.kind;
  }
  return out;
}

void print_run(const Outcome& r) {
  std::string named;
  for (auto n : r.named) named += (named.empty() ? "" : ",") + std::to_string(n) + "(" + r.measure.at(n) + ")";
  std::printf(
      "%-8s size %6lld seed %llu mesh %-18s fault rank %6lld factor %.3f named [%s] TP %lld FP %lld FN %lld slow "
      "groups "
      "right %lld/%lld wrong %lld [%s] diagnosis %s step %.1f ms calls/round %lld sim %.2f s decide %.2f s (CPU %.3f "
      "s; C3 exact %.2f ms CPU, x%.0f)\n",
      r.scenario.c_str(), static_cast<long long>(r.size), static_cast<unsigned long long>(r.seed), r.mesh.c_str(),
      static_cast<long long>(r.fault_rank), r.factor, named.c_str(), static_cast<long long>(r.tp),
      static_cast<long long>(r.fp), static_cast<long long>(r.fn), static_cast<long long>(r.groups_right),
      static_cast<long long>(r.groups_truth), static_cast<long long>(r.groups_wrong), r.slow_kinds.c_str(),
      r.diagnosis.c_str(), r.step_ms, static_cast<long long>(r.calls_per_round), r.sim_s, r.decide_s, r.decide_cpu_s,
      1e3 * r.c3_cpu_s, r.decide_cpu_s / r.c3_cpu_s);
  std::fflush(stdout);
}

int fail(const std::string& what) {
  std::fprintf(stderr, "straggler_sim_bench: %s\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "straggler_sim_bench [--seed BASE] [--seeds S] [--sizes N,...] [--steps N] [--rounds R] [--large-seeds S] "
          "[--large-steps N] [--only SEED] [--gpu-factors LO,HI] [--scenarios clean,slow-gpu,slow-nic]\n");
      return 0;
    }
    if (i + 1 >= argc) return fail(flag + " needs a value; see --help");
    const std::string value = argv[++i];
    if (flag == "--gpu-factors") {
      auto v = parse_double_list(value, "--gpu-factors");
      if (!v || v->size() != 2 || !((*v)[0] >= 1) || !((*v)[1] >= (*v)[0]) || (*v)[1] > 100)
        return fail("--gpu-factors takes LO,HI with 1 <= LO <= HI <= 100");
      o.gpu_lo = (*v)[0];
      o.gpu_hi = (*v)[1];
      continue;
    }
    if (flag == "--scenarios") {
      o.scenarios.clear();
      std::size_t at = 0;
      while (at <= value.size()) {
        const auto comma = value.find(',', at);
        const std::string one = value.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        if (one != "clean" && one != "slow-gpu" && one != "slow-nic")
          return fail("--scenarios: unknown scenario '" + one + "' (clean, slow-gpu, slow-nic)");
        o.scenarios.push_back(one);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      continue;
    }
    if (flag == "--sizes") {
      auto v = parse_int_list(value, "--sizes");
      if (!v) return fail(v.error().message());
      for (auto n : *v)
        if (n < 64 || n % 64 != 0 || n > 1'048'576)
          return fail("--sizes: every size must be a multiple of 64 from 64 to 1048576 (nodes of 8, pp up to 8)");
      o.sizes = *v;
      continue;
    }
    auto n = parse_int(value, flag);
    if (!n) return fail(n.error().message());
    const auto in = [&](std::int64_t lo, std::int64_t hi) { return *n >= lo && *n <= hi; };
    if (flag == "--seed" && in(0, std::int64_t{1} << 62)) {
      o.base = static_cast<std::uint64_t>(*n);
    } else if (flag == "--seeds" && in(1, 1000)) {
      o.seeds = *n;
    } else if (flag == "--large-seeds" && in(0, 1000)) {
      o.large_seeds = *n;
    } else if (flag == "--steps" && in(1, 100)) {
      o.steps = *n;
    } else if (flag == "--large-steps" && in(1, 100)) {
      o.large_steps = *n;
    } else if (flag == "--rounds" && in(1, 20)) {
      o.rounds = *n;
    } else if (flag == "--only" && in(0, std::int64_t{1} << 62)) {
      o.only = *n;
    } else {
      return fail("unknown flag or value out of range: " + flag + " " + value + "; see --help");
    }
  }
  std::printf(
      "straggler_sim_bench: base seed %llu, seeds %lld per scenario (%lld at 65536+ ranks), steps per round %lld "
      "(%lld at 65536+), rounds %lld, slow GPU factors %.3f-%.3f, decision: scout's default DecideOptions\n",
      static_cast<unsigned long long>(o.base), static_cast<long long>(o.seeds), static_cast<long long>(o.large_seeds),
      static_cast<long long>(o.steps), static_cast<long long>(o.large_steps), static_cast<long long>(o.rounds),
      o.gpu_lo, o.gpu_hi);
  const Spec defaults;
  std::printf(
      "model: nodes of %lld GPUs, NVLink %.0f GB/s alpha %.0f us, NIC %.0f GB/s alpha %.0f us; kernels fwd %.0f bwd "
      "%.0f ms x %lld microbatches, gpu sigma %.3f, kernel sigma %.3f, spikes p %.4f mean %.2f ms, tail p %.4f "
      "Pareto %.1f from %.1f ms cap %.0f ms, link sigma %.3f, congestion p %.4f; host CPU %.2f ms per call, runq "
      "%.0f%% of it\n",
      static_cast<long long>(defaults.fabric.gpus_per_node), defaults.fabric.nvlink_gbps,
      defaults.fabric.nvlink_alpha_ns / 1e3, defaults.fabric.nic_gbps, defaults.fabric.nic_alpha_ns / 1e3,
      defaults.program.fwd_ms, defaults.program.bwd_ms, static_cast<long long>(defaults.program.microbatches),
      defaults.noise.gpu_sigma, defaults.noise.kernel_sigma, defaults.noise.spike_p, defaults.noise.spike_mean_ns / 1e6,
      defaults.noise.tail_p, defaults.noise.tail_alpha, defaults.noise.tail_scale_ns / 1e6,
      defaults.noise.tail_cap_ns / 1e6, defaults.noise.link_sigma, defaults.noise.congestion_p,
      defaults.noise.host_cpu_ns / 1e6, 100 * defaults.noise.runq_share);
  std::vector<Outcome> all;
  for (std::size_t k = 0; k < o.sizes.size(); ++k) {
    const std::int64_t seeds = o.sizes[k] >= 65536 ? o.large_seeds : o.seeds;
    for (int j = 0; j < 3; ++j) {
      if (std::find(o.scenarios.begin(), o.scenarios.end(), k_scenarios[j]) == o.scenarios.end()) continue;
      for (std::int64_t i = 0; i < seeds || (o.only >= 0 && i < 1000); ++i) {
        const std::uint64_t seed = seed_of(o, k, j, i);
        if (o.only >= 0 && seed != static_cast<std::uint64_t>(o.only)) continue;
        auto r = run_one(o, k, j, i);
        if (!r) return fail(r.error().message());
        print_run(*r);
        all.push_back(std::move(*r));
      }
    }
  }
  std::printf("\n%-8s %7s %4s %3s %3s %3s %9s %7s %8s %12s %12s %10s %8s  %s\n", "scenario", "size", "runs", "TP", "FP",
              "FN", "precision", "recall", "innocent", "groups r/t", "groups wrong", "decide s", "CPU s", "measures");
  for (auto size : o.sizes) {
    std::int64_t tp_all = 0, fp_all = 0, fn_all = 0;
    std::vector<double> times, cpu_times, c3_times, ratios;
    for (const char* sc : k_scenarios) {
      std::int64_t n = 0, tp = 0, fp = 0, fn = 0, gr = 0, gt = 0, gw = 0;
      double tmax = 0, cmax = 0;
      std::map<std::string, std::int64_t> measures;
      for (const auto& r : all) {
        if (r.size != size || r.scenario != sc) continue;
        ++n;
        tp += r.tp;
        fp += r.fp;
        fn += r.fn;
        gr += r.groups_right > 0 ? 1 : 0;
        gt += r.groups_truth > 0 ? 1 : 0;
        gw += r.groups_wrong;
        tmax = std::max(tmax, r.decide_s);
        cmax = std::max(cmax, r.decide_cpu_s);
        times.push_back(r.decide_s);
        cpu_times.push_back(r.decide_cpu_s);
        c3_times.push_back(r.c3_cpu_s);
        ratios.push_back(r.decide_cpu_s / r.c3_cpu_s);
        for (const auto& [rank, m] : r.measure) ++measures[m];
      }
      if (n == 0) continue;
      tp_all += tp;
      fp_all += fp;
      fn_all += fn;
      std::string ms;
      for (const auto& [m, c] : measures) ms += m + ":" + std::to_string(c) + " ";
      const double prec = tp + fp ? static_cast<double>(tp) / static_cast<double>(tp + fp) : 1.0;
      const double rec = tp + fn ? static_cast<double>(tp) / static_cast<double>(tp + fn) : 1.0;
      std::printf("%-8s %7lld %4lld %3lld %3lld %3lld %9.3f %7.3f %8lld %5lld/%-6lld %12lld %10.2f %8.2f  %s\n", sc,
                  static_cast<long long>(size), static_cast<long long>(n), static_cast<long long>(tp),
                  static_cast<long long>(fp), static_cast<long long>(fn), prec, rec, static_cast<long long>(fp),
                  static_cast<long long>(gr), static_cast<long long>(gt), static_cast<long long>(gw), tmax, cmax,
                  ms.c_str());
    }
    if (times.empty()) continue;
    std::sort(times.begin(), times.end());
    std::sort(cpu_times.begin(), cpu_times.end());
    std::sort(c3_times.begin(), c3_times.end());
    std::sort(ratios.begin(), ratios.end());
    std::printf(
        "  size %lld: precision %.3f recall %.3f innocent %lld; decision time median %.2f s, max %.2f s (CPU median "
        "%.3f s, max %.3f s); reference, exact C3 over %lld ranks: CPU median %.3f ms; decision CPU / exact C3 CPU: "
        "median x%.0f, max x%.0f\n",
        static_cast<long long>(size),
        tp_all + fp_all ? static_cast<double>(tp_all) / static_cast<double>(tp_all + fp_all) : 1.0,
        tp_all + fn_all ? static_cast<double>(tp_all) / static_cast<double>(tp_all + fn_all) : 1.0,
        static_cast<long long>(fp_all), times[times.size() / 2], times.back(), cpu_times[cpu_times.size() / 2],
        cpu_times.back(), static_cast<long long>(size), 1e3 * c3_times[c3_times.size() / 2], ratios[ratios.size() / 2],
        ratios.back());
  }
  // The slow GPUs by factor: the decision's floor is min_relative (1.12x).
  const double edges[] = {1.05, 1.12, 1.3, 2.01};
  for (int b = 0; b < 3; ++b) {
    std::int64_t n = 0, hit = 0;
    for (const auto& r : all)
      if (r.scenario == "slow-gpu" && r.factor >= edges[b] && r.factor < edges[b + 1]) {
        ++n;
        hit += r.tp;
      }
    if (n)
      std::printf("slow GPU %.2f-%.2fx: named %lld of %lld\n", edges[b], edges[b + 1], static_cast<long long>(hit),
                  static_cast<long long>(n));
  }
  std::printf("peak RSS %.2f GB\n", peak_rss_gb());
  return 0;
}
