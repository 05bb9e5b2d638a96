// Straggler evidence on the wire and on disk (lib/straggler/README.md "Stragglers"): a
// round's RoundEvidence as CBOR for the per-round gather between observers, and
// the rounds as JSON for --evidence-out / --evidence-in (schema
// scout.straggler-evidence). Everything read back is validated: it comes from
// another observer or a file. No I/O here.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/straggler/timing.hpp"
#include "lib/topology/mesh.hpp"

namespace scout::straggler {

// Wire form of a round's evidence (CBOR), for the gather.
std::vector<std::uint8_t> encode_round(const RoundEvidence& round, const std::string& job, std::int64_t observer);
Result<RoundEvidence> decode_round(const std::vector<std::uint8_t>& blob, const std::string& job,
                                   std::int64_t observer);

// Recorded evidence (--evidence-out / --evidence-in): the rounds as JSON, schema scout.straggler-evidence.
nlohmann::json evidence_json(const std::vector<RoundEvidence>& rounds, const std::string& job);
Result<std::vector<RoundEvidence>> parse_evidence(const std::string& text, const std::string& job,
                                                  const std::string& path);
// The job a recorded evidence file names (its "job"), for --evidence-in without --job.
Result<std::string> evidence_job(const std::string& text, const std::string& path);

// The mesh from the records' coordinates when they are a consistent row-major
// mesh of the world size; otherwise dp=world. `how` says which.
Mesh infer_mesh(const RoundEvidence& round, std::string& how);

}  // namespace scout::straggler
