#include "lib/common/parse.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace scout {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    std::size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(text.substr(start));
      return out;
    }
    out.push_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view k_space = " \t\r\n\v\f";
  std::size_t begin = text.find_first_not_of(k_space);
  if (begin == std::string_view::npos) return {};
  std::size_t end = text.find_last_not_of(k_space);
  return text.substr(begin, end - begin + 1);
}

Result<std::int64_t> parse_int(std::string_view text, std::string_view what) {
  std::string_view t = trim(text);
  if (t.empty()) return input_error(fmt::format("{} is empty", what), "expected an integer");
  if (t.front() == '+') t.remove_prefix(1);
  std::int64_t value = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec == std::errc::result_out_of_range)
    return input_error(fmt::format("{} '{}' is out of range", what, text), "expected a 64-bit integer");
  if (ec != std::errc() || ptr != t.data() + t.size())
    return input_error(fmt::format("{} '{}' is not an integer", what, text));
  return value;
}

Result<double> parse_double(std::string_view text, std::string_view what) {
  std::string_view t = trim(text);
  if (t.empty()) return input_error(fmt::format("{} is empty", what), "expected a number");
  if (t.front() == '+') t.remove_prefix(1);
  double value = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec == std::errc::result_out_of_range)
    return input_error(fmt::format("{} '{}' is out of range", what, text), "expected a finite number");
  if (ec != std::errc() || ptr != t.data() + t.size())
    return input_error(fmt::format("{} '{}' is not a number", what, text));
  if (!std::isfinite(value))
    return input_error(fmt::format("{} '{}' is not finite", what, text), "NaN and infinity are not evidence");
  return value;
}

Result<std::vector<double>> parse_double_list(std::string_view text, std::string_view what) {
  std::vector<double> out;
  auto fields = split(text, ',');
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (trim(fields[i]).empty())
      return input_error(fmt::format("{}: field {} is empty", what, i + 1),
                         "expected comma-separated numbers such as 5,5,7");
    auto v = parse_double(fields[i], fmt::format("{}: field {}", what, i + 1));
    if (!v) return v.error();
    out.push_back(*v);
  }
  return out;
}

Result<std::vector<std::int64_t>> parse_int_list(std::string_view text, std::string_view what) {
  // Most values a list may expand to (ranges included): bounds the memory any
  // flag can make scout allocate (80 MB).
  constexpr std::int64_t k_max_values = 10'000'000;
  std::vector<std::int64_t> out;
  auto fields = split(text, ',');
  for (std::size_t i = 0; i < fields.size(); ++i) {
    std::string_view f = trim(fields[i]);
    if (f.empty())
      return input_error(fmt::format("{}: field {} is empty", what, i + 1), "expected a list such as 0,2,4-7");
    std::size_t dash = f.find('-', 1);
    if (dash == std::string_view::npos) {
      auto v = parse_int(f, fmt::format("{}: field {}", what, i + 1));
      if (!v) return v.error();
      if (*v < 0) return input_error(fmt::format("{}: field {} is negative", what, i + 1));
      if (static_cast<std::int64_t>(out.size()) >= k_max_values)
        return input_error(fmt::format("{}: more than {} values", what, k_max_values));
      out.push_back(*v);
      continue;
    }
    auto lo = parse_int(f.substr(0, dash), fmt::format("{}: range start", what));
    if (!lo) return lo.error();
    auto hi = parse_int(f.substr(dash + 1), fmt::format("{}: range end", what));
    if (!hi) return hi.error();
    if (*lo < 0 || *hi < *lo)
      return input_error(fmt::format("{}: range '{}' is empty or negative", what, f),
                         "write ranges as LOW-HIGH with 0 <= LOW <= HIGH");
    if (*hi - *lo >= k_max_values - static_cast<std::int64_t>(out.size()))
      return input_error(fmt::format("{}: range '{}' is too large", what, f),
                         fmt::format("a list expands to at most {} values", k_max_values));
    for (std::int64_t v = *lo; v <= *hi; ++v) out.push_back(v);
  }
  return out;
}

}  // namespace scout
