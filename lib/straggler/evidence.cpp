#include "lib/straggler/evidence.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "lib/common/hex.hpp"
#include "lib/common/json_input.hpp"

namespace scout::straggler {

namespace {

// Limits of what a peer's blob or a recorded file may hold.
constexpr std::size_t k_max_ranks_per_blob = 1 << 20;
constexpr std::size_t k_max_events_per_rank = 4096;
constexpr std::int64_t k_max_state_samples = std::int64_t{1} << 40;

// Integers only: nlohmann's get<> turns a float into an integer with a cast that is undefined out of range.
struct NotAnInteger : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::int64_t int_of(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) throw NotAnInteger("an integer out of range");
    return static_cast<std::int64_t>(v.get<std::uint64_t>());
  }
  if (!v.is_number_integer()) throw NotAnInteger("a number that is not an integer");
  return v.get<std::int64_t>();
}

std::uint64_t uint_of(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0) throw NotAnInteger("a negative or non-integer count");
  return static_cast<std::uint64_t>(v.get<std::int64_t>());
}

nlohmann::json round_json(const RoundEvidence& round, const std::string& job, std::int64_t observer) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : round.ranks) {
    nlohmann::json ev = nlohmann::json::array();
    for (const auto& e : r.events)
      ev.push_back({e.op_seq, hex64(e.fingerprint.group), static_cast<int>(e.fingerprint.type), e.fingerprint.count,
                    e.fingerprint.group_seq, e.enter_ns, e.exit_ns, static_cast<int>(e.exit_kind)});
    nlohmann::json x = {{"rank", r.rank},       {"node", r.node},       {"coords", r.coords}, {"step", r.step},
                        {"read_ns", r.read_ns}, {"written", r.written}, {"events", ev}};
    if (r.cpu_ns >= 0 && r.runq_ns >= 0) x["sched"] = {r.cpu_ns, r.runq_ns, r.main_cpu_ns};
    if (r.nivcsw >= 0) x["nivcsw"] = r.nivcsw;
    if (r.throttled_ns >= 0) x["cgroup"] = {r.nr_periods, r.nr_throttled, r.throttled_ns, r.quota_us, r.period_us};
    if (r.state_samples >= 0 && r.stopped_samples >= 0) x["stopped"] = {r.state_samples, r.stopped_samples};
    if (r.majflt >= 0 || r.read_bytes >= 0 || r.mem_limit_hits >= 0 || r.mem_stall_us >= 0)
      x["memory"] = {r.majflt, r.read_bytes, r.mem_limit_hits, r.mem_stall_us};
    ranks.push_back(std::move(x));
  }
  nlohmann::json out = {{"kind", "scout.straggler-round"},
                        {"job", job},
                        {"observer", observer},
                        {"world", round.world},
                        {"ranks", ranks}};
  if (round.baseline) out["baseline"] = true;
  return out;
}

}  // namespace

std::vector<std::uint8_t> encode_round(const RoundEvidence& round, const std::string& job, std::int64_t observer) {
  return nlohmann::json::to_cbor(round_json(round, job, observer));
}

namespace {

Result<RoundEvidence> round_from_json(const nlohmann::json& j, const std::string& job, std::int64_t observer,
                                      const std::string& what) {
  auto bad = [&](const std::string& why) { return input_error(fmt::format("{} rejected", what), why); };
  if (!j.is_object()) return bad("not an object");
  try {
    if (j.at("kind") != "scout.straggler-round") return bad("not straggler evidence");
    if (j.at("job").get<std::string>() != job)
      return bad(fmt::format("names job '{}'", j.at("job").get<std::string>()));
    if (observer >= 0 && int_of(j.at("observer")) != observer) return bad("names another observer");
    RoundEvidence r;
    r.world = int_of(j.at("world"));
    r.baseline = (j.contains("baseline") && j.at("baseline").get<bool>());
    if (r.world < 0 || r.world > k_max_world_size) return bad("world size out of range");
    const auto& ranks = j.at("ranks");
    if (!ranks.is_array() || ranks.size() > k_max_ranks_per_blob) return bad("too many ranks");
    for (const auto& x : ranks) {
      RankEvents e;
      e.rank = int_of(x.at("rank"));
      if (e.rank < 0 || e.rank >= r.world) return bad(fmt::format("rank {} outside world {}", e.rank, r.world));
      e.node = x.at("node").get<std::string>();
      const auto& c = x.at("coords");
      if (!c.is_array() || c.size() != 6) return bad("malformed coordinates");
      for (int d = 0; d < k_dim_count; ++d) {
        e.coords[d] = int_of(c[static_cast<std::size_t>(d)]);
        if (e.coords[d] < 0 || e.coords[d] >= r.world) return bad("coordinate out of range");
      }
      e.step = uint_of(x.at("step"));
      e.read_ns = int_of(x.at("read_ns"));
      // A CLOCK_REALTIME time: never negative (a window between two reads is their difference).
      if (e.read_ns < 0) return bad("negative read time");
      e.written = x.contains("written") ? uint_of(x.at("written")) : 0;  // absent in evidence of scout 1.0
      if (x.contains("sched")) {
        const auto& sc = x.at("sched");
        if (!sc.is_array() || sc.size() < 2 || sc.size() > 3) return bad("malformed scheduler counters");
        e.cpu_ns = int_of(sc[0]);
        e.runq_ns = int_of(sc[1]);
        e.main_cpu_ns = sc.size() > 2 ? int_of(sc[2]) : -1;
        if (e.cpu_ns < 0 || e.runq_ns < 0 || e.main_cpu_ns < -1) return bad("negative scheduler counters");
      }
      if (x.contains("nivcsw")) {  // the main thread's involuntary context switches; absent in older evidence
        e.nivcsw = int_of(x.at("nivcsw"));
        if (e.nivcsw < 0) return bad("negative context switches");
      }
      if (x.contains("cgroup")) {  // absent before scout 1.2, and for ranks without a readable CPU cgroup
        const auto& cg = x.at("cgroup");
        if (!cg.is_array() || cg.size() != 5) return bad("malformed cgroup counters");
        e.nr_periods = int_of(cg[0]);
        e.nr_throttled = int_of(cg[1]);
        e.throttled_ns = int_of(cg[2]);
        e.quota_us = int_of(cg[3]);
        e.period_us = int_of(cg[4]);
        if (e.nr_periods < 0 || e.nr_throttled < 0 || e.throttled_ns < 0 || e.quota_us < -1 || e.quota_us == 0 ||
            e.period_us < 0)
          return bad("malformed cgroup counters");
      }
      if (x.contains("stopped")) {  // the observer's state samples since its previous read; absent in older evidence
        const auto& st = x.at("stopped");
        if (!st.is_array() || st.size() != 2) return bad("malformed state samples");
        e.state_samples = int_of(st[0]);
        e.stopped_samples = int_of(st[1]);
        if (e.state_samples < 0 || e.state_samples > k_max_state_samples || e.stopped_samples < 0 ||
            e.stopped_samples > e.state_samples)
          return bad("malformed state samples");
      }
      if (x.contains("memory")) {  // major faults, storage reads, memory limit hits and stall; absent in older evidence
        const auto& mm = x.at("memory");
        if (!mm.is_array() || mm.size() != 4) return bad("malformed memory counters");
        e.majflt = int_of(mm[0]);
        e.read_bytes = int_of(mm[1]);
        e.mem_limit_hits = int_of(mm[2]);
        e.mem_stall_us = int_of(mm[3]);
        if (e.majflt < -1 || e.read_bytes < -1 || e.mem_limit_hits < -1 || e.mem_stall_us < -1)
          return bad("malformed memory counters");
      }
      const auto& ev = x.at("events");
      if (!ev.is_array() || ev.size() > k_max_events_per_rank) return bad("too many events");
      for (const auto& y : ev) {
        // The 8th field, what the exit time is (records::ExitKind), is absent from evidence that predates it.
        if (!y.is_array() || y.size() < 7 || y.size() > 8) return bad("malformed event");
        records::CollectiveEvent c;
        c.op_seq = uint_of(y[0]);
        const auto gid = parse_hex64(y[1].get<std::string>());
        if (!gid) return bad("malformed group id");
        c.fingerprint.group = *gid;
        const std::int64_t type = int_of(y[2]);
        if (type < 0 || type > 255) return bad("collective type out of range");
        c.fingerprint.type = static_cast<records::CollectiveType>(type);
        c.fingerprint.count = uint_of(y[3]);
        c.fingerprint.group_seq = uint_of(y[4]);
        c.enter_ns = int_of(y[5]);
        c.exit_ns = int_of(y[6]);
        if (y.size() > 7) {
          const std::int64_t kind = int_of(y[7]);
          if (kind < 0 || kind > static_cast<std::int64_t>(records::ExitKind::ordered))
            return bad("exit kind out of range");
          c.exit_kind = static_cast<records::ExitKind>(kind);
        }
        e.events.push_back(c);
      }
      r.ranks.push_back(std::move(e));
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  } catch (const NotAnInteger& e) {
    return bad(fmt::format("{} where an integer belongs", e.what()));
  }
}

}  // namespace

Result<RoundEvidence> decode_round(const std::vector<std::uint8_t>& blob, const std::string& job,
                                   std::int64_t observer) {
  nlohmann::json j = parse_cbor_input(blob);
  const std::string what = fmt::format("straggler evidence of observer {}", observer);
  if (j.is_discarded()) return input_error(what + " rejected", "not CBOR");
  return round_from_json(j, job, observer, what);
}

nlohmann::json evidence_json(const std::vector<RoundEvidence>& rounds, const std::string& job) {
  nlohmann::json r = nlohmann::json::array();
  for (const auto& x : rounds) r.push_back(round_json(x, job, -1));
  return {{"schema", "scout.straggler-evidence"}, {"version", 1}, {"job", job}, {"rounds", r}};
}

Result<std::string> evidence_job(const std::string& text, const std::string& path) {
  nlohmann::json j = parse_json_input(text);
  if (j.is_discarded() || !j.is_object() || string_or(j, "schema") != "scout.straggler-evidence")
    return input_error(fmt::format("--evidence-in {} is not straggler evidence", path),
                       "expected the JSON `scout straggler --evidence-out` writes");
  const std::string job = string_or(j, "job");
  if (job.empty())
    return input_error(fmt::format("--evidence-in {} names no job", path), "", "pass the --job it was recorded for");
  return job;
}

Result<std::vector<RoundEvidence>> parse_evidence(const std::string& text, const std::string& job,
                                                  const std::string& path) {
  const std::string what = fmt::format("--evidence-in {}", path);
  nlohmann::json j = parse_json_input(text);
  if (j.is_discarded() || !j.is_object() || string_or(j, "schema") != "scout.straggler-evidence" ||
      !j.contains("rounds") || !j["rounds"].is_array())
    return input_error(what + " is not straggler evidence",
                       "expected the JSON `scout straggler --evidence-out` writes");
  if (!j.contains("job") || !j["job"].is_string() || j["job"].get<std::string>() != job)
    return input_error(fmt::format("{} is evidence of another job", what), "", "pass the --job it was recorded for");
  if (j["rounds"].empty() || j["rounds"].size() > 1000)
    return input_error(what + " holds no rounds, or more than 1000");
  std::vector<RoundEvidence> out;
  for (const auto& r : j["rounds"]) {
    auto e = round_from_json(r, job, -1, what);
    if (!e) return e.error();
    out.push_back(std::move(*e));
  }
  return out;
}

Mesh infer_mesh(const RoundEvidence& round, std::string& how) {
  const std::int64_t world = std::max<std::int64_t>(1, round.world);
  how = "default";
  Coords sizes{1, 1, 1, 1, 1, 1};
  for (const auto& r : round.ranks)
    for (int d = 0; d < k_dim_count; ++d) sizes[d] = std::max(sizes[d], r.coords[d] + 1);
  std::int64_t product = 1;
  for (auto s : sizes) {
    if (s > k_max_world_size) return *Mesh::parse(fmt::format("dp={}", world));
    product *= s;
  }
  if (!round.ranks.empty() && product == world && product != sizes[0]) {
    auto m = mesh_from_coordinates(sizes, [&](const Mesh& mesh) {
      for (const auto& r : round.ranks)
        if (mesh.rank(r.coords) != r.rank) return false;
      return true;
    });
    if (m) {
      how = "records";
      return *m;
    }
  }
  return *Mesh::parse(fmt::format("dp={}", world));
}

}  // namespace scout::straggler
