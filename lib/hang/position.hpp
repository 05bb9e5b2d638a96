// The first phase of a hang probe across nodes: each observer's compact,
// fixed-size node position. The observers all-gather positions first
// (session::Session::two_phase); when every node's position shows a clean
// node and the newest progress among them is recent, the job is healthy and no
// rank's record crosses the network; otherwise every node sends its full
// evidence and decide() runs as it always did. The selection is exact, not a
// heuristic: a clean node has no dead, stopped, failed or tearing-down rank and
// no record problem, so with every rank present and progress recent decide()
// could only have said "healthy" (its stall and suspect rules all need one of
// those). lib/session/README.md ("Observer session: cost model") has the costs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lib/hang/decide.hpp"
#include "lib/hang/evidence.hpp"

namespace scout::hang {

// Bytes of one encoded node position (little-endian, versioned).
inline constexpr std::size_t k_node_position_bytes = 64;

struct NodePosition {
  std::int64_t observer = -1;
  std::int64_t collected_ns = 0;        // CLOCK_REALTIME when the node's records were read
  std::int64_t newest_progress_ns = 0;  // the silence rule's newest progress over its ranks (0: none published)
  std::int64_t world_size = 0;          // the records' world size (0: no readable record)
  std::int64_t ranks = 0;               // ranks with a readable record of this attempt
  std::int64_t rank_sum = 0;            // their sum, and the wrapping sum of a 64-bit mix of each: a
  std::int64_t rank_mix_sum = 0;        // cheap check that the nodes' ranks are 0..world-1, each once
  // Every local rank's process alive and its writer live, none inside a failed call or ending on a
  // communication error, no record problem (torn, stale, another attempt), at least one rank.
  bool clean = false;
};

// The position of `evidence` (this observer's node, after its blob round trip).
std::vector<std::uint8_t> encode_node_position(const NodeEvidence& evidence);
NodePosition node_position(const NodeEvidence& evidence);
// nullopt for a blob of another size, version or magic.
std::optional<NodePosition> decode_node_position(const std::vector<std::uint8_t>& bytes);

// True when the positions alone prove the job healthy: every observer present
// and clean, their ranks exactly 0..world-1, and the newest progress less than
// `threshold_ns` before the agreed now (the newest collection time).
bool positions_prove_healthy(const std::vector<std::optional<NodePosition>>& positions, std::int64_t threshold_ns);

// The ranks a position stands for, where they are one run first..first+ranks-1 (the usual
// placement) whose sum and mix sum match the position's; nullopt otherwise (another placement,
// or no rank). A position lists no ranks; this is what a timeline trace can still name.
std::optional<std::vector<std::int64_t>> position_ranks(const NodePosition& position);

// A stall (the positions did not prove the job healthy) gathers in two more
// steps rather than every rank's ring from every node:
//  1. every node sends its compact evidence: each rank's snapshot without its
//     ring, the ring described by its digest (ring_digest.hpp), a few hundred
//     bytes a rank instead of a few KiB;
//  2. select_ring_holders() names, for each distinct ring digest, the lowest
//     node holding one; only those send their full evidence;
//  3. restore_rings() rebuilds every other rank's ring from the one with its
//     digest, with the rank's own group ids and root/op values, exactly in
//     every field decide() reads. decide() then runs as it always did.
// A job's replicas share a digest when they wait at the same call, so a stall
// asks for the rings of one node per distinct history (the culprit's, the
// victims', the majority's), not of every node.
NodeEvidence compact_evidence(const NodeEvidence& evidence);
std::vector<std::int64_t> select_ring_holders(const std::vector<std::optional<NodeEvidence>>& compact);
struct RingRestore {
  std::int64_t restored = 0;  // ranks whose ring was rebuilt from a representative's
  std::int64_t lost = 0;      // ranks left without one (its node was selected but did not answer)
};
// `nodes` holds full evidence where it was gathered and compact evidence elsewhere.
RingRestore restore_rings(std::vector<std::optional<NodeEvidence>>& nodes);

// The verdict of a probe whose positions proved the job healthy (see above):
// what decide() says of such a job, with details.ranks_listed "positions" and
// no per-rank rows (no rank's record was gathered). `input` gives job,
// command, mesh, threshold and rejected observers; its nodes are not read.
// Defined beside decide() (decide.cpp), whose healthy verdict it must match.
Verdict healthy_from_positions(const DecisionInput& input, const std::vector<NodePosition>& positions);

}  // namespace scout::hang
