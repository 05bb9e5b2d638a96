#include "lib/common/json_input.hpp"

namespace scout {

namespace {

// Nesting depth of arrays and objects in JSON text (strings skipped); stops
// counting once it exceeds `limit`.
bool nesting_within(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limit) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

// A DOM-building SAX handler that refuses nesting deeper than a limit.
class BoundedSax : public nlohmann::detail::json_sax_dom_parser<nlohmann::json> {
 public:
  using Base = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;
  BoundedSax(nlohmann::json& root, int limit) : Base(root, false), m_limit(limit) {}
  bool start_object(std::size_t n) { return ++m_depth <= m_limit && Base::start_object(n); }
  bool start_array(std::size_t n) { return ++m_depth <= m_limit && Base::start_array(n); }
  bool end_object() {
    --m_depth;
    return Base::end_object();
  }
  bool end_array() {
    --m_depth;
    return Base::end_array();
  }

 private:
  int m_limit;
  int m_depth = 0;
};

}  // namespace

nlohmann::json parse_json_input(std::string_view text, int max_depth) {
  if (!nesting_within(text, max_depth)) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
}

nlohmann::json parse_cbor_input(std::span<const std::uint8_t> bytes, int max_depth) {
  nlohmann::json out;
  try {
    BoundedSax sax(out, max_depth);
    bool ok = nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &sax, nlohmann::json::input_format_t::cbor, true);
    if (!ok || sax.is_errored()) return nlohmann::json(nlohmann::json::value_t::discarded);
  } catch (const std::exception&) {
    // e.g. out_of_range for a declared size beyond max_size(): not valid input.
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  return out;
}

std::optional<std::string> optional_string(const nlohmann::json& j, std::string_view key, std::string fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(std::string(key));
  if (it == j.end()) return fallback;
  if (!it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::string string_or(const nlohmann::json& j, std::string_view key, std::string fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(std::string(key));
  if (it == j.end() || !it->is_string()) return fallback;
  return it->get<std::string>();
}

}  // namespace scout
