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
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
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

namespace {

// Whether `bytes` is a sequence of definite-length CBOR items, walked without
// recursion. nlohmann's reader recurses into nested indefinite-length byte
// strings without emitting SAX events (so BoundedSax cannot bound it), and
// into tags: scout's writers emit neither, so both are refused up front.
bool definite_cbor(std::span<const std::uint8_t> bytes) {
  std::size_t at = 0;
  std::uint64_t pending = 1;  // items still to read
  while (pending > 0) {
    if (at >= bytes.size()) return false;
    const std::uint8_t head = bytes[at++];
    const int major = head >> 5, info = head & 31;
    if (info >= 28) return false;  // reserved, or indefinite length / break
    std::uint64_t value = static_cast<std::uint64_t>(info);
    if (info >= 24) {
      const std::size_t n = std::size_t{1} << (info - 24);
      if (bytes.size() - at < n) return false;
      value = 0;
      for (std::size_t i = 0; i < n; ++i) value = value << 8 | bytes[at++];
    }
    --pending;
    const std::uint64_t left = bytes.size() - at;
    switch (major) {
      case 2:
      case 3:  // byte and text strings: skip the payload
        if (value > left) return false;
        at += static_cast<std::size_t>(value);
        break;
      case 4:  // array: each element takes at least one byte
        if (value > left) return false;
        pending += value;
        break;
      case 5:  // map: keys and values
        if (value > left / 2) return false;
        pending += 2 * value;
        break;
      case 6:
        return false;  // tags
      default:
        break;  // integers, simple values and floats carry no children
    }
  }
  return true;
}

}  // namespace

nlohmann::json parse_cbor_input(std::span<const std::uint8_t> bytes, int max_depth) {
  nlohmann::json out;
  if (!definite_cbor(bytes)) return nlohmann::json(nlohmann::json::value_t::discarded);
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
