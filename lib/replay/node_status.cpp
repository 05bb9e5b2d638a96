#include "lib/replay/node_status.hpp"

#include <nlohmann/json.hpp>

#include "lib/common/hex.hpp"

namespace scout::replay {

std::vector<std::uint8_t> encode_status(const NodeStatus& s) {
  nlohmann::json j = {
      {"has", s.has}, {"error", s.error}, {"digest", hex64(s.digest)}, {"bytes", s.bytes}, {"files", s.files}};
  const std::string t = j.dump();
  return {t.begin(), t.end()};
}

std::optional<NodeStatus> decode_status(const std::vector<std::uint8_t>& b) {
  const auto j = nlohmann::json::parse(b.begin(), b.end(), nullptr, false);
  if (!j.is_object() || !j.contains("has") || !j["has"].is_boolean() || !j.contains("error") ||
      !j["error"].is_string() || !j.contains("digest") || !j["digest"].is_string() || !j.contains("bytes") ||
      !j["bytes"].is_number_unsigned() || !j.contains("files") || !j["files"].is_object())
    return std::nullopt;
  NodeStatus s;
  s.has = j["has"].get<bool>();
  s.error = j["error"].get<std::string>();
  auto d = parse_hex64(j["digest"].get<std::string>());
  if (!d) return std::nullopt;
  s.digest = *d;
  s.bytes = j["bytes"].get<std::uint64_t>();
  for (const auto& [k, v] : j["files"].items()) {
    if (!v.is_string()) return std::nullopt;
    s.files[k] = v.get<std::string>();
  }
  return s;
}

}  // namespace scout::replay
