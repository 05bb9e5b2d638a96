// Fuzz target: a verdict in its JSON form as an observer receives it from its
// group's leader (a two-level hang probe; after the session verified the
// sender: a peer with the job token, or a bug).
#include "fuzz/targets/fuzz_support.hpp"
#include "lib/report/verdict.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  auto v = verdict_from_json(j);
  if (!v) {
    SCOUT_FUZZ_CHECK(v.error().code == ExitCode::bad_input);
    return 0;
  }
  // What was accepted writes out and reads back alike.
  auto again = verdict_from_json(nlohmann::json(to_json(*v)));
  SCOUT_FUZZ_CHECK(again.ok() && again->suspects.size() == v->suspects.size() &&
                   again->groups.size() == v->groups.size() && again->status == v->status);
  (void)render_text(*v);
  (void)exit_code_for(*v);
  return 0;
}
