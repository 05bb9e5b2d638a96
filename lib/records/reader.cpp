#include "lib/records/reader.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

#include "lib/common/proc.hpp"
#include "lib/records/layout.hpp"

namespace scout::records {

namespace {

namespace L = layout;
constexpr auto k_relaxed = std::memory_order_relaxed;
constexpr std::size_t k_max_map_bytes = std::size_t{1} << 20;
constexpr int k_slot_tries = 1000;

// An open, mapped segment; unmaps and closes on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (m_data != nullptr) munmap(m_data, m_size);
    if (m_fd >= 0) close(m_fd);
  }
  int m_fd = -1;
  void* m_data = nullptr;
  std::size_t m_size = 0;
  struct stat m_stat {};
};

std::string join_path(const std::string& dir, std::string_view name) {
  return dir + "/" + std::string(name);
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "scout.<job>.<rank>.tmp.<pid>.<n>": a record being created (or whose creator died).
std::optional<std::int64_t> temporary_name_pid(std::string_view name) {
  if (!name.starts_with(L::k_segment_prefix)) return std::nullopt;
  std::size_t tmp = name.find(".tmp.");
  if (tmp == std::string_view::npos) return std::nullopt;
  if (!parse_segment_name(name.substr(0, tmp))) return std::nullopt;
  std::string_view rest = name.substr(tmp + 5);
  std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || !all_digits(rest.substr(0, dot)) || !all_digits(rest.substr(dot + 1)) ||
      dot > 12)
    return std::nullopt;
  return std::stoll(std::string(rest.substr(0, dot)));
}

RecordRead problem(std::string_view name, RecordProblem p, std::string message) {
  RecordRead r;
  r.segment = std::string(name);
  r.problem = p;
  r.message = std::move(message);
  return r;
}

// Opens and maps `name` after the owner checks; fills `read` on failure.
bool open_segment(std::string_view name, const ReaderOptions& o, Mapping& m, RecordRead& read) {
  std::string path = join_path(o.shm_dir, name);
  m.m_fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (m.m_fd < 0) {
    read = problem(name, RecordProblem::unreadable, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    return false;
  }
  if (fstat(m.m_fd, &m.m_stat) != 0 || !S_ISREG(m.m_stat.st_mode)) {
    read = problem(name, RecordProblem::unreadable, fmt::format("{} is not a regular file", path));
    return false;
  }
  if (o.owner == OwnerPolicy::same_user) {
    if (m.m_stat.st_uid != geteuid()) {
      read = problem(name, RecordProblem::other_owner,
                     fmt::format("{} belongs to uid {}, not to this user (uid {}); refused: records are only "
                                 "trusted from their own user (--allow-other-owner reads them anyway)",
                                 path, m.m_stat.st_uid, geteuid()));
      return false;
    }
    if ((m.m_stat.st_mode & 0077) != 0) {
      read = problem(name, RecordProblem::other_owner,
                     fmt::format("{} has mode {:04o}: other users could have written it; refused (records are "
                                 "created 0600; --allow-other-owner reads it anyway)",
                                 path, m.m_stat.st_mode & 07777));
      return false;
    }
  }
  auto size = static_cast<std::size_t>(m.m_stat.st_size);
  if (size < 3 * sizeof(L::Word)) {
    read = problem(
        name, RecordProblem::wrong_size,
        fmt::format("{} has {} bytes, too small for a record header (a writer may still be creating it)", path, size));
    return false;
  }
  m.m_size = std::min(size, k_max_map_bytes);
  void* p = mmap(nullptr, m.m_size, PROT_READ, MAP_SHARED, m.m_fd, 0);
  if (p == MAP_FAILED) {
    read = problem(name, RecordProblem::unreadable, fmt::format("cannot map {}: {}", path, std::strerror(errno)));
    return false;
  }
  m.m_data = p;
  return true;
}

std::optional<Fingerprint> decode_fingerprint(std::uint64_t small, std::uint64_t group, std::uint64_t count,
                                              std::uint64_t root_or_op, std::uint64_t group_seq) {
  Fingerprint f;
  std::uint8_t type = L::small_type(small);
  if (type > static_cast<std::uint8_t>(CollectiveType::other)) return std::nullopt;
  f.type = static_cast<CollectiveType>(type);
  f.dtype = L::small_dtype(small);
  f.group = group;
  f.count = count;
  f.root_or_op = static_cast<std::int64_t>(root_or_op);
  f.group_seq = group_seq;
  return f;
}

}  // namespace

std::optional<SegmentName> parse_segment_name(std::string_view name) {
  if (!name.starts_with(L::k_segment_prefix)) return std::nullopt;
  std::string_view rest = name.substr(L::k_segment_prefix.size());
  std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > L::k_max_job_name_bytes) return std::nullopt;
  std::string_view job = rest.substr(0, dot);
  std::string_view rank = rest.substr(dot + 1);
  if (L::sanitize_job(job) != job || !all_digits(rank) || rank.size() > 12) return std::nullopt;
  return SegmentName{std::string(job), std::stoll(std::string(rank))};
}

bool writer_alive(std::int64_t pid, std::uint64_t start_ticks) {
  if (!proc::pid_alive(pid)) return false;
  proc::Stat st;
  if (!proc::read_stat(pid, &st)) return true;  // exists but /proc hides it (hidepid): cannot tell reuse, assume alive
  if (st.state == 'Z' || st.state == 'X') return false;
  return start_ticks == 0 || st.start_ticks == start_ticks;
}

Result<std::vector<std::string>> list_segments(const ReaderOptions& o) {
  DIR* dir = opendir(o.shm_dir.c_str());
  if (dir == nullptr)
    return unavailable_error(fmt::format("cannot list {}", o.shm_dir), std::strerror(errno),
                             "check that shared memory is mounted there");
  std::string want_job = o.job.empty() ? std::string() : L::sanitize_job(o.job);
  std::vector<std::pair<SegmentName, std::string>> found;
  while (dirent* e = readdir(dir)) {
    auto parsed = parse_segment_name(e->d_name);
    if (!parsed) continue;
    if (!want_job.empty() && parsed->job != want_job) continue;
    found.emplace_back(std::move(*parsed), e->d_name);
  }
  closedir(dir);
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first.job, a.first.rank) < std::tie(b.first.job, b.first.rank);
  });
  std::vector<std::string> names;
  for (auto& f : found) names.push_back(std::move(f.second));
  return names;
}

RecordRead read_segment(std::string_view name, const ReaderOptions& o) {
  RecordRead read;
  read.segment = std::string(name);
  Mapping m;
  if (!open_segment(name, o, m, read)) return read;
  std::string path = join_path(o.shm_dir, name);
  const auto* words = static_cast<const L::Word*>(m.m_data);
  std::uint64_t magic = words[0].load(std::memory_order_acquire);
  if (magic != L::k_magic)
    return problem(
        name, RecordProblem::bad_magic,
        fmt::format("{} is not a scout record (magic {:#018x}, expected {:#018x})", path, magic, L::k_magic));
  std::uint64_t version = words[1].load(k_relaxed);
  if (version < L::k_min_layout_version || version > L::k_layout_version)
    return problem(name, RecordProblem::unknown_version,
                   fmt::format("{} has record layout version {}, this scout reads versions {} to {}; use the scout "
                               "that matches the trainer's publisher",
                               path, version, L::k_min_layout_version, L::k_layout_version));
  std::uint64_t size = words[2].load(k_relaxed);
  if (size != sizeof(L::Record) || static_cast<std::uint64_t>(m.m_stat.st_size) != sizeof(L::Record))
    return problem(name, RecordProblem::wrong_size,
                   fmt::format("{} is {} bytes and says {}, but a version {} record is {} bytes", path,
                               m.m_stat.st_size, size, version, sizeof(L::Record)));
  const auto* rec = static_cast<const L::Record*>(m.m_data);
  const auto& h = rec->header;

  RankSnapshot s;
  s.job = L::load_string(h.job, L::k_job_words);
  s.attempt = L::load_string(h.attempt, L::k_attempt_words);
  s.host = L::load_string(h.host, L::k_host_words);
  s.rank = static_cast<std::int64_t>(h.rank.load(k_relaxed));
  s.world_size = static_cast<std::int64_t>(h.world_size.load(k_relaxed));
  for (std::size_t i = 0; i < 6; ++i) s.coords[i] = static_cast<std::int64_t>(h.coords[i].load(k_relaxed));
  s.pid = static_cast<std::int64_t>(h.pid.load(k_relaxed));
  s.start_ns = static_cast<std::int64_t>(h.start_ns.load(k_relaxed));
  std::uint64_t start_ticks = h.start_ticks.load(k_relaxed);
  read.writer_alive = writer_alive(s.pid, start_ticks);

  if (!o.job.empty() && s.job != o.job) {
    read.problem = RecordProblem::other_job;
    read.message = fmt::format("{} belongs to job '{}', not '{}'", path, s.job, o.job);
    return read;
  }
  auto parsed = parse_segment_name(name);
  if (s.world_size <= 0 || s.rank < 0 || s.rank >= s.world_size || (parsed && parsed->rank != s.rank) ||
      L::sanitize_job(s.job) != (parsed ? parsed->job : L::sanitize_job(s.job))) {
    read.problem = RecordProblem::corrupt;
    read.message = fmt::format("{} names rank {} of world size {} for job '{}', which does not match its name", path,
                               s.rank, s.world_size, s.job);
    return read;
  }

  // Progress and ring, read into `s` (header fields already set); false with
  // `read` holding the problem when no consistent, valid read was made.
  const std::uint8_t max_state =
      static_cast<std::uint8_t>(version >= 2 ? CollectiveState::failed : CollectiveState::done);
  auto read_body = [&](RankSnapshot& s) -> bool {
    // Progress through the latch, retried until consistent or the deadline.
    auto deadline = std::chrono::steady_clock::now() + o.read_timeout;
    std::uint64_t p[12];
    bool consistent = false;
    for (std::uint64_t attempt = 0;; ++attempt) {
      std::uint64_t s1 = rec->latch.load(std::memory_order_acquire);
      const L::Progress& copy = rec->progress[s1 & 1];
      const L::Word* w = &copy.step;
      for (int i = 0; i < 12; ++i) p[i] = w[i].load(k_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (rec->latch.load(k_relaxed) == s1) {
        consistent = true;
        break;
      }
      if ((attempt & 63) == 63 && std::chrono::steady_clock::now() >= deadline) break;
    }
    if (!consistent) {
      read.problem = RecordProblem::torn;
      read.message = fmt::format("{}: no consistent read of the progress block within {} ms (writer {})", path,
                                 o.read_timeout.count(), read.writer_alive ? "alive and updating" : "gone");
      return false;
    }
    s.step = p[0];
    s.op_seq = p[1];
    std::uint64_t small = p[2];
    auto pending = decode_fingerprint(small, p[3], p[4], p[5], p[6]);
    std::uint8_t phase = L::small_phase(small);
    std::uint8_t state = L::small_state(small);
    if (!pending || phase > static_cast<std::uint8_t>(Phase::terminated) || state > max_state) {
      read.problem = RecordProblem::corrupt;
      read.message = fmt::format("{}: progress block holds unknown values (phase {}, state {}, type {})", path, phase,
                                 state, L::small_type(small));
      return false;
    }
    s.pending = *pending;
    s.phase = static_cast<Phase>(phase);
    s.collective_state = static_cast<CollectiveState>(state);
    s.progress_ns = static_cast<std::int64_t>(p[9]);
    s.events = p[10];
    s.dropped = p[11];
    s.heartbeat_ns =
        std::max(static_cast<std::int64_t>(rec->heartbeat_ns.load(std::memory_order_acquire)), s.progress_ns);

    // Ring slots, each behind its own sequence; a slot that stays odd (its
    // writer died mid-write) or never reads consistently is skipped.
    for (std::size_t i = 0; i < L::k_ring_size; ++i) {
      const L::RingSlot& slot = rec->ring[i];
      for (int t = 0; t < k_slot_tries; ++t) {
        std::uint64_t s1 = slot.seq.load(std::memory_order_acquire);
        if (s1 & 1) continue;
        std::uint64_t v[8];
        const L::Word* w = &slot.op_seq;
        for (int k = 0; k < 8; ++k) v[k] = w[k].load(k_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (slot.seq.load(k_relaxed) != s1) continue;
        if (v[0] == 0 || v[0] > s.op_seq) break;  // never used, or newer than the progress we read
        auto f = decode_fingerprint(v[1], v[2], v[3], v[4], v[5]);
        if (!f) break;
        CollectiveEvent e;
        e.fingerprint = *f;
        e.op_seq = v[0];
        e.enter_ns = static_cast<std::int64_t>(v[6]);
        e.exit_ns = static_cast<std::int64_t>(v[7]);
        e.failed = version >= 2 && L::small_state(v[1]) == static_cast<std::uint8_t>(CollectiveState::failed);
        // The slot's phase byte: the kind of its exit time (0, unknown, from older publishers; an
        // out-of-range value reads as unknown rather than refusing the whole record).
        const auto kind = L::small_phase(v[1]);
        e.exit_kind = kind <= static_cast<std::uint8_t>(ExitKind::ordered) && e.exit_ns != 0
                          ? static_cast<ExitKind>(kind)
                          : ExitKind::unknown;
        s.recent.push_back(e);
        break;
      }
    }
    std::sort(s.recent.begin(), s.recent.end(), [](const auto& a, const auto& b) { return a.op_seq < b.op_seq; });
    return true;
  };
  RankSnapshot header = s;
  if (!read_body(s)) return read;
  // A writer that died while it was read may have published after the copy
  // was taken: read once more, now that the record is final, so that a dead
  // writer's snapshot is always its last state (hang decisions rely on it).
  if (read.writer_alive && !writer_alive(s.pid, start_ticks)) {
    read.writer_alive = false;
    s = std::move(header);
    if (!read_body(s)) return read;
  }
  read.snapshot = std::move(s);
  return read;
}

void mark_stale(std::vector<RecordRead>& reads) {
  // Newest record per job, by the time the writer process started (ties: higher pid).
  std::map<std::string, const RankSnapshot*> newest;
  for (const auto& r : reads) {
    if (!r.snapshot) continue;
    const RankSnapshot*& n = newest[r.snapshot->job];
    if (n == nullptr || std::tie(r.snapshot->start_ns, r.snapshot->pid) > std::tie(n->start_ns, n->pid))
      n = &*r.snapshot;
  }
  for (auto& r : reads) {
    if (!r.snapshot) continue;
    const RankSnapshot* n = newest[r.snapshot->job];
    r.stale = r.snapshot->attempt != n->attempt || r.snapshot->world_size != n->world_size;
  }
}

Result<std::vector<RecordRead>> read_records(const ReaderOptions& o) {
  auto names = list_segments(o);
  if (!names) return names.error();
  std::vector<RecordRead> reads;
  reads.reserve(names->size());
  for (const auto& n : *names) reads.push_back(read_segment(n, o));
  mark_stale(reads);
  return reads;
}

Result<std::vector<GcEntry>> gc_records(const ReaderOptions& o, GcMode mode) {
  std::vector<GcEntry> out;
  DIR* dir = opendir(o.shm_dir.c_str());
  if (dir == nullptr)
    return unavailable_error(fmt::format("cannot list {}", o.shm_dir), std::strerror(errno),
                             "check that shared memory is mounted there");
  std::vector<std::string> temporaries;
  while (dirent* e = readdir(dir)) {
    std::string_view n = e->d_name;
    if (auto pid = temporary_name_pid(n)) {
      auto base = parse_segment_name(n.substr(0, n.find(".tmp.")));
      if (o.job.empty() || base->job == L::sanitize_job(o.job)) temporaries.emplace_back(n);
    }
  }
  closedir(dir);
  std::sort(temporaries.begin(), temporaries.end());
  for (const auto& t : temporaries) {
    std::int64_t pid = *temporary_name_pid(t);
    std::string path = join_path(o.shm_dir, t);
    struct stat st {};
    GcEntry e{t, false, ""};
    if (lstat(path.c_str(), &st) != 0 || st.st_uid != geteuid()) {
      e.reason = "temporary file of another user: kept";
    } else if (proc::pid_alive(pid)) {
      e.reason = fmt::format("temporary file of live process {}: kept", pid);
    } else {
      e.removed = true;
      e.reason = fmt::format("temporary file left by dead process {}", pid);
      if (mode == GcMode::remove && unlink(path.c_str()) != 0 && errno != ENOENT) {
        e.removed = false;
        e.reason = fmt::format("cannot remove: {}", std::strerror(errno));
      }
    }
    out.push_back(std::move(e));
  }

  auto names = list_segments(o);
  if (!names) return names.error();
  for (const auto& name : *names) {
    std::string path = join_path(o.shm_dir, name);
    struct stat judged {};
    if (lstat(path.c_str(), &judged) != 0) continue;  // removed meanwhile
    RecordRead r = read_segment(name, o);
    GcEntry e{name, false, ""};
    bool header_valid = r.problem == RecordProblem::none || r.problem == RecordProblem::torn ||
                        r.problem == RecordProblem::other_job || r.problem == RecordProblem::corrupt;
    if (!header_valid) {
      e.reason = fmt::format("{}: kept ({})", record_problem_name(r.problem), r.message);
    } else if (r.problem == RecordProblem::other_job) {
      e.reason = fmt::format("other job: kept ({})", r.message);
    } else if (r.writer_alive) {
      e.reason = "writer alive: kept";
    } else {
      e.removed = true;
      e.reason = r.snapshot ? fmt::format("writer pid {} is gone", r.snapshot->pid) : "writer is gone";
    }
    if (e.removed && mode == GcMode::remove) {
      // Move aside, check it is the file judged above, then unlink; a record a
      // new writer renamed into place meanwhile is put back.
      std::string aside = fmt::format("{}.gc.{}", path, getpid());
      if (rename(path.c_str(), aside.c_str()) != 0) {
        e.removed = false;
        e.reason = fmt::format("cannot remove: {}", std::strerror(errno));
      } else {
        struct stat moved {};
        if (lstat(aside.c_str(), &moved) == 0 && moved.st_ino == judged.st_ino && moved.st_dev == judged.st_dev) {
          unlink(aside.c_str());
        } else {
          if (link(aside.c_str(), path.c_str()) == 0) unlink(aside.c_str());
          e.removed = false;
          e.reason = "replaced by a new writer while being judged: kept";
        }
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace scout::records
