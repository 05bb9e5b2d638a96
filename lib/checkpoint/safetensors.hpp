// A native safetensors reader: header parsing with full validation, and
// streaming of tensor bytes in file order (never the whole file in memory).
//
// Format: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"k": "v"}}, then the data section; offsets are relative
// to the start of the data section.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/tensor/dtype.hpp"

namespace scout::checkpoint {

// Largest JSON header accepted (the format's own limit is 100 MB).
inline constexpr std::uint64_t k_max_safetensors_header = 100u << 20;

struct TensorEntry {
  std::string name;
  DType dtype = DType::u8;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // offsets relative to the data section
  std::uint64_t end = 0;
  std::uint64_t byte_size() const { return end - begin; }
};

struct SafetensorsHeader {
  std::string path;
  std::uint64_t file_size = 0;
  std::uint64_t header_size = 0;     // N
  std::uint64_t data_offset = 0;     // 8 + N
  std::vector<TensorEntry> tensors;  // in data order (ascending begin)
  std::map<std::string, std::string> metadata;
};

// Reads exactly `n` bytes of `fd` at `offset` into `buf`, retrying short
// reads and EINTR; false when the file ends first or a read fails.
bool read_exact(int fd, void* buf, std::size_t n, std::uint64_t offset);

// Reads of a file's structure (zip directories and local headers, pickles) made apart from the stream of its data:
// while an AsideReads for `fd` lives on this thread, read_aside reads bytes that the page cache does not hold with
// O_DIRECT, so that they leave no pages behind. A page cached ahead of a sequential stream makes the kernel's
// readahead fall back to single pages for the rest of its window (Linux page_cache_ra_order); one 30-byte local
// header read per zip entry of a cold .pt file did that to every window: 0.6-0.7 s against 0.2-0.5 s to read
// 3 x 192 MiB, system time 0.17-0.21 s against 0.04 s. Bytes already cached, reads over 1 MiB, other threads'
// reads, a file system without O_DIRECT, a kernel without cachestat(2): read_exact.
// Reads of up to 4 KiB are served from a window of the file kept per AsideReads (8 KiB read from the first
// offset it lacks, or the last read of up to 128 KiB, e.g. a zip's end): an archive's small entries, their local
// headers and its central directory lie close together, and each pread costs a system call.
class AsideReads {
 public:
  explicit AsideReads(int fd);
  ~AsideReads();
  AsideReads(const AsideReads&) = delete;
  AsideReads& operator=(const AsideReads&) = delete;

 private:
  int m_fd = -1;
  int m_direct = -1;
};
bool read_aside(int fd, void* buf, std::size_t n, std::uint64_t offset);

// Whether every page of bytes [offset, offset + n) of `fd` is in the page cache (cachestat(2)); nullopt when the
// kernel cannot say (before Linux 6.5, or the file system refuses).
std::optional<bool> pages_cached(int fd, std::uint64_t offset, std::uint64_t n);

// Reads and validates the header of the safetensors file at `path`. Errors
// (exit 4, bad input) name the file and the field: bad header length, invalid
// JSON, unknown dtype, bad shape, offsets out of range or inconsistent with
// dtype x shape, overlapping tensors, data truncated. Unreadable files are
// also bad input.
Result<SafetensorsHeader> read_safetensors_header(const std::string& path);

// Called with consecutive chunks of one tensor's bytes; `entry` says which.
using ChunkSink = std::function<void(const TensorEntry& entry, std::span<const std::byte> chunk)>;

// Streams every tensor's bytes of a validated file, in data order, through
// `sink` in chunks of at most `chunk_bytes`. `progress` (optional) gets the
// bytes done so far. Fails (bad input) if the file changed size or ends early.
Status stream_safetensors(const SafetensorsHeader& header, const ChunkSink& sink,
                          std::size_t chunk_bytes = std::size_t{8} << 20,
                          const std::function<void(std::uint64_t done)>& progress = {});

// Hash of every tensor of a validated file (lib/hash/tensor_hash.hpp), by name.
struct TensorDigest {
  std::string name;
  DType dtype = DType::u8;
  std::vector<std::int64_t> shape;
  std::uint64_t bytes = 0;
  std::uint64_t hash = 0;
  std::string source;  // file of a multi-file checkpoint that holds it (DCP .distcp, HF shard); empty for single files
  bool value = false;  // a non-tensor value (int, string, ...): hash of its canonical text, dtype U8, shape []
};
Result<std::vector<TensorDigest>> hash_safetensors(const SafetensorsHeader& header,
                                                   const std::function<void(std::uint64_t done)>& progress = {});

}  // namespace scout::checkpoint
