// libFuzzer target: torch.distributed.checkpoint .metadata bytes.
#include <cstddef>
#include <cstdint>

#include "lib/checkpoint/checkpoint_dir.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)scout::checkpoint::parse_dcp_metadata(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  return 0;
}
