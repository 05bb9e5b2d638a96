// The hash manifest of a checkpoint directory (schemas/ckpt-manifest.schema.json):
// written once at save time, it records every file's rank, shard and
// per-tensor hashes, so bit rot found later is named by file and tensor even
// where no replica exists, and so the directory's layout needs no --mesh.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/checkpoint/layout.hpp"
#include "lib/common/error.hpp"

namespace scout::checkpoint {

inline constexpr const char* k_manifest_schema = "scout.ckpt-manifest";
inline constexpr const char* k_manifest_schema_version = "1.0";
inline constexpr const char* k_manifest_file_name = "scout-ckpt.json";

// One file as the manifest records it (path relative to the directory).
struct ManifestFile {
  std::string path;
  std::int64_t rank = -1;
  std::string shard;
  std::size_t replica = 0;
  FileDigest digest;
};

struct Manifest {
  std::string dir;
  std::string mesh;
  std::string created_at;
  std::vector<ManifestFile> files;
};

// Builds the manifest JSON for `layout` with one digest per file, in layout
// order (`digests` flattened over the replica sets).
nlohmann::ordered_json manifest_to_json(const CheckpointLayout& layout, const std::vector<FileDigest>& digests);

// Reads and validates DIR/scout-ckpt.json: schema name and major version,
// hash spec version, every field's type, relative paths without "..".
// Bad input naming the field otherwise.
Result<Manifest> read_manifest(const std::string& dir);

// The layout the manifest records (replica sets by shard, replica order).
CheckpointLayout layout_from_manifest(const Manifest& manifest);

// A tensor whose hash no longer matches the manifest.
struct ManifestMismatch {
  std::string file;
  std::int64_t rank = -1;
  std::string tensor;
  std::uint64_t expected = 0;
  std::uint64_t actual = 0;
};

// Compares fresh digests with the manifest's. Bad input when a file or tensor
// the manifest lists is missing or extra, or dtype/shape changed; returns the
// tensors whose hash changed (bit rot or tampering).
Result<std::vector<ManifestMismatch>> compare_with_manifest(const Manifest& manifest,
                                                            const std::vector<FileDigest>& digests);

}  // namespace scout::checkpoint
