// Replica consensus over checkpoint files: files that hold copies of the same
// logical shard are compared tensor by tensor with exact C3 over their tensor
// hashes. Pure logic over digests, so it is tested without files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/checkpoint/checkpoint_file.hpp"
#include "lib/common/error.hpp"
#include "lib/common/hex.hpp"
#include "lib/consensus/c3.hpp"

namespace scout::checkpoint {

// One file of a replica set: its path and the rank that wrote it (-1 when unknown).
struct ReplicaFile {
  std::string path;
  std::int64_t rank = -1;
};

// Files holding copies of one logical shard, in replica order.
struct ReplicaSet {
  std::string shard;  // e.g. "model_rank{rank}.safetensors tp=1", or "replicas"
  std::vector<ReplicaFile> files;
};

// A tensor whose replicas do not all hold the same hash.
struct TensorDisagreement {
  std::string tensor;
  std::vector<std::uint64_t> hashes;  // one per replica, in replica order
  C3Result result;                    // attributed (outliers named) or inconclusive
};

struct ShardVerdict {
  std::string shard;
  std::size_t tensors = 0;                        // tensors compared (each held by every replica)
  std::uint64_t bytes = 0;                        // logical bytes per replica
  std::vector<TensorDisagreement> disagreements;  // tensors whose replicas differ, by name
};

// Compares the digests of one replica set (`digests[i]` belongs to
// `set.files[i]`, tensors sorted by name). Bad input (exit 4), naming the
// files and the tensor: a tensor missing from some replicas, or replicas that
// disagree on a tensor's dtype or shape. With one file nothing is compared.
Result<ShardVerdict> compare_replicas(const ReplicaSet& set, const std::vector<FileDigest>& digests);

// The one spelling of a 64-bit hash in documents lives in lib/common/hex.hpp;
// these names are kept for the checkpoint code's callers.
inline std::string hash_hex(std::uint64_t hash) {
  return hex64(hash);
}
inline std::optional<std::uint64_t> parse_hash_hex(std::string_view text) {
  return parse_hex64(text);
}

}  // namespace scout::checkpoint
