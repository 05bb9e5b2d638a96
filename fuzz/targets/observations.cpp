// Fuzz target: an observations document (`scout catalog build --observations`),
// checked against the kernel configuration it names (when that one is valid)
// and against a fixed one, and written back.
#include <nlohmann/json.hpp>

#include "fuzz/targets/fuzz_support.hpp"
#include "lib/catalog/catalog_io.hpp"

using namespace scout;

namespace {

void check(std::string_view text, const catalog::KernelConfig& config) {
  auto o = catalog::parse_observations(text, config, "observations.json");
  if (!o) {
    SCOUT_FUZZ_CHECK(o.error().code == ExitCode::bad_input);
    return;
  }
  // What was accepted is written back as a document that reads the same.
  auto doc = catalog::observations_to_json(config, *o);
  auto again = catalog::parse_observations(doc.dump(), config, "again");
  SCOUT_FUZZ_CHECK(again.ok() && again->size() == o->size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  catalog::KernelConfig fixed;
  fixed.experts = 4;
  check(text, fixed);
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_object() && j.contains("kernel")) {
    auto named = catalog::kernel_config_from_json(j["kernel"], "kernel");
    if (named && named->experts <= 64) check(text, *named);
  }
  return 0;
}
