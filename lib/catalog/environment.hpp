// The hardware and software environment a catalog is valid for, how it is
// detected, and how a recorded environment is compared with the current one.
//
// Fields are strings; "none" means absent (no GPU, no driver, not built in).
// Detection: GPU model, SM count, compute capability, driver and CUDA runtime
// from the CUDA runtime API (device 0); NCCL from the nccl.h scout was built
// against (the library is never loaded); LibTorch from the version scout's
// torch module was built against (the module is never loaded). Each field can
// be given instead (flags), which is how a catalog is built or checked for a
// trainer's stack that differs from scout's own.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/error.hpp"

namespace scout::catalog {

inline constexpr std::string_view k_none = "none";

enum class EnvField { gpu_model = 0, sm_count, compute_capability, driver, cuda, nccl, torch };
inline constexpr std::array<EnvField, 7> k_env_fields{
    EnvField::gpu_model, EnvField::sm_count, EnvField::compute_capability, EnvField::driver, EnvField::cuda,
    EnvField::nccl,      EnvField::torch};
// JSON key of a field, e.g. "compute_capability".
std::string_view env_field_name(EnvField field);
// Command-line flag that overrides a field, e.g. "--compute-capability".
std::string_view env_field_flag(EnvField field);

// Values given on the command line; nullopt: detect.
using EnvOverrides = std::array<std::optional<std::string>, 7>;

struct Environment {
  std::array<std::string, 7> values;   // "none" when absent
  std::array<std::string, 7> sources;  // "detected", "flag" or "absent"
  std::string detection_note;          // why no GPU was detected, if none was

  const std::string& get(EnvField f) const { return values[static_cast<std::size_t>(f)]; }
};

// Validates override values: non-empty printable text without spaces at the
// ends; sm_count a positive integer or "none".
Status validate_overrides(const EnvOverrides& overrides);

// Detects what `overrides` does not give. The GPU is queried only when some
// GPU field (model, SMs, capability, driver, CUDA) is not given.
Environment detect_environment(const EnvOverrides& overrides);

// One field whose recorded and current values differ.
struct EnvDifference {
  EnvField field;
  std::string recorded;
  std::string current;
};

// Fields of `recorded` that differ from `current`, in k_env_fields order.
std::vector<EnvDifference> compare(const Environment& recorded, const Environment& current);

// {"gpu_model": ..., ..., "sources": {...}} per schemas/catalog.schema.json.
nlohmann::ordered_json to_json(const Environment& env);
// Reads an environment object; input_error naming the bad field otherwise.
Result<Environment> environment_from_json(const nlohmann::json& j);

}  // namespace scout::catalog
