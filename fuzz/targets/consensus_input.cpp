// Fuzz target: `scout consensus` input (stdin text; the same bytes as --values),
// then C3 over what was accepted, as the command runs it.
#include <cmath>

#include "fuzz/targets/fuzz_support.hpp"
#include "lib/consensus/c3.hpp"
#include "lib/consensus/input.hpp"

using namespace scout;

namespace {

void decide(const std::vector<InputValue>& values) {
  bool numbers = !values.empty();
  for (const auto& v : values) {
    if (v.number) SCOUT_FUZZ_CHECK(std::isfinite(*v.number));
    numbers = numbers && v.number.has_value();
  }
  if (values.empty() || values.size() > 4096) return;
  if (numbers) {
    std::vector<double> xs;
    for (const auto& v : values) xs.push_back(*v.number);
    auto exact = c3_exact_values<double>(xs);
    SCOUT_FUZZ_CHECK(exact.outliers.size() == xs.size() || exact.status != C3Status::attributed);
    auto stat = c3_statistical(xs, StatisticalOptions{});
    SCOUT_FUZZ_CHECK(stat.outliers.size() == xs.size() || stat.status != C3Status::attributed);
  } else {
    std::vector<std::string> xs;
    for (const auto& v : values) xs.push_back(v.text);
    (void)c3_exact_values<std::string>(xs);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto from_stdin = parse_values_text(text);
  if (from_stdin)
    decide(*from_stdin);
  else
    SCOUT_FUZZ_CHECK(from_stdin.error().code == ExitCode::bad_input);
  auto from_flag = parse_values_flag(text);
  if (from_flag)
    decide(*from_flag);
  else
    SCOUT_FUZZ_CHECK(from_flag.error().code == ExitCode::bad_input || from_flag.error().code == ExitCode::usage);
  return 0;
}
