// Fuzz target: what another node announces in round 0 of `scout replay
// --recipe DIR --nodes N` (lib/replay/node_status.hpp), as received over the
// run's store (after the session verified the sender: a peer, or a bug).
#include "fuzz/targets/fuzz_support.hpp"
#include "lib/replay/node_status.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> bytes(data, data + size);
  auto s = replay::decode_status(bytes);
  if (!s) return 0;
  // What was accepted writes out and reads back alike.
  auto again = replay::decode_status(replay::encode_status(*s));
  SCOUT_FUZZ_CHECK(again && again->has == s->has && again->error == s->error && again->digest == s->digest &&
                   again->bytes == s->bytes && again->files == s->files);
  return 0;
}
