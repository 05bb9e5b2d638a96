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
      if (rest.substr(0, c) == "cpu") return CgroupRef{1, std::string(controllers), std::string(path)};
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

}  // namespace scout::straggler
