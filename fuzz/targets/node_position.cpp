// Fuzz target: the hang probe's first phase, as an observer receives it: a
// table of 64-byte node positions (each after the job token's tag verified: a
// peer with the token, or a bug) and the rule that lets them alone prove a job
// healthy. Input: consecutive 64-byte positions (a short tail is one malformed
// position), then the threshold from the first 8 bytes.
#include <cstring>

#include "fuzz/targets/fuzz_support.hpp"
#include "lib/hang/position.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 64 * hang::k_node_position_bytes) return 0;
  std::vector<std::optional<hang::NodePosition>> table;
  for (std::size_t at = 0; at < size; at += hang::k_node_position_bytes) {
    const std::size_t n = std::min(hang::k_node_position_bytes, size - at);
    std::vector<std::uint8_t> bytes(data + at, data + at + n);
    auto p = hang::decode_node_position(bytes);
    if (n != hang::k_node_position_bytes) SCOUT_FUZZ_CHECK(!p);
    if (p)
      SCOUT_FUZZ_CHECK(p->observer >= 0 && p->collected_ns >= 0 && p->newest_progress_ns >= 0 && p->world_size >= 0);
    table.push_back(p);
  }
  std::int64_t threshold = 5'000'000'000;
  if (size >= 8) std::memcpy(&threshold, data, 8);
  const bool proved = hang::positions_prove_healthy(table, threshold);
  if (proved)
    for (const auto& p : table) SCOUT_FUZZ_CHECK(p && p->clean && p->ranks > 0);
  return 0;
}
