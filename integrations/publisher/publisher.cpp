// Implementation of the C ABI in scout_publisher.h over lib/records/layout.hpp.
// No exception can leave this file: nothing here throws except std::string
// allocation during scout_record_create, which is caught there.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "lib/common/clock.hpp"
#include "lib/common/proc.hpp"
#include "lib/records/layout.hpp"
#include "scout_publisher.h"

namespace layout = scout::records::layout;

namespace {

constexpr int k_lock_spins = 256;
// How long a trainer's own write (an enter, a step, a phase) waits for the writer lock past its spin, yielding to
// the holder: a gloo completion callback or the exit watcher, which holds it for microseconds but can be preempted
// meanwhile on a loaded host. Dropping the event left a collective out of the ring, and the hang decision then sets
// the rank's whole history aside (it counts the drop): test_torch2_twins' native hooks lost a broadcast and a send
// so, once in CI at load ~7.
constexpr std::uint64_t k_lock_wait_ns = 50'000'000;
// A deferred exit whose collective failed carries this bit beside its token
// (tokens are op_seq values, far below 2^63).
constexpr std::uint64_t k_failed_bit = std::uint64_t{1} << 63;
// Bits 56-62 of an exit token carry the kind of its time (enum scout_exit_kind).
constexpr int k_kind_shift = 56;
constexpr std::uint64_t k_kind_mask = std::uint64_t{0x7f} << k_kind_shift;
constexpr std::uint8_t k_max_exit_kind = SCOUT_EXIT_ORDERED;
constexpr std::uint8_t k_state_done = 3;    // CollectiveState::done
constexpr std::uint8_t k_state_failed = 4;  // CollectiveState::failed

// What the writer knows; the record is its published mirror.
struct Mirror {
  std::uint64_t step = 0;
  std::uint64_t op_seq = 0;
  std::uint8_t phase = 0;
  std::uint8_t state = 0;
  std::uint8_t type = 0;
  std::uint8_t dtype = 0;
  std::uint64_t group = 0;
  std::uint64_t count = 0;
  std::int64_t root_or_op = -1;
  std::uint64_t group_seq = 0;
  std::uint64_t pending_op_seq = 0;
  std::uint64_t in_flight = 0;
  std::uint64_t progress_ns = 0;
  std::uint64_t events = 0;
  std::uint64_t dropped = 0;
  std::uint8_t phase_before_collective = 0;
  bool failed = false;  // a collective in flight since in_flight was last 0 completed with an error
};

std::uint64_t now_ns(clockid_t clock) {
  return static_cast<std::uint64_t>(scout::clock_ns(clock));
}

// Start time of `pid` in ticks since boot, 0 when unknown; `state` gets its state letter.
std::uint64_t process_start_ticks(long pid, char* state) {
  scout::proc::Stat st;
  if (!scout::proc::read_stat(pid, &st)) return 0;
  if (state) *state = st.state;
  return st.start_ticks;
}

void publish_progress(layout::Progress& p, const Mirror& m) {
  constexpr auto r = std::memory_order_relaxed;
  p.step.store(m.step, r);
  p.op_seq.store(m.op_seq, r);
  p.small.store(layout::pack_small(m.phase, m.state, m.type, m.dtype), r);
  p.group.store(m.group, r);
  p.count.store(m.count, r);
  p.root_or_op.store(static_cast<std::uint64_t>(m.root_or_op), r);
  p.group_seq.store(m.group_seq, r);
  p.pending_op_seq.store(m.pending_op_seq, r);
  p.in_flight.store(m.in_flight, r);
  p.progress_ns.store(m.progress_ns, r);
  p.events.store(m.events, r);
  p.dropped.store(m.dropped, r);
}

void write_slot_exit(layout::RingSlot& slot, std::uint64_t exit_ns, bool failed, std::uint8_t kind);

}  // namespace

struct scout_record {
  layout::Record* rec = nullptr;
  std::string path;
  Mirror mirror;
  std::uint64_t ring_op[layout::k_ring_size] = {};  // op_seq of each slot's enter, private copy
  layout::Word dropped_unpublished{0};              // events dropped while the lock was held
  // Exits of collectives whose thread found the lock held (e.g. a gloo
  // completion callback while the main thread publishes): applied by whoever
  // holds the lock next, or by the holder as it unlocks, so a completion is
  // never lost to contention.
  static constexpr std::size_t k_deferred = 16;
  std::atomic<std::uint64_t> deferred[k_deferred] = {};

  // Tries to take the writer lock with a bounded spin; never blocks.
  bool lock() {
    for (int i = 0; i < k_lock_spins; ++i) {
      std::uint64_t expected = 0;
      if (rec->writer_lock.compare_exchange_weak(expected, 1, std::memory_order_seq_cst, std::memory_order_relaxed))
        return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    return false;
  }
  // Past lock()'s spin: yields to the holder until it releases the lock, for at most k_lock_wait_ns. Not for a
  // signal handler (it may have interrupted the holder itself).
  bool lock_yielding() {
    if (lock()) return true;
    const std::uint64_t until = now_ns(CLOCK_MONOTONIC) + k_lock_wait_ns;
    do {
      sched_yield();
      if (lock()) return true;
    } while (now_ns(CLOCK_MONOTONIC) < until);
    return false;
  }
  bool has_deferred() const {
    for (const auto& d : deferred)
      if (d.load(std::memory_order_seq_cst) != 0) return true;
    return false;
  }
  // Releases the lock, then applies exits deferred meanwhile unless another
  // writer took the lock (it drains them itself).
  void unlock() {
    rec->writer_lock.store(0, std::memory_order_seq_cst);
    while (has_deferred()) {
      std::uint64_t expected = 0;
      if (!rec->writer_lock.compare_exchange_strong(expected, 1, std::memory_order_seq_cst)) return;
      std::uint64_t now = now_ns(CLOCK_REALTIME);
      if (drain(now)) publish(now);
      rec->writer_lock.store(0, std::memory_order_seq_cst);
    }
  }
  // Queues the exit of `token` for the lock holder; false when the queue is full.
  bool defer_exit(std::uint64_t token) {
    for (auto& d : deferred) {
      std::uint64_t empty = 0;
      if (d.compare_exchange_strong(empty, token, std::memory_order_seq_cst)) return true;
    }
    return false;
  }
  // Applies deferred exits; call with the lock held. True when any was applied.
  bool drain(std::uint64_t now) {
    bool any = false;
    for (auto& d : deferred) {
      if (d.load(std::memory_order_seq_cst) == 0) continue;  // plain load: the common case costs no locked op
      std::uint64_t t = d.exchange(0, std::memory_order_seq_cst);
      if (t != 0) any = apply_exit(t, now) || any;
    }
    return any;
  }
  // Marks the collective entered with `token` complete (failed when the token
  // carries k_failed_bit); call with the lock held.
  bool apply_exit(std::uint64_t token, std::uint64_t now) {
    Mirror& m = mirror;
    const bool failed = (token & k_failed_bit) != 0;
    const auto kind = static_cast<std::uint8_t>((token & k_kind_mask) >> k_kind_shift);
    token &= ~(k_failed_bit | k_kind_mask);
    if (token == 0 || token > m.op_seq) return false;
    for (std::size_t back = 0; back < layout::k_ring_size && back < m.events; ++back) {
      std::size_t slot = (m.events - 1 - back) % layout::k_ring_size;
      if (ring_op[slot] == token) {
        write_slot_exit(rec->ring[slot], now, failed, kind);
        break;
      }
    }
    advance(now);
    if (m.in_flight > 0) --m.in_flight;
    m.failed = m.failed || failed;
    if (m.in_flight == 0) {
      m.state = m.failed ? k_state_failed : k_state_done;
      m.failed = false;
      if (m.phase == SCOUT_PHASE_COLLECTIVE) m.phase = m.phase_before_collective;
    }
    return true;
  }
  // Takes the lock (yielding to its holder, bounded) and applies deferred exits; false (event dropped and counted)
  // when it stayed held.
  bool begin(std::uint64_t* now) {
    if (!lock_yielding()) {
      dropped_unpublished.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    *now = now_ns(CLOCK_REALTIME);
    drain(*now);
    return true;
  }

  // Publishes the mirror through the latch; call with the lock held.
  void publish(std::uint64_t now) {
    mirror.dropped += dropped_unpublished.exchange(0, std::memory_order_relaxed);
    std::uint64_t s = rec->latch.load(std::memory_order_relaxed);
    // Release, as Linux's raw_write_seqcount_latch puts smp_wmb() before each
    // increment: the stores of the previous publish into copy 1 must be
    // visible before the latch turns odd, which sends readers to copy 1. With
    // a relaxed store, a reader could acquire s + 1, read copy 1 while the
    // previous publish's stores to it are not yet visible to it (a mix of two
    // states), find the latch still s + 1 and return that mix as consistent.
    // (The fence below orders this increment before the stores to copy 0.)
    rec->latch.store(s + 1, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_release);
    publish_progress(rec->progress[0], mirror);
    rec->latch.store(s + 2, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_release);
    publish_progress(rec->progress[1], mirror);
    rec->heartbeat_ns.store(now, std::memory_order_release);
  }

  // Marks an event that advances op_seq.
  void advance(std::uint64_t now) {
    ++mirror.op_seq;
    mirror.progress_ns = now;
  }
};

namespace {

void write_slot(layout::RingSlot& slot, const Mirror& m, std::uint64_t op_seq, std::uint64_t enter_ns) {
  constexpr auto r = std::memory_order_relaxed;
  std::uint64_t s = slot.seq.load(r);
  slot.seq.store(s + 1, r);
  std::atomic_thread_fence(std::memory_order_release);
  slot.op_seq.store(op_seq, r);
  slot.small.store(layout::pack_small(0, 0, m.type, m.dtype), r);
  slot.group.store(m.group, r);
  slot.count.store(m.count, r);
  slot.root_or_op.store(static_cast<std::uint64_t>(m.root_or_op), r);
  slot.group_seq.store(m.group_seq, r);
  slot.enter_ns.store(enter_ns, r);
  slot.exit_ns.store(0, r);
  slot.seq.store(s + 2, std::memory_order_release);
}

void write_slot_exit(layout::RingSlot& slot, std::uint64_t exit_ns, bool failed, std::uint8_t kind) {
  constexpr auto r = std::memory_order_relaxed;
  std::uint64_t s = slot.seq.load(r);
  slot.seq.store(s + 1, r);
  std::atomic_thread_fence(std::memory_order_release);
  slot.exit_ns.store(exit_ns, r);
  std::uint64_t small = slot.small.load(r);
  small = (small & ~std::uint64_t{0xff}) | kind;  // a ring slot's phase byte: the kind of its exit time
  if (failed) small = (small & ~(std::uint64_t{0xff} << 8)) | std::uint64_t{k_state_failed} << 8;
  slot.small.store(small, r);
  slot.seq.store(s + 2, std::memory_order_release);
}

bool valid_text(const char* s, std::size_t max_bytes, bool allow_empty) {
  if (s == nullptr) return allow_empty;
  std::size_t n = std::strlen(s);
  return (allow_empty || n > 0) && n <= max_bytes;
}

// Checks an existing segment at `path`: SCOUT_OK when it may be replaced.
int check_existing(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return errno == ENOENT ? SCOUT_OK : SCOUT_ESYS;
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    close(fd);
    return SCOUT_ESYS;
  }
  if (st.st_uid != geteuid()) {
    close(fd);
    return SCOUT_EPERM;
  }
  int status = SCOUT_OK;
  if (S_ISREG(st.st_mode) && static_cast<std::size_t>(st.st_size) == sizeof(layout::Record)) {
    void* p = mmap(nullptr, sizeof(layout::Record), PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      const auto* rec = static_cast<const layout::Record*>(p);
      if (rec->header.magic.load(std::memory_order_acquire) == layout::k_magic) {
        auto pid = static_cast<long>(rec->header.pid.load(std::memory_order_relaxed));
        std::uint64_t ticks = rec->header.start_ticks.load(std::memory_order_relaxed);
        char state = '?';
        if (pid > 0 && pid != static_cast<long>(getpid()) && ticks != 0 && process_start_ticks(pid, &state) == ticks &&
            state != 'Z' && state != 'X')
          status = SCOUT_EEXIST;
      }
      munmap(p, sizeof(layout::Record));
    }
  }
  close(fd);
  return status;
}

}  // namespace

extern "C" {

int scout_record_create(const scout_record_options* o, scout_record** out) {
  if (out == nullptr || o == nullptr) return SCOUT_EINVAL;
  *out = nullptr;
  if (!valid_text(o->job, layout::k_max_job_bytes, false) ||
      !valid_text(o->attempt, layout::k_max_attempt_bytes, true) ||
      !valid_text(o->host, layout::k_max_host_bytes, true) || o->world_size <= 0 || o->rank < 0 ||
      o->rank >= o->world_size)
    return SCOUT_EINVAL;
  if (o->coords != nullptr)
    for (int i = 0; i < 6; ++i)
      if (o->coords[i] < 0) return SCOUT_EINVAL;
  try {
    auto* handle = new (std::nothrow) scout_record();
    if (handle == nullptr) return SCOUT_ESYS;
    handle->path = "/dev/shm/" + layout::segment_name(o->job, o->rank);
    int status = check_existing(handle->path);
    if (status != SCOUT_OK) {
      delete handle;
      return status;
    }
    static std::atomic<unsigned> counter{0};
    std::string tmp = handle->path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1));
    int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      delete handle;
      return SCOUT_ESYS;
    }
    void* p = MAP_FAILED;
    if (fchmod(fd, 0600) == 0 && ftruncate(fd, sizeof(layout::Record)) == 0)
      p = mmap(nullptr, sizeof(layout::Record), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int saved = errno;
    close(fd);
    if (p == MAP_FAILED) {
      unlink(tmp.c_str());
      delete handle;
      errno = saved;
      return SCOUT_ESYS;
    }
    auto* rec = static_cast<layout::Record*>(p);  // zero-filled by ftruncate
    constexpr auto r = std::memory_order_relaxed;
    auto& h = rec->header;
    h.version.store(layout::k_layout_version, r);
    h.size.store(sizeof(layout::Record), r);
    h.rank.store(static_cast<std::uint64_t>(o->rank), r);
    h.world_size.store(static_cast<std::uint64_t>(o->world_size), r);
    for (int i = 0; i < 6; ++i) h.coords[i].store(o->coords ? static_cast<std::uint64_t>(o->coords[i]) : 0, r);
    h.pid.store(static_cast<std::uint64_t>(getpid()), r);
    std::uint64_t ticks = process_start_ticks(static_cast<long>(getpid()), nullptr);
    h.start_ticks.store(ticks, r);
    std::uint64_t now = now_ns(CLOCK_REALTIME);
    std::uint64_t since_boot = now_ns(CLOCK_BOOTTIME);
    long hz = sysconf(_SC_CLK_TCK);
    std::uint64_t started_after_boot = hz > 0 ? ticks * (1000000000ULL / static_cast<std::uint64_t>(hz)) : 0;
    h.start_ns.store(ticks != 0 && started_after_boot <= since_boot ? now - (since_boot - started_after_boot) : 0, r);
    h.create_ns.store(now, r);
    h.uid.store(geteuid(), r);
    layout::store_string(h.job, layout::k_job_words, o->job);
    layout::store_string(h.attempt, layout::k_attempt_words, o->attempt ? o->attempt : "");
    char host[256] = {};
    if (o->host == nullptr) gethostname(host, sizeof host - 1);
    layout::store_string(h.host, layout::k_host_words, o->host ? o->host : host);
    handle->rec = rec;
    handle->mirror.progress_ns = now;
    handle->mirror.phase = SCOUT_PHASE_UNKNOWN;
    handle->publish(now);
    h.magic.store(layout::k_magic, std::memory_order_release);
    if (rename(tmp.c_str(), handle->path.c_str()) != 0) {
      saved = errno;
      unlink(tmp.c_str());
      munmap(p, sizeof(layout::Record));
      delete handle;
      errno = saved;
      return SCOUT_ESYS;
    }
    *out = handle;
    return SCOUT_OK;
  } catch (...) {
    return SCOUT_ESYS;
  }
}

namespace {

// The record SIGTERM marks (scout_record_watch_termination), and what SIGTERM did before.
std::atomic<scout_record*> g_watched{nullptr};
struct sigaction g_previous_term {};
std::atomic<bool> g_term_installed{false};
std::atomic<pid_t> g_watcher{0};  // the process that watches: a forked child (a DataLoader worker) never marks it

// Async-signal-safe: a bounded try-lock, stores into the mapped record, then the previous action.
void on_terminate(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (scout_record* record = g_watched.load(std::memory_order_acquire);
      record != nullptr && getpid() == g_watcher.load(std::memory_order_acquire) && record->lock()) {
    std::uint64_t now = now_ns(CLOCK_REALTIME);
    record->drain(now);
    record->mirror.phase = SCOUT_PHASE_TERMINATED;
    record->advance(now);
    record->publish(now);
    record->rec->writer_lock.store(0, std::memory_order_seq_cst);
  }
  errno = saved_errno;
  const struct sigaction& prev = g_previous_term;
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, context);
  } else if (prev.sa_handler == SIG_IGN) {
    return;
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
  } else {
    // The default action: end the process by the same signal, so that its parent sees SIGTERM.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);
  }
}

}  // namespace

int scout_record_watch_termination(scout_record* record) {
  if (record == nullptr) return SCOUT_EINVAL;
  g_watcher.store(getpid(), std::memory_order_release);
  g_watched.store(record, std::memory_order_release);
  if (g_term_installed.exchange(true)) return SCOUT_OK;
  struct sigaction sa {};
  sa.sa_sigaction = on_terminate;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGTERM, &sa, &g_previous_term) != 0) {
    g_term_installed.store(false);
    return SCOUT_ESYS;
  }
  return SCOUT_OK;
}

int scout_record_close(scout_record* record, int unlink_segment) {
  scout_record* expected = record;
  g_watched.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
  if (record == nullptr) return SCOUT_EINVAL;
  int status = SCOUT_OK;
  if (unlink_segment) {
    // Only remove the segment when it is still ours (a successor may have replaced it).
    int fd = open(record->path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st {};
    if (fd >= 0 && (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != sizeof(layout::Record))) {
      close(fd);
      fd = -1;
    }
    if (fd >= 0) {
      void* p = mmap(nullptr, sizeof(layout::Record), PROT_READ, MAP_SHARED, fd, 0);
      close(fd);
      if (p != MAP_FAILED) {
        const auto* other = static_cast<const layout::Record*>(p);
        if (other->header.pid.load(std::memory_order_relaxed) == static_cast<std::uint64_t>(getpid()) &&
            other->header.create_ns.load(std::memory_order_relaxed) ==
                record->rec->header.create_ns.load(std::memory_order_relaxed)) {
          if (unlink(record->path.c_str()) != 0) status = SCOUT_ESYS;
        }
        munmap(p, sizeof(layout::Record));
      }
    }
  }
  munmap(record->rec, sizeof(layout::Record));
  delete record;
  return status;
}

int scout_step_begin(scout_record* record, uint64_t step) {
  if (record == nullptr) return SCOUT_EINVAL;
  std::uint64_t now = 0;
  if (!record->begin(&now)) return SCOUT_EBUSY;
  record->mirror.step = step;
  record->mirror.phase = SCOUT_PHASE_UNKNOWN;
  record->advance(now);
  record->publish(now);
  record->unlock();
  return SCOUT_OK;
}

int scout_phase(scout_record* record, uint8_t phase) {
  if (record == nullptr || phase > SCOUT_PHASE_TERMINATED) return SCOUT_EINVAL;
  std::uint64_t now = 0;
  if (!record->begin(&now)) return SCOUT_EBUSY;
  record->mirror.phase = phase;
  if (phase != SCOUT_PHASE_COLLECTIVE) record->mirror.phase_before_collective = phase;
  record->advance(now);
  record->publish(now);
  record->unlock();
  return SCOUT_OK;
}

int scout_collective_enter(scout_record* record, uint64_t group, uint8_t type, uint8_t dtype, uint64_t count,
                           int64_t root_or_op, uint64_t group_seq, uint64_t* token) {
  if (record == nullptr || type > SCOUT_COLL_OTHER) return SCOUT_EINVAL;
  std::uint64_t now = 0;
  if (!record->begin(&now)) return SCOUT_EBUSY;
  Mirror& m = record->mirror;
  record->advance(now);
  if (m.phase != SCOUT_PHASE_COLLECTIVE) m.phase_before_collective = m.phase;
  m.phase = SCOUT_PHASE_COLLECTIVE;
  m.state = 2;  // CollectiveState::inside
  m.type = type;
  m.dtype = dtype;
  m.group = group;
  m.count = count;
  m.root_or_op = root_or_op;
  m.group_seq = group_seq;
  m.pending_op_seq = m.op_seq;
  ++m.in_flight;
  std::size_t slot = m.events % layout::k_ring_size;
  write_slot(record->rec->ring[slot], m, m.op_seq, now);
  record->ring_op[slot] = m.op_seq;
  ++m.events;
  record->publish(now);
  if (token) *token = m.op_seq;
  record->unlock();
  return SCOUT_OK;
}

namespace {

// scout_collective_exit and scout_collective_fail: `token` carries k_failed_bit for a failure.
int finish_collective(scout_record* record, uint64_t token) {
  if (record == nullptr || (token & ~(k_failed_bit | k_kind_mask)) == 0) return SCOUT_EINVAL;
  if (!record->lock()) {
    // Contended: hand the exit to the lock holder instead of dropping it.
    if (!record->defer_exit(token)) {
      record->dropped_unpublished.fetch_add(1, std::memory_order_relaxed);
      return SCOUT_EBUSY;
    }
    std::uint64_t expected = 0;
    if (record->rec->writer_lock.compare_exchange_strong(expected, 1, std::memory_order_seq_cst)) {
      std::uint64_t now = now_ns(CLOCK_REALTIME);
      if (record->drain(now)) record->publish(now);
      record->unlock();
    }
    return SCOUT_OK;
  }
  std::uint64_t now = now_ns(CLOCK_REALTIME);
  record->drain(now);
  bool known = record->apply_exit(token, now);
  record->publish(now);
  record->unlock();
  return known ? SCOUT_OK : SCOUT_EINVAL;
}

}  // namespace

int scout_collective_exit(scout_record* record, uint64_t token) {
  return scout_collective_exit_kind(record, token, SCOUT_EXIT_RETURNED);
}

int scout_collective_exit_kind(scout_record* record, uint64_t token, uint8_t kind) {
  if ((token & (k_failed_bit | k_kind_mask)) != 0 || kind > k_max_exit_kind) return SCOUT_EINVAL;
  return finish_collective(record, token | std::uint64_t{kind} << k_kind_shift);
}

int scout_collective_fail(scout_record* record, uint64_t token) {
  if ((token & (k_failed_bit | k_kind_mask)) != 0) return SCOUT_EINVAL;
  return finish_collective(record, token | k_failed_bit);
}

int scout_record_set_coords(scout_record* record, const int64_t* coords) {
  if (record == nullptr || coords == nullptr) return SCOUT_EINVAL;
  for (int i = 0; i < 6; ++i)
    if (coords[i] < 0) return SCOUT_EINVAL;
  for (int i = 0; i < 6; ++i)
    record->rec->header.coords[i].store(static_cast<std::uint64_t>(coords[i]), std::memory_order_release);
  return SCOUT_OK;
}

int scout_heartbeat(scout_record* record) {
  if (record == nullptr) return SCOUT_EINVAL;
  record->rec->heartbeat_ns.store(now_ns(CLOCK_REALTIME), std::memory_order_release);
  return SCOUT_OK;
}

uint64_t scout_group_id(const int64_t* ranks, size_t count) {
  if (ranks == nullptr && count != 0) return 0;
  return layout::group_id(ranks, count);
}

int scout_segment_name(const char* job, int64_t rank, char* buf, size_t size) {
  if (!valid_text(job, layout::k_max_job_bytes, false) || rank < 0 || buf == nullptr) return SCOUT_EINVAL;
  try {
    std::string name = layout::segment_name(job, rank);
    if (name.size() + 1 > size) return SCOUT_EINVAL;
    std::memcpy(buf, name.c_str(), name.size() + 1);
    return SCOUT_OK;
  } catch (...) {
    return SCOUT_ESYS;
  }
}

const char* scout_strerror(int status) {
  switch (status) {
    case SCOUT_OK:
      return "ok";
    case SCOUT_EINVAL:
      return "invalid argument";
    case SCOUT_EEXIST:
      return "a live process already publishes this job and rank";
    case SCOUT_EPERM:
      return "the existing record segment belongs to another user";
    case SCOUT_ESYS:
      return "a system call failed";
    case SCOUT_EBUSY:
      return "another thread was writing the record; the event was dropped";
    default:
      return "unknown status";
  }
}

uint32_t scout_layout_version(void) {
  return static_cast<uint32_t>(layout::k_layout_version);
}

}  // extern "C"
