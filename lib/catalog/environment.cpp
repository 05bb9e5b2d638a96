#include "lib/catalog/environment.hpp"

#include <fmt/format.h>

#include "lib/catalog/gpu.hpp"
#include "lib/common/parse.hpp"
#include "scout/config.hpp"

namespace scout::catalog {

std::string_view env_field_name(EnvField field) {
  switch (field) {
    case EnvField::gpu_model:
      return "gpu_model";
    case EnvField::sm_count:
      return "sm_count";
    case EnvField::compute_capability:
      return "compute_capability";
    case EnvField::driver:
      return "driver";
    case EnvField::cuda:
      return "cuda";
    case EnvField::nccl:
      return "nccl";
    case EnvField::torch:
      return "torch";
  }
  return "gpu_model";
}

std::string_view env_field_flag(EnvField field) {
  switch (field) {
    case EnvField::gpu_model:
      return "--gpu-model";
    case EnvField::sm_count:
      return "--sm-count";
    case EnvField::compute_capability:
      return "--compute-capability";
    case EnvField::driver:
      return "--driver";
    case EnvField::cuda:
      return "--cuda";
    case EnvField::nccl:
      return "--nccl";
    case EnvField::torch:
      return "--torch";
  }
  return "--gpu-model";
}

namespace {

Status check_value(EnvField field, const std::string& value, std::string_view origin) {
  auto bad = [&](std::string why) {
    return Error{
        origin == "flag" ? ExitCode::usage : ExitCode::bad_input,
        fmt::format("{} '{}' is not valid",
                    origin == "flag" ? std::string(env_field_flag(field)) : std::string(env_field_name(field)), value),
        std::move(why), "give a version such as 12.4, a model name, or 'none'"};
  };
  if (value.empty() || value.size() > 200) return bad("it must have 1 to 200 characters");
  if (trim(value) != value) return bad("it starts or ends with white space");
  for (unsigned char ch : value)
    if (ch < 0x20 || ch == 0x7f) return bad("it contains a control character");
  if (field == EnvField::sm_count && value != k_none) {
    auto n = parse_int(value, "sm_count");
    if (!n || *n < 1) return bad("the SM count must be a positive integer or 'none'");
  }
  return Ok{};
}

}  // namespace

Status validate_overrides(const EnvOverrides& overrides) {
  for (EnvField f : k_env_fields) {
    const auto& v = overrides[static_cast<std::size_t>(f)];
    if (v)
      if (auto s = check_value(f, *v, "flag"); !s) return s;
  }
  return Ok{};
}

Environment detect_environment(const EnvOverrides& overrides) {
  Environment env;
  auto given = [&](EnvField f) { return overrides[static_cast<std::size_t>(f)].has_value(); };
  const bool need_gpu = !given(EnvField::gpu_model) || !given(EnvField::sm_count) ||
                        !given(EnvField::compute_capability) || !given(EnvField::driver) || !given(EnvField::cuda);
  GpuInfo gpu;
  if (need_gpu) gpu = query_gpu();
  if (need_gpu && !gpu.present) env.detection_note = gpu.why_absent;
  auto or_none = [](const std::string& s) { return s.empty() ? std::string(k_none) : s; };
  std::array<std::string, 7> detected{or_none(gpu.model),
                                      gpu.sm_count > 0 ? std::to_string(gpu.sm_count) : std::string(k_none),
                                      or_none(gpu.compute_capability),
                                      or_none(gpu.driver),
                                      or_none(gpu.cuda_runtime),
                                      or_none(nccl_header_version()),
                                      SCOUT_WITH_TORCH ? or_none(SCOUT_TORCH_VERSION) : std::string(k_none)};
  for (EnvField f : k_env_fields) {
    const auto i = static_cast<std::size_t>(f);
    if (overrides[i]) {
      env.values[i] = *overrides[i];
      env.sources[i] = "flag";
    } else {
      env.values[i] = detected[i];
      env.sources[i] = detected[i] == k_none ? "absent" : "detected";
    }
  }
  return env;
}

std::vector<EnvDifference> compare(const Environment& recorded, const Environment& current) {
  std::vector<EnvDifference> out;
  for (EnvField f : k_env_fields)
    if (recorded.get(f) != current.get(f)) out.push_back({f, recorded.get(f), current.get(f)});
  return out;
}

nlohmann::ordered_json to_json(const Environment& env) {
  nlohmann::ordered_json j;
  for (EnvField f : k_env_fields) j[std::string(env_field_name(f))] = env.get(f);
  nlohmann::ordered_json sources;
  for (EnvField f : k_env_fields) sources[std::string(env_field_name(f))] = env.sources[static_cast<std::size_t>(f)];
  j["sources"] = sources;
  return j;
}

Result<Environment> environment_from_json(const nlohmann::json& j) {
  if (!j.is_object())
    return input_error("the catalog's environment is not an object", {},
                       "rebuild the catalog with 'scout catalog build'");
  Environment env;
  for (EnvField f : k_env_fields) {
    const std::string key(env_field_name(f));
    if (!j.contains(key) || !j[key].is_string())
      return input_error(fmt::format("the catalog's environment has no string field '{}'", key), {},
                         "rebuild the catalog with 'scout catalog build'");
    std::string v = j[key].get<std::string>();
    if (auto s = check_value(f, v, "catalog"); !s) return s.error();
    env.values[static_cast<std::size_t>(f)] = std::move(v);
    env.sources[static_cast<std::size_t>(f)] = "recorded";
  }
  return env;
}

}  // namespace scout::catalog
