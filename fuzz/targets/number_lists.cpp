// Fuzz target: the strict number parsers every flag and stdin list goes
// through (lib/common/parse.hpp: --ranks, --values, sizes).
#include <cmath>

#include "fuzz/targets/fuzz_support.hpp"
#include "lib/common/parse.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto v = parse_int(text, "n"); !v) SCOUT_FUZZ_CHECK(v.error().code != ExitCode::internal);
  if (auto v = parse_double(text, "x"); v) SCOUT_FUZZ_CHECK(std::isfinite(*v));
  if (auto v = parse_double_list(text, "xs"); v)
    for (double x : *v) SCOUT_FUZZ_CHECK(std::isfinite(x));
  if (auto v = parse_int_list(text, "ranks"); v)
    for (auto x : *v) SCOUT_FUZZ_CHECK(x >= 0);
  return 0;
}
