// The record layout, the publisher's writes and the reader's checks, on real
// shared memory (/dev/shm, unique job ids) and on patched copies of real
// records in a temporary directory.
#include "lib/records/reader.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "integrations/publisher/scout_publisher.h"
#include "lib/common/proc.hpp"
#include "lib/records/layout.hpp"

namespace scout::records {
namespace {

namespace L = layout;
namespace fs = std::filesystem;

std::string unique_job(const char* tag) {
  static int n = 0;
  return fmt::format("unit-{}-{}-{}", tag, getpid(), n++);
}

// A record created through the C ABI; removed at the end of the test.
class Published {
 public:
  Published(std::string job, std::int64_t rank, std::int64_t world, const char* attempt = "0") : m_job(std::move(job)) {
    std::int64_t coords[6] = {rank, 0, 0, 0, 0, 0};
    scout_record_options o{m_job.c_str(), attempt, rank, world, coords, "unit-host"};
    m_status = scout_record_create(&o, &m_rec);
    m_name = L::segment_name(m_job, rank);
  }
  ~Published() {
    if (m_rec) scout_record_close(m_rec, 1);
    ::unlink(("/dev/shm/" + m_name).c_str());
  }
  scout_record* rec() { return m_rec; }
  int status() const { return m_status; }
  const std::string& name() const { return m_name; }
  const std::string& job() const { return m_job; }

 private:
  std::string m_job;
  std::string m_name;
  scout_record* m_rec = nullptr;
  int m_status = -100;
};

ReaderOptions for_job(const std::string& job) {
  ReaderOptions o;
  o.job = job;
  return o;
}

// A temporary directory holding a copy of a segment, to patch.
class Copy {
 public:
  explicit Copy(const std::string& name) : m_name(name) {
    char tmpl[] = "/tmp/scout-records-XXXXXX";
    m_dir = ::mkdtemp(tmpl);
    fs::copy_file("/dev/shm/" + name, path());
    fs::permissions(path(), fs::perms::owner_read | fs::perms::owner_write);
  }
  ~Copy() { fs::remove_all(m_dir); }
  std::string path() const { return m_dir + "/" + m_name; }
  void poke(std::size_t offset, std::uint64_t value) {
    int fd = ::open(path().c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, &value, sizeof value, static_cast<off_t>(offset)), 8);
    ::close(fd);
  }
  ReaderOptions options(const std::string& job) const {
    ReaderOptions o = for_job(job);
    o.shm_dir = m_dir;
    return o;
  }

 private:
  std::string m_name;
  std::string m_dir;
};

TEST(RecordsLayout, NamesAndGroupIds) {
  EXPECT_EQ(L::sanitize_job("a/b c.d-e_f"), "a_b_c_d-e_f");
  EXPECT_EQ(L::segment_name("job 1", 3), "scout.job_1.3");
  std::int64_t a[] = {0, 2, 4, 6};
  std::int64_t b[] = {0, 2, 6, 4};
  EXPECT_NE(L::group_id(a, 4), L::group_id(b, 4));
  EXPECT_NE(L::group_id(a, 3), L::group_id(a, 4));
  EXPECT_EQ(L::group_id(a, 4), scout_group_id(a, 4));
  auto p = parse_segment_name("scout.job_1.12");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->job, "job_1");
  EXPECT_EQ(p->rank, 12);
  for (const char* bad : {"scout.job.1.tmp.5.0", "scout..1", "scout.job.", "scout.job.x", "other.job.1", "scout.a.b.1"})
    EXPECT_FALSE(parse_segment_name(bad)) << bad;
}

TEST(RecordsReader, RoundTripThroughTheCAbi) {
  Published p(unique_job("rt"), 1, 4, "attempt-7");
  ASSERT_EQ(p.status(), SCOUT_OK) << scout_strerror(p.status());
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm/" + p.name()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_size, static_cast<off_t>(sizeof(L::Record)));

  ASSERT_EQ(scout_step_begin(p.rec(), 3), SCOUT_OK);
  ASSERT_EQ(scout_phase(p.rec(), SCOUT_PHASE_FORWARD), SCOUT_OK);
  std::uint64_t token = 0;
  ASSERT_EQ(scout_collective_enter(p.rec(), 0xabcdef, SCOUT_COLL_ALL_REDUCE, 2, 100, 0, 7, &token), SCOUT_OK);
  RecordRead r = read_segment(p.name(), for_job(p.job()));
  ASSERT_EQ(r.problem, RecordProblem::none) << r.message;
  ASSERT_TRUE(r.snapshot);
  const RankSnapshot& s = *r.snapshot;
  EXPECT_TRUE(r.writer_alive);
  EXPECT_EQ(s.job, p.job());
  EXPECT_EQ(s.attempt, "attempt-7");
  EXPECT_EQ(s.host, "unit-host");
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.world_size, 4);
  EXPECT_EQ(s.coords[0], 1);
  EXPECT_EQ(s.pid, getpid());
  EXPECT_GT(s.start_ns, 0);
  EXPECT_EQ(s.step, 3u);
  EXPECT_EQ(s.op_seq, 3u);
  EXPECT_EQ(token, 3u);
  EXPECT_EQ(s.phase, Phase::collective);
  EXPECT_EQ(s.collective_state, CollectiveState::inside);
  Fingerprint want{0xabcdef, CollectiveType::all_reduce, 2, 100, 0, 7};
  EXPECT_EQ(s.pending, want);
  ASSERT_EQ(s.recent.size(), 1u);
  EXPECT_EQ(s.recent[0].exit_ns, 0);
  EXPECT_GT(s.recent[0].enter_ns, 0);

  ASSERT_EQ(scout_collective_exit(p.rec(), token), SCOUT_OK);
  r = read_segment(p.name(), for_job(p.job()));
  ASSERT_TRUE(r.snapshot);
  EXPECT_EQ(r.snapshot->collective_state, CollectiveState::done);
  EXPECT_EQ(r.snapshot->phase, Phase::forward);
  EXPECT_EQ(r.snapshot->op_seq, 4u);
  EXPECT_GE(r.snapshot->recent[0].exit_ns, r.snapshot->recent[0].enter_ns);
  EXPECT_EQ(r.snapshot->pending, want);

  EXPECT_EQ(scout_collective_exit(p.rec(), 99), SCOUT_EINVAL);
  EXPECT_EQ(scout_phase(p.rec(), 200), SCOUT_EINVAL);
}

TEST(RecordsReader, RingKeepsTheLastEventsInOrder) {
  Published p(unique_job("ring"), 0, 1);
  ASSERT_EQ(p.status(), SCOUT_OK);
  for (std::uint64_t i = 1; i <= 100; ++i) {
    std::uint64_t t = 0;
    ASSERT_EQ(scout_collective_enter(p.rec(), 1, SCOUT_COLL_BROADCAST, 5, i, 0, i, &t), SCOUT_OK);
    ASSERT_EQ(scout_collective_exit(p.rec(), t), SCOUT_OK);
  }
  RecordRead r = read_segment(p.name(), for_job(p.job()));
  ASSERT_TRUE(r.snapshot);
  ASSERT_EQ(r.snapshot->recent.size(), L::k_ring_size);
  EXPECT_EQ(r.snapshot->recent.front().fingerprint.group_seq, 100 - L::k_ring_size + 1);
  EXPECT_EQ(r.snapshot->recent.back().fingerprint.group_seq, 100u);
  for (std::size_t i = 1; i < r.snapshot->recent.size(); ++i)
    EXPECT_LT(r.snapshot->recent[i - 1].op_seq, r.snapshot->recent[i].op_seq);
}

TEST(RecordsReader, EachExitSaysWhatItsTimeIs) {
  Published p(unique_job("exitkind"), 0, 2);
  ASSERT_EQ(p.status(), SCOUT_OK);
  const std::uint8_t kinds[] = {SCOUT_EXIT_COMPLETED, SCOUT_EXIT_WAITED, SCOUT_EXIT_ORDERED, SCOUT_EXIT_RETURNED};
  std::uint64_t t = 0;
  for (std::uint64_t i = 0; i < 4; ++i) {
    ASSERT_EQ(scout_collective_enter(p.rec(), 9, SCOUT_COLL_ALL_REDUCE, 2, 10, 0, i + 1, &t), SCOUT_OK);
    ASSERT_EQ(scout_collective_exit_kind(p.rec(), t, kinds[i]), SCOUT_OK);
  }
  std::uint64_t plain = 0, failed = 0, inside = 0;
  ASSERT_EQ(scout_collective_enter(p.rec(), 9, SCOUT_COLL_ALL_REDUCE, 2, 10, 0, 5, &plain), SCOUT_OK);
  ASSERT_EQ(scout_collective_exit(p.rec(), plain), SCOUT_OK);  // the call returned
  ASSERT_EQ(scout_collective_enter(p.rec(), 9, SCOUT_COLL_ALL_REDUCE, 2, 10, 0, 6, &failed), SCOUT_OK);
  ASSERT_EQ(scout_collective_fail(p.rec(), failed), SCOUT_OK);
  ASSERT_EQ(scout_collective_enter(p.rec(), 9, SCOUT_COLL_SEND, 2, 10, 1, 7, &inside), SCOUT_OK);
  EXPECT_EQ(scout_collective_exit_kind(p.rec(), inside, 5), SCOUT_EINVAL);  // no such kind
  EXPECT_EQ(scout_collective_exit_kind(p.rec(), inside | (std::uint64_t{1} << 60), 2), SCOUT_EINVAL);
  RecordRead r = read_segment(p.name(), for_job(p.job()));
  ASSERT_TRUE(r.snapshot) << r.message;
  const auto& e = r.snapshot->recent;
  ASSERT_EQ(e.size(), 7u);
  EXPECT_EQ(e[0].exit_kind, ExitKind::completed);
  EXPECT_EQ(e[1].exit_kind, ExitKind::waited);
  EXPECT_EQ(e[2].exit_kind, ExitKind::ordered);
  EXPECT_EQ(e[3].exit_kind, ExitKind::returned);
  EXPECT_EQ(e[4].exit_kind, ExitKind::returned);
  EXPECT_TRUE(e[5].failed);
  EXPECT_EQ(e[6].exit_ns, 0);
  EXPECT_EQ(e[6].exit_kind, ExitKind::unknown);  // still inside: no exit, no kind
  EXPECT_EQ(e[6].fingerprint.type, CollectiveType::send);
  EXPECT_EQ(exit_kind_name(e[2].exit_kind), "ordered");
  EXPECT_EQ(r.snapshot->collective_state, CollectiveState::inside);
}

TEST(RecordsReader, FailedCompletionIsPublishedAsFailedInTheProgressAndTheRing) {
  Published p(unique_job("failed"), 0, 2);
  ASSERT_EQ(p.status(), SCOUT_OK);
  std::uint64_t t1 = 0, t2 = 0;
  ASSERT_EQ(scout_collective_enter(p.rec(), 9, SCOUT_COLL_ALL_REDUCE, 2, 10, 0, 1, &t1), SCOUT_OK);
  ASSERT_EQ(scout_collective_exit(p.rec(), t1), SCOUT_OK);
  ASSERT_EQ(scout_collective_enter(p.rec(), 9, SCOUT_COLL_ALL_REDUCE, 2, 10, 0, 2, &t2), SCOUT_OK);
  ASSERT_EQ(scout_collective_fail(p.rec(), t2), SCOUT_OK);
  EXPECT_EQ(scout_collective_fail(p.rec(), 0), SCOUT_EINVAL);
  EXPECT_EQ(scout_layout_version(), 2u);
  RecordRead r = read_segment(p.name(), for_job(p.job()));
  ASSERT_TRUE(r.snapshot) << r.message;
  EXPECT_EQ(r.snapshot->collective_state, CollectiveState::failed);
  EXPECT_EQ(collective_state_name(r.snapshot->collective_state), "failed");
  ASSERT_EQ(r.snapshot->recent.size(), 2u);
  EXPECT_FALSE(r.snapshot->recent[0].failed);
  EXPECT_TRUE(r.snapshot->recent[1].failed);
  EXPECT_NE(r.snapshot->recent[1].exit_ns, 0);
  EXPECT_EQ(r.snapshot->recent[1].fingerprint.type,
            CollectiveType::all_reduce);  // the state bits leave the type intact
  EXPECT_EQ(r.snapshot->events, 2u);
  EXPECT_EQ(r.snapshot->dropped, 0u);
  // A later call that completes is done again.
  std::uint64_t t3 = 0;
  ASSERT_EQ(scout_collective_enter(p.rec(), 9, SCOUT_COLL_ALL_REDUCE, 2, 10, 0, 3, &t3), SCOUT_OK);
  ASSERT_EQ(scout_collective_exit(p.rec(), t3), SCOUT_OK);
  r = read_segment(p.name(), for_job(p.job()));
  ASSERT_TRUE(r.snapshot);
  EXPECT_EQ(r.snapshot->collective_state, CollectiveState::done);
  // A version 1 record is still read; "failed" is not a version 1 state.
  {
    Copy c(p.name());
    c.poke(8, 1);
    RecordRead v1 = read_segment(p.name(), c.options(p.job()));
    ASSERT_TRUE(v1.snapshot) << v1.message;
    EXPECT_FALSE(v1.snapshot->recent[1].failed);
  }
}

TEST(RecordsReader, ConcurrentWriterNeverYieldsAMixedSnapshot) {
  Published p(unique_job("race"), 0, 2);
  ASSERT_EQ(p.status(), SCOUT_OK);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (std::uint64_t i = 1; !stop.load(std::memory_order_relaxed); ++i) {
      std::uint64_t t = 0;
      scout_collective_enter(p.rec(), i, SCOUT_COLL_ALL_REDUCE, 2, i, static_cast<std::int64_t>(i), i, &t);
      scout_collective_exit(p.rec(), t);
    }
  });
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Joiner() {
      stop = true;
      t.join();
    }
  } joiner{stop, writer};
  ReaderOptions o = for_job(p.job());
  int consistent = 0;
  for (int k = 0; k < 2000; ++k) {
    RecordRead r = read_segment(p.name(), o);
    ASSERT_TRUE(r.problem == RecordProblem::none || r.problem == RecordProblem::torn) << r.message;
    if (!r.snapshot || r.snapshot->pending.type == CollectiveType::none) continue;  // before the first enter
    const Fingerprint& f = r.snapshot->pending;
    ASSERT_EQ(f.group, f.count);
    ASSERT_EQ(f.count, f.group_seq);
    ASSERT_EQ(static_cast<std::uint64_t>(f.root_or_op), f.group_seq);
    for (const auto& e : r.snapshot->recent) ASSERT_EQ(e.fingerprint.count, e.fingerprint.group_seq);
    ++consistent;
  }
  EXPECT_GT(consistent, 0);
}

TEST(RecordsReader, ExitsAreNeverLostToContention) {
  Published p(unique_job("contend"), 0, 1);
  ASSERT_EQ(p.status(), SCOUT_OK);
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop.load(std::memory_order_relaxed)) scout_phase(p.rec(), SCOUT_PHASE_BACKWARD);
  });
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Joiner() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } joiner{stop, other};
  for (std::uint64_t i = 1; i <= 20000; ++i) {
    std::uint64_t t = 0;
    while (scout_collective_enter(p.rec(), 1, SCOUT_COLL_ALL_REDUCE, 2, i, 0, i, &t) != SCOUT_OK) {
    }
    ASSERT_EQ(scout_collective_exit(p.rec(), t), SCOUT_OK);
  }
  stop = true;
  other.join();
  ASSERT_EQ(scout_heartbeat(p.rec()), SCOUT_OK);
  ASSERT_EQ(scout_step_begin(p.rec(), 1), SCOUT_OK);  // drains anything still deferred
  RecordRead r = read_segment(p.name(), for_job(p.job()));
  ASSERT_TRUE(r.snapshot);
  EXPECT_EQ(r.snapshot->collective_state, CollectiveState::done);
  EXPECT_EQ(r.snapshot->pending.count, 20000u);
  for (const auto& e : r.snapshot->recent) EXPECT_NE(e.exit_ns, 0) << e.op_seq;
}

// Another thread of the trainer holding the record's writer lock (a gloo completion callback preempted while it
// held it, on a loaded host), through the shared segment.
class HeldLock {
 public:
  explicit HeldLock(const std::string& name) {
    int fd = ::open(("/dev/shm/" + name).c_str(), O_RDWR);
    if (fd < 0) return;
    void* p = ::mmap(nullptr, sizeof(L::Record), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return;
    m_rec = static_cast<L::Record*>(p);
    std::uint64_t expected = 0;
    m_held = m_rec->writer_lock.compare_exchange_strong(expected, 1);
  }
  ~HeldLock() {
    release();
    if (m_rec) ::munmap(m_rec, sizeof(L::Record));
  }
  bool held() const { return m_held; }
  void release() {
    if (m_held) m_rec->writer_lock.store(0);
    m_held = false;
  }

 private:
  L::Record* m_rec = nullptr;
  bool m_held = false;
};

TEST(RecordsReader, AnEnterWaitsForAHolderThatLetsGoSoon) {
  Published p(unique_job("held"), 0, 1);
  ASSERT_EQ(p.status(), SCOUT_OK);
  HeldLock held(p.name());
  ASSERT_TRUE(held.held());
  std::thread holder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // far past lock()'s spin of 256 pauses
    held.release();
  });
  std::uint64_t token = 0;
  const int entered = scout_collective_enter(p.rec(), 1, SCOUT_COLL_BROADCAST, 2, 3, 0, 1, &token);
  holder.join();
  ASSERT_EQ(entered, SCOUT_OK);  // was SCOUT_EBUSY: the call left out of the records
  RecordRead r = read_segment(p.name(), for_job(p.job()));
  ASSERT_TRUE(r.snapshot);
  ASSERT_EQ(r.snapshot->recent.size(), 1u);
  EXPECT_EQ(r.snapshot->recent[0].fingerprint.count, 3u);
  EXPECT_EQ(r.snapshot->dropped, 0u);
}

TEST(RecordsReader, AnEnterGivesUpOnAHolderThatNeverLetsGo) {
  Published p(unique_job("stuck"), 0, 1);
  ASSERT_EQ(p.status(), SCOUT_OK);
  HeldLock held(p.name());
  ASSERT_TRUE(held.held());
  std::uint64_t token = 0;
  EXPECT_EQ(scout_collective_enter(p.rec(), 1, SCOUT_COLL_BROADCAST, 2, 3, 0, 1, &token), SCOUT_EBUSY);
  held.release();
  ASSERT_EQ(scout_heartbeat(p.rec()), SCOUT_OK);
  ASSERT_EQ(scout_step_begin(p.rec(), 1), SCOUT_OK);
  RecordRead r = read_segment(p.name(), for_job(p.job()));
  ASSERT_TRUE(r.snapshot);
  EXPECT_EQ(r.snapshot->dropped, 1u);  // counted, so the reader knows the ring misses an event
}

TEST(RecordsReader, LatchKeepsTheLastCompleteCopyWhenTheWriterDiesMidWrite) {
  Published p(unique_job("latch"), 0, 1);
  ASSERT_EQ(p.status(), SCOUT_OK);
  ASSERT_EQ(scout_step_begin(p.rec(), 5), SCOUT_OK);
  Copy c(p.name());
  // The writer died after bumping the latch to odd and half-writing copy 0.
  std::uint64_t latch = 0;
  {
    std::ifstream in(c.path(), std::ios::binary);
    in.seekg(offsetof(L::Record, latch));
    in.read(reinterpret_cast<char*>(&latch), 8);
  }
  ASSERT_EQ(latch % 2, 0u);
  c.poke(offsetof(L::Record, latch), latch + 1);
  c.poke(offsetof(L::Record, progress) + offsetof(L::Progress, step), 999);
  RecordRead r = read_segment(p.name(), c.options(p.job()));
  ASSERT_EQ(r.problem, RecordProblem::none) << r.message;
  EXPECT_EQ(r.snapshot->step, 5u);
  // A ring slot left odd is skipped, not read half-written.
  std::uint64_t t = 0;
  ASSERT_EQ(scout_collective_enter(p.rec(), 1, SCOUT_COLL_BARRIER, 0, 0, -1, 1, &t), SCOUT_OK);
  Copy c2(p.name());
  c2.poke(offsetof(L::Record, ring) + offsetof(L::RingSlot, seq), 3);
  r = read_segment(p.name(), c2.options(p.job()));
  ASSERT_EQ(r.problem, RecordProblem::none) << r.message;
  EXPECT_TRUE(r.snapshot->recent.empty());
  EXPECT_EQ(r.snapshot->pending.type, CollectiveType::barrier);
}

TEST(RecordsReader, RefusesWhatItCannotTrust) {
  Published p(unique_job("bad"), 2, 4);
  ASSERT_EQ(p.status(), SCOUT_OK);
  {
    Copy c(p.name());
    c.poke(0, 0x1234);
    RecordRead r = read_segment(p.name(), c.options(p.job()));
    EXPECT_EQ(r.problem, RecordProblem::bad_magic);
    EXPECT_NE(r.message.find("not a scout record"), std::string::npos);
    EXPECT_FALSE(r.snapshot);
  }
  {
    Copy c(p.name());
    c.poke(8, L::k_layout_version + 1);
    RecordRead r = read_segment(p.name(), c.options(p.job()));
    EXPECT_EQ(r.problem, RecordProblem::unknown_version);
    EXPECT_NE(r.message.find(fmt::format("version {}", L::k_layout_version + 1)), std::string::npos) << r.message;
  }
  {
    Copy c(p.name());
    c.poke(16, 100);
    EXPECT_EQ(read_segment(p.name(), c.options(p.job())).problem, RecordProblem::wrong_size);
    fs::resize_file(c.path(), 10);
    EXPECT_EQ(read_segment(p.name(), c.options(p.job())).problem, RecordProblem::wrong_size);
  }
  {
    Copy c(p.name());
    c.poke(offsetof(L::Header, rank), 9);
    EXPECT_EQ(read_segment(p.name(), c.options(p.job())).problem, RecordProblem::corrupt);
  }
  {
    Copy c(p.name());
    RecordRead r = read_segment(p.name(), c.options(p.job() + "-other"));
    EXPECT_EQ(r.problem, RecordProblem::other_job);
    EXPECT_NE(r.message.find(p.job()), std::string::npos);
  }
  {
    Copy c(p.name());
    fs::permissions(c.path(), fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
    EXPECT_EQ(read_segment(p.name(), c.options(p.job())).problem, RecordProblem::other_owner);
    ReaderOptions any = c.options(p.job());
    any.owner = OwnerPolicy::any_user;
    EXPECT_EQ(read_segment(p.name(), any).problem, RecordProblem::none);
  }
  if (geteuid() == 0) {
    Copy c(p.name());
    ASSERT_EQ(::chown(c.path().c_str(), 65534, 65534), 0);
    RecordRead r = read_segment(p.name(), c.options(p.job()));
    EXPECT_EQ(r.problem, RecordProblem::other_owner);
    EXPECT_NE(r.message.find("uid 65534"), std::string::npos);
  }
  EXPECT_EQ(read_segment("scout.nope.0", for_job("nope")).problem, RecordProblem::unreadable);
}

TEST(RecordsReader, DeadWriterIsDetectedAndCollectedButALiveOneIsKept) {
  std::string job = unique_job("dead");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    scout_record* rec = nullptr;
    scout_record_options o{job.c_str(), nullptr, 0, 2, nullptr, nullptr};
    char ok = scout_record_create(&o, &rec) == SCOUT_OK ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    ::pause();
    ::_exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  std::string name = L::segment_name(job, 0);
  Published live(job, 1, 2);  // this process: a live writer of rank 1
  ASSERT_EQ(live.status(), SCOUT_OK);

  // A second writer of the child's rank is refused while the child lives.
  Published twin(job, 0, 2);
  EXPECT_EQ(twin.status(), SCOUT_EEXIST);
  RecordRead r = read_segment(name, for_job(job));
  EXPECT_TRUE(r.writer_alive);
  auto kept = gc_records(for_job(job), GcMode::remove);
  ASSERT_TRUE(kept.ok());
  for (const auto& e : *kept) EXPECT_FALSE(e.removed) << e.segment;

  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  r = read_segment(name, for_job(job));
  ASSERT_EQ(r.problem, RecordProblem::none);
  EXPECT_FALSE(r.writer_alive);  // record outlives its writer, which is known dead
  auto dry = gc_records(for_job(job), GcMode::dry_run);
  ASSERT_TRUE(dry.ok());
  EXPECT_TRUE(fs::exists("/dev/shm/" + name));
  auto done = gc_records(for_job(job), GcMode::remove);
  ASSERT_TRUE(done.ok());
  ASSERT_EQ(done->size(), 2u);
  for (const auto& e : *done) EXPECT_EQ(e.removed, e.segment == name) << e.segment << ": " << e.reason;
  EXPECT_FALSE(fs::exists("/dev/shm/" + name));
  EXPECT_TRUE(fs::exists("/dev/shm/" + live.name()));
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(RecordsReader, PidReuseIsNotALiveWriter) {
  scout::proc::Stat self;
  ASSERT_TRUE(scout::proc::read_stat(getpid(), &self));
  const std::uint64_t ticks = self.start_ticks;
  EXPECT_TRUE(writer_alive(getpid(), ticks));
  EXPECT_FALSE(writer_alive(getpid(), ticks + 1));
  EXPECT_FALSE(writer_alive(0x3ffffffe, ticks));
  EXPECT_FALSE(writer_alive(-1, 0));
}

TEST(RecordsReader, StaleRecordsOfAnEarlierAttempt) {
  auto read = [](std::int64_t rank, const char* attempt, std::int64_t start, std::int64_t world) {
    RecordRead r;
    r.segment = fmt::format("scout.j.{}", rank);
    RankSnapshot s;
    s.job = "j";
    s.rank = rank;
    s.attempt = attempt;
    s.start_ns = start;
    s.world_size = world;
    r.snapshot = s;
    return r;
  };
  std::vector<RecordRead> reads = {read(0, "1", 200, 2), read(1, "1", 210, 2), read(2, "0", 100, 3)};
  mark_stale(reads);
  EXPECT_FALSE(reads[0].stale);
  EXPECT_FALSE(reads[1].stale);
  EXPECT_TRUE(reads[2].stale);
}

}  // namespace
}  // namespace scout::records
