// A process's CPU cgroup: where it is, its throttling counters and its quota (lib/straggler/README.md
// "Stragglers", the cause of a compute straggler). The parsers are pure (unit-tested on fixture text of
// cgroup v1 and v2); read_cgroup_cpu() reads /proc and /sys/fs/cgroup.
//
//  v1: /proc/PID/cgroup line "N:cpu,cpuacct:/path" (a controller list holding "cpu"); the hierarchy is
//      mounted at <root>/<controllers> (or <root>/cpu): cpu.stat has nr_periods, nr_throttled and
//      throttled_time (ns); the quota is cpu.cfs_quota_us (-1: none) per cpu.cfs_period_us.
//  v2: the line "0::/path"; <root>/<path>/cpu.stat has nr_periods, nr_throttled and throttled_usec; the
//      quota is cpu.max ("max 100000" or "50000 100000").
// A quota throttles the cgroup that carries it (its children's own counters do not move): the level read
// is the deepest one on the process's path with a quota, else the process's own cgroup.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace scout::straggler {

struct CgroupRef {
  int version = 0;          // 1 or 2
  std::string controllers;  // v1: the controller list of the line ("cpu,cpuacct"); v2: ""
  std::string path;         // "/..." inside the hierarchy
};

// The CPU controller's cgroup in /proc/PID/cgroup text: the v1 line whose controllers hold "cpu" when
// there is one (a hybrid host's v2 line then has no CPU controller), else the v2 "0::" line.
std::optional<CgroupRef> cpu_cgroup_of(std::string_view proc_cgroup);

struct CpuStat {
  std::int64_t nr_periods = 0;
  std::int64_t nr_throttled = 0;
  std::int64_t throttled_ns = 0;
};

// cpu.stat text of a v1 (throttled_time, ns) or v2 (throttled_usec) cgroup; nullopt when the
// throttling counters are missing or malformed.
std::optional<CpuStat> parse_cpu_stat(std::string_view text, int version);

struct CpuQuota {
  std::int64_t quota_us = -1;  // -1: no quota
  std::int64_t period_us = 0;
  bool limited() const { return quota_us > 0 && period_us > 0; }
  double cpus() const { return limited() ? static_cast<double>(quota_us) / static_cast<double>(period_us) : 0; }
};

// v1: cpu.cfs_quota_us and cpu.cfs_period_us; v2: cpu.max. nullopt when malformed.
std::optional<CpuQuota> parse_v1_quota(std::string_view quota_us, std::string_view period_us);
std::optional<CpuQuota> parse_cpu_max(std::string_view text);

struct CgroupCpu {
  int version = 0;
  std::string dir;  // the directory read
  CpuStat stat;
  std::optional<CpuQuota> quota;  // unknown when unreadable
};

// Process `pid`'s CPU cgroup counters (see above); nullopt when they cannot be read (the process gone,
// no CPU controller, an unmounted hierarchy). `root` is where the cgroup hierarchies are mounted.
std::optional<CgroupCpu> read_cgroup_cpu(std::int64_t pid, const std::string& root = "/sys/fs/cgroup");

// The line of `controller`'s cgroup in /proc/PID/cgroup text (as cpu_cgroup_of, for any v1 controller).
std::optional<CgroupRef> controller_cgroup_of(std::string_view proc_cgroup, std::string_view controller);

// A process's memory counters, for the cause of a straggler short of memory or reading from storage (-1:
// unreadable): its major page faults (/proc/PID/stat field 12), the bytes it brought in from storage
// (/proc/PID/io read_bytes; page-cache hits are not counted), and its memory cgroup's limit hits (v1
// memory.failcnt; v2 memory.events "max") and stall (v2 memory.pressure "some" total, us; PSI).
struct MemoryCounters {
  std::int64_t majflt = -1;
  std::int64_t read_bytes = -1;
  std::int64_t limit_hits = -1;
  std::int64_t stall_us = -1;
};
std::optional<std::int64_t> parse_majflt(std::string_view proc_stat);
// "key value" or "key: value" lines (/proc/PID/io, memory.events): the value of `key`.
std::optional<std::int64_t> parse_keyed(std::string_view text, std::string_view key);
// PSI text ("some avg10=0.00 avg60=0.00 avg300=0.00 total=123"): the "some" line's total (us).
std::optional<std::int64_t> parse_pressure_some_total(std::string_view text);
MemoryCounters read_memory_counters(std::int64_t pid, const std::string& root = "/sys/fs/cgroup");
// The main thread's involuntary context switches (RankEvents::nivcsw) from /proc/PID/status (the main thread's own
// count: the process's other threads are in /proc/PID/task/TID/status); nullopt where unreadable.
std::optional<std::int64_t> read_nivcsw(std::int64_t pid);

}  // namespace scout::straggler
