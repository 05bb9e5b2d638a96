// A list of named tensors as one byte string: what replay broadcasts (inputs,
// RNG state), gathers (parameter shards) and passes across the LibTorch
// module's C ABI (lib/replay/torch_abi.hpp).
//   "SRP1" u32 count, per tensor: u16 name length, name, u8 dtype (DType code),
//   u8 rank, rank x i64 dims, u64 byte length, bytes. Little-endian.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/tensor/dtype.hpp"

namespace scout::replay {

struct PackedTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> data;  // row-major, dtype_size * numel bytes
};

std::vector<std::uint8_t> encode_pack(const std::vector<PackedTensor>& tensors);
// Validates everything (sizes agree with shapes, no trailing bytes); bad input otherwise.
Result<std::vector<PackedTensor>> decode_pack(std::span<const std::uint8_t> bytes);

// The tensor hash of one packed tensor (lib/hash), and of a list of them (the
// hash of the u64 vector of their hashes, so order and count matter).
std::uint64_t hash_packed(const PackedTensor& t);
std::uint64_t hash_list(const std::vector<const PackedTensor*>& tensors);

std::int64_t numel(const std::vector<std::int64_t>& shape);

}  // namespace scout::replay
