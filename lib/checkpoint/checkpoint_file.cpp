#include "lib/checkpoint/checkpoint_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "lib/checkpoint/checkpoint_dir.hpp"
#include "lib/checkpoint/torch_file.hpp"
#include "lib/hash/crc32.hpp"
#include "lib/hash/file_hash.hpp"
#include "lib/hash/tensor_hash.hpp"

namespace scout::checkpoint {

std::string_view file_format_name(FileFormat format) {
  switch (format) {
    case FileFormat::safetensors:
      return "safetensors";
    case FileFormat::torch_zip:
      return "torch";
    case FileFormat::torch_legacy:
      return "torch-legacy";
    case FileFormat::dcp:
      return "dcp";
    case FileFormat::hf_sharded:
      return "safetensors-sharded";
    case FileFormat::unknown:
      break;
  }
  return "unknown";
}

Result<FileFormat> detect_format(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return input_error(fmt::format("cannot open {}", path), std::strerror(errno), "check the path and permissions");
  unsigned char head[8] = {};
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  ::close(fd);
  if (n < 0) return input_error(fmt::format("cannot read {}", path), std::strerror(errno));
  if (n >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4) return FileFormat::torch_zip;
  if (n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return FileFormat::torch_legacy;
  if (n == 8) return FileFormat::safetensors;  // the header parser validates the rest
  return FileFormat::unknown;
}

unsigned default_hash_threads() {
  static const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return cores;
}

namespace {

// A segment is read in pieces of up to 1 MiB, each by one pread into a buffer
// that a hashing thread then walks. A cold file streams best in sequential
// reads, which the kernel's readahead follows whatever their size; warm, a
// 1 MiB buffer is still in the shared cache when another core hashes it (4 MiB
// pieces were slower warm: 3 x 256 MiB safetensors in 0.10-0.15 s against
// 0.08-0.12 s, 2 loaded cores).
constexpr std::uint64_t k_piece_bytes = std::uint64_t{1} << 20;
// With a CRC to compute, a piece is walked in blocks small enough to stay in
// the core's cache between the hash and the CRC.
constexpr std::uint64_t k_block_bytes = std::uint64_t{256} << 10;

// Piece buffers of the whole process: at most k_buffers_per_thread per hashing
// thread exist at once (memory is bounded by them, whatever the files' sizes
// and however many files are in flight); a reader waits for one. Buffers are
// reused (a fresh one would fault in its pages on every piece) and freed when
// the hashing threads end (HashPool, idle).
class PieceBuffers {
 public:
  static constexpr unsigned k_buffers_per_thread = 4;
  static PieceBuffers& instance() {
    static PieceBuffers* buffers = new PieceBuffers(k_buffers_per_thread * default_hash_threads());
    return *buffers;
  }
  std::unique_ptr<std::byte[]> take() {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return m_used < m_max; });
    ++m_used;
    if (!m_free.empty()) {
      auto b = std::move(m_free.back());
      m_free.pop_back();
      return b;
    }
    lock.unlock();
    return std::unique_ptr<std::byte[]>(new std::byte[k_piece_bytes]);
  }
  void give(std::unique_ptr<std::byte[]> buffer) {
    {
      std::lock_guard lock(m_mutex);
      --m_used;
      m_free.push_back(std::move(buffer));
    }
    m_cv.notify_one();
  }
  void trim() {
    std::vector<std::unique_ptr<std::byte[]>> drop;
    std::lock_guard lock(m_mutex);
    drop.swap(m_free);
  }

 private:
  explicit PieceBuffers(unsigned max) : m_max(std::max(2u, max)) {}
  const unsigned m_max;
  unsigned m_used = 0;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::vector<std::unique_ptr<std::byte[]>> m_free;
};

// The process-wide hashing threads, at most one per core (they only hash:
// each file's reads are issued by the thread that queues its ranges). A
// thread starts when work waits and none is idle, and ends after k_idle
// without work, so no thread outlives a verification by long (a program
// embedding the library keeps none; the last one frees the piece buffers)
// and exit never waits for one. The pool itself is never destroyed: a thread
// still ending at exit finds it intact.
class HashPool {
 public:
  static HashPool& instance() {
    static HashPool* pool = new HashPool(default_hash_threads());
    return *pool;
  }
  void submit(std::function<void()> work) {
    bool start = false;
    {
      std::lock_guard lock(m_mutex);
      m_queue.push_back(std::move(work));
      if (m_idle == 0 && m_live < m_max) {
        ++m_live;
        start = true;
      }
    }
    if (start) {
      std::thread([this] { run(); }).detach();
    } else {
      m_cv.notify_one();
    }
  }
  unsigned live() {
    std::lock_guard lock(m_mutex);
    return m_live;
  }

 private:
  static constexpr std::chrono::seconds k_idle{2};
  explicit HashPool(unsigned threads) : m_max(std::max(1u, threads)) {}
  void run() {
    std::unique_lock lock(m_mutex);
    for (;;) {
      ++m_idle;
      const bool got = m_cv.wait_for(lock, k_idle, [&] { return !m_queue.empty(); });
      --m_idle;
      if (!got) break;
      std::function<void()> work = std::move(m_queue.front());
      m_queue.pop_front();
      lock.unlock();
      work();
      lock.lock();
    }
    if (--m_live == 0) PieceBuffers::instance().trim();
  }
  const unsigned m_max;
  unsigned m_live = 0;  // threads started and not ended
  unsigned m_idle = 0;  // of those, waiting for work
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<std::function<void()>> m_queue;
};

// A window of a file that pieces are hashed from: bytes [offset, offset + size) (offset page-aligned), either mapped
// read-only (`map`), or not (null: its pieces are read with pread). Unmapped when the last piece hashed from it is
// done.
struct Window {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::byte* map = nullptr;
  Window() = default;
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  ~Window() {
    if (map != nullptr) ::munmap(map, static_cast<std::size_t>(size));
  }
};

// A file window is mapped only when every page of it is in the page cache (cachestat(2)): hashing the cached pages
// in place saves their copy into a buffer (pread's _copy_to_iter, a third of the CPU time of a warm .pt run). Its
// pages are mapped by the faults of the hashing threads' first reads, one fault per folio (Linux maps a file's
// whole large folio on a fault): MADV_POPULATE_READ or MAP_POPULATE walk the page tables page by page and cost more
// than the copy where the folios are 1 MiB (11.8 ms of CPU for 192 MiB against 9.3 ms for pread and 3.6 ms for the
// faults). A window not wholly cached is read with pread, as a cold file streams best (the kernel's readahead
// follows sequential reads; faults on a mapping would read it in smaller, synchronous steps). Windows smaller than
// k_map_min_bytes (the end of a small file) are read too: a pread costs less than mmap and munmap.
constexpr std::uint64_t k_window_bytes = std::uint64_t{16} << 20;
constexpr std::uint64_t k_map_min_bytes = std::uint64_t{256} << 10;

// A window of `fd` (of `file_size` bytes) from the page holding byte `offset`: mapped when `map` and wholly cached,
// else not.
std::shared_ptr<Window> open_window(int fd, std::uint64_t file_size, std::uint64_t offset, bool map_it) {
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  auto w = std::make_shared<Window>();
  w->offset = offset / page * page;
  w->size = std::min(k_window_bytes, file_size - w->offset);
  if (!map_it || w->size < k_map_min_bytes || !pages_cached(fd, w->offset, w->size).value_or(false)) return w;
  void* map =
      ::mmap(nullptr, static_cast<std::size_t>(w->size), PROT_READ, MAP_SHARED, fd, static_cast<off_t>(w->offset));
  if (map != MAP_FAILED) w->map = static_cast<std::byte*>(map);
  return w;
}

// Small folios make mapping cost more than the copy it saves: a fault maps one folio (or 16 pages of 4 KiB ones,
// the kernel's fault-around), so a window of folios of 64 KiB or less (a file read in small random reads) takes 16
// faults per MiB, and was slower mapped than read (3 x 192 MiB .pt, all in 4 KiB folios: 170-190 ms of CPU against
// 140-180 ms), while one of 256 KiB to 2 MiB folios (most of what sequential reads and writes leave) takes 0.5-4
// and is faster (.pt 57-64 ms against 62-93 ms, safetensors 44-52 ms against 70-84 ms). The hashing threads count the
// faults of the mapped pieces; once the pieces mapped since the last verdict span half a window and took more than
// k_max_faults_per_mib, the job's next k_read_windows windows are read, and then windows are mapped again to look:
// folio sizes differ along a file (a cold read's first tens of MiB are in small folios, as the kernel's readahead
// grows its folios with its window; a DCP file of the bench mapped 10 of its 13 windows), and a file wholly in small
// folios maps one window in four.
constexpr std::uint64_t k_max_faults_per_mib = 10;
constexpr unsigned k_read_windows = 3;

// Page faults taken by this thread so far.
std::uint64_t thread_faults() {
  struct rusage ru {};
  if (::getrusage(RUSAGE_THREAD, &ru) != 0) return 0;
  return static_cast<std::uint64_t>(ru.ru_minflt + ru.ru_majflt);
}

struct Piece {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::size_t segment = 0;             // index into State::segments
  std::size_t part = 0;                // index of the piece within its segment
  bool crc = false;                    // its segment's CRC-32 is checked
  std::vector<ByteRange> slices;       // parts of ranges inside the piece
  std::unique_ptr<std::byte[]> bytes;  // the piece, read (PieceBuffers), or
  std::shared_ptr<Window> window;      // the mapped window it lies in
  const std::byte* data = nullptr;     // its first byte, in `bytes` or the window
};

}  // namespace

unsigned hashing_threads_alive() {
  return HashPool::instance().live();
}

struct RangeHashJob::State {
  int fd = -1;
  std::string label;
  ProgressFn progress;
  unsigned in_flight = 0;
  std::uint64_t file_size = 0;
  std::mutex mutex;
  std::condition_variable cv;
  unsigned queued = 0;  // pieces submitted and not finished
  std::uint64_t done = 0;
  std::string error;
  std::vector<std::uint64_t> sums;
  struct Segment {
    bool crc = false;
    std::uint32_t expected = 0;
    std::string entry;
    std::vector<std::pair<std::uint32_t, std::uint64_t>> parts;  // CRC and length of each piece
  };
  std::vector<Segment> segments;
  std::shared_ptr<Window> window;  // the window pieces are taken from now (the adding thread's only)
  // Bytes of mapped pieces hashed and the faults they took (hashing threads), and the adding thread's view of them
  // when it last chose whether to map a window.
  std::atomic<std::uint64_t> mapped_bytes{0};
  std::atomic<std::uint64_t> mapped_faults{0};
  std::uint64_t seen_bytes = 0;
  std::uint64_t seen_faults = 0;
  unsigned read_windows = 0;  // windows still to read before mapping one again

  // Whether the next window should be mapped (when wholly cached), from the faults mapped pieces took since the
  // last verdict. The adding thread's.
  bool map_next_window() {
    if (read_windows > 0) {
      --read_windows;
      return false;
    }
    const std::uint64_t bytes = mapped_bytes.load(std::memory_order_relaxed);
    const std::uint64_t faults = mapped_faults.load(std::memory_order_relaxed);
    if (bytes - seen_bytes < k_window_bytes / 2) return true;
    const bool small = (faults - seen_faults) * (std::uint64_t{1} << 20) > k_max_faults_per_mib * (bytes - seen_bytes);
    seen_bytes = bytes;
    seen_faults = faults;
    if (!small) return true;
    read_windows = k_read_windows - 1;
    return false;
  }

  void fail(std::string why) {
    std::lock_guard lock(mutex);
    if (error.empty()) error = std::move(why);
  }

  // Runs on a pool thread, once the piece's bytes are read or mapped.
  void run(Piece& p) {
    struct Walk {
      const Piece* p;
      std::uint32_t crc = 0;
      std::uint64_t* local;
      // A CRC-checked block's slices (ranges, sums, the slice each came from): preallocated, the walk only computes.
      hash::SumRange* ranges;
      std::uint64_t* sums;
      std::size_t* slice_of;
    };
    std::vector<std::uint64_t> local(p.slices.size(), 0);
    const std::size_t per_block = p.crc ? p.slices.size() : 0;
    std::vector<hash::SumRange> block_ranges(per_block);
    std::vector<std::uint64_t> block_sums(per_block);
    std::vector<std::size_t> block_slice(per_block);
    Walk walk{&p, 0, local.data(), block_ranges.data(), block_sums.data(), block_slice.data()};
    // The piece is walked in blocks that stay in the core's cache. In a CRC-checked piece the CRC and the hash of
    // a block's slices take one pass over it (hash::crc32_and_partial_sums: each line loaded once for both). The
    // walk only reads and computes (a mapped piece's walk is left by siglongjmp when its file was truncated under
    // it).
    auto walk_piece = [](void* arg) {
      auto& w = *static_cast<Walk*>(arg);
      const Piece& q = *w.p;
      for (std::uint64_t b = 0; b < q.size; b += k_block_bytes) {
        // The `n` bytes at `data` are those at file offset `at`: CRC them (in order) and hash the slices they hold.
        const std::byte* data = q.data + b;
        const std::uint64_t at = q.offset + b, n = std::min(k_block_bytes, q.size - b);
        std::size_t count = 0;
        for (std::size_t i = 0; i < q.slices.size(); ++i) {
          const ByteRange& s = q.slices[i];
          const std::uint64_t lo = std::max(at, s.offset), hi = std::min(at + n, s.offset + s.size);
          if (lo >= hi) continue;
          const std::uint64_t first_word = s.first_word + (lo - s.offset) / 8;
          if (q.crc) {
            w.ranges[count] = {static_cast<std::size_t>(lo - at), static_cast<std::size_t>(hi - lo), first_word};
            w.sums[count] = 0;
            w.slice_of[count++] = i;
          } else {
            w.local[i] ^= hash::partial_sum(std::span(data + (lo - at), static_cast<std::size_t>(hi - lo)), first_word);
          }
        }
        if (!q.crc) continue;
        w.crc = hash::crc32_and_partial_sums(std::span(data, static_cast<std::size_t>(n)), w.crc,
                                             std::span(w.ranges, count), w.sums);
        for (std::size_t j = 0; j < count; ++j) w.local[w.slice_of[j]] ^= w.sums[j];
      }
    };
    bool read = true;
    if (p.window) {
      const std::uint64_t faults = thread_faults();
      read = hash::run_sigbus_guarded(p.data, p.data + p.size, walk_piece, &walk);
      mapped_faults.fetch_add(thread_faults() - faults, std::memory_order_relaxed);
      mapped_bytes.fetch_add(p.size, std::memory_order_relaxed);
      p.window.reset();
    } else {
      walk_piece(&walk);
      PieceBuffers::instance().give(std::move(p.bytes));
    }
    if (!read) {
      fail(fmt::format("read failed at byte {}: file truncated", p.offset));
      return;
    }
    std::lock_guard lock(mutex);
    for (std::size_t i = 0; i < p.slices.size(); ++i) sums[p.slices[i].target] ^= local[i];
    if (p.crc) segments[p.segment].parts[p.part] = {walk.crc, p.size};
    done += p.size;
    if (progress) progress(done);
  }
};

RangeHashJob::RangeHashJob(int fd, std::string label, ProgressFn progress, unsigned in_flight)
    : m_state(std::make_shared<State>()) {
  m_state->fd = fd;
  m_state->label = std::move(label);
  m_state->progress = std::move(progress);
  m_state->in_flight = in_flight == 0 ? default_hash_threads() + 2 : in_flight;
  struct stat st {};
  if (::fstat(fd, &st) == 0) m_state->file_size = static_cast<std::uint64_t>(st.st_size);
}

RangeHashJob::~RangeHashJob() {
  (void)wait();
}

std::size_t RangeHashJob::new_target() {
  std::lock_guard lock(m_state->mutex);
  m_state->sums.push_back(0);
  return m_state->sums.size() - 1;
}

std::size_t RangeHashJob::add(std::uint64_t offset, std::uint64_t size, std::span<const ByteRange> ranges,
                              std::optional<std::uint32_t> crc, std::string entry) {
  State& st = *m_state;
  if (offset > st.file_size || size > st.file_size - offset) {
    // A mapping past the end would fault: refuse, as a short read.
    st.fail(fmt::format("read failed at byte {}: file truncated ({} bytes)", std::min(offset + size, st.file_size),
                        st.file_size));
    return k_no_segment;
  }
  // Ranges that start a whole number of words into the segment share its
  // pieces (piece boundaries then fall on word boundaries of the range too);
  // the others get pieces of their own.
  std::vector<ByteRange> inside;
  std::vector<ByteRange> apart;
  for (const auto& r : ranges) ((r.offset - offset) % 8 == 0 ? inside : apart).push_back(r);
  auto queue = [&](std::uint64_t seg_offset, std::uint64_t seg_size, const std::vector<ByteRange>& rs, bool with_crc) {
    std::size_t segment = 0;
    const std::uint64_t pieces = (seg_size + k_piece_bytes - 1) / k_piece_bytes;
    {
      std::lock_guard lock(st.mutex);
      segment = st.segments.size();
      State::Segment s;
      s.crc = with_crc;
      s.expected = crc.value_or(0);
      s.entry = entry;
      if (with_crc) s.parts.assign(static_cast<std::size_t>(pieces), {0, 0});
      st.segments.push_back(std::move(s));
    }
    for (std::uint64_t k = 0; k < pieces; ++k) {
      auto piece = std::make_shared<Piece>();
      piece->offset = seg_offset + k * k_piece_bytes;
      piece->size = std::min(k_piece_bytes, seg_offset + seg_size - piece->offset);
      piece->segment = segment;
      piece->part = static_cast<std::size_t>(k);
      piece->crc = with_crc;
      for (const auto& r : rs)
        if (r.offset < piece->offset + piece->size && piece->offset < r.offset + r.size) piece->slices.push_back(r);
      if (piece->slices.empty() && !with_crc) continue;
      {
        std::unique_lock lock(st.mutex);
        st.cv.wait(lock, [&] { return st.queued < st.in_flight; });
        if (!st.error.empty()) return segment;
        ++st.queued;
      }
      // Read here, in the order the segments were added (file order for every reader), one pread per piece
      // into a buffer that a pool thread hashes: each file is read front to back by one thread, while hashing
      // stays parallel. (Pool threads reading pieces 8 MiB apart of one file at once shared its readahead
      // state; no POSIX_FADV_WILLNEED per piece either: several files' hints reached the disk as scattered
      // requests.) A piece in a window wholly in the page cache is hashed where it lies, from the window's
      // mapping (open_window).
      if (!st.window || piece->offset < st.window->offset ||
          piece->offset + piece->size > st.window->offset + st.window->size)
        st.window = open_window(st.fd, st.file_size, piece->offset, st.map_next_window());
      bool read = true;
      if (st.window->map != nullptr && piece->offset + piece->size <= st.window->offset + st.window->size) {
        piece->window = st.window;
        piece->data = st.window->map + (piece->offset - st.window->offset);
      } else {
        piece->bytes = PieceBuffers::instance().take();
        piece->data = piece->bytes.get();
        read = read_exact(st.fd, piece->bytes.get(), static_cast<std::size_t>(piece->size), piece->offset);
      }
      if (!read) {
        PieceBuffers::instance().give(std::move(piece->bytes));
        st.fail(fmt::format("read failed at byte {}: file truncated", piece->offset));
        {
          std::lock_guard lock(st.mutex);
          --st.queued;
        }
        st.cv.notify_all();
        return segment;
      }
      HashPool::instance().submit([state = m_state, piece] {
        state->run(*piece);
        {
          std::lock_guard lock(state->mutex);
          --state->queued;
        }
        state->cv.notify_all();
      });
    }
    return segment;
  };
  const std::size_t main = queue(offset, size, inside, crc.has_value());
  for (const auto& r : apart) queue(r.offset, r.size, {r}, false);
  return main;
}

Status RangeHashJob::wait() {
  State& st = *m_state;
  st.window.reset();  // the adding thread's, as wait() is
  std::unique_lock lock(st.mutex);
  st.cv.wait(lock, [&] { return st.queued == 0; });
  if (!st.error.empty())
    return input_error(fmt::format("{}: {}", st.label, st.error), {},
                       "the file is incomplete; re-copy it or use another replica");
  return Ok{};
}

std::uint64_t RangeHashJob::sum(std::size_t target) const {
  std::lock_guard lock(m_state->mutex);
  return m_state->sums.at(target);
}

std::optional<CrcFailure> RangeHashJob::crc_failure(std::size_t segment) const {
  std::lock_guard lock(m_state->mutex);
  if (segment >= m_state->segments.size() || !m_state->segments[segment].crc) return std::nullopt;
  const auto& s = m_state->segments[segment];
  std::uint32_t c = 0;
  for (const auto& [part, len] : s.parts) c = hash::crc32_combine(c, part, len);
  if (c == s.expected) return std::nullopt;
  return CrcFailure{s.entry, {}, {}, s.expected, c};
}

Status hash_ranges_pipelined(int fd, const std::string& label, const std::vector<ByteRange>& ranges,
                             std::vector<std::uint64_t>& sums, const ProgressFn& progress, unsigned threads,
                             std::size_t /*chunk_bytes*/) {
  RangeHashJob job(fd, label, progress, threads == 0 ? 0 : threads + 2);
  std::vector<std::size_t> target_of(sums.size());
  for (auto& t : target_of) t = job.new_target();
  for (const auto& r : ranges) {
    ByteRange mine = r;
    mine.target = target_of.at(r.target);
    job.add(r.offset, r.size, std::span(&mine, 1));
  }
  auto ok = job.wait();
  if (!ok) return ok;
  for (std::size_t i = 0; i < sums.size(); ++i) sums[i] = hash::combine(sums[i], job.sum(target_of[i]));
  return Ok{};
}

Result<std::vector<TensorDigest>> hash_safetensors_pipelined(const SafetensorsHeader& h, const ProgressFn& progress,
                                                             std::size_t /*chunk_bytes*/, std::size_t buffers) {
  int fd = ::open(h.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return input_error(fmt::format("cannot open {}", h.path), std::strerror(errno), "check the path and permissions");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != h.file_size) {
    ::close(fd);
    return input_error(fmt::format("{}: file changed size while reading", h.path), {},
                       "retry when no writer is active");
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<std::uint64_t> sums(h.tensors.size(), 0);
  Status ok = Ok{};
  {
    RangeHashJob job(fd, h.path, progress, static_cast<unsigned>(std::max<std::size_t>(buffers, 3)));
    for (std::size_t t = 0; t < h.tensors.size(); ++t) {
      const ByteRange r{h.data_offset + h.tensors[t].begin, h.tensors[t].byte_size(), job.new_target(), 0};
      job.add(r.offset, r.size, std::span(&r, 1));
    }
    ok = job.wait();
    if (ok)
      for (std::size_t t = 0; t < h.tensors.size(); ++t) sums[t] = job.sum(t);
  }
  ::close(fd);
  if (!ok) return ok.error();
  std::vector<TensorDigest> out;
  out.reserve(h.tensors.size());
  for (std::size_t i = 0; i < h.tensors.size(); ++i) {
    const auto& e = h.tensors[i];
    out.push_back(
        {e.name, e.dtype, e.shape, e.byte_size(), hash::finalize(sums[i], e.dtype, e.shape, e.byte_size()), {}, false});
  }
  std::sort(out.begin(), out.end(), [](const TensorDigest& a, const TensorDigest& b) { return a.name < b.name; });
  return out;
}

Result<PendingArchive> queue_torch_archive(int fd, std::uint64_t base, std::uint64_t length, const std::string& label,
                                           RangeHashJob& job, unsigned threads) {
  auto archive = read_torch_archive(fd, base, length, label);
  if (!archive) return archive.error();
  PendingArchive out;
  std::map<std::uint64_t, std::vector<ByteRange>> ranges_of;  // storage data offset -> contiguous views in it
  std::map<std::uint64_t, std::vector<std::string>> names_of;
  for (std::size_t i = 0; i < archive->tensors.size(); ++i) {
    const auto& t = archive->tensors[i];
    const std::uint64_t es = dtype_size(t.dtype), bytes = t.numel() * es;
    TensorDigest d{t.name, t.dtype, t.shape, bytes, 0, {}, false};
    names_of[t.storage_data].push_back(t.name);
    if (t.contiguous()) {
      const std::size_t target = job.new_target();
      ranges_of[t.storage_data].push_back({t.storage_data + t.storage_offset * es, bytes, target, 0});
      out.sums.emplace_back(out.digests.size(), target);
    } else {
      // A strided view: gathered from its storage in windows (memory bounded by two windows, whatever the
      // storage's size) and hashed in the view's logical order.
      const hash::StorageReader read = [&](std::byte* dst, std::size_t n, std::uint64_t at) {
        return read_exact(fd, dst, n, t.storage_data + at);
      };
      std::optional<std::uint64_t> h;
      try {
        h = hash::hash_strided_windowed(t.dtype, t.shape, t.strides, static_cast<std::int64_t>(t.storage_offset),
                                        t.storage_bytes, read, threads);
      } catch (const std::invalid_argument& e) {
        return input_error(fmt::format("{}: tensor '{}' does not fit its storage", label, t.name), e.what(),
                           "the file is damaged; use another replica");
      }
      if (!h)
        return input_error(fmt::format("{}: cannot read the storage of '{}' (bytes {}..{})", label, t.name,
                                       t.storage_data, t.storage_data + t.storage_bytes),
                           "file truncated", "the file is incomplete; re-copy it or use another replica");
      d.hash = *h;
    }
    out.digests.push_back(std::move(d));
  }
  // Every storage is read once, whole, and checked against its CRC-32; the contiguous views in it are hashed on the
  // way.
  for (const auto& s : archive->storages)
    out.checks.emplace_back(job.add(s.data, s.bytes, ranges_of[s.data], s.crc32, s.entry), names_of[s.data]);
  if (archive->pickle_crc_actual != archive->pickle_crc_expected) {
    CrcFailure f{archive->pickle_entry, {}, {}, archive->pickle_crc_expected, archive->pickle_crc_actual};
    for (const auto& t : archive->tensors) f.tensors.push_back(t.name);
    for (const auto& l : archive->leaves) f.tensors.push_back(l.name);
    std::sort(f.tensors.begin(), f.tensors.end());
    out.pickle_failure = std::move(f);
  }
  for (const auto& e : archive->other_crc_failures)
    out.other_failures.push_back(CrcFailure{e.entry, {}, {}, e.expected, e.actual});
  for (const auto& l : archive->leaves) {
    TensorDigest d{l.name, DType::u8, {}, l.text.size(), 0, {}, false};
    d.hash =
        hash::hash_tensor(DType::u8, {}, std::span(reinterpret_cast<const std::byte*>(l.text.data()), l.text.size()));
    d.value = true;
    out.digests.push_back(std::move(d));
  }
  return out;
}

std::vector<TensorDigest> complete_torch_archive(PendingArchive&& pending, const RangeHashJob& job,
                                                 std::vector<CrcFailure>* crc_failures) {
  for (const auto& [digest, target] : pending.sums) {
    auto& d = pending.digests[digest];
    d.hash = hash::finalize(job.sum(target), d.dtype, d.shape, d.bytes);
  }
  if (crc_failures) {
    if (pending.pickle_failure) crc_failures->push_back(*pending.pickle_failure);
    for (const auto& f : pending.other_failures) crc_failures->push_back(f);
    for (const auto& [segment, names] : pending.checks)
      if (auto f = job.crc_failure(segment)) {
        f->tensors = names;
        std::sort(f->tensors.begin(), f->tensors.end());
        crc_failures->push_back(std::move(*f));
      }
  }
  std::sort(pending.digests.begin(), pending.digests.end(),
            [](const TensorDigest& a, const TensorDigest& b) { return a.name < b.name; });
  return std::move(pending.digests);
}

Result<std::vector<TensorDigest>> digest_torch_archive(int fd, std::uint64_t base, std::uint64_t length,
                                                       const std::string& label, const ProgressFn& progress,
                                                       unsigned threads) {
  RangeHashJob job(fd, label, progress, threads == 0 ? 0 : threads + 2);
  auto pending = queue_torch_archive(fd, base, length, label, job, threads);
  auto ok = job.wait();
  if (!pending) return pending.error();
  if (!ok) return ok.error();
  return complete_torch_archive(std::move(*pending), job, nullptr);
}

Result<FileDigest> digest_file(const std::string& path, const ProgressFn& progress, unsigned threads) {
  struct stat dst {};
  if (::stat(path.c_str(), &dst) == 0 && S_ISDIR(dst.st_mode)) return digest_directory(path, progress, threads);
  auto format = detect_format(path);
  if (!format) return format.error();
  FileDigest d;
  d.path = path;
  d.format = *format;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) d.size = static_cast<std::uint64_t>(st.st_size);
  switch (*format) {
    case FileFormat::torch_zip: {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        return input_error(fmt::format("cannot open {}", path), std::strerror(errno), "check the path and permissions");
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      Result<PendingArchive> pending = PendingArchive{};
      Status ok = Ok{};
      {
        // The directory, the local headers and data.pkl are read before the storages, apart from their stream.
        AsideReads aside(fd);
        RangeHashJob job(fd, path, progress, threads == 0 ? 0 : threads + 2);
        pending = queue_torch_archive(fd, 0, d.size, path, job, threads);
        ok = job.wait();
        if (pending && ok) d.tensors = complete_torch_archive(std::move(*pending), job, &d.crc_failures);
      }
      ::close(fd);
      if (!pending) return pending.error();
      if (!ok) return ok.error();
      return d;
    }
    case FileFormat::torch_legacy:
      return input_error(fmt::format("{}: legacy (pre-zip) torch.save format", path),
                         "scout reads only the zip format torch.save writes by default since torch 1.6",
                         "re-save it with torch.save(dict(model.state_dict()), f) from torch >= 1.6 without "
                         "_use_new_zipfile_serialization=False, or as safetensors");
    case FileFormat::dcp:
    case FileFormat::hf_sharded:
    case FileFormat::unknown:
      return input_error(fmt::format("{}: file is {} bytes, too short to be a checkpoint", path, d.size), {},
                         "the file is empty or truncated; re-copy it or use another replica");
    case FileFormat::safetensors:
      break;
  }
  auto header = read_safetensors_header(path);
  if (!header) return header.error();
  auto t = hash_safetensors_pipelined(*header, progress, std::size_t{4} << 20,
                                      (threads == 0 ? default_hash_threads() : threads) + 2);
  if (!t) return t.error();
  d.tensors = std::move(*t);
  return d;
}

}  // namespace scout::checkpoint
