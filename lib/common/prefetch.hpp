// Asking the memory for data ahead of its reads, where a walk jumps from one cold run of bytes to the next (the
// hardware's prefetcher follows a stream within a run, not the jump to the next one).
#pragma once

#include <cstddef>

namespace scout {

// The cache lines of [first, last) asked for, to be read soon; no effect on what the program computes.
inline void prefetch_range(const void* first, const void* last) {
  constexpr std::size_t k_line = 64;
  const char* p = static_cast<const char*>(first);
  const char* end = static_cast<const char*>(last);
  for (; p < end; p += k_line) __builtin_prefetch(p);
}

}  // namespace scout
