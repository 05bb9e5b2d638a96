// One checkpoint file of any supported format, reduced to per-tensor digests
// (name, dtype, shape, bytes, tensor hash): safetensors and torch.save zip
// files, both read natively and streamed (lib/checkpoint/torch_file.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/checkpoint/safetensors.hpp"
#include "lib/common/error.hpp"
#include "lib/hash/tensor_hash.hpp"

namespace scout::checkpoint {

enum class FileFormat { safetensors, torch_zip, torch_legacy, unknown, dcp, hf_sharded };

// "safetensors", "torch", "torch-legacy", "unknown", "dcp", "safetensors-sharded".
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

// Validates and hashes the file at `path` (a directory: lib/checkpoint/checkpoint_dir.hpp), streamed (bounded memory, reading
// overlapped with hashing); strided torch views are hashed from a read-only
// mapping of their storage. Errors: bad input (exit 4) naming the file and
// the problem, with how to fix it.
// `threads` hash this file's chunks (0: every core; digest_files gives each
// of its concurrent files a share).
Result<FileDigest> digest_file(const std::string& path, const ProgressFn& progress = {}, unsigned threads = 0);

// Like hash_safetensors, but a reader thread fills `buffers` buffers of
// `chunk_bytes` while buffers - 2 threads (at least 1) hash, so the disk never
// waits for the hash.
Result<std::vector<TensorDigest>> hash_safetensors_pipelined(const SafetensorsHeader& header, const ProgressFn& progress = {},
                                                             std::size_t chunk_bytes = std::size_t{8} << 20,
                                                             std::size_t buffers = 3);

// `size` bytes at file offset `offset`: words `first_word`... of tensor `target`.
struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::size_t target = 0;
  std::uint64_t first_word = 0;
};

// XORs into `sums[target]` the word sum (hash::partial_sum) of every range
// of the open file `fd`: a reader thread fills buffers of `chunk_bytes` while
// `threads` hashers (0: every core) drain them in any order (the sum is
// associative), so neither the disk nor the hash waits. Bad input naming
// `label` when the file ends early.
Status hash_ranges_pipelined(int fd, const std::string& label, const std::vector<ByteRange>& ranges, std::vector<std::uint64_t>& sums,
                             const ProgressFn& progress = {}, unsigned threads = 0, std::size_t chunk_bytes = std::size_t{4} << 20);

// Digests (sorted by name) of the torch.save archive in bytes [base, base +
// length) of `fd`: its tensors by their logical bytes, and its non-tensor
// values (TensorDigest::value) by their canonical text.
Result<std::vector<TensorDigest>> digest_torch_archive(int fd, std::uint64_t base, std::uint64_t length, const std::string& label,
                                                        const ProgressFn& progress = {}, unsigned threads = 0);

}  // namespace scout::checkpoint
