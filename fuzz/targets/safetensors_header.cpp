// Fuzz target: the safetensors reader (header validation, then streaming and
// hashing of a file the header accepted). The input is the whole file.
#include <spdlog/spdlog.h>

#include "fuzz/targets/fuzz_support.hpp"
#include "lib/checkpoint/safetensors.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string path = fuzz::write_scratch("model.safetensors", data, size);
  auto h = checkpoint::read_safetensors_header(path);
  if (!h) {
    SCOUT_FUZZ_CHECK(h.error().code == ExitCode::bad_input);
    return 0;
  }
  // What the reader promises of an accepted header.
  SCOUT_FUZZ_CHECK(h->data_offset == 8 + h->header_size && h->data_offset <= h->file_size);
  const std::uint64_t data_size = h->file_size - h->data_offset;
  for (std::size_t i = 0; i < h->tensors.size(); ++i) {
    const auto& t = h->tensors[i];
    SCOUT_FUZZ_CHECK(t.begin <= t.end && t.end <= data_size);
    if (i > 0) SCOUT_FUZZ_CHECK(h->tensors[i - 1].begin <= t.begin);
  }
  auto digests = checkpoint::hash_safetensors(*h);
  SCOUT_FUZZ_CHECK(digests.ok());
  SCOUT_FUZZ_CHECK(digests->size() == h->tensors.size());
  return 0;
}
