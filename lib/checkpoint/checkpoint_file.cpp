#include "lib/checkpoint/checkpoint_file.hpp"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fmt/format.h>
#include <memory>
#include <mutex>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "lib/checkpoint/torch_reader.hpp"
#include "lib/hash/tensor_hash.hpp"
#include "lib/plugin/module_loader.hpp"

namespace scout::checkpoint {

std::string_view file_format_name(FileFormat format) {
  switch (format) {
    case FileFormat::safetensors: return "safetensors";
    case FileFormat::torch_zip: return "torch";
    case FileFormat::torch_legacy: return "torch-legacy";
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

Result<std::vector<TensorDigest>> hash_safetensors_pipelined(const SafetensorsHeader& h, const ProgressFn& progress,
                                                             std::size_t chunk_bytes, std::size_t buffers) {
  chunk_bytes = std::max<std::size_t>(chunk_bytes & ~std::size_t{7}, 4096);  // whole words per chunk, so chunks never split a word
  buffers = std::max<std::size_t>(buffers, 2);
  int fd = ::open(h.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return input_error(fmt::format("cannot open {}", h.path), std::strerror(errno), "check the path and permissions");
  struct stat st{};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != h.file_size) {
    ::close(fd);
    return input_error(fmt::format("{}: file changed size while reading", h.path), {}, "retry when no writer is active");
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

  // Buffers no larger than the data, left uninitialized: small files must start fast.
  std::uint64_t data_bytes = 0;
  for (const auto& e : h.tensors) data_bytes = std::max(data_bytes, e.byte_size());
  chunk_bytes = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, (data_bytes + 7) & ~std::uint64_t{7}));
  chunk_bytes = std::max<std::size_t>(chunk_bytes, 8);
  std::vector<std::unique_ptr<std::byte[]>> pool;
  for (std::size_t i = 0; i < buffers; ++i) pool.emplace_back(new std::byte[chunk_bytes]);
  Pipe full;   // reader -> hasher
  Pipe empty;  // hasher -> reader
  for (std::size_t i = 0; i < buffers; ++i) empty.push({0, i, 0});
  std::string read_error;

  std::thread reader([&] {
    for (std::size_t t = 0; t < h.tensors.size(); ++t) {
      const auto& e = h.tensors[t];
      std::uint64_t pos = e.begin;
      while (pos < e.end) {
        Chunk c;
        if (!empty.pop(c)) return;
        c.tensor = t;
        c.size = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, e.end - pos));
        if (!read_exact(fd, pool[c.buffer].get(), c.size, h.data_offset + pos)) {
          read_error = fmt::format("tensor '{}': read failed at byte {}: file truncated", e.name, h.data_offset + pos);
          full.close();
          return;
        }
        pos += c.size;
        full.push(c);
      }
    }
    full.close();
  });

  std::vector<hash::TensorHasher> hashers;
  hashers.reserve(h.tensors.size());
  for (const auto& e : h.tensors) hashers.emplace_back(e.dtype, e.shape);
  std::uint64_t done = 0;
  Chunk c;
  while (full.pop(c)) {
    hashers[c.tensor].update(std::span<const std::byte>(pool[c.buffer].get(), c.size));
    done += c.size;
    empty.push(c);
    if (progress) progress(done);
  }
  empty.close();
  reader.join();
  ::close(fd);
  if (!read_error.empty()) return input_error(fmt::format("{}: {}", h.path, read_error), {}, "the file is incomplete; re-copy it or use another replica");

  std::vector<TensorDigest> out;
  out.reserve(h.tensors.size());
  for (std::size_t i = 0; i < h.tensors.size(); ++i) {
    const auto& e = h.tensors[i];
    if (hashers[i].bytes_seen() != e.byte_size())
      return internal_error(fmt::format("{}: tensor '{}' hashed {} of {} bytes", h.path, e.name, hashers[i].bytes_seen(), e.byte_size()));
    out.push_back({e.name, e.dtype, e.shape, e.byte_size(), hashers[i].finish()});
  }
  std::sort(out.begin(), out.end(), [](const TensorDigest& a, const TensorDigest& b) { return a.name < b.name; });
  return out;
}

namespace {

struct TorchSink {
  std::vector<TensorDigest> tensors;
  std::string error;
};

int torch_tensor(void* ctx, const char* name, const char* dtype, const std::int64_t* shape, std::size_t rank, const void* data,
                 std::uint64_t bytes) {
  auto* sink = static_cast<TorchSink*>(ctx);
  try {
    auto dt = parse_dtype(dtype);
    if (!dt) {
      sink->error = fmt::format("tensor '{}' has dtype {}, which scout does not hash", name, dtype);
      return 4;
    }
    TensorDigest d;
    d.name = name;
    d.dtype = *dt;
    d.shape.assign(shape, shape + rank);
    d.bytes = bytes;
    d.hash = hash::hash_tensor(*dt, d.shape, std::span<const std::byte>(static_cast<const std::byte*>(data), bytes));
    sink->tensors.push_back(std::move(d));
    return 0;
  } catch (const std::exception& e) {  // no exception crosses the C ABI
    sink->error = e.what();
    return 70;
  }
}

Result<std::vector<TensorDigest>> digest_torch(const std::string& path) {
  auto sym = torch_module_symbol(k_torch_read_symbol);
  if (!sym) return sym.error();
  auto read = reinterpret_cast<ScoutTorchReadFn>(*sym);
  TorchSink sink;
  char error[2048] = {};
  int rc = read(path.c_str(), torch_tensor, &sink, error, sizeof error);
  if (rc == 0) {
    std::sort(sink.tensors.begin(), sink.tensors.end(), [](const TensorDigest& a, const TensorDigest& b) { return a.name < b.name; });
    for (std::size_t i = 1; i < sink.tensors.size(); ++i)
      if (sink.tensors[i].name == sink.tensors[i - 1].name)
        return input_error(fmt::format("{}: two tensors are named '{}'", path, sink.tensors[i].name), {}, "use unique dict keys");
    return std::move(sink.tensors);
  }
  std::string message = !sink.error.empty() ? fmt::format("{}: {}", path, sink.error) : std::string(error);
  if (rc == 4) return input_error(message);
  return internal_error(message);
}

}  // namespace

Result<FileDigest> digest_file(const std::string& path, const ProgressFn& progress) {
  auto format = detect_format(path);
  if (!format) return format.error();
  FileDigest d;
  d.path = path;
  d.format = *format;
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) d.size = static_cast<std::uint64_t>(st.st_size);
  switch (*format) {
    case FileFormat::torch_zip: {
      auto t = digest_torch(path);
      if (!t) return t.error();
      d.tensors = std::move(*t);
      if (progress) progress(d.size);
      return d;
    }
    case FileFormat::torch_legacy:
      return input_error(fmt::format("{}: legacy (pre-zip) torch.save format", path), "LibTorch reads only the zip format",
                         "re-save it with torch.save(dict(model.state_dict()), f) from torch >= 1.6 without "
                         "_use_new_zipfile_serialization=False, or as safetensors");
    case FileFormat::unknown:
      return input_error(fmt::format("{}: file is {} bytes, too short to be a checkpoint", path, d.size), {},
                         "the file is empty or truncated; re-copy it or use another replica");
    case FileFormat::safetensors: break;
  }
  auto header = read_safetensors_header(path);
  if (!header) return header.error();
  auto t = hash_safetensors_pipelined(*header, progress);
  if (!t) return t.error();
  d.tensors = std::move(*t);
  return d;
}

}  // namespace scout::checkpoint
