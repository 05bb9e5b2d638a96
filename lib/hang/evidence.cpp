#include "lib/hang/evidence.hpp"

#include <nlohmann/json.hpp>

#include "lib/common/json_input.hpp"
#include "lib/common/parse.hpp"
#include "lib/records/snapshot_codec.hpp"

namespace scout::hang {

using nlohmann::json;

namespace {

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
    json row = records::encode_snapshot(r.snapshot);
    row["wa"] = r.writer_alive;
    row["ps"] = json::array({static_cast<int>(r.process.state), std::string(1, r.process.raw_state),
                             r.process.exit_code, r.process.signal, r.process.pid_reused, r.process.detail});
    if (r.ring) row["rg"] = json::array({r.ring->a, r.ring->b, r.ring->events, r.ring->groups, r.ring->values});
    ranks.push_back(std::move(row));
  }
  json issues = json::array();
  for (const auto& i : e.issues)
    issues.push_back(json::array({i.segment, i.problem, i.message, i.rank, i.writer_alive, i.attempt, i.world_size}));
  json doc = {{"v", k_evidence_version},
              {"o", e.observer},
              {"n", e.node},
              {"job", e.job},
              {"att", e.attempt},
              {"t", e.collected_ns},
              {"ranks", std::move(ranks)},
              {"issues", std::move(issues)}};
  return json::to_cbor(doc);
}

Result<NodeEvidence> deserialize(const std::vector<std::uint8_t>& blob) {
  // Bounded depth (nlohmann's CBOR reader recurses) and never a throw (it
  // throws out_of_range for a declared size beyond max_size()).
  json doc = parse_cbor_input(blob);
  if (doc.is_discarded() || !doc.is_object()) return input_error("evidence blob is not valid CBOR");
  // A blob holds integers only: get<int> of a float out of range is undefined behaviour.
  if (holds_float(doc))
    return input_error("evidence blob holds a floating-point number", "this scout writes integers only");
  try {
    if (doc.at("v").get<std::int64_t>() != k_evidence_version)
      return input_error("evidence blob has an unknown version",
                         "this scout reads version " + std::to_string(k_evidence_version),
                         "run the same scout version on every node");
    NodeEvidence e;
    e.observer = doc.at("o").get<std::int64_t>();
    e.node = doc.at("n").get<std::string>();
    e.job = doc.at("job").get<std::string>();
    e.attempt = doc.at("att").get<std::string>();
    e.collected_ns = doc.at("t").get<std::int64_t>();
    for (const auto& r : doc.at("ranks")) {
      RankEvidence re;
      auto snap = records::decode_snapshot(r);
      if (!snap) return input_error("evidence blob holds a bad snapshot", snap.error().message());
      re.snapshot = std::move(*snap);
      re.writer_alive = r.at("wa").get<bool>();
      const auto& ps = r.at("ps");
      re.process.state = small_enum<ProcessState>(ps.at(0), 5);
      auto raw = ps.at(1).get<std::string>();
      re.process.raw_state = raw.empty() ? '?' : raw[0];
      re.process.exit_code = ps.at(2).get<int>();
      re.process.signal = ps.at(3).get<int>();
      re.process.pid_reused = ps.at(4).get<bool>();
      re.process.detail = ps.at(5).get<std::string>();
      if (r.contains("rg")) {
        const auto& rg = r.at("rg");
        if (!rg.is_array() || rg.size() != 5 || !re.snapshot.recent.empty())
          return input_error("evidence blob holds a bad ring digest", "five fields, and no ring beside it");
        RingDigest d;
        d.a = rg.at(0).get<std::uint64_t>();
        d.b = rg.at(1).get<std::uint64_t>();
        d.events = rg.at(2).get<std::uint64_t>();
        d.groups = rg.at(3).get<std::vector<std::uint64_t>>();
        d.values = rg.at(4).get<std::vector<std::int64_t>>();
        if (d.events > records::max_encoded_events() ||
            d.groups.size() > std::min<std::uint64_t>(d.events, k_max_ring_names) ||
            d.values.size() > std::min<std::uint64_t>(d.events, k_max_ring_names) ||
            (d.events > 0 && (d.groups.empty() || d.values.empty())))
          return input_error("evidence blob holds a bad ring digest", "more names or events than a ring holds");
        re.ring = std::move(d);
      }
      e.ranks.push_back(std::move(re));
    }
    for (const auto& i : doc.at("issues")) {
      RecordIssue ri;
      ri.segment = i.at(0).get<std::string>();
      ri.problem = i.at(1).get<std::string>();
      ri.message = i.at(2).get<std::string>();
      ri.rank = i.at(3).get<std::int64_t>();
      ri.writer_alive = i.at(4).get<bool>();
      ri.attempt = i.at(5).get<std::string>();
      ri.world_size = i.at(6).get<std::int64_t>();
      e.issues.push_back(std::move(ri));
    }
    return e;
  } catch (const std::exception& ex) {
    return input_error("evidence blob is malformed", ex.what());
  }
}

std::int64_t rank_from_segment(const std::string& segment) {
  auto pos = segment.find_last_of(".-_");
  std::string_view tail =
      pos == std::string::npos ? std::string_view(segment) : std::string_view(segment).substr(pos + 1);
  if (tail.empty() || tail.size() > 12) return -1;
  std::int64_t v = 0;
  for (char c : tail) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace scout::hang
