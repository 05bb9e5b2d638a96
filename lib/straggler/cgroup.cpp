#include "lib/straggler/cgroup.hpp"

#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace scout::straggler {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::optional<std::int64_t> to_int(std::string_view s) {
  s = trim(s);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) return std::nullopt;
  std::string t = s.str();
  if (t.size() > (1u << 16)) t.resize(1u << 16);
  return t;
}

}  // namespace

std::optional<CgroupRef> cpu_cgroup_of(std::string_view text) {
  return controller_cgroup_of(text, "cpu");
}

std::optional<CgroupRef> controller_cgroup_of(std::string_view text, std::string_view controller) {
  std::optional<CgroupRef> v2;
  for (auto line : lines_of(text)) {
    // hierarchy-id:controller-list:path (the path may hold ':')
    const auto a = line.find(':');
    if (a == std::string_view::npos) continue;
    const auto b = line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1),
                           path = trim(line.substr(b + 1));
    if (path.empty() || path.front() != '/') continue;
    if (id == "0" && controllers.empty()) {
      v2 = CgroupRef{2, "", std::string(path)};
      continue;
    }
    std::string_view rest = controllers;
    while (!rest.empty()) {
      const auto c = rest.find(',');
      if (rest.substr(0, c) == controller) return CgroupRef{1, std::string(controllers), std::string(path)};
      if (c == std::string_view::npos) break;
      rest.remove_prefix(c + 1);
    }
  }
  return v2;
}

std::optional<CpuStat> parse_cpu_stat(std::string_view text, int version) {
  CpuStat s;
  bool periods = false, throttled = false, time = false;
  const std::string_view time_key = version == 1 ? "throttled_time" : "throttled_usec";
  for (auto line : lines_of(text)) {
    const auto sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, sp);
    auto v = to_int(line.substr(sp + 1));
    if (!v || *v < 0) {
      if (key == "nr_periods" || key == "nr_throttled" || key == time_key) return std::nullopt;
      continue;
    }
    if (key == "nr_periods") {
      s.nr_periods = *v;
      periods = true;
    } else if (key == "nr_throttled") {
      s.nr_throttled = *v;
      throttled = true;
    } else if (key == time_key) {
      if (version != 1 && *v > INT64_MAX / 1000) return std::nullopt;
      s.throttled_ns = version == 1 ? *v : *v * 1000;
      time = true;
    }
  }
  if (!periods || !throttled || !time) return std::nullopt;
  return s;
}

std::optional<CpuQuota> parse_v1_quota(std::string_view quota_us, std::string_view period_us) {
  auto q = to_int(quota_us);
  auto p = to_int(period_us);
  if (!q || !p || *p <= 0 || (*q < 0 && *q != -1) || *q == 0) return std::nullopt;
  return CpuQuota{*q, *p};
}

std::optional<CpuQuota> parse_cpu_max(std::string_view text) {
  text = trim(text);
  const auto sp = text.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  const std::string_view q = text.substr(0, sp);
  auto p = to_int(text.substr(sp + 1));
  if (!p || *p <= 0) return std::nullopt;
  if (q == "max") return CpuQuota{-1, *p};
  auto v = to_int(q);
  if (!v || *v <= 0) return std::nullopt;
  return CpuQuota{*v, *p};
}

std::optional<CgroupCpu> read_cgroup_cpu(std::int64_t pid, const std::string& root) {
  namespace fs = std::filesystem;
  auto text = read_text(fmt::format("/proc/{}/cgroup", pid));
  if (!text) return std::nullopt;
  auto ref = cpu_cgroup_of(*text);
  if (!ref) return std::nullopt;
  std::error_code ec;
  std::string base;
  if (ref->version == 1) {
    for (const std::string& c : {root + "/" + ref->controllers, root + "/cpu", root + "/cpu,cpuacct"})
      if (fs::exists(c + "/cpu.stat", ec)) {
        base = c;
        break;
      }
  } else {
    for (const std::string& c : {root, root + "/unified"})
      if (fs::exists(c + "/cgroup.controllers", ec)) {
        base = c;
        break;
      }
  }
  if (base.empty()) return std::nullopt;
  // The levels of the path, deepest first ("/a/b" -> "/a/b", "/a", "").
  std::vector<std::string> levels;
  for (std::string p = ref->path == "/" ? "" : ref->path;; p = p.substr(0, p.rfind('/'))) {
    if (p.find("/..") != std::string::npos) return std::nullopt;
    levels.push_back(p);
    if (p.empty()) break;
  }
  auto quota_at = [&](const std::string& dir) -> std::optional<CpuQuota> {
    if (ref->version == 1) {
      auto q = read_text(dir + "/cpu.cfs_quota_us");
      auto p = read_text(dir + "/cpu.cfs_period_us");
      if (!q || !p) return std::nullopt;
      return parse_v1_quota(*q, *p);
    }
    auto m = read_text(dir + "/cpu.max");
    return m ? parse_cpu_max(*m) : std::nullopt;
  };
  CgroupCpu out;
  out.version = ref->version;
  std::optional<CpuQuota> own_quota;
  std::string chosen;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const std::string dir = base + levels[i];
    auto q = quota_at(dir);
    if (i == 0) own_quota = q;
    if (q && q->limited()) {
      chosen = dir;
      out.quota = q;
      break;
    }
  }
  if (chosen.empty()) {
    chosen = base + levels.front();
    out.quota = own_quota;  // unlimited, or unknown (a v2 root has no cpu.max)
    if (!out.quota && ref->version == 2 && levels.front().empty()) out.quota = CpuQuota{-1, 100000};
  }
  auto stat_text = read_text(chosen + "/cpu.stat");
  if (!stat_text) return std::nullopt;
  auto stat = parse_cpu_stat(*stat_text, ref->version);
  // A v2 root's cpu.stat has no throttling counters: nothing above the process can throttle it there.
  if (!stat && ref->version == 2 && chosen == base) stat = CpuStat{};
  if (!stat) return std::nullopt;
  out.dir = chosen;
  out.stat = *stat;
  return out;
}

std::optional<std::int64_t> parse_majflt(std::string_view stat) {
  // pid (comm) state ppid ... : the comm may hold spaces and ')', so the fields start after the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = stat.substr(close + 1);
  // After the comm: state (field 3) ... majflt is field 12, the 10th from here.
  for (int field = 3;; ++field) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.empty()) return std::nullopt;
    const auto end = std::min(rest.find(' '), rest.size());
    if (field == 12) {
      auto v = to_int(rest.substr(0, end));
      if (!v || *v < 0) return std::nullopt;
      return v;
    }
    rest.remove_prefix(end);
  }
}

std::optional<std::int64_t> parse_keyed(std::string_view text, std::string_view key) {
  for (auto line : lines_of(text)) {
    line = trim(line);
    const auto sep = line.find_first_of(": ");
    if (sep == std::string_view::npos || line.substr(0, sep) != key) continue;
    std::string_view value = line.substr(sep + 1);
    while (!value.empty() && (value.front() == ':' || value.front() == ' ')) value.remove_prefix(1);
    auto v = to_int(value);
    if (!v || *v < 0) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

std::optional<std::int64_t> parse_pressure_some_total(std::string_view text) {
  for (auto line : lines_of(text)) {
    line = trim(line);
    if (line.substr(0, 5) != "some ") continue;
    const auto at = line.find("total=");
    if (at == std::string_view::npos) return std::nullopt;
    auto v = to_int(line.substr(at + 6, line.find(' ', at) - (at + 6)));
    if (!v || *v < 0) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

std::optional<std::int64_t> read_nivcsw(std::int64_t pid) {
  auto text = read_text(fmt::format("/proc/{}/status", pid));
  if (!text) return std::nullopt;
  return parse_keyed(*text, "nonvoluntary_ctxt_switches");
}

MemoryCounters read_memory_counters(std::int64_t pid, const std::string& root) {
  namespace fs = std::filesystem;
  MemoryCounters m;
  if (auto stat = read_text(fmt::format("/proc/{}/stat", pid)))
    if (auto v = parse_majflt(*stat)) m.majflt = *v;
  if (auto io = read_text(fmt::format("/proc/{}/io", pid)))
    if (auto v = parse_keyed(*io, "read_bytes")) m.read_bytes = *v;
  auto text = read_text(fmt::format("/proc/{}/cgroup", pid));
  auto ref = text ? controller_cgroup_of(*text, "memory") : std::nullopt;
  if (!ref || ref->path.find("/..") != std::string::npos) return m;
  const std::string path = ref->path == "/" ? "" : ref->path;
  std::error_code ec;
  if (ref->version == 1) {
    // The root memory cgroup has no limit to hit (its failcnt stays 0): read, it says "no hits".
    for (const std::string& c : {root + "/" + ref->controllers, root + "/memory"})
      if (fs::exists(c + path + "/memory.failcnt", ec)) {
        if (auto f = read_text(c + path + "/memory.failcnt"))
          if (auto v = to_int(*f); v && *v >= 0) m.limit_hits = *v;
        break;
      }
    return m;
  }
  for (const std::string& c : {root, root + "/unified"}) {
    if (!fs::exists(c + "/cgroup.controllers", ec)) continue;
    if (auto e = read_text(c + path + "/memory.events"))
      if (auto v = parse_keyed(*e, "max")) m.limit_hits = *v;
    if (auto pr = read_text(c + path + "/memory.pressure"))
      if (auto v = parse_pressure_some_total(*pr)) m.stall_us = *v;
    break;
  }
  return m;
}

}  // namespace scout::straggler
