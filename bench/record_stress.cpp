// Record stress: one writer publishing through libscout_publisher.so as fast
// as it can against several readers, counting inconsistent snapshots (there
// must be none).
//
//   record_stress [--reads N] [--readers R] [--full-reads M] [--seconds S]
//
// The writer publishes collective enter/exit pairs i = 1, 2, ... with
// group == count == root_or_op == group_seq == i, so every consistent state
// satisfies that equality; a reader that returns a state where it does not has
// mixed two publishes (a torn read reported as consistent).
//
// Readers map the segment read-only on their own (as an observer process
// does) and run the reader's protocol of lib/records/reader.cpp: the progress
// copy through the latch and every ring slot through its sequence, N reads in
// all (default 10^7). Beside them, M snapshots (default 20000) go through the
// real records::read_segment (open, checks, latch, ring), which costs a
// mapping per read. The figures printed: reads, consistent reads, retries
// (latch or slot moved: the protocol working), inconsistent snapshots, and the
// writer's events. Exit status 1 when any snapshot is inconsistent.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "integrations/publisher/scout_publisher.h"
#include "lib/records/layout.hpp"
#include "lib/records/reader.hpp"

namespace L = scout::records::layout;

namespace {

struct Counts {
  std::uint64_t reads = 0;
  std::uint64_t consistent = 0;
  std::uint64_t latch_retries = 0;
  std::uint64_t slot_retries = 0;
  std::uint64_t slots_checked = 0;
  std::uint64_t bad_progress = 0;
  std::uint64_t bad_slot = 0;
};

std::uint64_t arg(int argc, char** argv, const char* name, std::uint64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::strtoull(argv[i + 1], nullptr, 10);
  return fallback;
}

// The reader's latch protocol (lib/records/reader.cpp, read_segment), one
// consistent copy of the progress block into p; counts retries.
void read_progress(const L::Record* rec, std::uint64_t p[12], Counts& c) {
  for (;;) {
    std::uint64_t s1 = rec->latch.load(std::memory_order_acquire);
    const L::Word* w = &rec->progress[s1 & 1].step;
    for (int i = 0; i < 12; ++i) p[i] = w[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (rec->latch.load(std::memory_order_relaxed) == s1) return;
    ++c.latch_retries;
  }
}

// The reader's slot protocol: false when the slot never read consistently.
bool read_slot(const L::RingSlot& slot, std::uint64_t v[8], Counts& c) {
  for (int t = 0; t < 1000; ++t) {
    std::uint64_t s1 = slot.seq.load(std::memory_order_acquire);
    if (s1 & 1) {
      ++c.slot_retries;
      continue;
    }
    const L::Word* w = &slot.op_seq;
    for (int k = 0; k < 8; ++k) v[k] = w[k].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.seq.load(std::memory_order_relaxed) == s1) return true;
    ++c.slot_retries;
  }
  return false;
}

void reader(const L::Record* rec, std::uint64_t reads, const std::atomic<bool>& stop, Counts& c) {
  std::uint64_t p[12], v[8];
  for (std::uint64_t n = 0; n < reads && !stop.load(std::memory_order_relaxed); ++n) {
    read_progress(rec, p, c);
    ++c.reads;
    // group (3), count (4), root_or_op (5), group_seq (6) of the pending collective.
    bool ok = p[3] == p[4] && p[4] == p[5] && p[5] == p[6];
    if (!ok) ++c.bad_progress;
    // One ring slot per read, rotating, so that every slot is hammered.
    const L::RingSlot& slot = rec->ring[n % L::k_ring_size];
    if (read_slot(slot, v, c) && v[0] != 0) {
      ++c.slots_checked;
      // group (2), count (3), root_or_op (4), group_seq (5).
      if (!(v[2] == v[3] && v[3] == v[4] && v[4] == v[5])) {
        ++c.bad_slot;
        ok = false;
      }
    }
    c.consistent += ok;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t reads = arg(argc, argv, "--reads", 10'000'000);
  const std::uint64_t readers = std::max<std::uint64_t>(1, arg(argc, argv, "--readers", 3));
  const std::uint64_t full_reads = arg(argc, argv, "--full-reads", 20'000);
  const std::uint64_t seconds = arg(argc, argv, "--seconds", 600);
  const std::string job = "record-stress-" + std::to_string(getpid());

  scout_record_options o{job.c_str(), "0", 0, 1, nullptr, "stress"};
  scout_record* rec = nullptr;
  if (int s = scout_record_create(&o, &rec); s != SCOUT_OK) {
    std::fprintf(stderr, "record_stress: cannot create a record: %s\n", scout_strerror(s));
    return 2;
  }
  const std::string name = L::segment_name(job, 0);
  const std::string path = "/dev/shm/" + name;
  std::uint64_t token = 0;
  // The first event already satisfies the invariant.
  scout_collective_enter(rec, 1, SCOUT_COLL_ALL_REDUCE, 2, 1, 1, 1, &token);
  scout_collective_exit(rec, token);

  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  void* map = fd < 0 ? MAP_FAILED : mmap(nullptr, sizeof(L::Record), PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    std::perror("record_stress: map");
    return 2;
  }
  const auto* view = static_cast<const L::Record*>(map);

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> events{0};
  std::thread writer([&] {
    std::uint64_t i = 1, t = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      ++i;
      scout_collective_enter(rec, i, SCOUT_COLL_ALL_REDUCE, 2, i, static_cast<std::int64_t>(i), i, &t);
      scout_collective_exit(rec, t);
      if ((i & 1023) == 0) events.store(2 * i, std::memory_order_relaxed);
    }
    events.store(2 * i, std::memory_order_relaxed);
  });

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Counts> counts(readers + 1);
  std::vector<std::thread> pool;
  const std::uint64_t per = (reads + readers - 1) / readers;
  for (std::uint64_t r = 0; r < readers; ++r)
    pool.emplace_back(reader, view, per, std::cref(stop), std::ref(counts[r]));
  // The real reader, beside the protocol readers.
  Counts& full = counts[readers];
  std::uint64_t full_torn = 0, full_problem = 0;
  std::thread real([&] {
    scout::records::ReaderOptions ro;
    ro.job = job;
    ro.read_timeout = std::chrono::milliseconds(1000);
    for (std::uint64_t n = 0; n < full_reads && !stop.load(std::memory_order_relaxed); ++n) {
      auto r = scout::records::read_segment(name, ro);
      ++full.reads;
      if (r.problem == scout::records::RecordProblem::torn) {
        ++full_torn;
        continue;
      }
      if (!r.snapshot) {
        ++full_problem;
        continue;
      }
      const auto& f = r.snapshot->pending;
      bool ok = f.group == f.count && f.count == static_cast<std::uint64_t>(f.root_or_op) && f.count == f.group_seq;
      if (!ok) ++full.bad_progress;
      for (const auto& e : r.snapshot->recent) {
        ++full.slots_checked;
        const auto& g = e.fingerprint;
        if (!(g.group == g.count && g.count == static_cast<std::uint64_t>(g.root_or_op) && g.count == g.group_seq)) {
          ++full.bad_slot;
          ok = false;
        }
      }
      full.consistent += ok;
    }
  });
  // A deadline, so that a starved machine still ends (figures then say how far it got).
  std::thread watchdog([&] {
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(seconds)) stop.store(true);
    }
  });
  for (auto& t : pool) t.join();
  real.join();
  stop.store(true);
  writer.join();
  watchdog.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  Counts sum;
  for (std::uint64_t r = 0; r < readers; ++r) {
    sum.reads += counts[r].reads;
    sum.consistent += counts[r].consistent;
    sum.latch_retries += counts[r].latch_retries;
    sum.slot_retries += counts[r].slot_retries;
    sum.slots_checked += counts[r].slots_checked;
    sum.bad_progress += counts[r].bad_progress;
    sum.bad_slot += counts[r].bad_slot;
  }
  std::printf("record_stress: %.1f s, writer %llu events, %llu protocol readers\n", secs,
              static_cast<unsigned long long>(events.load()), static_cast<unsigned long long>(readers));
  std::printf("protocol reads: %llu (target %llu), latch retries %llu, ring slots checked %llu, slot retries %llu\n",
              static_cast<unsigned long long>(sum.reads), static_cast<unsigned long long>(reads),
              static_cast<unsigned long long>(sum.latch_retries), static_cast<unsigned long long>(sum.slots_checked),
              static_cast<unsigned long long>(sum.slot_retries));
  std::printf("protocol inconsistent snapshots: %llu (progress %llu, ring slot %llu)\n",
              static_cast<unsigned long long>(sum.bad_progress + sum.bad_slot),
              static_cast<unsigned long long>(sum.bad_progress), static_cast<unsigned long long>(sum.bad_slot));
  std::printf(
      "read_segment reads: %llu, torn %llu, other problems %llu, ring events checked %llu, inconsistent %llu "
      "(progress %llu, ring %llu)\n",
      static_cast<unsigned long long>(full.reads), static_cast<unsigned long long>(full_torn),
      static_cast<unsigned long long>(full_problem), static_cast<unsigned long long>(full.slots_checked),
      static_cast<unsigned long long>(full.bad_progress + full.bad_slot),
      static_cast<unsigned long long>(full.bad_progress), static_cast<unsigned long long>(full.bad_slot));
  munmap(map, sizeof(L::Record));
  close(fd);
  scout_record_close(rec, 1);
  const bool bad = sum.bad_progress + sum.bad_slot + full.bad_progress + full.bad_slot + full_problem > 0;
  const bool short_run = sum.reads < reads;
  std::printf("record_stress: %s%s\n", bad ? "FAILED: inconsistent snapshots" : "zero inconsistent snapshots",
              short_run ? " (deadline reached before every read)" : "");
  return bad ? 1 : 0;
}
