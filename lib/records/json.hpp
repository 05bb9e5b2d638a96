// The one JSON form of a collective's fingerprint, used by every document
// that shows one (`scout records list`, hang verdicts): the group id as a
// 64-bit id string (lib/common/hex.hpp), the type and dtype as names.
// schemas/verdict.schema.json: #/definitions/records_fingerprint.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "lib/records/snapshot.hpp"

namespace scout::records {

// "none" for 0, the dtype's name ("F32"), or "dtype<N>" for an unknown code.
std::string dtype_text(std::uint8_t code);

// {"group": "0x…", "type", "dtype", "count", "root_or_op", "group_seq"}.
nlohmann::json fingerprint_json(const Fingerprint& fingerprint);

}  // namespace scout::records
