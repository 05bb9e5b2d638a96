// JSON and CBOR from the outside world (files, stdin, peers): parsing that
// never throws and bounds the nesting depth, and field getters that never
// throw on a wrong type. Deep nesting is refused at parse time because
// nlohmann::json copies, dumps and compares recursively, and its CBOR reader
// recurses: "[[[[...]]]]" of a few hundred kB overflowed the stack (found by
// the fuzz targets, fuzz/corpus/*/regress-deep-*).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace scout {

// Deeper than any document scout reads or writes.
inline constexpr int k_max_json_depth = 64;

// The JSON document in `text`; discarded (is_discarded()) when it is not valid
// JSON or nests arrays/objects deeper than `max_depth`.
nlohmann::json parse_json_input(std::string_view text, int max_depth = k_max_json_depth);

// The CBOR document in `bytes`; discarded when invalid, nested deeper than
// `max_depth`, or declaring a size the parser refuses. Never throws.
nlohmann::json parse_cbor_input(std::span<const std::uint8_t> bytes, int max_depth = k_max_json_depth);

// Optional string field `key` of `j`: `fallback` when absent (or j is not an
// object), the string when it is one, nullopt when present with another type.
std::optional<std::string> optional_string(const nlohmann::json& j, std::string_view key, std::string fallback = {});

// String field `key` of `j`, or `fallback` when absent or not a string.
std::string string_or(const nlohmann::json& j, std::string_view key, std::string fallback = {});

}  // namespace scout
