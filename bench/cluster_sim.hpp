// A timing simulator of a synchronous GPU-cluster training job, for scoring the
// straggler decision (lib/straggler/decide.hpp) beyond the 2-core host scout is
// tested on (bench/straggler_sim_bench.cpp, tests/unit/straggler/cluster_sim_test.cpp).
// It writes what scout reads: each rank's collective ring and scheduler counters at
// every read (straggler::RoundEvidence), so the decision runs unchanged on it.
//
// The model (fixed before any decision was scored on it; bench/heldout/split.json):
//  - Placement: a mesh dp x tp (x pp), tp fastest (scout's row-major placement), nodes of
//    `gpus_per_node` consecutive ranks. A group whose members share a node talks over NVLink,
//    any other over the members' NICs (one NIC per GPU, rail-optimized: the dp ring of tp index t
//    uses NIC t of every node).
//  - The program, the same on every rank, per step: for each of `microbatches` a forward kernel
//    segment then a tp all-reduce (and a pp exchange), then as many backward segments and tp
//    all-reduces (and pp exchanges), then the gradient all-reduce over dp; the optimizer's kernels
//    run before the next step's first call. A dim of size 1 has no call (its segment's compute
//    joins the next call's).
//  - Kernel time: each segment's nominal time x a persistent per-GPU factor (lognormal, sigma
//    `gpu_sigma`: GPUs of one model differ by about 1%) x a per-segment lognormal (sigma
//    `kernel_sigma`, ~2%) x the fault's factor on the slow GPU.
//  - Host noise added to a segment: an OS noise spike with probability `spike_p` (exponential,
//    mean `spike_mean_ns`), a heavy tail with probability `tail_p` (Pareto, scale `tail_scale_ns`,
//    index `tail_alpha`, capped at `tail_cap_ns`). Applied as if the host were never ahead of the
//    GPU's queue (harsher than a real job, whose queued kernels hide most host noise).
//  - Collectives, alpha-beta (NCCL's two algorithms, the cheaper one taken, as its tuner does):
//      ring all-reduce  2 (N - 1) (alpha + S / N / B)
//      tree all-reduce  2 ceil(log2 N) alpha + 2 S / (tree_efficiency B)
//    alpha, B: NVLink's inside a node, the NIC's across nodes, B the slowest member NIC's (a slow
//    NIC bounds the ring and the tree); a pp exchange alpha + S / B. Each call's transfer time x a
//    lognormal (sigma `link_sigma`), and with probability `congestion_p` x (1 + an exponential of
//    mean `congestion_mean`): a fabric's transient congestion.
//  - Synchrony: a collective starts when its last member arrives and every member leaves at
//    start + transfer + a skew of at most `exit_skew_ns`: a slow rank arrives last and waits
//    least, its peers wait for it. A rank's next segment starts at its exit.
//  - Timestamps: enter = the rank's arrival, exit = its leaving, i.e. the collective kernel's
//    start and end on the GPU's stream (what CUDA-event timing of the collective gives; the host's
//    enqueue times of an asynchronous job would not be this: that is the premise, not simulated).
//  - CPU counters: a GPU job's host thread uses little CPU per call and never waits for a CPU
//    (no oversubscription): per call `host_cpu_ns` (lognormal, sigma `host_cpu_sigma`), the main
//    thread `main_share` of it, its wait for a CPU `runq_share` of it; no cgroup quota, no process
//    state samples. The slow GPU's host thread uses the same CPU as the others'.
//  - Faults: none; slow_gpu (one rank's kernels x factor); slow_nic (one rank's NIC bandwidth /
//    factor: every group crossing nodes through it is slowed).
//  - Reads: a baseline read (opens the counter window, as scout's first read does), then one read
//    per round after `steps_per_round` steps. The ring at a read holds the calls since the previous
//    read and the step before it (the real ring holds the last 64; older calls belong to an earlier
//    round, which analyse() leaves out, so the decision is the same with less memory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/straggler/timing.hpp"
#include "lib/topology/mesh.hpp"

namespace scout::bench::cluster {

struct Fabric {
  std::int64_t gpus_per_node = 8;
  double nvlink_alpha_ns = 3'000;
  double nvlink_gbps = 200;  // GB/s, effective bus bandwidth per GPU
  double nic_alpha_ns = 8'000;
  double nic_gbps = 22;  // GB/s, a 200 Gb/s NIC's effective bandwidth
  double tree_efficiency = 0.85;
};

struct Program {
  std::int64_t microbatches = 2;
  double fwd_ms = 6, bwd_ms = 12, optimizer_ms = 2, pre_pp_ms = 0.3, pre_dp_ms = 1;
  double tp_bytes = 16.0 * (1 << 20), pp_bytes = 8.0 * (1 << 20), dp_bytes = 256.0 * (1 << 20);
  std::int64_t steps_per_round = 8;
  std::int64_t rounds = 3;
};

struct Noise {
  double gpu_sigma = 0.01;
  double kernel_sigma = 0.02;
  double spike_p = 0.003, spike_mean_ns = 300e3;
  double tail_p = 5e-4, tail_scale_ns = 1e6, tail_alpha = 1.5, tail_cap_ns = 50e6;
  double link_sigma = 0.05;
  double congestion_p = 0.002, congestion_mean = 1.0;
  double exit_skew_ns = 3'000;
  double host_cpu_ns = 250e3, host_cpu_sigma = 0.1, main_share = 0.85, runq_share = 0.01;
};

enum class FaultKind { none, slow_gpu, slow_nic };

struct Fault {
  FaultKind kind = FaultKind::none;
  std::int64_t rank = -1;  // the slow GPU, or the GPU whose NIC is slow
  double factor = 1;       // kernel time x factor, or NIC bandwidth / factor
};

struct Spec {
  std::string mesh = "dp=16,tp=8";
  Fabric fabric;
  Program program;
  Noise noise;
  Fault fault;
  std::uint64_t seed = 1;
};

struct Run {
  Mesh mesh;
  std::vector<straggler::GroupInfo> groups;        // straggler::mesh_groups(mesh)
  std::vector<straggler::RoundEvidence> evidence;  // the baseline read, then one per round
  std::int64_t calls_per_step = 0;
  double step_ms = 0;  // the job's mean step time (wall clock)
};

// Validates the spec (mesh, sizes, rates, the fault's rank and factor); the error names what is wrong.
Result<Run> simulate(const Spec& spec);

// Node index of a rank.
inline std::int64_t node_of(const Spec& s, std::int64_t rank) {
  return rank / s.fabric.gpus_per_node;
}

// The groups a slow NIC of `rank` slows: those that cross nodes with `rank` a member.
std::vector<std::size_t> groups_through_nic(const Spec& s, const Run& run, std::int64_t rank);

}  // namespace scout::bench::cluster
