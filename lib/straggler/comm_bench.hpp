// The communication half of `scout straggler --bench` (lib/straggler/README.md
// "Stragglers"): a timed all-gather inside each process group of the mesh,
// over the observer session (lib/session), so communication is measured per
// group without the live job's noise. Every rank of this node is one session
// member (a thread each, member id = global rank, id space = the world); the
// members of a process group form a subgroup session and run a warm-up and
// then `iterations` timed all-gathers of the same payload. A group's time per
// iteration is the least of its members' durations (the one that arrived last
// waited least: what the all-gather costs once everyone is there); the
// group's time is the median over iterations. With several nodes every node's
// observer runs its own ranks' members against the shared store, and each
// node reports the groups it has members in.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/straggler/timing.hpp"
#include "lib/transport/store.hpp"

namespace scout::straggler {

struct CommBenchOptions {
  std::string key_namespace;  // e.g. "<token namespace>/straggler/bench"
  std::size_t payload_bytes = std::size_t{64} << 10;
  std::int64_t iterations = 5;               // timed, after one warm-up
  std::chrono::milliseconds timeout{20000};  // each formation and each operation
  std::string listen_address;                // the Gloo devices' address ("" = automatic)
  std::vector<std::int64_t> expected;        // session members (ranks); empty = the whole world
  double slow_ratio = 1.5;                   // a group this many times its kind's median is slow
};

struct GroupCommTiming {
  GroupInfo group;
  std::vector<double> iterations_ns;  // per timed iteration: least member duration
  double ns = 0;                      // median of iterations_ns
  double ratio = 1;                   // against the median of the other groups of its kind
  bool slow = false;
  std::string error;  // non-empty: not measured
};

struct CommBenchResult {
  std::vector<GroupCommTiming> groups;  // in the order of the mesh groups, only groups with a local member
  std::vector<std::string> notes;
};

// Opens one store connection (each member thread has its own).
using StoreOpener = std::function<Result<std::unique_ptr<transport::KeyValueStore>>()>;

// Runs the timed all-gathers for `local_ranks` (members of `groups`, ranks of a world of `world`).
// Never fails as a whole: a group that could not be measured carries `error`.
CommBenchResult run_comm_bench(const StoreOpener& open_store, const std::vector<GroupInfo>& groups, std::int64_t world,
                               const std::vector<std::int64_t>& local_ranks, const CommBenchOptions& options);

// Ratios and slow flags per kind (pure; run_comm_bench calls it): a group is slow when it takes at least
// `slow_ratio` times the median of the other groups of its kind (kinds with a single group are not compared).
void compare_groups(std::vector<GroupCommTiming>& groups, double slow_ratio);

}  // namespace scout::straggler
