// A rank's collective ring in the form a stall's first gather sends instead of
// the ring itself: a 128-bit digest of every field decide() reads from the
// ring, with the rank's own process-group ids and root/op values replaced by
// their index in first-appearance order, plus those two short lists. Ranks
// whose rings agree up to those names (the replicas of a DDP job, and the
// replicas of a dp x tp x pp mesh, whose tp, pp and dp groups differ but are
// called alike) share one digest, so one of them sends its ring and the
// others' rings are rebuilt from it with their own names, exactly (every field
// decide() reads; enter and exit times and op_seq are the representative's).
// lib/session/README.md ("Observer session: cost model") has the costs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lib/records/snapshot.hpp"

namespace scout::hang {

struct RingDigest {
  std::uint64_t a = 0, b = 0;         // two independent 64-bit hashes of the normalized ring
  std::uint64_t events = 0;           // ring length
  std::vector<std::uint64_t> groups;  // the ring's process-group ids, first appearance first
  std::vector<std::int64_t> values;   // the ring's root_or_op values, first appearance first
  bool operator==(const RingDigest&) const = default;
  // Two rings with the same key are rebuilt from each other.
  bool same_shape(const RingDigest& o) const { return a == o.a && b == o.b && events == o.events; }
};

// Bounds a decoded digest must keep (a ring has at most records::layout::k_ring_size events).
inline constexpr std::size_t k_max_ring_names = 64;

RingDigest ring_digest(const std::vector<records::CollectiveEvent>& ring);

// `rep_ring` (whose digest is `rep`) rewritten with `own`'s group ids and
// root/op values; nullopt unless the two digests have the same shape and the
// rebuilt ring's digest is exactly `own` (so nothing is ever guessed).
std::optional<std::vector<records::CollectiveEvent>> rebuild_ring(const std::vector<records::CollectiveEvent>& rep_ring,
                                                                  const RingDigest& rep, const RingDigest& own);

}  // namespace scout::hang
