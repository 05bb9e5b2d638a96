// Fuzz target: a rows file (`scout catalog build --rows-file`, JSON or text)
// and the --rows specification. The first byte picks the expert count asked for.
#include <algorithm>

#include "fuzz/targets/fuzz_support.hpp"
#include "lib/catalog/catalog_io.hpp"
#include "lib/catalog/compress.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::optional<std::int64_t> experts;
  if (data[0] % 4 != 0) experts = data[0] % 9;  // 0..8, 0 included: a bad request must be an error, not a crash
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto rows = catalog::parse_rows_file(text, experts, "rows.txt");
  if (rows) {
    SCOUT_FUZZ_CHECK(rows->experts > 0);
    SCOUT_FUZZ_CHECK(rows->values.size() % static_cast<std::size_t>(rows->experts) == 0);
    if (experts) SCOUT_FUZZ_CHECK(rows->experts == *experts);
  } else {
    SCOUT_FUZZ_CHECK(rows.error().code == ExitCode::bad_input || rows.error().code == ExitCode::usage);
  }
  auto spec = catalog::parse_rows_spec(text);
  if (spec) {
    // A spec may legitimately name millions of row counts: check the ends and
    // an evenly spread sample of neighbours, not every element (the check
    // itself would dominate the run under the sanitizers).
    SCOUT_FUZZ_CHECK(!spec->empty() && spec->size() <= catalog::k_max_shapes);
    SCOUT_FUZZ_CHECK(spec->front() >= 1 && spec->back() <= catalog::k_max_rows);
    const std::size_t stride = std::max<std::size_t>(1, spec->size() / 4096);
    for (std::size_t i = 1; i < spec->size(); i += stride) SCOUT_FUZZ_CHECK((*spec)[i - 1] < (*spec)[i]);
  } else {
    SCOUT_FUZZ_CHECK(spec.error().code == ExitCode::usage || spec.error().code == ExitCode::bad_input);
  }
  return 0;
}
