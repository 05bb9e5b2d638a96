// The values an operator gives `scout consensus` (--values, or stdin: one per
// line or a JSON array), parsed into text and, where a value is a number, its
// number. Outside input: every failure is an Error naming the value.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/error.hpp"

namespace scout {

// A value as the operator wrote it, and its number when it is one.
struct InputValue {
  std::string text;
  std::optional<double> number;
};

// "--values v1,v2,...": an empty field is a usage error, NaN or infinity bad input.
Result<std::vector<InputValue>> parse_values_flag(std::string_view values);

// stdin's text: a JSON array of numbers and strings when it starts with '[',
// else one value per non-blank line. Empty text, invalid JSON, other element
// types, NaN or infinity: bad input.
Result<std::vector<InputValue>> parse_values_text(std::string_view text);

}  // namespace scout
