// Element types scout understands, with their safetensors names and sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace scout {

// The numeric code of each dtype is part of the tensor hash specification
// (schemas/tensor-hash.md): never renumber, only append.
enum class DType : std::uint8_t {
  f64 = 1,
  f32 = 2,
  f16 = 3,
  bf16 = 4,
  i64 = 5,
  i32 = 6,
  i16 = 7,
  i8 = 8,
  u8 = 9,
  boolean = 10,
  f8_e4m3 = 11,
  f8_e5m2 = 12,
  u16 = 13,
  u32 = 14,
  u64 = 15,
  c64 = 16,
  c128 = 17,
  f8_e4m3fnuz = 18,
  f8_e5m2fnuz = 19,
  f8_e8m0 = 20,
};

// Size of one element in bytes.
std::size_t dtype_size(DType dtype);
// safetensors name, e.g. "F32", "BF16", "BOOL".
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype name (case-sensitive, as the format writes them).
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace scout
