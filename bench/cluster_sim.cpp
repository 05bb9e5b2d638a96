#include "bench/cluster_sim.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "lib/records/layout.hpp"

namespace scout::bench::cluster {

namespace {

// The simulation's clock runs from 0 in doubles (ns resolution for days); events get this CLOCK_REALTIME offset.
constexpr std::int64_t k_epoch_ns = 1'700'000'000'000'000'000;

struct Call {
  std::string kind;  // "tp", "pp" or "dp"
  Dim dim = Dim::tp;
  double bytes = 0;
  double compute_ns = 0;  // nominal kernel time before the call
};

bool finite_in(double v, double lo, double hi) {
  return std::isfinite(v) && v >= lo && v <= hi;
}

Status validate(const Spec& s, const Mesh& mesh) {
  const auto bad = [](const std::string& what) {
    return usage_error("cluster_sim: " + what, "the simulator's spec is out of its range", "fix the flag or the spec");
  };
  if (mesh.world_size() < 2 || mesh.world_size() > 1'048'576) return bad("the mesh needs 2 to 1048576 ranks");
  if (s.fabric.gpus_per_node < 1 || s.fabric.gpus_per_node > 1024) return bad("gpus_per_node must be 1-1024");
  for (double v : {s.fabric.nvlink_alpha_ns, s.fabric.nic_alpha_ns})
    if (!finite_in(v, 0, 1e9)) return bad("alpha must be 0-1e9 ns");
  for (double v : {s.fabric.nvlink_gbps, s.fabric.nic_gbps})
    if (!finite_in(v, 1e-3, 1e6)) return bad("bandwidth must be 0.001-1e6 GB/s");
  if (!finite_in(s.fabric.tree_efficiency, 0.01, 1)) return bad("tree_efficiency must be 0.01-1");
  const auto& p = s.program;
  if (p.microbatches < 1 || p.microbatches > 64) return bad("microbatches must be 1-64");
  if (p.steps_per_round < 1 || p.steps_per_round > 1000) return bad("steps_per_round must be 1-1000");
  if (p.rounds < 1 || p.rounds > 100) return bad("rounds must be 1-100");
  for (double v : {p.fwd_ms, p.bwd_ms, p.optimizer_ms, p.pre_pp_ms, p.pre_dp_ms})
    if (!finite_in(v, 0, 1e5)) return bad("kernel times must be 0-1e5 ms");
  for (double v : {p.tp_bytes, p.pp_bytes, p.dp_bytes})
    if (!finite_in(v, 0, 1e12)) return bad("message sizes must be 0-1e12 bytes");
  const auto& n = s.noise;
  for (double v : {n.gpu_sigma, n.kernel_sigma, n.link_sigma, n.host_cpu_sigma})
    if (!finite_in(v, 0, 2)) return bad("sigmas must be 0-2");
  for (double v : {n.spike_p, n.tail_p, n.congestion_p, n.main_share, n.runq_share})
    if (!finite_in(v, 0, 1)) return bad("probabilities and shares must be 0-1");
  for (double v : {n.spike_mean_ns, n.tail_scale_ns, n.tail_cap_ns, n.exit_skew_ns, n.host_cpu_ns, n.congestion_mean})
    if (!finite_in(v, 0, 1e10)) return bad("noise scales must be 0-1e10");
  if (!finite_in(n.tail_alpha, 0.1, 100)) return bad("tail_alpha must be 0.1-100");
  if (s.fault.kind != FaultKind::none) {
    if (s.fault.rank < 0 || s.fault.rank >= mesh.world_size()) return bad("the fault's rank is outside the world");
    if (!finite_in(s.fault.factor, 1, 1000)) return bad("the fault's factor must be 1-1000");
  }
  return Ok{};
}

double transfer_ns(const std::string& kind, std::size_t n, double bytes, double alpha, double bw_bytes_per_ns,
                   double tree_efficiency) {
  if (kind == "pp") return alpha + bytes / bw_bytes_per_ns;
  const double dn = static_cast<double>(n);
  const double ring = 2 * (dn - 1) * (alpha + bytes / dn / bw_bytes_per_ns);
  const double tree = 2 * std::ceil(std::log2(dn)) * alpha + 2 * bytes / (tree_efficiency * bw_bytes_per_ns);
  return std::min(ring, tree);
}

}  // namespace

std::vector<std::size_t> groups_through_nic(const Spec& s, const Run& run, std::int64_t rank) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < run.groups.size(); ++i) {
    const auto& g = run.groups[i];
    if (g.kind == "world" || std::find(g.members.begin(), g.members.end(), rank) == g.members.end()) continue;
    std::set<std::int64_t> nodes;
    for (auto m : g.members) nodes.insert(node_of(s, m));
    if (nodes.size() > 1) out.push_back(i);
  }
  return out;
}

Result<Run> simulate(const Spec& s) {
  auto parsed = Mesh::parse(s.mesh);
  if (!parsed) return parsed.error();
  const Mesh mesh = *parsed;
  if (auto st = validate(s, mesh); !st) return st.error();
  Run run;
  run.mesh = mesh;
  run.groups = straggler::mesh_groups(mesh);
  const std::int64_t world = mesh.world_size();
  const auto W = static_cast<std::size_t>(world);
  const auto& p = s.program;
  const auto& nz = s.noise;

  // The program of one step.
  std::vector<Call> program;
  double pending = p.optimizer_ms * 1e6;
  const auto add = [&](const char* kind, Dim dim, double bytes, double ms) {
    pending += ms * 1e6;
    if (mesh.size(dim) <= 1) return;
    program.push_back(Call{kind, dim, bytes, pending});
    pending = 0;
  };
  for (std::int64_t m = 0; m < p.microbatches; ++m) {
    add("tp", Dim::tp, p.tp_bytes, p.fwd_ms);
    add("pp", Dim::pp, p.pp_bytes, p.pre_pp_ms);
  }
  for (std::int64_t m = 0; m < p.microbatches; ++m) {
    add("tp", Dim::tp, p.tp_bytes, p.bwd_ms);
    add("pp", Dim::pp, p.pp_bytes, p.pre_pp_ms);
  }
  add("dp", Dim::dp, p.dp_bytes, p.pre_dp_ms);
  if (program.empty())
    return usage_error("cluster_sim: the mesh " + s.mesh + " has no dp, tp or pp dim of size > 1",
                       "the program's collectives run over those", "use a mesh such as dp=16,tp=8");
  program.front().compute_ns += pending;  // kernels after the last call run before the next step's first
  run.calls_per_step = static_cast<std::int64_t>(program.size());

  // Per kind, its groups (indices into run.groups), and per group its transfer's alpha and bandwidth.
  std::map<std::string, std::vector<std::size_t>> of_kind;
  std::vector<double> alpha(run.groups.size(), 0), bw(run.groups.size(), 0);
  for (std::size_t i = 0; i < run.groups.size(); ++i) {
    const auto& g = run.groups[i];
    of_kind[g.kind].push_back(i);
    std::set<std::int64_t> nodes;
    for (auto m : g.members) nodes.insert(node_of(s, m));
    const bool intra = nodes.size() == 1;
    alpha[i] = intra ? s.fabric.nvlink_alpha_ns : s.fabric.nic_alpha_ns;
    double gbps = intra ? s.fabric.nvlink_gbps : s.fabric.nic_gbps;
    if (!intra && s.fault.kind == FaultKind::slow_nic &&
        std::find(g.members.begin(), g.members.end(), s.fault.rank) != g.members.end())
      gbps /= s.fault.factor;
    bw[i] = gbps;  // GB/s == bytes per ns
  }

  std::mt19937_64 rng(s.seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> unit(0, 1);
  const auto lognormal = [&](double sigma) {
    return sigma > 0 ? std::exp(sigma * normal(rng) - sigma * sigma / 2) : 1.0;
  };

  std::vector<double> gpu_factor(W), clock(W, 0.0), cpu(W, 0), main_cpu(W, 0), runq(W, 0);
  for (std::size_t r = 0; r < W; ++r) gpu_factor[r] = lognormal(nz.gpu_sigma);
  if (s.fault.kind == FaultKind::slow_gpu) gpu_factor[static_cast<std::size_t>(s.fault.rank)] *= s.fault.factor;
  std::vector<std::uint64_t> op_seq(W, 0);
  std::map<std::uint64_t, std::uint64_t> group_seq;
  std::vector<std::vector<records::CollectiveEvent>> ring(W);
  std::uint64_t step = 0;
  const std::size_t keep = program.size();  // the step before a read stays in the next read's ring

  const auto host_noise = [&]() {
    double extra = 0;
    if (nz.spike_p > 0 && unit(rng) < nz.spike_p) extra += -nz.spike_mean_ns * std::log(1 - unit(rng));
    if (nz.tail_p > 0 && unit(rng) < nz.tail_p)
      extra += std::min(nz.tail_cap_ns, nz.tail_scale_ns * std::pow(1 - unit(rng), -1 / nz.tail_alpha));
    return extra;
  };

  const auto run_step = [&]() {
    ++step;
    for (const auto& call : program) {
      const auto& groups = of_kind.at(call.kind);
      const auto type = call.kind == "pp" ? records::CollectiveType::all_gather : records::CollectiveType::all_reduce;
      const auto count = static_cast<std::uint64_t>(call.bytes / 2);  // bf16 elements
      for (auto gi : groups) {
        const auto& g = run.groups[gi];
        double start = 0;
        std::vector<double> arrive(g.members.size());
        for (std::size_t k = 0; k < g.members.size(); ++k) {
          const auto m = static_cast<std::size_t>(g.members[k]);
          const double kernels = call.compute_ns * gpu_factor[m] * lognormal(nz.kernel_sigma);
          arrive[k] = clock[m] + kernels + host_noise();
          start = std::max(start, arrive[k]);
        }
        double t = transfer_ns(call.kind, g.members.size(), call.bytes, alpha[gi], bw[gi], s.fabric.tree_efficiency) *
                   lognormal(nz.link_sigma);
        if (nz.congestion_p > 0 && unit(rng) < nz.congestion_p) t *= 1 + -nz.congestion_mean * std::log(1 - unit(rng));
        const std::uint64_t gs = ++group_seq[g.id];
        for (std::size_t k = 0; k < g.members.size(); ++k) {
          const auto m = static_cast<std::size_t>(g.members[k]);
          records::CollectiveEvent e;
          e.fingerprint.group = g.id;
          e.fingerprint.type = type;
          e.fingerprint.dtype = 0;
          e.fingerprint.count = count;
          e.fingerprint.group_seq = gs;
          e.op_seq = ++op_seq[m];
          e.enter_ns = k_epoch_ns + static_cast<std::int64_t>(arrive[k]);
          const double exit = start + t + nz.exit_skew_ns * unit(rng);
          e.exit_ns = k_epoch_ns + static_cast<std::int64_t>(exit);
          e.exit_kind = records::ExitKind::completed;
          clock[m] = exit;
          ring[m].push_back(e);
          const double used = nz.host_cpu_ns * lognormal(nz.host_cpu_sigma);
          cpu[m] += used;
          main_cpu[m] += nz.main_share * used;
          runq[m] += nz.runq_share * used;
        }
      }
    }
  };

  const auto read = [&](bool baseline) {
    straggler::RoundEvidence r;
    r.world = world;
    r.baseline = baseline;
    r.ranks.reserve(W);
    for (std::size_t i = 0; i < W; ++i) {
      straggler::RankEvents re;
      re.rank = static_cast<std::int64_t>(i);
      re.node = "node" + std::to_string(node_of(s, re.rank));
      re.coords = mesh.coords(re.rank);
      re.step = step;
      re.read_ns = k_epoch_ns + static_cast<std::int64_t>(clock[i]);
      re.written = op_seq[i];
      re.cpu_ns = static_cast<std::int64_t>(cpu[i]);
      re.main_cpu_ns = static_cast<std::int64_t>(main_cpu[i]);
      re.runq_ns = static_cast<std::int64_t>(runq[i]);
      auto& events = ring[i];
      const std::size_t from =
          events.size() > records::layout::k_ring_size ? events.size() - records::layout::k_ring_size : 0;
      re.events.assign(events.begin() + static_cast<std::ptrdiff_t>(from), events.end());
      if (events.size() > keep) events.erase(events.begin(), events.end() - static_cast<std::ptrdiff_t>(keep));
      r.ranks.push_back(std::move(re));
    }
    run.evidence.push_back(std::move(r));
  };

  run_step();  // a warm-up step, then the baseline read
  read(true);
  const double t0 = clock[0];
  for (std::int64_t round = 0; round < p.rounds; ++round) {
    for (std::int64_t k = 0; k < p.steps_per_round; ++k) run_step();
    read(false);
  }
  run.step_ms = (clock[0] - t0) / 1e6 / static_cast<double>(p.rounds * p.steps_per_round);
  return run;
}

}  // namespace scout::bench::cluster
