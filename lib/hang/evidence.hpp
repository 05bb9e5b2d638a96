// The evidence one observer contributes to a hang probe: the snapshots of its
// node's ranks, what the OS says about each rank's process, and the records it
// could not read. Serialized as a compact blob (CBOR) for the gather; the
// transport authenticates blobs (lib/transport/auth.hpp), not this layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/hang/process_state.hpp"
#include "lib/hang/ring_digest.hpp"
#include "lib/records/snapshot.hpp"

namespace scout::hang {

// Layout version of the serialized blob; a reader refuses other versions.
// Version 2: snapshots in the records codec (lib/records/snapshot_codec.hpp),
// with the whole ring and its counters; record issues name their attempt.
inline constexpr std::int64_t k_evidence_version = 2;

// One rank as seen by its node's observer.
struct RankEvidence {
  records::RankSnapshot snapshot;
  bool writer_alive = false;  // the reader's own liveness check (pid + start time)
  ProcessEvidence process;    // what /proc says about snapshot.pid
  // The compact form a stall's first gather sends (position.hpp): the ring is
  // left out of snapshot.recent and described by its digest instead.
  std::optional<RingDigest> ring;
  // Set by restore_rings() where no representative's ring rebuilt this rank's:
  // its history is unknown (decide() neither judges it nor compares with it).
  bool ring_lost = false;
};

// A record that could not be turned into a snapshot.
struct RecordIssue {
  std::string segment;
  std::string problem;  // records::record_problem_name(...), or "stale"
  std::string message;
  std::int64_t rank = -1;       // when the segment name or header tells it, else -1
  bool writer_alive = false;    // the reader's liveness check of the writer named in the header
  std::string attempt;          // the attempt the record belongs to, when it could be read ("" unknown)
  std::int64_t world_size = 0;  // the record's world size, when it could be read (0 unknown)
};

// Everything one observer knows, at `collected_ns` (CLOCK_REALTIME).
struct NodeEvidence {
  std::int64_t observer = -1;  // the observer's index (node index) in the probe
  std::string node;            // node name (host)
  std::string job;
  std::string attempt;
  std::int64_t collected_ns = 0;
  std::vector<RankEvidence> ranks;
  std::vector<RecordIssue> issues;
};

// Serializes `evidence` to a compact versioned blob.
std::vector<std::uint8_t> serialize(const NodeEvidence& evidence);

// Parses a blob made by serialize(); input errors on anything malformed,
// of another version, or out of range.
Result<NodeEvidence> deserialize(const std::vector<std::uint8_t>& blob);

// The rank named by a segment "scout.<job>.<rank>"-style name (last '.'- or
// '-'-separated field when it is a number), or -1.
std::int64_t rank_from_segment(const std::string& segment);

}  // namespace scout::hang
