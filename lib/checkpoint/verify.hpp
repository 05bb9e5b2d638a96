// Certification of one checkpoint: hash every file of a layout (files in
// parallel, each streamed), run replica consensus per logical shard and, when
// a manifest exists, compare against it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/checkpoint/layout.hpp"
#include "lib/checkpoint/manifest.hpp"
#include "lib/checkpoint/replica_consensus.hpp"

namespace scout::checkpoint {

// Bytes hashed so far out of the total, for progress display (called from
// worker threads, serialized by the caller's wrapper).
using VerifyProgressFn = std::function<void(std::uint64_t done, std::uint64_t total)>;

struct VerifyOptions {
  unsigned jobs = 0;                   // files hashed at once; 0 = min(files, max(cores, 4))
  const Manifest* manifest = nullptr;  // compare with it when set
  VerifyProgressFn progress;
};

struct VerifyReport {
  CheckpointLayout layout;
  std::vector<FileDigest> digests;   // flattened in layout order
  std::vector<ShardVerdict> shards;  // one per replica set
  bool manifest_checked = false;
  std::vector<ManifestMismatch> manifest_mismatches;
  std::uint64_t bytes_read = 0;  // file bytes read
  double seconds = 0;
};

// Hashes and compares. Errors (bad input, exit 4) name the file: unreadable
// or malformed files, truncation, tensors missing or differing in dtype or
// shape between replicas, manifest entries that do not match the files.
Result<VerifyReport> verify_layout(const CheckpointLayout& layout, const VerifyOptions& options);

// Hashes the files of `paths` with `jobs` workers (0 = automatic); results in
// input order. The first failing file (in input order) is the error.
Result<std::vector<FileDigest>> digest_files(const std::vector<std::string>& paths, unsigned jobs,
                                             const VerifyProgressFn& progress);

}  // namespace scout::checkpoint
