#include "lib/straggler/history.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "lib/checkpoint/durable_file.hpp"
#include "lib/common/file.hpp"
#include "lib/common/hex.hpp"

namespace scout::straggler {

namespace {

const char* const k_measures[] = {"compute_ns", "link_ns", "step_ns"};

double mad(const std::vector<double>& v, double m) {
  std::vector<double> d;
  d.reserve(v.size());
  for (double x : v) d.push_back(std::fabs(x - m));
  return median(d);
}

}  // namespace

std::vector<GroupTimes> group_times(const std::vector<RoundEvidence>& evidence,
                                    const std::vector<TimingTable>& tables) {
  std::vector<GroupTimes> out;
  if (tables.empty()) return out;
  // Step time per rank: wall time over steps between its first and last read.
  std::map<std::int64_t, double> step_ns;
  if (evidence.size() >= 2) {
    std::map<std::int64_t, const RankEvents*> first, last;
    for (const auto& r : evidence.front().ranks) first[r.rank] = &r;
    for (const auto& r : evidence.back().ranks) last[r.rank] = &r;
    for (const auto& [rank, a] : first) {
      auto it = last.find(rank);
      if (it == last.end()) continue;
      const RankEvents* b = it->second;
      if (b->step > a->step && b->read_ns > a->read_ns)
        step_ns[rank] = static_cast<double>(b->read_ns - a->read_ns) / static_cast<double>(b->step - a->step);
    }
  }
  for (const auto& g : tables.back().groups) {
    GroupTimes gt;
    gt.kind = g.kind;
    gt.key = g.kind + "/" + hex64(g.id);
    std::vector<double> compute, link, steps;
    for (const auto& t : tables) {
      // Calls of this group's kind every member completed.
      std::map<CallKey, double> min_wait;
      std::map<CallKey, std::int64_t> seen;  // members with the call's exact wait (a wait() returning: a bound)
      const std::uint32_t kind = t.kind_index(g.kind);
      for (auto m : g.members) {
        auto it = t.ranks.find(m);
        if (it == t.ranks.end()) continue;
        double c = 0;
        std::int64_t n = 0;
        for (const auto& [key, call] : (*it).second) {
          c += static_cast<double>(call.compute_ns);
          ++n;
          if (key.kind != kind || !call.wait_exact) continue;
          auto w = static_cast<double>(call.wait_ns);
          auto [p, fresh] = min_wait.emplace(key, w);
          if (!fresh) p->second = std::min(p->second, w);
          ++seen[key];
        }
        if (n > 0) compute.push_back(c / static_cast<double>(n));
      }
      std::vector<double> per_call;
      for (const auto& [key, w] : min_wait)
        if (seen[key] == static_cast<std::int64_t>(g.members.size())) per_call.push_back(w);
      if (!per_call.empty()) link.push_back(median(per_call));
    }
    for (auto m : g.members)
      if (step_ns.count(m)) steps.push_back(step_ns[m]);
    if (!compute.empty()) gt.compute_ns = median(compute);
    if (!link.empty()) gt.link_ns = median(link);
    if (!steps.empty()) gt.step_ns = median(steps);
    if (gt.compute_ns >= 0 || gt.link_ns >= 0 || gt.step_ns >= 0) out.push_back(std::move(gt));
  }
  return out;
}

Result<History> parse_history(const std::string& text, const std::string& job, const std::string& path) {
  auto bad = [&](const std::string& why) {
    return input_error(fmt::format("--history {} is not a straggler history", path), why,
                       "pass the file an earlier `scout straggler --history` wrote for this job, or a new path");
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (j.value("schema", "") != k_history_schema) return bad("schema is not scout.straggler-history");
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<std::int64_t>() != k_history_version)
    return bad(fmt::format("version is not {}", k_history_version));
  if (!j.contains("job") || !j["job"].is_string()) return bad("no job");
  if (j["job"].get<std::string>() != job)
    return input_error(
        fmt::format("--history {} belongs to job '{}', not '{}'", path, j["job"].get<std::string>(), job),
        "a job's baseline says nothing about another job", "use one history file per job");
  if (!j.contains("groups") || !j["groups"].is_object()) return bad("no groups object");
  History h;
  h.job = job;
  for (const auto& [key, g] : j["groups"].items()) {
    if (!g.is_object() || key.size() > 256) return bad(fmt::format("group {} is not an object", key));
    for (const auto& [m, vals] : g.items()) {
      if (std::find(std::begin(k_measures), std::end(k_measures), m) == std::end(k_measures))
        return bad(fmt::format("unknown measure {} in group {}", m, key));
      if (!vals.is_array() || vals.size() > 1024)
        return bad(fmt::format("{}.{} is not a list of at most 1024 numbers", key, m));
      auto& out = h.groups[key][m];
      for (const auto& v : vals) {
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
          return bad(fmt::format("{}.{} holds a value that is not a finite non-negative number", key, m));
        out.push_back(v.get<double>());
      }
    }
  }
  if (h.groups.size() > 100000) return bad("more than 100000 groups");
  return h;
}

nlohmann::json history_json(const History& h) {
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [key, ms] : h.groups) {
    nlohmann::json g = nlohmann::json::object();
    for (const auto& [m, v] : ms) g[m] = v;
    groups[key] = g;
  }
  return {{"schema", k_history_schema}, {"version", k_history_version}, {"job", h.job}, {"groups", groups}};
}

std::vector<Drift> check_and_append(History& h, const std::vector<GroupTimes>& now, const DriftOptions& o,
                                    std::int64_t* with_baseline) {
  std::vector<Drift> out;
  std::int64_t based = 0;
  for (const auto& g : now) {
    const double values[] = {g.compute_ns, g.link_ns, g.step_ns};
    bool has_base = false;
    for (int i = 0; i < 3; ++i) {
      if (values[i] < 0) continue;
      auto& past = h.groups[g.key][k_measures[i]];
      if (static_cast<std::int64_t>(past.size()) >= o.min_entries) {
        has_base = true;
        const double base = median(past);
        const double spread = 1.4826 * mad(past, base);
        const double threshold = std::max(base * (1 + o.min_relative), base + o.kappa * spread);
        if (values[i] > threshold && base > 0)
          out.push_back(Drift{g.key, k_measures[i], values[i], base, values[i] / base, threshold});
      }
      past.push_back(values[i]);
      if (static_cast<std::int64_t>(past.size()) > o.max_entries)
        past.erase(past.begin(),
                   past.begin() + static_cast<std::ptrdiff_t>(past.size() - static_cast<std::size_t>(o.max_entries)));
    }
    based += has_base ? 1 : 0;
  }
  if (with_baseline) *with_baseline = based;
  return out;
}

Result<TemporalResult> update_history(const std::string& path, const std::string& job,
                                      const std::vector<GroupTimes>& now, const DriftOptions& o,
                                      std::chrono::milliseconds lock_timeout) {
  auto lock = checkpoint::FileLock::acquire(path + ".lock", lock_timeout);
  if (!lock) return lock.error();
  History h;
  h.job = job;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return input_error(fmt::format("--history {} is not a regular file", path));
    auto text = read_small_file(path, std::size_t{16} << 20);
    if (!text) return text.error();
    auto parsed = parse_history(*text, job, path);
    if (!parsed) return parsed.error();
    h = std::move(*parsed);
  } else if (errno != ENOENT) {
    return unavailable_error(fmt::format("cannot read --history {}", path), std::strerror(errno));
  }
  TemporalResult r;
  r.path = path;
  r.groups = static_cast<std::int64_t>(now.size());
  r.drifts = check_and_append(h, now, o, &r.with_baseline);
  auto w = atomic_write_file(path, history_json(h).dump(1) + "\n", 0644);
  if (!w) return w.error();
  return r;
}

}  // namespace scout::straggler
