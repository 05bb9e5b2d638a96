#include "lib/common/schema.hpp"

#include <fmt/format.h>

#include "lib/common/parse.hpp"

namespace scout {

Status check_schema(const nlohmann::json& doc, std::string_view schema, int major, std::string_view origin,
                    std::string_view hint) {
  if (!doc.is_object() || !doc.contains("schema") || !doc["schema"].is_string() ||
      doc["schema"].get<std::string>() != schema)
    return input_error(fmt::format("{} is not a {} document", origin, schema),
                       "its \"schema\" field is missing or different", std::string(hint));
  if (!doc.contains("schema_version") || !doc["schema_version"].is_string())
    return input_error(fmt::format("{} has no schema_version", origin), {}, std::string(hint));
  const std::string version = doc["schema_version"].get<std::string>();
  auto parts = split(version, '.');
  auto maj = parts.size() == 2 ? parse_int(parts[0], "major") : Result<std::int64_t>(input_error("bad"));
  auto min = parts.size() == 2 ? parse_int(parts[1], "minor") : Result<std::int64_t>(input_error("bad"));
  if (!maj || !min || *maj < 0 || *min < 0)
    return input_error(fmt::format("{} has schema_version '{}'", origin, version), "expected MAJOR.MINOR",
                       std::string(hint));
  if (*maj != major)
    return input_error(fmt::format("{} has schema version {} of {}", origin, version, schema),
                       fmt::format("this scout reads version {}.x only", major), std::string(hint));
  return Ok{};
}

}  // namespace scout
