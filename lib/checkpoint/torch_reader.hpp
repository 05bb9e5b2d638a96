// The C ABI between scout and its LibTorch module for reading torch.save
// files. scout never links LibTorch: it looks up `k_torch_read_symbol` with
// torch_module_symbol() (lib/plugin/module_loader.hpp) only when a .pt file is
// read. No exception crosses this boundary.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// Receives one tensor: `ctx` as given to the reader, `name` (nested dict keys
// joined by '.'), `dtype` a safetensors dtype name ("F32", "BF16", ...),
// `shape` of `rank` sizes, and its logical row-major bytes (`data`, `bytes`).
// The pointers are valid only during the call. Returns 0 to continue, anything
// else to stop reading (the reader then returns that value).
typedef int (*ScoutTorchTensorFn)(void* ctx, const char* name, const char* dtype, const std::int64_t* shape,
                                  std::size_t rank, const void* data, std::uint64_t bytes);

// Reads the torch.save zip file at `path` (a dict of tensors, possibly
// nested) and calls `fn` once per tensor, in key order. Returns 0 on success,
// 4 when the file is bad or unreadable input (message in `error`, at most
// `error_len` bytes with the terminating NUL, including how to fix it), 70 on
// an internal failure, or `fn`'s non-zero value.
typedef int (*ScoutTorchReadFn)(const char* path, ScoutTorchTensorFn fn, void* ctx, char* error, std::size_t error_len);
}

namespace scout::checkpoint {
// Name of the module's ScoutTorchReadFn export.
inline constexpr const char* k_torch_read_symbol = "scout_torch_read_tensors";
}  // namespace scout::checkpoint
