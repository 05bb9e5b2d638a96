// A discrete-event simulation of a synchronous training job for the straggler
// unit tests: every step runs the same program of collectives (one per group
// kind, in order); a collective of group G starts when its last member arrives
// and costs link(G); each rank computes before each call. The ring of each
// rank at the end of every round is what its record would hold.
#pragma once

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "lib/records/layout.hpp"
#include "lib/straggler/timing.hpp"
#include "lib/topology/mesh.hpp"

namespace scout::straggler::sim {

// Two reads of rank 0 (a baseline and a round, 1 s and 5 calls apart), for the
// evidence round-trip tests: `fill(e, i)` sets what read i holds beside them.
inline std::vector<RoundEvidence> two_reads_of_one_rank(const std::function<void(RankEvents&, int)>& fill) {
  std::vector<RoundEvidence> rounds(2);
  for (int i = 0; i < 2; ++i) {
    RankEvents e;
    e.rank = 0;
    e.read_ns = 1'000'000'000LL * (i + 1);
    e.written = 10 + 5 * static_cast<std::uint64_t>(i);
    fill(e, i);
    rounds[static_cast<std::size_t>(i)].world = 1;
    rounds[static_cast<std::size_t>(i)].ranks.push_back(e);
  }
  rounds[0].baseline = true;
  return rounds;
}

// Adds `calls` calls of kind "dp" (group_seq first_call, first_call + 1, ...) to `rank` in `t`, each with the
// same compute and wait (ms): a round built from recorded per-call means.
inline void add_uniform_calls(TimingTable& t, std::int64_t rank, double compute_ms, double wait_ms,
                              std::uint64_t first_call, std::int64_t calls) {
  const std::uint32_t dp = t.add_kind("dp");
  for (std::int64_t c = 0; c < calls; ++c) {
    CallTiming call;
    call.compute_ns = static_cast<std::int64_t>(compute_ms * 1e6);
    call.wait_ns = static_cast<std::int64_t>(wait_ms * 1e6);
    call.type = 1;
    call.count = 1;
    t.ranks.set(rank, {dp, first_call + static_cast<std::uint64_t>(c)}, call);
  }
}

struct Spec {
  Mesh mesh = *Mesh::parse("dp=4");
  std::int64_t ranks_per_node = 1;
  std::int64_t steps_per_round = 20;
  std::int64_t rounds = 3;
  double compute_ns = 2e6;                                 // per call
  double jitter = 0.04;                                    // relative, uniform +-
  double link_ns = 3e5;                                    // per call
  std::map<std::int64_t, double> compute_factor;           // rank -> factor
  std::function<double(const GroupInfo&)> link_factor;     // group -> factor (default 1)
  std::function<double(std::int64_t round)> fleet_factor;  // all compute, per round (default 1)
  // Extra ns added to one rank's compute before one call (default none): CPU taken from outside in bursts,
  // a loaded host's descheduling spikes. Called once per (rank, call) in program order.
  std::function<double(std::int64_t rank, std::uint64_t step, std::mt19937_64& rng)> extra_ns;
  // rank -> extra ns before its first call of every step only: a host-side stall (a slow data loader) in one
  // gap of a step of several calls.
  std::map<std::int64_t, double> stall_ns;
  // Scheduler counters (RankEvents::cpu_ns, runq_ns) at every read, when set: CPU used per call by a rank
  // in a round, and the share of compute_ns its main thread waits for a CPU per call.
  std::function<double(std::int64_t rank, std::int64_t round, std::mt19937_64& rng)> cpu_per_call;
  double runq_share = 0;
  std::map<std::int64_t, double> runq_extra_ns;  // rank -> more wait for a CPU per call than the others
  bool baseline = false;                         // the first read is the baseline read (no decision on it)
  std::uint64_t seed = 1;
};

inline std::vector<RoundEvidence> run(const Spec& s) {
  std::mt19937_64 rng(s.seed);
  std::uniform_real_distribution<double> u(-1, 1);
  const auto groups = mesh_groups(s.mesh);
  std::vector<std::string> kinds;
  for (const auto& g : groups)
    if (std::find(kinds.begin(), kinds.end(), g.kind) == kinds.end()) kinds.push_back(g.kind);
  const auto world = s.mesh.world_size();
  std::vector<double> t(static_cast<std::size_t>(world), 1.7e18);
  std::vector<std::vector<records::CollectiveEvent>> ev(static_cast<std::size_t>(world));
  std::map<std::uint64_t, std::uint64_t> seq;
  std::vector<RoundEvidence> out;
  std::uint64_t step = 0;
  std::vector<double> cpu(static_cast<std::size_t>(world), 5e9), runq(static_cast<std::size_t>(world), 1e9);
  std::vector<double> main_cpu(static_cast<std::size_t>(world), 4e9);
  std::vector<std::size_t> counted(static_cast<std::size_t>(world), 0);
  for (std::int64_t round = 0; round < s.rounds; ++round) {
    const double fleet = s.fleet_factor ? s.fleet_factor(round) : 1.0;
    for (std::int64_t st = 0; st < s.steps_per_round; ++st) {
      ++step;
      for (const auto& kind : kinds)
        for (const auto& g : groups) {
          if (g.kind != kind) continue;
          std::vector<double> arrive;
          double start = 0;
          for (auto m : g.members) {
            auto it = s.compute_factor.find(m);
            double f = (it == s.compute_factor.end() ? 1.0 : it->second) * fleet;
            double a = t[static_cast<std::size_t>(m)] + s.compute_ns * f * (1 + s.jitter * u(rng));
            if (s.extra_ns) a += s.extra_ns(m, step, rng);
            if (auto st = s.stall_ns.find(m); st != s.stall_ns.end() && kind == kinds.front()) a += st->second;
            arrive.push_back(a);
            start = std::max(start, a);
          }
          double lf = s.link_factor ? s.link_factor(g) : 1.0;
          double exit = start + s.link_ns * lf * (1 + s.jitter * u(rng));
          const std::uint64_t gs = ++seq[g.id];
          for (std::size_t i = 0; i < g.members.size(); ++i) {
            auto m = static_cast<std::size_t>(g.members[i]);
            records::CollectiveEvent e;
            e.fingerprint.group = g.id;
            e.fingerprint.type = records::CollectiveType::all_reduce;
            e.fingerprint.count = 1024;
            e.fingerprint.group_seq = gs;
            e.op_seq = ev[m].size() + 1;
            e.enter_ns = static_cast<std::int64_t>(arrive[i]);
            double x = exit + 2e3 * (1 + u(rng));
            e.exit_ns = static_cast<std::int64_t>(x);
            t[m] = x;
            ev[m].push_back(e);
          }
        }
    }
    RoundEvidence r;
    r.world = world;
    r.baseline = s.baseline && round == 0;
    for (std::int64_t rank = 0; rank < world; ++rank) {
      RankEvents re;
      const auto i = static_cast<std::size_t>(rank);
      re.written = ev[i].size();
      if (s.cpu_per_call) {
        const double calls = static_cast<double>(ev[i].size() - counted[i]);
        const double mine = calls * s.cpu_per_call(rank, round, rng);
        cpu[i] += mine;
        main_cpu[i] += 0.9 * mine;  // the main thread does most of the work
        auto extra = s.runq_extra_ns.find(rank);
        runq[i] += calls * (s.runq_share * s.compute_ns + (extra == s.runq_extra_ns.end() ? 0.0 : extra->second));
        counted[i] = ev[i].size();
        re.cpu_ns = static_cast<std::int64_t>(cpu[i]);
        re.runq_ns = static_cast<std::int64_t>(runq[i]);
        re.main_cpu_ns = static_cast<std::int64_t>(main_cpu[i]);
      }
      re.rank = rank;
      re.node = "node" + std::to_string(rank / s.ranks_per_node);
      re.step = step;
      re.read_ns = static_cast<std::int64_t>(t[static_cast<std::size_t>(rank)]);
      const auto& all = ev[static_cast<std::size_t>(rank)];
      std::size_t from = all.size() > records::layout::k_ring_size ? all.size() - records::layout::k_ring_size : 0;
      re.events.assign(all.begin() + static_cast<std::ptrdiff_t>(from), all.end());
      r.ranks.push_back(std::move(re));
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace scout::straggler::sim
