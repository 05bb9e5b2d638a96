#include "lib/hang/evidence.hpp"

#include <nlohmann/json.hpp>

#include "lib/common/json_input.hpp"
#include "lib/common/parse.hpp"

namespace scout::hang {

using nlohmann::json;

namespace {

json fingerprint_json(const records::Fingerprint& f) {
  return json::array({f.group, static_cast<int>(f.type), f.dtype, f.count, f.root_or_op, f.group_seq});
}

records::Fingerprint fingerprint_from(const json& j) {
  records::Fingerprint f;
  f.group = j.at(0).get<std::uint64_t>();
  int type = j.at(1).get<int>();
  if (type < 0 || type > 255) throw std::out_of_range("collective type");
  f.type = static_cast<records::CollectiveType>(type);
  int dtype = j.at(2).get<int>();
  if (dtype < 0 || dtype > 255) throw std::out_of_range("dtype");
  f.dtype = static_cast<std::uint8_t>(dtype);
  f.count = j.at(3).get<std::uint64_t>();
  f.root_or_op = j.at(4).get<std::int64_t>();
  f.group_seq = j.at(5).get<std::uint64_t>();
  return f;
}

// Whether `j` holds a floating-point number anywhere (depth is bounded by parse_cbor_input).
bool holds_float(const json& j) {
  if (j.is_number_float()) return true;
  if (j.is_array() || j.is_object())
    for (const auto& v : j)
      if (holds_float(v)) return true;
  return false;
}

template <typename E>
E small_enum(const json& j, int max) {
  int v = j.get<int>();
  if (v < 0 || v > max) throw std::out_of_range("enum value");
  return static_cast<E>(v);
}

}  // namespace

std::vector<std::uint8_t> serialize(const NodeEvidence& e) {
  json ranks = json::array();
  for (const auto& r : e.ranks) {
    const auto& s = r.snapshot;
    json recent = json::array();
    std::size_t first = s.recent.size() > k_max_recent_events ? s.recent.size() - k_max_recent_events : 0;
    for (std::size_t i = first; i < s.recent.size(); ++i) {
      const auto& ev = s.recent[i];
      recent.push_back(json::array({fingerprint_json(ev.fingerprint), ev.op_seq, ev.enter_ns, ev.exit_ns}));
    }
    ranks.push_back(json::object({
        {"job", s.job}, {"att", s.attempt}, {"r", s.rank}, {"w", s.world_size}, {"c", s.coords},
        {"h", s.host}, {"pid", s.pid}, {"st", s.start_ns}, {"step", s.step}, {"op", s.op_seq},
        {"ph", static_cast<int>(s.phase)}, {"fp", fingerprint_json(s.pending)},
        {"cs", static_cast<int>(s.collective_state)}, {"hb", s.heartbeat_ns}, {"pg", s.progress_ns},
        {"ev", std::move(recent)}, {"wa", r.writer_alive},
        {"ps", json::array({static_cast<int>(r.process.state), std::string(1, r.process.raw_state), r.process.exit_code,
                            r.process.signal, r.process.pid_reused, r.process.detail})},
    }));
  }
  json issues = json::array();
  for (const auto& i : e.issues)
    issues.push_back(json::array({i.segment, i.problem, i.message, i.rank, i.writer_alive}));
  json doc = {{"v", k_evidence_version}, {"o", e.observer}, {"n", e.node}, {"job", e.job}, {"att", e.attempt},
              {"t", e.collected_ns}, {"ranks", std::move(ranks)}, {"issues", std::move(issues)}};
  return json::to_cbor(doc);
}

Result<NodeEvidence> deserialize(const std::vector<std::uint8_t>& blob) {
  // Bounded depth (nlohmann's CBOR reader recurses) and never a throw (it
  // throws out_of_range for a declared size beyond max_size()).
  json doc = parse_cbor_input(blob);
  if (doc.is_discarded() || !doc.is_object()) return input_error("evidence blob is not valid CBOR");
  // A blob holds integers only: get<int> of a float out of range is undefined behaviour.
  if (holds_float(doc)) return input_error("evidence blob holds a floating-point number", "this scout writes integers only");
  try {
    if (doc.at("v").get<std::int64_t>() != k_evidence_version)
      return input_error("evidence blob has an unknown version", "this scout reads version 1",
                         "run the same scout version on every node");
    NodeEvidence e;
    e.observer = doc.at("o").get<std::int64_t>();
    e.node = doc.at("n").get<std::string>();
    e.job = doc.at("job").get<std::string>();
    e.attempt = doc.at("att").get<std::string>();
    e.collected_ns = doc.at("t").get<std::int64_t>();
    for (const auto& r : doc.at("ranks")) {
      RankEvidence re;
      auto& s = re.snapshot;
      s.job = r.at("job").get<std::string>();
      s.attempt = r.at("att").get<std::string>();
      s.rank = r.at("r").get<std::int64_t>();
      s.world_size = r.at("w").get<std::int64_t>();
      s.coords = r.at("c").get<std::array<std::int64_t, 6>>();
      s.host = r.at("h").get<std::string>();
      s.pid = r.at("pid").get<std::int64_t>();
      s.start_ns = r.at("st").get<std::int64_t>();
      s.step = r.at("step").get<std::uint64_t>();
      s.op_seq = r.at("op").get<std::uint64_t>();
      s.phase = small_enum<records::Phase>(r.at("ph"), 255);
      s.pending = fingerprint_from(r.at("fp"));
      s.collective_state = small_enum<records::CollectiveState>(r.at("cs"), 255);
      s.heartbeat_ns = r.at("hb").get<std::int64_t>();
      s.progress_ns = r.at("pg").get<std::int64_t>();
      for (const auto& ev : r.at("ev")) {
        records::CollectiveEvent ce;
        ce.fingerprint = fingerprint_from(ev.at(0));
        ce.op_seq = ev.at(1).get<std::uint64_t>();
        ce.enter_ns = ev.at(2).get<std::int64_t>();
        ce.exit_ns = ev.at(3).get<std::int64_t>();
        s.recent.push_back(ce);
      }
      re.writer_alive = r.at("wa").get<bool>();
      const auto& ps = r.at("ps");
      re.process.state = small_enum<ProcessState>(ps.at(0), 5);
      auto raw = ps.at(1).get<std::string>();
      re.process.raw_state = raw.empty() ? '?' : raw[0];
      re.process.exit_code = ps.at(2).get<int>();
      re.process.signal = ps.at(3).get<int>();
      re.process.pid_reused = ps.at(4).get<bool>();
      re.process.detail = ps.at(5).get<std::string>();
      if (s.rank < 0 || s.world_size <= 0 || s.rank >= s.world_size)
        return input_error("evidence blob holds a rank out of range");
      e.ranks.push_back(std::move(re));
    }
    for (const auto& i : doc.at("issues")) {
      RecordIssue ri;
      ri.segment = i.at(0).get<std::string>();
      ri.problem = i.at(1).get<std::string>();
      ri.message = i.at(2).get<std::string>();
      ri.rank = i.at(3).get<std::int64_t>();
      ri.writer_alive = i.at(4).get<bool>();
      e.issues.push_back(std::move(ri));
    }
    return e;
  } catch (const std::exception& ex) {
    return input_error("evidence blob is malformed", ex.what());
  }
}

std::int64_t rank_from_segment(const std::string& segment) {
  auto pos = segment.find_last_of(".-_");
  std::string_view tail = pos == std::string::npos ? std::string_view(segment) : std::string_view(segment).substr(pos + 1);
  if (tail.empty() || tail.size() > 12) return -1;
  std::int64_t v = 0;
  for (char c : tail) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace scout::hang
