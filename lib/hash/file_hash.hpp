// The tensor evidence hash of a whole file's bytes, taken as one tensor of
// dtype U8 and shape [size] (`scout hash --raw`; schemas/tensor-hash.md).
#pragma once

#include <cstdint>
#include <string>

#include "lib/common/error.hpp"

namespace scout::hash {

struct RawFileHash {
  std::uint64_t size = 0;  // bytes
  std::uint64_t hash = 0;  // hash_tensor(U8, [size], bytes)
};

// Hashes the regular file at `path` zero-copy from a read-only mapping with
// `threads` threads (0: all cores; the value does not depend on it). Bad
// input naming the path when it cannot be opened, is not a regular file or
// cannot be mapped.
Result<RawFileHash> hash_raw_file(const std::string& path, unsigned threads = 0);

}  // namespace scout::hash
