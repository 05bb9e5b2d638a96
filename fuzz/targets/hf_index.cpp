// libFuzzer target: Hugging Face sharded checkpoint index JSON.
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/checkpoint/checkpoint_dir.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)scout::checkpoint::parse_hf_index(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  return 0;
}
