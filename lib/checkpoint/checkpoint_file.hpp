// One checkpoint file of any supported format, reduced to per-tensor digests
// (name, dtype, shape, bytes, tensor hash): safetensors and torch.save zip
// files, both read natively and streamed (lib/checkpoint/torch_file.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
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

// A zip entry whose CRC-32 did not match the bytes read: corruption inside
// that entry, found without replicas.
struct CrcFailure {
  std::string entry;                 // e.g. "archive/data/3", or "archive/data.pkl"
  std::string source;                // file of a multi-file checkpoint (DCP .distcp); empty for single files
  std::vector<std::string> tensors;  // the values stored in it (all of them for data.pkl)
  std::uint32_t expected = 0;        // from the central directory
  std::uint32_t actual = 0;          // of the bytes read
};

// Per-tensor digests of one file, sorted by name.
struct FileDigest {
  std::string path;
  FileFormat format = FileFormat::unknown;
  std::uint64_t size = 0;
  std::vector<TensorDigest> tensors;
  std::vector<CrcFailure> crc_failures;  // torch.save and DCP files
};

// Bytes done so far for one file (called from the hashing thread).
using ProgressFn = std::function<void(std::uint64_t done)>;

// Validates and hashes the file at `path` (a directory: lib/checkpoint/checkpoint_dir.hpp), streamed (bounded memory,
// reading overlapped with hashing); a strided torch view's storage is read whole into memory and hashed in the view's
// order. Errors: bad input (exit 4) naming the file and the problem, with how to fix it. `threads` hash this file's
// chunks (0: every core; digest_files gives each of its concurrent files a share).
Result<FileDigest> digest_file(const std::string& path, const ProgressFn& progress = {}, unsigned threads = 0);

// Like hash_safetensors, but through a RangeHashJob (reading overlapped with
// hashing on every core). `chunk_bytes` and `buffers` are kept for callers;
// the job sizes its own pieces.
Result<std::vector<TensorDigest>> hash_safetensors_pipelined(const SafetensorsHeader& header,
                                                             const ProgressFn& progress = {},
                                                             std::size_t chunk_bytes = std::size_t{8} << 20,
                                                             std::size_t buffers = 3);

// `size` bytes at file offset `offset`: words `first_word`... of tensor `target`.
struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::size_t target = 0;
  std::uint64_t first_word = 0;
};

// Hashes parts of one open file. The thread that adds the segments reads
// them, in the order they are added (file order for every reader here), one
// pread of up to 1 MiB per piece into a buffer: each file is read front to
// back by one thread, so the kernel's readahead streams it as it does for
// `cat` (the structure read apart from it: AsideReads). A window of 16 MiB
// wholly in the page cache (cachestat(2)) is instead mapped read-only and its
// pieces hashed in place, without the copy (unless the job's mapped pieces
// took many page faults: small folios, which cost more mapped than copied).
// A process-wide pool of hashing
// threads (one per core, shared by every file in flight, so no core idles
// while any file has work; idle threads end after 2 s) hashes each piece: the
// word sums of the ranges inside it are XORed into their targets (any order:
// the sum is associative) and, for zip entries, its CRC-32 is computed on the
// way (lib/hash/crc32.hpp) and compared with the directory's. At most
// `in_flight` pieces of a job are read and not yet hashed, and at most 4 per
// hashing thread in the whole process (memory is bounded by those buffers,
// not by the files). A file truncated while it is read is an error, not a
// crash: a short read, or a SIGBUS in the hashing of a mapped piece, which
// hash::run_sigbus_guarded turns into the same read error. add() and wait()
// are called from one thread.
// Hashing threads of the pool alive now (0 once it has been idle for 2 s).
unsigned hashing_threads_alive();

class RangeHashJob {
 public:
  // `in_flight` 0: the pool's thread count + 2 pieces read ahead of hashing.
  RangeHashJob(int fd, std::string label, ProgressFn progress = {}, unsigned in_flight = 0);
  ~RangeHashJob();  // waits for its queued pieces
  RangeHashJob(const RangeHashJob&) = delete;
  RangeHashJob& operator=(const RangeHashJob&) = delete;

  // A new word sum (0 until ranges are added to it).
  std::size_t new_target();
  // Reads the `size` bytes at `offset` here, piece by piece, and queues each
  // piece for hashing (blocks while `in_flight` pieces wait to be hashed). `ranges` lie inside them; a range that
  // starts a whole number of words after `offset` is hashed in the same pass, any other is read separately. With `crc`
  // (an entry named `entry`), a CRC-32 that differs is reported by crc_failures(). Returns the segment's id for
  // crc_failure (k_no_segment when refused: the bytes lie past the file's end, which wait() reports).
  std::size_t add(std::uint64_t offset, std::uint64_t size, std::span<const ByteRange> ranges,
                  std::optional<std::uint32_t> crc = {}, std::string entry = {});
  static constexpr std::size_t k_no_segment = static_cast<std::size_t>(-1);
  // Waits for every piece. Bad input naming the label when the file ended
  // early or could not be read.
  Status wait();
  // After wait(): the word sum of `target`; the entry, expected and actual
  // CRC of `segment` when its CRC was given and differs.
  std::uint64_t sum(std::size_t target) const;
  std::optional<CrcFailure> crc_failure(std::size_t segment) const;

  struct State;

 private:
  std::shared_ptr<State> m_state;
};

// XORs into `sums[target]` the word sum (hash::partial_sum) of every range
// of the open file `fd` through a RangeHashJob. Bad input naming `label` when
// the file ends early.
Status hash_ranges_pipelined(int fd, const std::string& label, const std::vector<ByteRange>& ranges,
                             std::vector<std::uint64_t>& sums, const ProgressFn& progress = {}, unsigned threads = 0,
                             std::size_t chunk_bytes = std::size_t{4} << 20);

// A torch.save archive whose storages are queued on a RangeHashJob:
// complete_torch_archive turns it into digests once the job is done.
struct PendingArchive {
  std::vector<TensorDigest> digests;  // hashes of streamed tensors filled in by complete_torch_archive
  std::vector<std::pair<std::size_t, std::size_t>> sums;                 // (digest index, job target)
  std::vector<std::pair<std::size_t, std::vector<std::string>>> checks;  // (job segment of a storage, tensors in it)
  std::optional<CrcFailure> pickle_failure;                              // data.pkl's CRC differs
  std::vector<CrcFailure> other_failures;  // other small entries' CRCs differ (no tensor in them)
};

// Reads the archive in bytes [base, base + length) of `fd` and queues its
// storage entries (each checked against its CRC-32) on `job`; strided views
// are hashed at once from their storage, read whole into memory.
Result<PendingArchive> queue_torch_archive(int fd, std::uint64_t base, std::uint64_t length, const std::string& label,
                                           RangeHashJob& job, unsigned threads = 0);
// The digests, sorted by name, after job.wait() succeeded; entries whose
// CRC-32 failed are appended to `crc_failures` (when given).
std::vector<TensorDigest> complete_torch_archive(PendingArchive&& pending, const RangeHashJob& job,
                                                 std::vector<CrcFailure>* crc_failures);

// Digests (sorted by name) of the torch.save archive in bytes [base, base +
// length) of `fd`: its tensors by their logical bytes, and its non-tensor
// values (TensorDigest::value) by their canonical text.
Result<std::vector<TensorDigest>> digest_torch_archive(int fd, std::uint64_t base, std::uint64_t length,
                                                       const std::string& label, const ProgressFn& progress = {},
                                                       unsigned threads = 0);

}  // namespace scout::checkpoint
