// One checkpoint file of any supported format, reduced to per-tensor digests
// (name, dtype, shape, bytes, tensor hash): safetensors natively and streamed,
// torch.save zip files through the LibTorch module (loaded only for them).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/checkpoint/safetensors.hpp"
#include "lib/common/error.hpp"

namespace scout::checkpoint {

enum class FileFormat { safetensors, torch_zip, torch_legacy, unknown };

// "safetensors", "torch", "torch-legacy", "unknown".
std::string_view file_format_name(FileFormat format);

// Format of the file at `path` from its first bytes (zip magic, pickle
// protocol byte, safetensors header length); bad input when unreadable.
Result<FileFormat> detect_format(const std::string& path);

// Per-tensor digests of one file, sorted by name.
struct FileDigest {
  std::string path;
  FileFormat format = FileFormat::unknown;
  std::uint64_t size = 0;
  std::vector<TensorDigest> tensors;
};

// Bytes done so far for one file (called from the hashing thread).
using ProgressFn = std::function<void(std::uint64_t done)>;

// Validates and hashes the file at `path`. Safetensors is streamed (bounded
// memory, reading overlapped with hashing); torch files are read by the
// LibTorch module (whole file in memory: a LibTorch limit). Errors: bad input
// (exit 4) naming the file and the problem, with how to fix it; unavailable
// when the LibTorch module is needed but absent.
Result<FileDigest> digest_file(const std::string& path, const ProgressFn& progress = {});

// Like hash_safetensors, but a reader thread fills `buffers` buffers of
// `chunk_bytes` while the caller's thread hashes, so the disk never waits for
// the hash (double buffering with 2).
Result<std::vector<TensorDigest>> hash_safetensors_pipelined(const SafetensorsHeader& header, const ProgressFn& progress = {},
                                                             std::size_t chunk_bytes = std::size_t{8} << 20,
                                                             std::size_t buffers = 3);

}  // namespace scout::checkpoint
