// libscout_hash.so: scout's tensor evidence hash behind a C ABI, for the
// Python package's in-job replay (ctypes). Built from lib/hash and
// lib/tensor only (no scout_core, no LibTorch): trainers load it into their
// process. Never throws.
#include <cstdint>
#include <exception>
#include <span>

#include "lib/hash/tensor_hash.hpp"

extern "C" {

__attribute__((visibility("default"))) int scout_hash_spec_version() {
  return scout::hash::k_hash_spec_version;
}

// Hash of a contiguous row-major tensor: `dtype` is scout's DType code
// (schemas/tensor-hash.md), `shape` has `ndim` dims, `data` holds `nbytes`.
// Returns 0 and sets *out, or 1 on bad arguments.
__attribute__((visibility("default"))) int scout_hash_tensor(int dtype, const std::int64_t* shape, int ndim,
                                                             const void* data, std::uint64_t nbytes, unsigned threads,
                                                             std::uint64_t* out) {
  try {
    if (!out || ndim < 0 || ndim > 64 || (ndim > 0 && !shape) || (nbytes > 0 && !data) || dtype < 1 || dtype > 15)
      return 1;
    const auto dt = static_cast<scout::DType>(dtype);
    std::uint64_t elements = 1;
    for (int i = 0; i < ndim; ++i) {
      if (shape[i] < 0) return 1;
      elements *= static_cast<std::uint64_t>(shape[i]);
    }
    if (elements * scout::dtype_size(dt) != nbytes) return 1;
    *out = scout::hash::hash_tensor(dt, std::span(shape, static_cast<std::size_t>(ndim)),
                                    std::span(static_cast<const std::byte*>(data), nbytes), threads);
    return 0;
  } catch (const std::exception&) {
    return 1;
  }
}
}
