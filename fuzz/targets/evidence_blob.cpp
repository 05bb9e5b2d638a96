// Fuzz target: a hang evidence blob as an observer receives it from a peer
// (after the job token's tag verified: a peer with the token, or a bug).
#include "fuzz/targets/fuzz_support.hpp"
#include "lib/hang/evidence.hpp"
#include "lib/hang/position.hpp"

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
  // A stall's gather: this blob's rings by digest (as sent), rebuilt from its own full ranks and
  // from its compact form's; whatever the digests claim, a ring is rebuilt only where it matches.
  std::vector<std::optional<hang::NodeEvidence>> nodes = {*e, hang::compact_evidence(*e)};
  (void)hang::select_ring_holders(nodes);
  const auto restored = hang::restore_rings(nodes);
  SCOUT_FUZZ_CHECK(restored.restored + restored.lost <= static_cast<std::int64_t>(2 * e->ranks.size()));
  for (const auto& n : nodes)
    for (const auto& r : n->ranks) SCOUT_FUZZ_CHECK(!r.ring && (r.ring_lost || r.snapshot.recent.size() <= 64));
  return 0;
}
