#include "lib/records/snapshot_codec.hpp"

#include <fmt/format.h>

#include "lib/records/layout.hpp"

namespace scout::records {

using nlohmann::json;

namespace {

template <typename E>
E small_enum(const json& j, int max) {
  int v = j.get<int>();
  if (v < 0 || v > max) throw std::out_of_range("enum value");
  return static_cast<E>(v);
}

}  // namespace

std::size_t max_encoded_events() {
  return layout::k_ring_size;
}

json encode_fingerprint(const Fingerprint& f) {
  return json::array({f.group, static_cast<int>(f.type), f.dtype, f.count, f.root_or_op, f.group_seq});
}

Fingerprint decode_fingerprint_array(const json& j) {
  if (!j.is_array() || j.size() != 6) throw std::out_of_range("fingerprint is not a 6-element array");
  Fingerprint f;
  f.group = j.at(0).get<std::uint64_t>();
  f.type = small_enum<CollectiveType>(j.at(1), static_cast<int>(CollectiveType::other));
  f.dtype = static_cast<std::uint8_t>(small_enum<int>(j.at(2), 255));
  f.count = j.at(3).get<std::uint64_t>();
  f.root_or_op = j.at(4).get<std::int64_t>();
  f.group_seq = j.at(5).get<std::uint64_t>();
  return f;
}

json encode_snapshot(const RankSnapshot& s) {
  json ring = json::array();
  for (const auto& ev : s.recent)
    ring.push_back(json::array({encode_fingerprint(ev.fingerprint), ev.op_seq, ev.enter_ns, ev.exit_ns, ev.failed,
                                static_cast<int>(ev.exit_kind)}));
  return json::object({
      {"job", s.job},
      {"att", s.attempt},
      {"r", s.rank},
      {"w", s.world_size},
      {"c", s.coords},
      {"h", s.host},
      {"pid", s.pid},
      {"st", s.start_ns},
      {"step", s.step},
      {"op", s.op_seq},
      {"ph", static_cast<int>(s.phase)},
      {"fp", encode_fingerprint(s.pending)},
      {"cs", static_cast<int>(s.collective_state)},
      {"hb", s.heartbeat_ns},
      {"pg", s.progress_ns},
      {"evn", s.events},
      {"drop", s.dropped},
      {"ev", std::move(ring)},
  });
}

Result<RankSnapshot> decode_snapshot(const json& r) {
  try {
    if (!r.is_object()) return input_error("snapshot is not an object");
    RankSnapshot s;
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
    s.phase = small_enum<Phase>(r.at("ph"), static_cast<int>(Phase::terminated));
    s.pending = decode_fingerprint_array(r.at("fp"));
    s.collective_state = small_enum<CollectiveState>(r.at("cs"), static_cast<int>(CollectiveState::failed));
    s.heartbeat_ns = r.at("hb").get<std::int64_t>();
    s.progress_ns = r.at("pg").get<std::int64_t>();
    s.events = r.at("evn").get<std::uint64_t>();
    s.dropped = r.at("drop").get<std::uint64_t>();
    const auto& ring = r.at("ev");
    if (!ring.is_array() || ring.size() > layout::k_ring_size)
      return input_error(
          "snapshot holds more ring events than a record has",
          fmt::format("{} events, a ring holds {}", ring.is_array() ? ring.size() : 0, layout::k_ring_size));
    s.recent.reserve(ring.size());
    for (const auto& ev : ring) {
      CollectiveEvent ce;
      ce.fingerprint = decode_fingerprint_array(ev.at(0));
      ce.op_seq = ev.at(1).get<std::uint64_t>();
      ce.enter_ns = ev.at(2).get<std::int64_t>();
      ce.exit_ns = ev.at(3).get<std::int64_t>();
      ce.failed = ev.at(4).get<bool>();
      // The kind of the exit time (absent from blobs that predate it: unknown).
      if (ev.size() > 5) ce.exit_kind = small_enum<ExitKind>(ev.at(5), static_cast<int>(ExitKind::ordered));
      s.recent.push_back(ce);
    }
    if (s.rank < 0 || s.world_size <= 0 || s.rank >= s.world_size)
      return input_error("snapshot holds a rank out of range",
                         fmt::format("rank {} of world size {}", s.rank, s.world_size));
    return s;
  } catch (const std::exception& ex) {
    return input_error("snapshot is malformed", ex.what());
  }
}

}  // namespace scout::records
