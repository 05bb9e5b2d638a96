// The tensor evidence hash of a whole file's bytes, taken as one tensor of
// dtype U8 and shape [size] (`scout hash --raw`; schemas/tensor-hash.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
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
// cannot be mapped, and when it shrank while it was hashed (a read of the
// mapping past the new end raises SIGBUS; it is caught, see below).
Result<RawFileHash> hash_raw_file(const std::string& path, unsigned threads = 0);

// partial_sum (tensor_hash.hpp) of bytes of a file mapping, or nullopt when
// reading them raised SIGBUS (the file was truncated under the mapping).
// The first call installs a SIGBUS handler that returns to the guarded read
// of the faulting thread; a SIGBUS anywhere else goes to the handler that was
// there before (by default: the process ends with a core dump, as without it).
std::optional<std::uint64_t> guarded_partial_sum(std::span<const std::byte> bytes, std::uint64_t first_word);

}  // namespace scout::hash
