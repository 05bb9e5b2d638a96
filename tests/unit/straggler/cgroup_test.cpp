#include "lib/straggler/cgroup.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "lib/straggler/decide.hpp"
#include "lib/straggler/evidence.hpp"
#include "tests/unit/straggler/sim.hpp"

namespace scout::straggler {
namespace {

TEST(StragglerCgroup, V1CpuLineIsFoundAmongTheControllers) {
  // This host: cpu and cpuacct mounted apart, a hybrid 0:: line too.
  auto r = cpu_cgroup_of(
      "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/34f8\n2:cpuacct:/\n1:cpu:/scout-straggler-j\n0::/\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->version, 1);
  EXPECT_EQ(r->controllers, "cpu");
  EXPECT_EQ(r->path, "/scout-straggler-j");
  // Joined controllers; "cpuacct" or "cpuset" alone is not "cpu".
  r = cpu_cgroup_of("5:cpuset:/x\n3:cpuacct:/y\n4:cpu,cpuacct:/kubepods/pod1/abc\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->version, 1);
  EXPECT_EQ(r->controllers, "cpu,cpuacct");
  EXPECT_EQ(r->path, "/kubepods/pod1/abc");
  r = cpu_cgroup_of("3:cpuacct,cpu:/a:b\n");  // a path may hold ':'
  ASSERT_TRUE(r);
  EXPECT_EQ(r->path, "/a:b");
}

TEST(StragglerCgroup, V2LineIsUsedWhenNoV1CpuController) {
  auto r = cpu_cgroup_of("0::/system.slice/train.service\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->version, 2);
  EXPECT_EQ(r->path, "/system.slice/train.service");
  r = cpu_cgroup_of("12:cpuset:/\n0::/user.slice\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->version, 2);
  EXPECT_FALSE(cpu_cgroup_of("12:cpuset:/\n4:memory:/\n"));
  EXPECT_FALSE(cpu_cgroup_of(""));
  EXPECT_FALSE(cpu_cgroup_of("garbage\n1:cpu\n"));
}

TEST(StragglerCgroup, V1CpuStatIsInNanoseconds) {
  auto s = parse_cpu_stat("nr_periods 420\nnr_throttled 37\nthrottled_time 1587273723\nnr_bursts 0\nburst_time 0\n", 1);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->nr_periods, 420);
  EXPECT_EQ(s->nr_throttled, 37);
  EXPECT_EQ(s->throttled_ns, 1587273723);
  // v2's key in a v1 file (or the reverse) is not the throttled time.
  EXPECT_FALSE(parse_cpu_stat("nr_periods 1\nnr_throttled 1\nthrottled_usec 5\n", 1));
  EXPECT_FALSE(parse_cpu_stat("nr_periods 1\nnr_throttled x\nthrottled_time 5\n", 1));
  EXPECT_FALSE(parse_cpu_stat("nr_periods 1\nnr_throttled -1\nthrottled_time 5\n", 1));
  EXPECT_FALSE(parse_cpu_stat("", 1));
}

TEST(StragglerCgroup, V2CpuStatIsInMicroseconds) {
  auto s = parse_cpu_stat(
      "usage_usec 8123456\nuser_usec 7000000\nsystem_usec 1123456\ncore_sched.force_idle_usec 0\nnr_periods 300\n"
      "nr_throttled 120\nthrottled_usec 2500000\nnr_bursts 0\nburst_usec 0\n",
      2);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->nr_periods, 300);
  EXPECT_EQ(s->nr_throttled, 120);
  EXPECT_EQ(s->throttled_ns, 2'500'000'000);
  // A v2 root's cpu.stat: usage only.
  EXPECT_FALSE(parse_cpu_stat("usage_usec 1\nuser_usec 1\nsystem_usec 0\n", 2));
  EXPECT_FALSE(parse_cpu_stat("nr_periods 1\nnr_throttled 1\nthrottled_usec 9223372036854775807\n", 2));
}

TEST(StragglerCgroup, QuotasOfBothVersions) {
  auto q = parse_v1_quota("25000\n", "100000\n");
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->limited());
  EXPECT_DOUBLE_EQ(q->cpus(), 0.25);
  q = parse_v1_quota("-1\n", "100000\n");
  ASSERT_TRUE(q);
  EXPECT_FALSE(q->limited());
  EXPECT_FALSE(parse_v1_quota("0", "100000"));
  EXPECT_FALSE(parse_v1_quota("-5", "100000"));
  EXPECT_FALSE(parse_v1_quota("1000", "0"));
  EXPECT_FALSE(parse_v1_quota("abc", "100000"));

  q = parse_cpu_max("150000 100000\n");
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(q->cpus(), 1.5);
  q = parse_cpu_max("max 100000\n");
  ASSERT_TRUE(q);
  EXPECT_FALSE(q->limited());
  EXPECT_FALSE(parse_cpu_max("max"));
  EXPECT_FALSE(parse_cpu_max("0 100000"));
  EXPECT_FALSE(parse_cpu_max("50000 0"));
  EXPECT_FALSE(parse_cpu_max(""));
}

TEST(StragglerCgroup, ThisProcessHasReadableCountersWhereAHierarchyIsMounted) {
  auto c = read_cgroup_cpu(getpid());
  if (!c) GTEST_SKIP() << "no readable CPU cgroup here";
  EXPECT_TRUE(c->version == 1 || c->version == 2);
  EXPECT_GE(c->stat.nr_throttled, 0);
  EXPECT_GE(c->stat.throttled_ns, 0);
  EXPECT_FALSE(read_cgroup_cpu(-5));
}

TEST(StragglerCgroup, ThisProcessHasAnInvoluntarySwitchCount) {
  const auto n = read_nivcsw(getpid());
  ASSERT_TRUE(n.has_value());
  EXPECT_GE(*n, 0);
  EXPECT_FALSE(read_nivcsw(-5));
}

TEST(StragglerCgroup, CountersTravelInTheEvidenceAndTheirDeltasPerCall) {
  auto rounds = sim::two_reads_of_one_rank([](RankEvents& e, int i) {
    e.cpu_ns = 100 + 50 * i;
    e.runq_ns = 10 + 20 * i;
    e.main_cpu_ns = 90 + 40 * i;
    e.nr_periods = 7 + 10 * i;
    e.nr_throttled = 2 + 4 * i;
    e.throttled_ns = 1000 + 5000 * i;
    e.quota_us = 20000;
    e.period_us = 100000;
  });
  auto back = parse_evidence(evidence_json(rounds, "j").dump(), "j", "test");
  ASSERT_TRUE(back) << back.error().message();
  ASSERT_EQ(back->size(), 2u);
  const auto& e = (*back)[1].ranks.at(0);
  EXPECT_EQ(e.nr_periods, 17);
  EXPECT_EQ(e.nr_throttled, 6);
  EXPECT_EQ(e.throttled_ns, 6000);
  EXPECT_EQ(e.quota_us, 20000);
  EXPECT_EQ(e.period_us, 100000);
  auto cpus = cpu_per_call(*back);
  const auto& c = cpus[1].at(0);
  EXPECT_EQ(c.calls, 5);
  EXPECT_EQ(c.window_ns, 1'000'000'000);
  EXPECT_DOUBLE_EQ(c.throttled_ns, 1000.0);
  EXPECT_EQ(c.nr_throttled, 4);
  EXPECT_EQ(c.nr_periods, 10);
  // Evidence without them (scout before 1.2, another host's rank): unknown, not zero.
  rounds[1].ranks[0].throttled_ns = -1;
  back = parse_evidence(evidence_json(rounds, "j").dump(), "j", "test");
  ASSERT_TRUE(back);
  EXPECT_EQ((*back)[1].ranks.at(0).throttled_ns, -1);
  EXPECT_DOUBLE_EQ(cpu_per_call(*back)[1].at(0).throttled_ns, -1.0);
  // Malformed counters are bad input.
  auto j = evidence_json(rounds, "j");
  j["rounds"][0]["ranks"][0]["cgroup"] = {1, 2, -3, -1, 0};
  EXPECT_FALSE(parse_evidence(j.dump(), "j", "test"));
  j["rounds"][0]["ranks"][0]["cgroup"] = {1, 2, 3};
  EXPECT_FALSE(parse_evidence(j.dump(), "j", "test"));
  // So is a negative read time: the window between two reads is their difference, which must not overflow.
  j = evidence_json(rounds, "j");
  j["rounds"][0]["ranks"][0]["read_ns"] = std::numeric_limits<std::int64_t>::min();
  auto negative = parse_evidence(j.dump(), "j", "test");
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().message().find("negative read time"), std::string::npos) << negative.error().message();
}

// The main thread's involuntary context switches (issue 40): recorded when read, an optional field that older
// evidence lacks, non-negative integers only, and per call over a round's window.
TEST(StragglerCgroup, InvoluntarySwitchesTravelInTheEvidenceAndTheirDeltasPerCall) {
  auto rounds = sim::two_reads_of_one_rank([](RankEvents& e, int i) {
    e.cpu_ns = 100 + 50 * i;
    e.runq_ns = 10 + 20 * i;
    e.main_cpu_ns = 90 + 40 * i;
    e.nivcsw = 300 + 150 * i;
  });
  auto j = evidence_json(rounds, "j");
  EXPECT_EQ(j["rounds"][1]["ranks"][0]["nivcsw"], 450);
  auto back = parse_evidence(j.dump(), "j", "test");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ((*back)[1].ranks.at(0).nivcsw, 450);
  EXPECT_DOUBLE_EQ(cpu_per_call(*back)[1].at(0).nivcsw, 30.0);  // 150 switches over 5 calls
  // Evidence without it (recorded before it, another host's rank): unknown, not zero; nothing else changes.
  j["rounds"][0]["ranks"][0].erase("nivcsw");
  back = parse_evidence(j.dump(), "j", "test");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ((*back)[0].ranks.at(0).nivcsw, -1);
  const auto c = cpu_per_call(*back)[1].at(0);
  EXPECT_DOUBLE_EQ(c.nivcsw, -1.0);
  EXPECT_DOUBLE_EQ(c.cpu_ns, 10.0);
  rounds[1].ranks[0].nivcsw = -1;  // unread: not written
  EXPECT_FALSE(evidence_json(rounds, "j")["rounds"][1]["ranks"][0].contains("nivcsw"));
  // A count that went back (another process with the rank's pid) is no count.
  j = evidence_json(rounds, "j");
  j["rounds"][0]["ranks"][0]["nivcsw"] = 500;
  j["rounds"][1]["ranks"][0]["nivcsw"] = 400;
  back = parse_evidence(j.dump(), "j", "test");
  ASSERT_TRUE(back);
  EXPECT_DOUBLE_EQ(cpu_per_call(*back)[1].at(0).nivcsw, -1.0);
  // Malformed counts are bad input, with the field named.
  for (const nlohmann::json bad :
       {nlohmann::json(-1), nlohmann::json(1.5), nlohmann::json("7"), nlohmann::json::array()}) {
    j["rounds"][0]["ranks"][0]["nivcsw"] = bad;
    auto r = parse_evidence(j.dump(), "j", "test");
    ASSERT_FALSE(r) << bad.dump();
  }
  j["rounds"][0]["ranks"][0]["nivcsw"] = -1;
  auto negative = parse_evidence(j.dump(), "j", "test");
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().message().find("negative context switches"), std::string::npos)
      << negative.error().message();
}

// cause_of over hand-made rounds: 100 calls of a 1 s window, the suspect 10 ms per call slower (1 s).
RankRound hit(double runq_ms, double peer_runq_ms, double throttled_ms, double peer_throttled_ms) {
  RankRound r;
  r.excess_ns = 10e6;
  r.runq_ns = runq_ms * 1e6;
  r.peer_runq_ns = peer_runq_ms * 1e6;
  r.window.main_cpu_ns = 20e6;  // it and its peers used 20 ms of CPU per call
  r.peer_wait_per_cpu = peer_runq_ms / 20;
  r.throttled_ns = throttled_ms < 0 ? -1 : throttled_ms * 1e6;
  r.peer_throttled_ns = peer_throttled_ms < 0 ? -1 : peer_throttled_ms * 1e6;
  r.window.calls = 100;
  r.window.window_ns = 10'000'000'000;
  r.window.nr_throttled = throttled_ms > 0 ? 40 : 0;
  r.window.nr_periods = 100;
  r.window.quota_us = throttled_ms > 0 ? 20000 : -1;
  r.window.period_us = 100000;
  return r;
}

std::string cause(const std::vector<RankRound>& rounds) {
  std::vector<const RankRound*> p;
  for (const auto& r : rounds) p.push_back(&r);
  return cause_of(p, DecideOptions{}).cause;
}

TEST(StragglerCause, ThrottledIsAQuotaWaitingIsContentionNeitherIsSlowCompute) {
  // Throttled time shows as CPU wait too (measured: a busy loop under a 0.2 CPU quota, 1.59 s throttled of
  // 2.4 s waiting in 3 s): the cgroup's counters tell a quota from contention.
  EXPECT_EQ(cause({hit(12, 2, 9, 0), hit(11, 2, 8, 0)}), "cpu_quota");
  EXPECT_EQ(cause({hit(12, 2, 0, 0), hit(11, 2, 0, 0)}), "cpu_contention");
  EXPECT_EQ(cause({hit(2, 2, 0, 0), hit(3, 2, 0, 0)}), "slow_compute");
  // More work waits longer in proportion on a busy host: 1.5x the CPU, 1.5x the wait, is slow compute.
  RankRound more = hit(9, 6, 0, 0);
  more.window.main_cpu_ns = 30e6;
  EXPECT_EQ(cause({more, more}), "slow_compute");
  more.runq_ns = 20e6;  // ... and far more than in proportion is contention, where its peers used as much CPU
  EXPECT_EQ(cause({more, more}), "cpu_contention");
  // ... but not where it used 1.5x their CPU per call (process and main thread): more work waits longer per
  // CPU second on a host short of CPUs (trainer-slowed ranks at load 10-12 on 2 CPUs), so it is slow compute.
  more.cpu_ns = 36e6;
  more.cpu_ratio = 1.5;
  more.main_cpu_ratio = 1.5;
  EXPECT_EQ(cause({more, more}), "slow_compute");
  more.cpu_ratio = 1.1;  // ... as the process's CPU must show too
  EXPECT_EQ(cause({more, more}), "cpu_contention");
  more.cpu_ratio = 1.5;
  more.main_cpu_ratio = 1.1;  // ... and the main thread's
  EXPECT_EQ(cause({more, more}), "cpu_contention");
  // More work and a wait beyond it: the larger share of its excess decides. Pinned with busy loops, 1.18x its peers'
  // CPU per call (24 of 20.3 ms) and 2.7x their wait per CPU second (65 ms against 24 at their rate): its extra CPU
  // with the wait that costs at their rate (3.7 ms x 2) is more work's, 7 ms of its 48; up to more_work_wait_factor
  // (2.5) times its CPU's rise of that wait (0.18 x 2.5 x 24 ms, 11 ms) either's; the wait beyond, 30 ms: contention
  // (the CI fresh clone's rank, 873f50c, read slow_compute when more work came first).
  RankRound pinned = hit(65, 24, 0, 0);
  pinned.window.main_cpu_ns = 24e6;
  pinned.peer_wait_per_cpu = 1.0;  // its peers: 20.3 ms of CPU and 20.3 ms of wait per call
  pinned.cpu_ns = 28.8e6;
  pinned.cpu_ratio = pinned.main_cpu_ratio = 1.18;
  pinned.excess_ns = 49e6;
  auto c = cause_of({&pinned, &pinned}, DecideOptions{});
  EXPECT_EQ(c.cause, "cpu_contention");
  EXPECT_GT(c.figures["wait_beyond_work_s"].get<double>(), c.figures["more_work_s"].get<double>());
  // A trainer-slowed rank at the edge of what was measured (1.36x its peers' CPU per call, 1.9x their wait per CPU
  // second at load 10-12 on 2 CPUs) stays slow compute: more work raised its wait that much.
  RankRound trained = hit(0, 0, 0, 0);
  trained.window.main_cpu_ns = 27.2e6;  // its peers' 20 ms x 1.36
  trained.peer_wait_per_cpu = 4.5;      // 4.5 ms of wait per ms of CPU: 122 ms at their rate
  trained.runq_ns = 1.9 * 27.2e6 * 4.5;
  trained.cpu_ns = 32.6e6;
  trained.cpu_ratio = trained.main_cpu_ratio = 1.36;
  trained.excess_ns = 0.6 * (trained.runq_ns - 27.2e6 * 4.5);  // its wait beyond its peers' rate, the larger part
  EXPECT_EQ(cause({trained, trained}), "slow_compute");
  // ... but not at 2.5x their wait per CPU second: 184 ms beyond their rate, 110 of it either's, 73 ms against more
  // work's 40.
  trained.runq_ns = 2.5 * 27.2e6 * 4.5;
  trained.excess_ns = 0.6 * (trained.runq_ns - 27.2e6 * 4.5);
  EXPECT_EQ(cause({trained, trained}), "cpu_contention");
  // A quota every peer shares is no explanation of one rank's slowness.
  EXPECT_EQ(cause({hit(12, 2, 9, 9), hit(11, 2, 9, 9)}), "cpu_contention");
  // Without the cgroup's counters, waiting could be either: unknown; not waiting is slow compute still.
  EXPECT_EQ(cause({hit(12, 2, -1, -1), hit(11, 2, -1, -1)}), "unknown");
  EXPECT_EQ(cause({hit(2, 2, -1, -1), hit(2, 2, -1, -1)}), "slow_compute");
  // No scheduler counters (another host's rank recorded without them).
  RankRound none = hit(2, 2, 0, 0);
  none.runq_ns = -1;
  EXPECT_EQ(cause({none, none}), "unknown");
}

TEST(StragglerCause, ExtraTimeOffACpuWithoutWaitingOrStopsIsBlocked) {
  // No more CPU, no longer CPU wait, not stopped, not throttled: its 10 ms per call excess spent off a CPU (a
  // data loader asleep on storage) is blocked where at least half the excess is off-CPU time beyond its peers'.
  RankRound slept = hit(2, 2, 0, 0);
  slept.compute_ns = 50e6;               // its peers' compute 40 ms per call (excess 10 ms)
  slept.off_cpu_ratio = 1 + 9e6 / 40e6;  // 9 ms per call more off a CPU than its peers
  EXPECT_EQ(cause({slept, slept}), "blocked");
  EXPECT_NEAR(cause_of({&slept, &slept}, DecideOptions{}).figures["off_cpu_excess_s"].get<double>(), 1.8, 1e-9);
  slept.off_cpu_ratio = 1 + 4e6 / 40e6;  // under half its excess: slow compute
  EXPECT_EQ(cause({slept, slept}), "slow_compute");
  // More work comes first: 1.5x the CPU with time off a CPU is slow compute.
  RankRound busy = slept;
  busy.off_cpu_ratio = 1 + 9e6 / 40e6;
  busy.window.main_cpu_ns = 30e6;
  busy.cpu_ns = 36e6;
  busy.cpu_ratio = busy.main_cpu_ratio = 1.5;
  EXPECT_EQ(cause({busy, busy}), "slow_compute");
  // ... but not where its extra CPU is less than its extra time off a CPU: 1.2x its peers' CPU (4 ms per call
  // more) beside 9 ms more asleep is blocked (a sleeping rank on a loaded host, seed 619206687).
  busy.window.main_cpu_ns = 24e6;
  busy.cpu_ns = 28.8e6;
  busy.cpu_ratio = busy.main_cpu_ratio = 1.2;
  EXPECT_EQ(cause({busy, busy}), "blocked");
}

TEST(StragglerCause, FiguresAreNumbers) {
  std::vector<RankRound> rounds = {hit(12, 2, 9, 0), hit(11, 2, 8, 0)};
  std::vector<const RankRound*> p = {&rounds[0], &rounds[1]};
  auto c = cause_of(p, DecideOptions{});
  EXPECT_DOUBLE_EQ(c.figures["window_s"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(c.figures["throttled_s"].get<double>(), 1.7);
  EXPECT_DOUBLE_EQ(c.figures["excess_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(c.figures["runq_s"].get<double>(), 2.3);
  EXPECT_DOUBLE_EQ(c.figures["peers_runq_s"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(c.figures["cpu_s"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(c.figures["runq_at_peers_rate_s"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(c.figures["peers_cpu_s"].get<double>(), 4.0);
  EXPECT_EQ(c.figures["nr_throttled"].get<std::int64_t>(), 80);
  EXPECT_DOUBLE_EQ(c.figures["quota_cpus"].get<double>(), 0.2);
  EXPECT_TRUE(c.figures["quota_known"].get<bool>());
}

TEST(StragglerMemory, ProcAndCgroupTextIsParsed) {
  // /proc/PID/stat: a comm with spaces and ')' does not shift the fields; majflt is field 12.
  EXPECT_EQ(parse_majflt("4321 (py thon) x) S 1 4321 4321 0 -1 4194560 1500 0 77 0 12 3 0 0 20 0 1 0"), 77);
  EXPECT_FALSE(parse_majflt("4321 (py S 1"));
  EXPECT_FALSE(parse_majflt("garbage"));
  EXPECT_FALSE(parse_majflt("1 (a) S 1 1 1 0 -1 0 0 0 -5 0"));
  EXPECT_EQ(parse_keyed("rchar: 6976\nwchar: 0\nread_bytes: 1048576\nwrite_bytes: 0\n", "read_bytes"), 1048576);
  EXPECT_EQ(parse_keyed("low 0\nhigh 0\nmax 42\noom 0\n", "max"), 42);
  EXPECT_FALSE(parse_keyed("rchar: 1\n", "read_bytes"));
  EXPECT_FALSE(parse_keyed("read_bytes: x\n", "read_bytes"));
  EXPECT_EQ(parse_pressure_some_total("some avg10=0.00 avg60=0.12 avg300=0.01 total=123456\n"
                                      "full avg10=0.00 avg60=0.00 avg300=0.00 total=100\n"),
            123456);
  EXPECT_FALSE(parse_pressure_some_total("full avg10=0.00 total=100\n"));
  auto m = controller_cgroup_of("9:name=systemd:/\n4:memory:/scout-straggler-mem-j-2\n1:cpu:/x\n0::/\n", "memory");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->version, 1);
  EXPECT_EQ(m->path, "/scout-straggler-mem-j-2");
  m = controller_cgroup_of("0::/system.slice/train.service\n", "memory");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->version, 2);
  // This process: /proc/self/stat and /proc/self/io are readable.
  const auto own = read_memory_counters(getpid());
  EXPECT_GE(own.majflt, 0);
  EXPECT_GE(own.read_bytes, 0);
  EXPECT_EQ(read_memory_counters(-5).majflt, -1);
}

TEST(StragglerMemory, CountersTravelInTheEvidenceAndTheirDeltasPerCall) {
  std::vector<RoundEvidence> rounds(2);
  for (int i = 0; i < 2; ++i) {
    RankEvents e;
    e.rank = 0;
    e.read_ns = 1'000'000'000LL * (i + 1);
    e.written = 10 + 4 * static_cast<std::uint64_t>(i);
    e.cpu_ns = 100 + 50 * i;
    e.runq_ns = 10;
    e.majflt = 5 + 40 * i;
    e.read_bytes = 1000 + 4000 * i;
    e.mem_limit_hits = 3 + 7 * i;
    rounds[static_cast<std::size_t>(i)].world = 1;
    rounds[static_cast<std::size_t>(i)].ranks.push_back(e);
  }
  auto back = parse_evidence(evidence_json(rounds, "j").dump(), "j", "test");
  ASSERT_TRUE(back) << back.error().message();
  const auto c = cpu_per_call(*back)[1].at(0);
  EXPECT_DOUBLE_EQ(c.majflt, 10.0);
  EXPECT_DOUBLE_EQ(c.read_bytes, 1000.0);
  EXPECT_EQ(c.mem_limit_hits, 7);
  EXPECT_DOUBLE_EQ(c.mem_stall_ns, -1.0);  // no PSI counter at either read
  auto j = evidence_json(rounds, "j");
  j["rounds"][0]["ranks"][0]["memory"] = {1, 2, 3};
  EXPECT_FALSE(parse_evidence(j.dump(), "j", "test"));
  j["rounds"][0]["ranks"][0]["memory"] = {1, -7, 3, -1};
  EXPECT_FALSE(parse_evidence(j.dump(), "j", "test"));
}

// memory_causes over a hand-made round: rank 1 named for compute among peers 0, 2, 3.
Decision memory_case(double read_mb, double peers_read_mb, double faults, std::int64_t hits, const char* cause,
                     RoundResult& round) {
  round = RoundResult{};
  PeerRound p;
  p.members = {0, 1, 2, 3};
  for (std::int64_t r = 0; r < 4; ++r) {
    RankRound x;
    x.rank = r;
    x.window.calls = 20;
    x.window.read_bytes = (r == 1 ? read_mb : peers_read_mb) * 1048576.0;
    x.window.majflt = r == 1 ? faults : 0;
    x.window.mem_limit_hits = r == 1 ? hits : 0;
    p.ranks.push_back(x);
  }
  round.peers.push_back(p);
  Decision d;
  Suspicion s;
  s.rank = 1;
  s.reason = "compute";
  s.evidence["cause"] = cause;
  s.evidence["cause_figures"] = nlohmann::json::object();
  d.suspects.push_back(s);
  memory_causes(d, {round});
  return d;
}

TEST(StragglerMemory, ReadsFromStorageItsPeersDoNotMakeTheCause) {
  RoundResult round;
  // At its memory cgroup's limit, reading 48 MB a call its peers read from the page cache: memory pressure.
  auto d = memory_case(48, 0, 0, 300, "slow_compute", round);
  EXPECT_EQ(d.suspects[0].evidence["cause"], "memory_pressure");
  EXPECT_DOUBLE_EQ(d.suspects[0].evidence["cause_figures"]["read_mb_per_call"].get<double>(), 48.0);
  EXPECT_EQ(d.suspects[0].evidence["cause_figures"]["memory_limit_hits"].get<std::int64_t>(), 300);
  // The same reads with no limit hit: its data comes from storage.
  d = memory_case(48, 0, 0, 0, "blocked", round);
  EXPECT_EQ(d.suspects[0].evidence["cause"], "storage_reads");
  // Major faults alone (mapped data reclaimed) count too.
  d = memory_case(0, 0, 200, 5, "slow_compute", round);
  EXPECT_EQ(d.suspects[0].evidence["cause"], "memory_pressure");
  // Its peers read as much: not the cause. Too little to matter: not the cause.
  d = memory_case(48, 40, 0, 300, "slow_compute", round);
  EXPECT_EQ(d.suspects[0].evidence["cause"], "slow_compute");
  d = memory_case(0.01, 0, 2, 300, "slow_compute", round);
  EXPECT_EQ(d.suspects[0].evidence["cause"], "slow_compute");
  // A cause from stronger evidence (a quota, stops) is kept.
  d = memory_case(48, 0, 0, 300, "cpu_quota", round);
  EXPECT_EQ(d.suspects[0].evidence["cause"], "cpu_quota");
}

}  // namespace
}  // namespace scout::straggler
