// Fuzz target: a hang evidence blob as an observer receives it from a peer
// (after the job token's tag verified: a peer with the token, or a bug).
#include "fuzz/targets/fuzz_support.hpp"
#include "lib/hang/evidence.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> blob(data, data + size);
  auto e = hang::deserialize(blob);
  if (!e) {
    SCOUT_FUZZ_CHECK(e.error().code == ExitCode::bad_input);
    return 0;
  }
  for (const auto& r : e->ranks) SCOUT_FUZZ_CHECK(r.snapshot.rank >= 0 && r.snapshot.rank < r.snapshot.world_size);
  // What was accepted serializes to a blob that reads back alike.
  auto again = hang::deserialize(hang::serialize(*e));
  SCOUT_FUZZ_CHECK(again.ok() && again->ranks.size() == e->ranks.size() && again->issues.size() == e->issues.size());
  (void)hang::rank_from_segment(e->node);
  return 0;
}
