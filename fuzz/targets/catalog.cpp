// Fuzz target: a catalog document as `scout catalog check` reads it.
#include "fuzz/targets/fuzz_support.hpp"
#include "lib/catalog/catalog_io.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = catalog::parse_catalog(text, "catalog.json");
  if (!c) {
    SCOUT_FUZZ_CHECK(c.error().code == ExitCode::bad_input);
    return 0;
  }
  SCOUT_FUZZ_CHECK(c->representatives <= c->shapes);
  SCOUT_FUZZ_CHECK(catalog::validate(c->config).ok());
  return 0;
}
