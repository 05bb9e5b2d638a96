// The compact encoding of a RankSnapshot (snapshot.hpp) for transport between
// observers: every field, the whole ring (up to layout::k_ring_size events,
// each with its failed flag) and the ring's events/dropped counters. A JSON
// value built for CBOR (short keys, fingerprints as arrays); the hang evidence
// blob (lib/hang/evidence.hpp) and any later observer capability use it, so
// no consumer keeps a cut-down copy of the ring.
#pragma once

#include <nlohmann/json.hpp>

#include "lib/common/error.hpp"
#include "lib/records/snapshot.hpp"

namespace scout::records {

// Most ring events a decoded snapshot may hold (the ring's size).
std::size_t max_encoded_events();

// `s` as a compact JSON object (for json::to_cbor).
nlohmann::json encode_snapshot(const RankSnapshot& s);

// Parses encode_snapshot()'s form; input error on a missing field, a value out
// of range (enum codes, rank outside [0, world size)), or more ring events
// than a record holds.
Result<RankSnapshot> decode_snapshot(const nlohmann::json& j);

// A fingerprint as the compact array [group, type, dtype, count, root_or_op, group_seq].
nlohmann::json encode_fingerprint(const Fingerprint& f);
// Throws std::exception (out_of_range, type_error) on malformed input.
Fingerprint decode_fingerprint_array(const nlohmann::json& j);

}  // namespace scout::records
