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

// Runs `fn(arg)` on this thread, guarded like guarded_partial_sum: false when a read of the bytes [begin, end) (a
// file mapping) raised SIGBUS inside it, which then ends `fn` at once. `fn` may only read and compute (CRC-32, word
// sums) into memory it was given: it is left by siglongjmp, so it must hold no lock, allocate nothing and own
// nothing with a destructor. A SIGBUS at an address outside [begin, end) goes to the handler that was there before.
// Guards nest (an inner guard covers its own range only). Costs one sigprocmask per call.
bool run_sigbus_guarded(const void* begin, const void* end, void (*fn)(void*), void* arg);

}  // namespace scout::hash
