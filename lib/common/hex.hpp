// The one spelling of a 64-bit id or hash in every document scout writes
// (docs/contracts.md "JSON conventions"): a JSON string "0x" followed by exactly 16
// lowercase hex digits, e.g. "0x00000000000000ff". JSON numbers above 2^53
// lose precision in most readers (jq, JavaScript, Python's json with floats),
// so no 64-bit id or hash is ever written as a number.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace scout {

inline std::string hex64(std::uint64_t value) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string out = "0x0000000000000000";
  for (int i = 17; i >= 2; --i, value >>= 4) out[static_cast<std::size_t>(i)] = k_digits[value & 0xf];
  return out;
}

// Parses hex64's form (the prefix and exactly 16 digits; upper-case digits are
// read too, never written); nullopt otherwise.
inline std::optional<std::uint64_t> parse_hex64(std::string_view text) {
  if (text.size() != 18 || text[0] != '0' || text[1] != 'x') return std::nullopt;
  std::uint64_t v = 0;
  for (std::size_t i = 2; i < text.size(); ++i) {
    const char c = text[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return std::nullopt;
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  return v;
}

}  // namespace scout
