// The peers of a replay on this node (`scout replay --battery`, `--recipe`): forked processes, each one peer
// of the run (run_peer, runner.hpp), meeting at a store (a private file store on one machine, the run's shared one
// across nodes); the first that gathered hands back every peer's evidence.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/replay/evidence.hpp"
#include "lib/replay/inject.hpp"
#include "lib/replay/runner.hpp"
#include "lib/transport/store.hpp"

namespace scout::replay {

// What every local peer runs with (the rest of PeerRunOptions is per peer).
struct LocalPeersOptions {
  std::int64_t peers = 4;  // on this node
  std::uint64_t seed = 1;
  int threads = 1;
  int repeat = 3;
  std::string device = "cpu";                // "cuda": peer i computes on cuda:i
  std::chrono::milliseconds timeout{30000};  // each transport step
};

// What the local peers gathered (every peer holds every peer's evidence).
struct PeersOutcome {
  std::vector<std::optional<PeerEvidence>> evidence;  // in peer order, all nodes' peers
  std::vector<int> codes;                             // each local peer's exit status
  std::vector<std::string> errors;
  nlohmann::json notes = nlohmann::json::array();
};

// A hosted tcp:// store must outlive every peer's last read: each peer counts
// itself done (`count_self`) and the host waits (bounded) for all `peers` of
// them under `key_namespace`.
void wait_all_done(transport::KeyValueStore& store, const std::string& key_namespace, std::int64_t peers,
                   std::chrono::milliseconds timeout, bool count_self, bool host);

// The address this node's replay peers (and its recipe exchange) bind Gloo
// to: loopback on one node; across nodes the local address that reaches a
// tcp:// store's host (an etcd:// store's first member), or for a shared file:// store the host name's (Gloo's
// automatic choice), so that peers on other machines can connect.
std::string peer_listen_address(const std::optional<transport::StoreUri>& shared, std::int64_t nodes);

// Forks this node's --peers peer processes (global peer ids node_index *
// peers + i of nodes * peers), each bounded, and reads what they gathered.
// `shared`: the store every node meets at (nullopt: a private file store);
// `parent_hosts`: this process already hosts its tcp:// server (no peer does).
// Unavailable when no peer gathered the evidence (its reason: the first peer's error).
Result<PeersOutcome> run_local_peers(const LocalPeersOptions& o, const std::vector<RecipeInstance>& recipes,
                                     const std::vector<Injection>& injections,
                                     const std::optional<transport::StoreUri>& shared, std::int64_t node_index,
                                     std::int64_t nodes, const std::string& ns, bool parent_hosts = false);

}  // namespace scout::replay
