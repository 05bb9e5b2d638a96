// Strict parsing of numbers and lists from the outside world (flags, stdin,
// files). Every function rejects trailing junk, empty fields and non-finite
// values, and names the offending text in its error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/error.hpp"

namespace scout {

// Splits `text` on `sep`, keeping empty fields (so callers can reject them).
std::vector<std::string_view> split(std::string_view text, char sep);

// Trims ASCII whitespace at both ends.
std::string_view trim(std::string_view text);

// Parses a base-10 signed integer; `what` names the field in errors.
Result<std::int64_t> parse_int(std::string_view text, std::string_view what);

// Parses a finite double (NaN and infinities are rejected); `what` names the field.
Result<double> parse_double(std::string_view text, std::string_view what);

// Parses "1,2,3" into finite doubles; empty fields are errors.
Result<std::vector<double>> parse_double_list(std::string_view text, std::string_view what);

// Parses "0,3,7" or ranges "0-7,9" into non-negative integers.
Result<std::vector<std::int64_t>> parse_int_list(std::string_view text, std::string_view what);

}  // namespace scout
