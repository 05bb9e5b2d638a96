// Fuzz target: an SRP1 pack of tensors (lib/replay/pack.hpp) as a node receives
// it from another: a recipe's files sent by the source node, a peer's inputs
// and parameters.
#include "fuzz/targets/fuzz_support.hpp"
#include "lib/replay/pack.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto p = replay::decode_pack(std::span<const std::uint8_t>(data, size));
  if (!p) {
    SCOUT_FUZZ_CHECK(p.error().code == ExitCode::bad_input);
    return 0;
  }
  // What was accepted packs again and reads back alike, tensor by tensor.
  auto again = replay::decode_pack(replay::encode_pack(*p));
  SCOUT_FUZZ_CHECK(again.ok() && again->size() == p->size());
  for (std::size_t i = 0; i < p->size(); ++i)
    SCOUT_FUZZ_CHECK(replay::hash_packed((*again)[i]) == replay::hash_packed((*p)[i]));
  return 0;
}
