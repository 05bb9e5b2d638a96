// One replay peer's side of Algorithm 2 over the existing transport
// (lib/transport/gather.*; the observer session of issue #10 can replace the
// three calls below without touching the rest):
//   1. broadcast: the source peer's inputs and RNG state for every recipe
//      (an all-gather where only the source sends data);
//   2. per recipe: a barrier, then the timed gather of the parameter shards;
//      the module call (forward and backward timed by the module); drill
//      injections; hashes of every compared quantity;
//   3. all-gather of every peer's evidence, which each peer returns (the
//      caller decides with decide_replay).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/replay/battery.hpp"
#include "lib/replay/evidence.hpp"
#include "lib/replay/inject.hpp"
#include "lib/transport/store.hpp"

namespace scout::replay {

struct RecipeInstance {
  std::string name;  // unique in the run: "expert_gemm", "expert_gemm#1", "blocks.2@40" (exported)
  RecipeSpec spec;
  // An exported recipe (spec.id "exported", lib/replay/exported.hpp): the
  // captured input and RNG state the source broadcasts, the parameters every
  // peer holds (each contributes its shard to the timed gather), the module file.
  std::vector<PackedTensor> exported_inputs;
  std::vector<PackedTensor> exported_params;
  std::string module_path;
};

struct PeerRunOptions {
  std::vector<RecipeInstance> recipes;
  std::int64_t peer = 0;
  std::int64_t peers = 1;
  std::int64_t source = 0;
  std::uint64_t seed = 1;
  int threads = 1;
  int repeat = 3;
  std::string device = "cpu";
  std::string key_namespace = "scout-replay";
  std::chrono::milliseconds timeout{30000};  // each transport step
  std::vector<Injection> injections;         // already resolved (no sdc:random)
  std::int64_t rank = -1;
  std::string node;
  // Peers sharing one machine's CPUs take this file lock around their module
  // call, so each time measures its own computation, not its neighbours' (empty: none).
  std::string compute_lock;
  // The address this peer's Gloo pairs bind: loopback when every peer runs on
  // this machine; across nodes, one the other nodes reach ("" = Gloo's choice
  // from the host name).
  std::string listen_address = "127.0.0.1";
};

struct PeerRunResult {
  PeerEvidence mine;
  std::vector<std::optional<PeerEvidence>> all;  // gathered, in peer order
  std::vector<std::string> notes;
};

// Runs this peer's side; unavailable when the store or the module is unusable.
// Loads the LibTorch module and sets it up for `device` ("cpu", "cuda", "cuda:N"): its environment JSON, or
// an unavailable error with the module's reason (a CPU-only LibTorch, no usable GPU). Initializes CUDA for a
// GPU device: call it in a process that forks no CUDA user afterwards.
Result<std::string> probe_module_device(const std::string& device, std::int64_t threads);

// probe_module_device in a forked child (so that this process never initializes CUDA), bounded by `timeout`;
// the child's error message comes back as an unavailable error's `what`.
Result<std::string> probe_module_device_isolated(const std::string& device, std::int64_t threads,
                                                 std::chrono::milliseconds timeout);

Result<PeerRunResult> run_peer(transport::KeyValueStore& store, const PeerRunOptions& options);

// Applies the sdc injections of `peer` for `recipe` to `results` (a pack of
// "<quantity>/<i>" tensors) and returns the per-quantity hashes; `injected`
// receives what was flipped. Pure.
std::map<Quantity, std::uint64_t> hash_results(std::vector<PackedTensor>& results, const std::string& recipe,
                                               std::int64_t peer, const std::vector<Injection>& injections,
                                               nlohmann::json& injected);

// Every --inject kind applied to `peer` and `recipe`: the slow factor (1: none).
double slow_factor(const std::vector<Injection>& injections, std::int64_t peer, const std::string& recipe);

}  // namespace scout::replay
