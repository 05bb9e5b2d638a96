#include "lib/checkpoint/safetensors.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "lib/common/json_input.hpp"
#include "lib/hash/tensor_hash.hpp"

namespace scout::checkpoint {

namespace {

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Error bad(const std::string& path, std::string what, std::string hint = {}) {
  return input_error(
      fmt::format("{}: {}", path, what), {},
      hint.empty() ? "the file is not a valid safetensors file; re-save or re-copy it" : std::move(hint));
}

Result<int> open_file(const std::string& path, std::uint64_t& size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return input_error(fmt::format("cannot open {}", path), std::strerror(errno), "check the path and permissions");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return input_error(fmt::format("{} is not a regular file", path));
  }
  size = static_cast<std::uint64_t>(st.st_size);
  return fd;
}

}  // namespace

bool read_exact(int fd, void* buf, std::size_t n, std::uint64_t offset) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
  return true;
}

namespace {

// This thread's AsideReads: the file, its O_DIRECT twin (-1: the file was wholly cached when the AsideReads was
// made, read normally) and the last window of bytes read apart.
struct Aside {
  const void* owner = nullptr;  // the AsideReads
  int fd = -1;
  int direct = -1;
  std::uint64_t size = 0;  // of the file, when the AsideReads was made
  std::vector<std::byte> window;
  std::uint64_t window_offset = 0;
};
thread_local std::vector<Aside> t_aside;

#if defined(__NR_cachestat)
constexpr long k_sys_cachestat = __NR_cachestat;
#elif defined(__x86_64__) || defined(__aarch64__)
constexpr long k_sys_cachestat = 451;
#else
constexpr long k_sys_cachestat = -1;
#endif

}  // namespace

std::optional<bool> pages_cached(int fd, std::uint64_t offset, std::uint64_t n) {
  if (k_sys_cachestat < 0) return std::nullopt;
  struct {
    std::uint64_t off, len;
  } range{offset, n};
  struct {
    std::uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
  } cs{};
  if (::syscall(k_sys_cachestat, fd, &range, &cs, 0) != 0) return std::nullopt;
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t pages = (offset + n + page - 1) / page - offset / page;
  return cs.nr_cache >= pages;
}

namespace {

constexpr std::uint64_t k_direct_align = 4096;
// Larger aside reads are read normally: their own readahead makes large folios, and O_DIRECT streams slowly where
// the host caches the disk (dd iflag=direct bs=16M: 250-450 MB/s here, against 2 GB/s and more through the page
// cache; 4 KiB direct reads take 0.05 ms).
constexpr std::size_t k_direct_max = std::size_t{1} << 20;

// Bytes [offset, offset + n) through the O_DIRECT descriptor `direct`, in aligned blocks; false when it cannot
// (alignment refused, read error): the caller reads them normally.
bool read_direct(int direct, void* buf, std::size_t n, std::uint64_t offset) {
  const std::uint64_t begin = offset / k_direct_align * k_direct_align;
  const std::uint64_t end = (offset + n + k_direct_align - 1) / k_direct_align * k_direct_align;
  void* raw = nullptr;
  if (::posix_memalign(&raw, k_direct_align, static_cast<std::size_t>(end - begin)) != 0) return false;
  std::unique_ptr<std::byte, decltype(&std::free)> block(static_cast<std::byte*>(raw), &std::free);
  std::uint64_t got = 0;
  while (begin + got < offset + n) {
    const ssize_t r = ::pread(direct, block.get() + got, static_cast<std::size_t>(end - begin - got),
                              static_cast<off_t>(begin + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || static_cast<std::uint64_t>(r) % k_direct_align != 0) {
      // The end of the file (a short, unaligned read) or a refusal.
      if (r > 0) got += static_cast<std::uint64_t>(r);
      break;
    }
    got += static_cast<std::uint64_t>(r);
  }
  if (begin + got < offset + n) return false;
  std::memcpy(buf, block.get() + (offset - begin), n);
  return true;
}

// Structure reads come in clusters: a torch.save archive's small entries (byteorder, version, data.pkl...) and
// their 30-byte local headers lie within a few KiB, and its end (found in one read of up to 64 KiB) holds the
// central directory and the last entries' local headers. A read of at most k_window_small bytes is served from
// the thread's window for the file, else it reads k_window bytes from its offset as the new window; a read of at
// most k_window_keep bytes (the end) becomes the window. A DCP file's items took ~16 reads each (1,769 preads for
// 3 x 192 MiB, against 695 for the same tensors saved as .pt).
constexpr std::size_t k_window_small = 4096;
constexpr std::size_t k_window = 8192;
constexpr std::size_t k_window_keep = std::size_t{128} << 10;

// Bytes [offset, offset + n) of `a`'s file as AsideReads reads them: normally when the file was wholly cached or
// these bytes are; otherwise through O_DIRECT, so that they leave no page ahead of the stream.
bool read_structure(const Aside& a, void* buf, std::size_t n, std::uint64_t offset) {
  if (a.direct < 0 || n > k_direct_max) return read_exact(a.fd, buf, n, offset);
  const auto in_cache = pages_cached(a.fd, offset, n);
  if (!in_cache || *in_cache) return read_exact(a.fd, buf, n, offset);
  return read_direct(a.direct, buf, n, offset) || read_exact(a.fd, buf, n, offset);
}

bool in_window(const Aside& a, std::size_t n, std::uint64_t offset) {
  return offset >= a.window_offset && offset - a.window_offset <= a.window.size() &&
         n <= a.window.size() - (offset - a.window_offset);
}

}  // namespace

AsideReads::AsideReads(int fd) : m_fd(fd) {
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) return;
  Aside a;
  a.owner = this;
  a.fd = fd;
  a.size = static_cast<std::uint64_t>(st.st_size);
  // A file wholly in the page cache (warm) is read normally, without a cachestat call per read.
  if (k_sys_cachestat >= 0 && !pages_cached(fd, 0, static_cast<std::uint64_t>(st.st_size)).value_or(true)) {
    m_direct = ::open(fmt::format("/proc/self/fd/{}", fd).c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    a.direct = m_direct;
  }
  t_aside.push_back(std::move(a));
}

AsideReads::~AsideReads() {
  auto it = std::find_if(t_aside.begin(), t_aside.end(), [this](const Aside& a) { return a.owner == this; });
  if (it != t_aside.end()) t_aside.erase(it);
  if (m_direct >= 0) ::close(m_direct);
}

bool read_aside(int fd, void* buf, std::size_t n, std::uint64_t offset) {
  if (n == 0) return true;
  auto it = std::find_if(t_aside.rbegin(), t_aside.rend(), [fd](const Aside& a) { return a.fd == fd; });
  if (it == t_aside.rend()) return read_exact(fd, buf, n, offset);
  Aside& a = *it;
  const bool inside = offset <= a.size && n <= a.size - offset;
  if (inside && n <= k_window_small) {
    if (!in_window(a, n, offset)) {
      const auto len = static_cast<std::size_t>(std::min<std::uint64_t>(k_window, a.size - offset));
      a.window.resize(len);
      if (!read_structure(a, a.window.data(), len, offset)) a.window.clear();
      a.window_offset = offset;
    }
    if (in_window(a, n, offset)) {
      std::memcpy(buf, a.window.data() + (offset - a.window_offset), n);
      return true;
    }
    return read_structure(a, buf, n, offset);
  }
  if (!read_structure(a, buf, n, offset)) return false;
  if (inside && n <= k_window_keep) {
    a.window.assign(static_cast<const std::byte*>(buf), static_cast<const std::byte*>(buf) + n);
    a.window_offset = offset;
  }
  return true;
}

Result<SafetensorsHeader> read_safetensors_header(const std::string& path) {
  SafetensorsHeader h;
  h.path = path;
  auto opened = open_file(path, h.file_size);
  if (!opened) return opened.error();
  Fd fd{*opened};
  if (h.file_size < 8)
    return bad(path, fmt::format("file is {} bytes, too short for a safetensors header length", h.file_size));
  unsigned char len_bytes[8];
  if (!read_exact(fd.fd, len_bytes, 8, 0)) return bad(path, "cannot read the header length");
  for (int i = 7; i >= 0; --i) h.header_size = (h.header_size << 8) | len_bytes[i];
  if (h.header_size == 0 || h.header_size > k_max_safetensors_header)
    return bad(path,
               fmt::format("header length {} is invalid (must be 1..{})", h.header_size, k_max_safetensors_header));
  if (h.header_size > h.file_size - 8)
    return bad(path, fmt::format("header length {} exceeds the file ({} bytes): truncated or not safetensors",
                                 h.header_size, h.file_size));
  h.data_offset = 8 + h.header_size;
  std::string text(h.header_size, '\0');
  if (!read_exact(fd.fd, text.data(), text.size(), 8)) return bad(path, "cannot read the JSON header");
  nlohmann::json j = parse_json_input(text);
  if (j.is_discarded() || !j.is_object()) return bad(path, "the header is not a JSON object (or nests too deep)");
  const std::uint64_t data_size = h.file_size - h.data_offset;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const auto& t = it.value();
    if (name == "__metadata__") {
      if (!t.is_object()) return bad(path, "__metadata__ is not an object");
      for (auto m = t.begin(); m != t.end(); ++m) {
        if (!m.value().is_string()) return bad(path, fmt::format("__metadata__.{} is not a string", m.key()));
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!t.is_object()) return bad(path, fmt::format("tensor '{}': entry is not an object", name));
    TensorEntry e;
    e.name = name;
    if (!t.contains("dtype") || !t["dtype"].is_string())
      return bad(path, fmt::format("tensor '{}': dtype missing", name));
    auto dt = parse_dtype(t["dtype"].get<std::string>());
    if (!dt) return bad(path, fmt::format("tensor '{}': unknown dtype '{}'", name, t["dtype"].get<std::string>()));
    e.dtype = *dt;
    if (!t.contains("shape") || !t["shape"].is_array())
      return bad(path, fmt::format("tensor '{}': shape missing", name));
    if (t["shape"].size() > 16) return bad(path, fmt::format("tensor '{}': rank {} above 16", name, t["shape"].size()));
    std::uint64_t elements = 1;
    bool overflow = false;
    for (const auto& d : t["shape"]) {
      if (!d.is_number_unsigned())
        return bad(path, fmt::format("tensor '{}': shape has a non-integer or negative size", name));
      std::uint64_t v = d.get<std::uint64_t>();
      if (v > (std::uint64_t{1} << 62)) overflow = true;
      e.shape.push_back(static_cast<std::int64_t>(v));
      if (v != 0 && elements > (std::uint64_t{1} << 62) / v) overflow = true;
      elements *= v;
    }
    if (overflow) return bad(path, fmt::format("tensor '{}': shape is too large", name));
    static const nlohmann::json k_none;
    const auto& off = t.contains("data_offsets") ? t["data_offsets"] : k_none;  // no copy of the value
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return bad(path, fmt::format("tensor '{}': data_offsets must be [begin, end]", name));
    e.begin = off[0].get<std::uint64_t>();
    e.end = off[1].get<std::uint64_t>();
    if (e.end < e.begin)
      return bad(path, fmt::format("tensor '{}': data_offsets end {} before begin {}", name, e.end, e.begin));
    std::uint64_t expect = elements * dtype_size(e.dtype);
    if (e.byte_size() != expect)
      return bad(path, fmt::format("tensor '{}': data_offsets span {} bytes but {} x {} needs {}", name, e.byte_size(),
                                   dtype_name(e.dtype), elements, expect));
    if (e.end > data_size)
      return bad(path,
                 fmt::format("tensor '{}': data ends at {} but the data section has {} bytes: file truncated", name,
                             e.end, data_size),
                 "the file is incomplete; re-copy it or use another replica");
    h.tensors.push_back(std::move(e));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (std::size_t i = 1; i < h.tensors.size(); ++i) {
    const auto& prev = h.tensors[i - 1];
    const auto& cur = h.tensors[i];
    if (cur.begin < prev.end && cur.byte_size() > 0 && prev.byte_size() > 0)
      return bad(path, fmt::format("tensors '{}' and '{}' overlap (bytes {}..{} and {}..{})", prev.name, cur.name,
                                   prev.begin, prev.end, cur.begin, cur.end));
  }
  return h;
}

Status stream_safetensors(const SafetensorsHeader& h, const ChunkSink& sink, std::size_t chunk_bytes,
                          const std::function<void(std::uint64_t)>& progress) {
  std::uint64_t size = 0;
  auto opened = open_file(h.path, size);
  if (!opened) return opened.error();
  Fd fd{*opened};
  if (size != h.file_size)
    return bad(h.path, fmt::format("file changed size while reading ({} -> {} bytes)", h.file_size, size),
               "retry when no writer is active");
  ::posix_fadvise(fd.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  chunk_bytes = std::max<std::size_t>(chunk_bytes, 4096);
  std::vector<std::byte> buf(chunk_bytes);
  std::uint64_t done = 0;
  for (const auto& e : h.tensors) {
    std::uint64_t pos = e.begin;
    if (e.byte_size() == 0) sink(e, {});
    while (pos < e.end) {
      std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, e.end - pos));
      if (!read_exact(fd.fd, buf.data(), n, h.data_offset + pos))
        return bad(h.path,
                   fmt::format("tensor '{}': read failed at byte {}: file truncated", e.name, h.data_offset + pos));
      sink(e, std::span<const std::byte>(buf.data(), n));
      pos += n;
      done += n;
      if (progress) progress(done);
    }
  }
  return Ok{};
}

Result<std::vector<TensorDigest>> hash_safetensors(const SafetensorsHeader& h,
                                                   const std::function<void(std::uint64_t)>& progress) {
  std::vector<TensorDigest> out;
  out.reserve(h.tensors.size());
  std::vector<hash::TensorHasher> hashers;
  hashers.reserve(h.tensors.size());
  for (const auto& e : h.tensors) hashers.emplace_back(e.dtype, e.shape);
  std::size_t current = 0;
  auto status = stream_safetensors(
      h,
      [&](const TensorEntry& e, std::span<const std::byte> chunk) {
        while (&h.tensors[current] != &e) ++current;
        hashers[current].update(chunk);
      },
      std::size_t{8} << 20, progress);
  if (!status) return status.error();
  for (std::size_t i = 0; i < h.tensors.size(); ++i) {
    const auto& e = h.tensors[i];
    out.push_back({e.name, e.dtype, e.shape, e.byte_size(), hashers[i].finish(), {}, false});
  }
  std::sort(out.begin(), out.end(), [](const TensorDigest& a, const TensorDigest& b) { return a.name < b.name; });
  return out;
}

}  // namespace scout::checkpoint
