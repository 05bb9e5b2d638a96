#include "lib/consensus/input.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "lib/common/json_input.hpp"
#include "lib/common/parse.hpp"

namespace scout {

namespace {

Result<InputValue> make_value(std::string_view raw, std::size_t position) {
  InputValue t{std::string(trim(raw)), std::nullopt};
  std::string_view s = t.text;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && ptr == s.data() + s.size()) {
    if (!std::isfinite(v))
      return input_error(fmt::format("value {} '{}' is not finite", position + 1, t.text),
                         "NaN and infinity are not evidence", "drop the peer or give its real value");
    t.number = v;
  }
  return t;
}

}  // namespace

Result<std::vector<InputValue>> parse_values_flag(std::string_view values) {
  std::vector<InputValue> out;
  auto fields = split(values, ',');
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (trim(fields[i]).empty())
      return usage_error(fmt::format("--values: field {} is empty", i + 1), {},
                         "give one value per peer, e.g. --values 5,5,5,7");
    auto v = make_value(fields[i], i);
    if (!v) return v.error();
    out.push_back(std::move(*v));
  }
  return out;
}

Result<std::vector<InputValue>> parse_values_text(std::string_view text) {
  std::vector<InputValue> out;
  std::string_view body = trim(text);
  if (body.empty())
    return input_error("no values were given", "--values is absent and stdin is empty",
                       "pass --values v1,v2,... or pipe one value per line");
  if (body.front() == '[') {
    nlohmann::json arr = parse_json_input(body);
    if (arr.is_discarded() || !arr.is_array())
      return input_error("stdin is not a valid JSON array", {}, "write values as [5, 5, 7] or one per line");
    for (std::size_t i = 0; i < arr.size(); ++i) {
      const auto& e = arr[i];
      if (e.is_number()) {
        out.push_back({e.dump(), e.get<double>()});
      } else if (e.is_string()) {
        auto v = make_value(e.get<std::string>(), i);
        if (!v) return v.error();
        out.push_back(std::move(*v));
      } else {
        return input_error(fmt::format("JSON element {} is neither a number nor a string", i + 1));
      }
    }
    return out;
  }
  // One value per line, or several on a line separated by blanks or commas
  // ("1 1 1 2" is four values, never one).
  std::size_t start = std::string_view::npos;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    const bool sep =
        i == text.size() || text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r' || text[i] == ',';
    if (!sep && start == std::string_view::npos) start = i;
    if (sep && start != std::string_view::npos) {
      auto v = make_value(text.substr(start, i - start), out.size());
      if (!v) return v.error();
      out.push_back(std::move(*v));
      start = std::string_view::npos;
    }
  }
  return out;
}

}  // namespace scout
