// libFuzzer target: the restricted pickle reader under torch.save's allow-list
// and a small policy, plus rendering of whatever it accepts.
#include "lib/pickle/pickle.hpp"

#include <cstddef>
#include <cstdint>

#include "lib/checkpoint/torch_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  scout::pickle::Policy small = scout::checkpoint::torch_pickle_policy();
  small.max_items = 20000;
  small.max_depth = 64;
  auto doc = scout::pickle::parse(in, small);
  if (doc) {
    (void)scout::pickle::render(*doc->root, 200);
    scout::checkpoint::TorchArchive out;
    (void)scout::checkpoint::flatten_torch_value(*doc->root, "fuzz", out, [](const std::string&) {
      return scout::Result<std::pair<std::uint64_t, std::uint64_t>>(
          std::make_pair(std::uint64_t{0}, std::uint64_t{4096}));
    });
  }
  return 0;
}
