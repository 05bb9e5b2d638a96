// What one replay peer reports for each recipe it ran (Algorithm 2's per-peer
// evidence), its JSON blob form for the gather, and the pure decision over
// every peer's evidence: exact C3 on the contract, then on the input, then per
// compared quantity; statistical C3 on gather and compute times.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/replay/inject.hpp"
#include "lib/report/verdict.hpp"

namespace scout::replay {

inline constexpr const char* k_evidence_schema = "scout.replay.evidence";
inline constexpr const char* k_evidence_version = "1.0";

struct RecipeEvidence {
  std::string recipe;                                  // instance id, e.g. "expert_gemm" or "expert_gemm#2"
  nlohmann::json contract = nlohmann::json::object();  // compared whole by exact C3
  std::uint64_t input_hash = 0;                        // hash of the input and RNG state as this peer will use them
  std::map<Quantity, std::uint64_t> hashes;            // compared quantities
  double gather_s = 0;                                 // timed parameter gather
  double forward_s = 0;                                // module forward (min over repeats)
  double backward_s = 0;                               // module backward (min over repeats)
  std::string error;                                   // non-empty: this peer could not run the recipe
  nlohmann::json injected = nlohmann::json::array();   // drill injections applied here (for the record)
};

struct PeerEvidence {
  std::int64_t peer = 0;   // index among the compared peers
  std::int64_t rank = -1;  // the job's rank (battery mode: the peer index)
  std::string node;
  std::vector<RecipeEvidence> recipes;
};

nlohmann::json to_json(const PeerEvidence& e);
Result<PeerEvidence> peer_evidence_from_json(const nlohmann::json& j);

struct DecideOptions {
  std::string job;
  double straggler_min_rel = 1.0;    // a time counts as slow only above (1 + this) x median ...
  double straggler_min_abs = 0.002;  // ... and this many seconds above it (module calls)
  double gather_min_abs = 0.05;      // gathers: their time is mostly latency, so a larger floor
  double kappa = 3.5;
  // Peers on this machine and the CPUs they share, where they outnumber them: a peer then
  // waits whole scheduler slices for a CPU, so module calls get a higher floor (the caller's).
  std::optional<std::pair<std::int64_t, std::int64_t>> oversubscribed;
  std::optional<std::int64_t> cycle;
  std::optional<std::string> checkpoint;
  std::string sweep = "periodic";  // periodic | full
  std::string mode = "battery";    // battery | recipe | job
};

// The verdict over every peer's evidence (nullopt: that peer's evidence never
// arrived). Pure; peer order is the order of `peers`.
Verdict decide_replay(const std::vector<std::optional<PeerEvidence>>& peers, const DecideOptions& options);

// The majority hash per recipe and quantity (from a decided verdict's
// details), for --golden files.
nlohmann::json golden_from_verdict(const Verdict& verdict);
// Compares a golden document with this run's; returns the drift list.
nlohmann::json golden_drift(const nlohmann::json& golden, const nlohmann::json& now);

std::string hash_hex(std::uint64_t h);

}  // namespace scout::replay
