#include "lib/checkpoint/checkpoint_file.hpp"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fmt/format.h>
#include <memory>
#include <atomic>
#include <mutex>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "lib/checkpoint/checkpoint_dir.hpp"
#include "lib/checkpoint/torch_file.hpp"
#include <sys/mman.h>
#include "lib/hash/tensor_hash.hpp"

namespace scout::checkpoint {

std::string_view file_format_name(FileFormat format) {
  switch (format) {
    case FileFormat::safetensors: return "safetensors";
    case FileFormat::torch_zip: return "torch";
    case FileFormat::torch_legacy: return "torch-legacy";
    case FileFormat::dcp: return "dcp";
    case FileFormat::hf_sharded: return "safetensors-sharded";
    case FileFormat::unknown: break;
  }
  return "unknown";
}

Result<FileFormat> detect_format(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return input_error(fmt::format("cannot open {}", path), std::strerror(errno), "check the path and permissions");
  unsigned char head[8] = {};
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  ::close(fd);
  if (n < 0) return input_error(fmt::format("cannot read {}", path), std::strerror(errno));
  if (n >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4) return FileFormat::torch_zip;
  if (n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return FileFormat::torch_legacy;
  if (n == 8) return FileFormat::safetensors;  // the header parser validates the rest
  return FileFormat::unknown;
}

namespace {

struct Chunk {
  std::size_t tensor = 0;
  std::size_t buffer = 0;
  std::size_t size = 0;
  std::uint64_t word = 0;  // word index of the chunk's first byte within its tensor
};

// Blocking single-producer single-consumer hand-off of buffer indices.
class Pipe {
 public:
  void push(Chunk c) {
    std::lock_guard lock(m_mutex);
    m_items.push_back(c);
    m_cv.notify_all();
  }
  // False when closed and drained.
  bool pop(Chunk& out) {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return !m_items.empty() || m_closed; });
    if (m_items.empty()) return false;
    out = m_items.front();
    m_items.pop_front();
    return true;
  }
  void close() {
    std::lock_guard lock(m_mutex);
    m_closed = true;
    m_cv.notify_all();
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<Chunk> m_items;
  bool m_closed = false;
};

}  // namespace

unsigned default_hash_threads() {
  static const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return cores;
}

Status hash_ranges_pipelined(int fd, const std::string& label, const std::vector<ByteRange>& ranges, std::vector<std::uint64_t>& sums,
                             const ProgressFn& progress, unsigned threads, std::size_t chunk_bytes) {
  // The word sum is an XOR of per-word terms (lib/hash/tensor_hash.hpp, proof 4), so chunks may be hashed by
  // several threads in any order: a reader thread fills buffers, `threads` hashers drain them.
  if (threads == 0) threads = default_hash_threads();
  chunk_bytes = std::max<std::size_t>(chunk_bytes & ~std::size_t{7}, 4096);  // whole words per chunk, so chunks never split a word
  std::uint64_t largest = 0, total = 0;
  for (const auto& r : ranges) largest = std::max(largest, r.size), total += r.size;
  if (largest == 0) return Ok{};
  // Buffers no larger than the data, left uninitialized: small files must start fast.
  chunk_bytes = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, (largest + 7) & ~std::uint64_t{7}));
  chunk_bytes = std::max<std::size_t>(chunk_bytes, 8);
  threads = static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(threads, total / chunk_bytes + 1)));
  const std::size_t buffers = threads + 2;
  std::vector<std::unique_ptr<std::byte[]>> pool;
  for (std::size_t i = 0; i < buffers; ++i) pool.emplace_back(new std::byte[chunk_bytes]);
  Pipe full;   // reader -> hashers
  Pipe empty;  // hashers -> reader
  for (std::size_t i = 0; i < buffers; ++i) empty.push({0, i, 0, 0});
  std::string read_error;

  std::thread reader([&] {
    for (const auto& r : ranges) {
      std::uint64_t pos = 0;
      while (pos < r.size) {
        Chunk c;
        if (!empty.pop(c)) return;
        c.tensor = r.target;
        c.word = r.first_word + pos / 8;
        c.size = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, r.size - pos));
        if (!read_exact(fd, pool[c.buffer].get(), c.size, r.offset + pos)) {
          read_error = fmt::format("read failed at byte {}: file truncated", r.offset + pos);
          full.close();
          return;
        }
        pos += c.size;
        full.push(c);
      }
    }
    full.close();
  });

  std::mutex sums_mutex;
  std::atomic<std::uint64_t> done{0};
  auto hasher = [&] {
    Chunk c;
    while (full.pop(c)) {
      const std::uint64_t part = hash::partial_sum(std::span<const std::byte>(pool[c.buffer].get(), c.size), c.word);
      {
        std::lock_guard lock(sums_mutex);
        sums[c.tensor] = hash::combine(sums[c.tensor], part);
      }
      const std::uint64_t d = done.fetch_add(c.size) + c.size;
      empty.push(c);
      if (progress) {
        std::lock_guard lock(sums_mutex);
        progress(d);
      }
    }
  };
  std::vector<std::thread> workers;
  for (unsigned t = 1; t < threads; ++t) workers.emplace_back(hasher);
  hasher();
  for (auto& w : workers) w.join();
  empty.close();
  reader.join();
  if (!read_error.empty()) return input_error(fmt::format("{}: {}", label, read_error), {}, "the file is incomplete; re-copy it or use another replica");
  return Ok{};
}

Result<std::vector<TensorDigest>> hash_safetensors_pipelined(const SafetensorsHeader& h, const ProgressFn& progress,
                                                             std::size_t chunk_bytes, std::size_t buffers) {
  int fd = ::open(h.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return input_error(fmt::format("cannot open {}", h.path), std::strerror(errno), "check the path and permissions");
  struct stat st{};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != h.file_size) {
    ::close(fd);
    return input_error(fmt::format("{}: file changed size while reading", h.path), {}, "retry when no writer is active");
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<ByteRange> ranges;
  for (std::size_t t = 0; t < h.tensors.size(); ++t) ranges.push_back({h.data_offset + h.tensors[t].begin, h.tensors[t].byte_size(), t, 0});
  std::vector<std::uint64_t> sums(h.tensors.size(), 0);
  auto ok = hash_ranges_pipelined(fd, h.path, ranges, sums, progress, static_cast<unsigned>(std::max<std::size_t>(buffers, 3) - 2), chunk_bytes);
  ::close(fd);
  if (!ok) return ok.error();
  std::vector<TensorDigest> out;
  out.reserve(h.tensors.size());
  for (std::size_t i = 0; i < h.tensors.size(); ++i) {
    const auto& e = h.tensors[i];
    out.push_back({e.name, e.dtype, e.shape, e.byte_size(), hash::finalize(sums[i], e.dtype, e.shape, e.byte_size()), {}, false});
  }
  std::sort(out.begin(), out.end(), [](const TensorDigest& a, const TensorDigest& b) { return a.name < b.name; });
  return out;
}

Result<std::vector<TensorDigest>> digest_torch_archive(int fd, std::uint64_t base, std::uint64_t length, const std::string& label,
                                                        const ProgressFn& progress, unsigned threads) {
  auto archive = read_torch_archive(fd, base, length, label);
  if (!archive) return archive.error();
  std::vector<TensorDigest> out;
  std::vector<ByteRange> ranges;
  std::vector<std::size_t> streamed;  // digest index of each streamed range
  for (std::size_t i = 0; i < archive->tensors.size(); ++i) {
    const auto& t = archive->tensors[i];
    const std::uint64_t es = dtype_size(t.dtype), bytes = t.numel() * es;
    TensorDigest d{t.name, t.dtype, t.shape, bytes, 0, {}, false};
    if (t.contiguous()) {
      ranges.push_back({t.storage_data + t.storage_offset * es, bytes, streamed.size(), 0});
      streamed.push_back(out.size());
    } else {
      // A strided view: map its storage (the page cache backs it; nothing is copied whole) and hash the logical order.
      const long page = ::sysconf(_SC_PAGESIZE);
      const std::uint64_t start = t.storage_data & ~static_cast<std::uint64_t>(page - 1);
      const std::uint64_t span = t.storage_data + t.storage_bytes - start;
      void* map = ::mmap(nullptr, static_cast<std::size_t>(span), PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(start));
      if (map == MAP_FAILED) return input_error(fmt::format("{}: cannot map storage of '{}'", label, t.name), std::strerror(errno));
      const auto* base_ptr = static_cast<const std::byte*>(map) + (t.storage_data - start) + t.storage_offset * es;
      d.hash = hash::hash_strided(t.dtype, t.shape, t.strides, base_ptr, threads == 0 ? 0 : threads);
      ::munmap(map, static_cast<std::size_t>(span));
    }
    out.push_back(std::move(d));
  }
  std::vector<std::uint64_t> sums(streamed.size(), 0);
  auto ok = hash_ranges_pipelined(fd, label, ranges, sums, progress, threads);
  if (!ok) return ok.error();
  for (std::size_t h = 0; h < streamed.size(); ++h) {
    auto& d = out[streamed[h]];
    d.hash = hash::finalize(sums[h], d.dtype, d.shape, d.bytes);
  }
  for (const auto& l : archive->leaves) {
    TensorDigest d{l.name, DType::u8, {}, l.text.size(), 0, {}, false};
    d.hash = hash::hash_tensor(DType::u8, {}, std::span(reinterpret_cast<const std::byte*>(l.text.data()), l.text.size()));
    d.value = true;
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const TensorDigest& a, const TensorDigest& b) { return a.name < b.name; });
  return out;
}

Result<FileDigest> digest_file(const std::string& path, const ProgressFn& progress, unsigned threads) {
  struct stat dst{};
  if (::stat(path.c_str(), &dst) == 0 && S_ISDIR(dst.st_mode)) return digest_directory(path, progress, threads);
  auto format = detect_format(path);
  if (!format) return format.error();
  FileDigest d;
  d.path = path;
  d.format = *format;
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) d.size = static_cast<std::uint64_t>(st.st_size);
  switch (*format) {
    case FileFormat::torch_zip: {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return input_error(fmt::format("cannot open {}", path), std::strerror(errno), "check the path and permissions");
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      auto t = digest_torch_archive(fd, 0, d.size, path, progress, threads);
      ::close(fd);
      if (!t) return t.error();
      d.tensors = std::move(*t);
      return d;
    }
    case FileFormat::torch_legacy:
      return input_error(fmt::format("{}: legacy (pre-zip) torch.save format", path), "scout reads only the zip format torch.save writes by default since torch 1.6",
                         "re-save it with torch.save(dict(model.state_dict()), f) from torch >= 1.6 without "
                         "_use_new_zipfile_serialization=False, or as safetensors");
    case FileFormat::dcp:
    case FileFormat::hf_sharded:
    case FileFormat::unknown:
      return input_error(fmt::format("{}: file is {} bytes, too short to be a checkpoint", path, d.size), {},
                         "the file is empty or truncated; re-copy it or use another replica");
    case FileFormat::safetensors: break;
  }
  auto header = read_safetensors_header(path);
  if (!header) return header.error();
  auto t = hash_safetensors_pipelined(*header, progress, std::size_t{4} << 20, (threads == 0 ? default_hash_threads() : threads) + 2);
  if (!t) return t.error();
  d.tensors = std::move(*t);
  return d;
}

}  // namespace scout::checkpoint
