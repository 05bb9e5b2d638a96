#include "lib/hang/flight_recorder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>

#include "lib/pickle/pickle.hpp"
#include "lib/records/layout.hpp"

namespace scout::hang {

namespace {

using json = nlohmann::json;
using records::CollectiveType;

CollectiveType type_of(const std::string& profiling_name) {
  std::string n =
      profiling_name.substr(profiling_name.find(':') == std::string::npos ? 0 : profiling_name.find(':') + 1);
  static const std::map<std::string, CollectiveType> k = {
      {"all_reduce", CollectiveType::all_reduce},
      {"allreduce", CollectiveType::all_reduce},
      {"all_reduce_coalesced", CollectiveType::all_reduce},
      {"allreduce_coalesced", CollectiveType::all_reduce},
      {"all_gather", CollectiveType::all_gather},
      {"allgather", CollectiveType::all_gather},
      {"all_gather_into_tensor", CollectiveType::all_gather_into_tensor},
      {"_allgather_base", CollectiveType::all_gather_into_tensor},
      {"allgather_into_tensor_coalesced", CollectiveType::all_gather_into_tensor},
      {"all_gather_into_tensor_coalesced", CollectiveType::all_gather_into_tensor},
      {"reduce_scatter", CollectiveType::reduce_scatter},
      {"reduce_scatter_tensor", CollectiveType::reduce_scatter_tensor},
      {"_reduce_scatter_base", CollectiveType::reduce_scatter_tensor},
      {"reduce_scatter_tensor_coalesced", CollectiveType::reduce_scatter_tensor},
      {"all_to_all", CollectiveType::all_to_all},
      {"alltoall", CollectiveType::all_to_all},
      {"all_to_all_single", CollectiveType::all_to_all_single},
      {"alltoall_base", CollectiveType::all_to_all_single},
      {"broadcast", CollectiveType::broadcast},
      {"reduce", CollectiveType::reduce},
      {"gather", CollectiveType::gather},
      {"scatter", CollectiveType::scatter},
      {"barrier", CollectiveType::barrier},
      {"send", CollectiveType::send},
      {"recv", CollectiveType::recv},
  };
  auto it = k.find(n);
  return it == k.end() ? CollectiveType::other : it->second;
}

std::uint8_t dtype_of(const std::string& name) {
  static const std::map<std::string, std::uint8_t> k = {{"Double", 1}, {"Float", 2}, {"Half", 3},  {"BFloat16", 4},
                                                        {"Long", 5},   {"Int", 6},   {"Short", 7}, {"Char", 8},
                                                        {"Byte", 9},   {"Bool", 10}};
  auto it = k.find(name);
  return it == k.end() ? 0 : it->second;
}

// "[0, 1, 2]" -> {0, 1, 2}
Result<std::vector<std::int64_t>> parse_ranks(const std::string& text) {
  std::vector<std::int64_t> out;
  std::string cur;
  for (char c : text) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      cur.push_back(c);
    } else if (c == ',' || c == ']' || c == ' ') {
      if (!cur.empty()) {
        if (cur.size() > 9) return input_error(fmt::format("pg_config rank list {} has an out-of-range rank", text));
        out.push_back(std::stoll(cur));
        cur.clear();
      }
    } else if (c != '[') {
      return input_error(fmt::format("pg_config rank list {} is not a list of ranks", text));
    }
  }
  if (!cur.empty()) out.push_back(std::stoll(cur));
  return out;
}

std::int64_t int_field(const json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

// A pickled dump (torch's _dump_fr_trace, the dump-on-timeout file) as the
// JSON document its _dump_fr_trace_json twin holds: torch pickles plain dicts,
// lists, tuples, strings, numbers and None (no class at all), so the reader
// runs with an empty allow-list and anything else is refused by name.
Result<json> json_of(const pickle::Value& v, int depth) {
  if (depth > 64) return input_error("the pickled Flight Recorder dump nests deeper than 64 levels");
  switch (v.kind) {
    case pickle::Kind::none:
      return json(nullptr);
    case pickle::Kind::boolean:
      return json(v.boolean);
    case pickle::Kind::integer:
      return json(v.integer);
    case pickle::Kind::floating:
      return json(v.floating);
    case pickle::Kind::string:
      return json(v.text);
    case pickle::Kind::list:
    case pickle::Kind::tuple: {
      json out = json::array();
      for (const auto* item : v.items) {
        auto j = json_of(*item, depth + 1);
        if (!j) return j.error();
        out.push_back(std::move(*j));
      }
      return out;
    }
    case pickle::Kind::dict: {
      json out = json::object();
      for (const auto& [k, val] : v.entries) {
        std::string key;
        if (k->is(pickle::Kind::string))
          key = k->text;
        else if (k->is(pickle::Kind::integer))
          key = std::to_string(k->integer);
        else
          return input_error(
              fmt::format("the pickled Flight Recorder dump has a {} dict key", pickle::kind_name(k->kind)));
        auto j = json_of(*val, depth + 1);
        if (!j) return j.error();
        out[key] = std::move(*j);
      }
      return out;
    }
    default:
      return input_error(
          fmt::format("the pickled Flight Recorder dump holds a {} ({})", pickle::kind_name(v.kind), pickle::render(v)),
          "a torch Flight Recorder dump holds only dicts, lists, strings, numbers and None");
  }
}

Result<json> parse_dump(const std::string& text) {
  if (!text.empty() && static_cast<unsigned char>(text[0]) == 0x80) {  // pickle PROTO opcode: the dump-on-timeout form
    pickle::Policy policy;
    policy.max_bytes = std::size_t{256} << 20;
    auto doc = pickle::parse(std::as_bytes(std::span(text.data(), text.size())), policy);
    if (!doc) {
      Error e = doc.error();
      e.what = "the pickled Flight Recorder dump cannot be read: " + e.what;
      return e;
    }
    return json_of(*doc->root, 0);
  }
  try {
    return json::parse(text);
  } catch (const std::exception& e) {
    return input_error("the Flight Recorder dump is neither JSON nor a pickle", e.what(),
                       "give torch's dumps: the pickled dump-on-timeout files (TORCH_FR_DUMP_TEMP_FILE<rank>) or "
                       "torch._C._distributed_c10d._dump_fr_trace_json() output");
  }
}

}  // namespace

namespace {

// Process groups over the same members ("twins": e.g. a new_group over the whole world beside the
// default group) have one scout id, and the publisher counts their calls together (one counter per
// id, ARCHITECTURE.md), while the Flight Recorder numbers each pg's collectives apart
// (collective_seq_id). So that a dump gives the numbers the publisher gives, a collective of a pg
// whose members pg_config names, and which has twins there, gets the sum over its twins of the
// calls each had issued by then: its own collective_seq_id, a twin's latest entry before it, else
// that twin's first entry after it minus one (the recorder's ring holds the newest entries of all
// pgs together, so a twin's calls before its first entry in the ring all came before), else, for a
// twin with no entry in the ring, its pg_status last_enqueued_collective (0 when absent). gloo's
// dumps name only the default pg in pg_config: the other pgs' members are guessed (the world) and
// their entries keep their own numbers, as before.
void renumber_twins(const std::vector<const json*>& entries, std::vector<records::CollectiveEvent>& events,
                    const std::vector<std::string>& pg_of,
                    const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& configured, const json& doc) {
  std::map<std::uint64_t, std::vector<std::string>> twins;  // scout id -> configured pg names
  std::map<std::string, std::uint64_t> id_of;
  for (const auto& [name, ranks] : configured) {
    if (id_of.count(name)) continue;
    const auto id = records::layout::group_id(ranks.data(), ranks.size());
    id_of[name] = id;
    twins[id].push_back(name);
  }
  auto last_enqueued = [&](const std::string& name) -> std::uint64_t {
    if (!doc.contains("pg_status") || !doc["pg_status"].is_object()) return 0;
    const auto& st = doc["pg_status"];
    if (!st.contains(name) || !st[name].is_object()) return 0;
    const std::int64_t v = int_field(st[name], "last_enqueued_collective");
    return v > 0 ? static_cast<std::uint64_t>(v) : 0;
  };
  // Per configured pg name: (entry index, collective_seq_id) of its collectives, in ring order.
  std::map<std::string, std::vector<std::pair<std::size_t, std::uint64_t>>> calls;
  std::vector<char> take(events.size(), 0);
  for (std::size_t i = 0; i < events.size() && i < entries.size(); ++i) {
    const json& e = *entries[i];
    const auto t = events[i].fingerprint.type;
    if (e.value("is_p2p", false) || t == CollectiveType::send || t == CollectiveType::recv) continue;
    auto it = id_of.find(pg_of[i]);
    if (it == id_of.end() || it->second != events[i].fingerprint.group || twins[it->second].size() < 2) continue;
    take[i] = 1;
    calls[pg_of[i]].emplace_back(i, events[i].fingerprint.group_seq);
  }
  std::vector<std::uint64_t> merged(events.size(), 0);
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (!take[i]) continue;
    std::uint64_t sum = 0;
    for (const auto& twin : twins[events[i].fingerprint.group]) {
      if (twin == pg_of[i]) {
        sum += events[i].fingerprint.group_seq;
        continue;
      }
      const auto& c = calls[twin];
      auto after = std::upper_bound(c.begin(), c.end(), std::pair{i, std::uint64_t{0}},
                                    [](const auto& a, const auto& b) { return a.first < b.first; });
      if (after != c.begin())
        sum += std::prev(after)->second;
      else if (after != c.end())
        sum += after->second > 0 ? after->second - 1 : 0;
      else
        sum += last_enqueued(twin);
    }
    merged[i] = sum;
  }
  for (std::size_t i = 0; i < events.size(); ++i)
    if (take[i]) events[i].fingerprint.group_seq = merged[i];
}

Result<records::RankSnapshot> snapshot_from_document(const json& doc, std::int64_t rank, const std::string& job) {
  if (!doc.is_object() || !doc.contains("entries") || !doc["entries"].is_array())
    return input_error("the Flight Recorder dump has no \"entries\" list", "",
                       "give a dump made by torch's Flight Recorder");
  // Process groups: name and desc -> member ranks.
  std::map<std::string, std::vector<std::int64_t>> by_name, by_desc;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> configured;  // (pg name, members) per pg_config entry
  std::int64_t world = rank + 1;
  if (doc.contains("pg_config") && doc["pg_config"].is_object()) {
    for (auto& [key, cfg] : doc["pg_config"].items()) {
      if (!cfg.is_object() || !cfg.contains("ranks")) continue;
      auto ranks = cfg["ranks"].is_string()
                       ? parse_ranks(cfg["ranks"].get<std::string>())
                       : Result<std::vector<std::int64_t>>(cfg["ranks"].get<std::vector<std::int64_t>>());
      if (!ranks) return ranks.error();
      for (auto r : *ranks) world = std::max(world, r + 1);
      by_name[key] = *ranks;
      std::string name = key;
      if (cfg.contains("name") && cfg["name"].is_string()) {
        by_name[cfg["name"].get<std::string>()] = *ranks;
        if (!cfg["name"].get<std::string>().empty()) name = cfg["name"].get<std::string>();
      }
      if (cfg.contains("desc") && cfg["desc"].is_string()) by_desc[cfg["desc"].get<std::string>()] = *ranks;
      // gloo's recorder keys one config by "" (the ranks of the last pg registered, not always the default
      // pg's): no name, so it names no twin.
      if (!name.empty()) configured.emplace_back(name, *ranks);
    }
  }
  auto members = [&](const json& e) -> std::vector<std::int64_t> {
    std::string name, desc;
    if (e.contains("process_group") && e["process_group"].is_array() && e["process_group"].size() >= 2) {
      if (e["process_group"][0].is_string()) name = e["process_group"][0].get<std::string>();
      if (e["process_group"][1].is_string()) desc = e["process_group"][1].get<std::string>();
    }
    if (auto it = by_name.find(name); it != by_name.end() && !name.empty()) return it->second;
    if (auto it = by_desc.find(desc); it != by_desc.end() && !desc.empty()) return it->second;
    if (name == "0" || desc == "default_pg" || by_name.size() <= 2) {
      std::vector<std::int64_t> all(static_cast<std::size_t>(world));
      for (std::int64_t i = 0; i < world; ++i) all[static_cast<std::size_t>(i)] = i;
      return all;
    }
    return {-1, static_cast<std::int64_t>(std::hash<std::string>{}(name)&0x7fffffff)};  // unknown group: its own id
  };

  std::vector<const json*> entries;
  for (const auto& e : doc["entries"]) {
    if (!e.is_object()) return input_error("a Flight Recorder entry is not an object");
    entries.push_back(&e);
  }
  std::stable_sort(entries.begin(), entries.end(), [](const json* a, const json* b) {
    return int_field(*a, "record_id") < int_field(*b, "record_id");
  });

  // Per entry: its pg's name (process_group[0]).
  std::vector<std::string> pg_of(entries.size());

  records::RankSnapshot s;
  s.job = job;
  s.rank = rank;
  s.world_size = world;
  s.coords = {rank, 0, 0, 0, 0, 0};
  std::vector<records::CollectiveEvent> events;
  std::int64_t last_ns = 0;
  for (const json* ep : entries) {
    const json& e = *ep;
    if (e.contains("process_group") && e["process_group"].is_array() && !e["process_group"].empty() &&
        e["process_group"][0].is_string())
      pg_of[events.size()] = e["process_group"][0].get<std::string>();
    records::CollectiveEvent ev;
    auto& f = ev.fingerprint;
    std::string pname = e.value("profiling_name", std::string());
    f.type = type_of(pname);
    bool p2p = e.value("is_p2p", false) || f.type == CollectiveType::send || f.type == CollectiveType::recv;
    auto ranks = members(e);
    if (p2p) ranks.push_back(-2);  // the point-to-point sequence of the group, apart from its collectives
    f.group = records::layout::group_id(ranks.data(), ranks.size());
    f.group_seq = static_cast<std::uint64_t>(int_field(e, p2p ? "p2p_seq_id" : "collective_seq_id"));
    std::uint64_t count = 0;
    if (e.contains("input_sizes") && e["input_sizes"].is_array()) {
      for (const auto& shape : e["input_sizes"]) {
        if (!shape.is_array()) continue;
        std::uint64_t n = 1;
        for (const auto& d : shape)
          n *= d.is_number_integer() ? static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.get<std::int64_t>())) : 0;
        count += n;
      }
    }
    f.count = count;
    if (e.contains("input_dtypes") && e["input_dtypes"].is_array() && !e["input_dtypes"].empty() &&
        e["input_dtypes"][0].is_string())
      f.dtype = dtype_of(e["input_dtypes"][0].get<std::string>());
    f.root_or_op = -1;
    ev.op_seq = static_cast<std::uint64_t>(int_field(e, "record_id") + 1);
    ev.enter_ns = int_field(e, "time_created_ns");
    bool retired = e.value("retired", false) || e.value("state", std::string()) == "completed";
    std::int64_t done_ns = int_field(e, "time_discovered_completed_ns");
    ev.exit_ns = retired ? (done_ns > 0 ? done_ns : ev.enter_ns + 1) : 0;
    last_ns = std::max({last_ns, ev.enter_ns, ev.exit_ns});
    events.push_back(ev);
  }
  renumber_twins(entries, events, pg_of, configured, doc);
  s.op_seq = events.empty() ? 0 : events.back().op_seq;
  s.progress_ns = s.heartbeat_ns = last_ns;
  // A dump is taken on a timeout or failure. gloo marks a timed-out op retired
  // like a completed one and records no completion time, so the newest entry
  // counts as still inside unless the backend timed its completion (NCCL).
  if (!events.empty()) {
    const json& last = *entries.back();
    const bool timed_done =
        int_field(last, "time_discovered_completed_ns") > 0 && last.value("state", std::string()) == "completed";
    if (!timed_done) events.back().exit_ns = 0;
  }
  if (!events.empty()) {
    s.pending = events.back().fingerprint;
    s.collective_state = events.back().exit_ns == 0 ? records::CollectiveState::inside : records::CollectiveState::done;
    s.phase = events.back().exit_ns == 0 ? records::Phase::collective : records::Phase::unknown;
  }
  std::size_t keep = std::min<std::size_t>(events.size(), 64);
  s.recent.assign(events.end() - static_cast<std::ptrdiff_t>(keep), events.end());
  return s;
}

}  // namespace

Result<records::RankSnapshot> snapshot_from_flight_recorder(const std::string& text, std::int64_t rank,
                                                            const std::string& job) {
  auto parsed = parse_dump(text);
  if (!parsed) return parsed.error();
  try {
    return snapshot_from_document(*parsed, rank, job);
  } catch (const nlohmann::json::exception& e) {  // a field of another type than torch writes
    return input_error("the Flight Recorder dump has a field of an unexpected type", e.what(),
                       "give a dump made by torch's Flight Recorder");
  }
}

Result<std::vector<records::RecordRead>> read_flight_recorder_dir(const std::string& dir, const std::string& job) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return input_error(fmt::format("--flight-recorder {}: not a directory", dir), ec ? ec.message() : "",
                       "give the directory the job's Flight Recorder dumps are in");
  std::map<std::int64_t, std::string> files;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    if (!de.is_regular_file()) continue;
    std::string name = de.path().filename().string();
    std::string stem = name.size() > 5 && name.ends_with(".json") ? name.substr(0, name.size() - 5) : name;
    std::size_t i = stem.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(stem[i - 1]))) --i;
    if (i == stem.size() || stem.size() - i > 9) continue;
    std::int64_t rank = std::stoll(stem.substr(i));
    if (files.count(rank))
      return input_error(fmt::format("--flight-recorder {}: two dumps for rank {} ({} and {})", dir, rank,
                                     fs::path(files[rank]).filename().string(), name),
                         "", "keep one dump per rank in the directory");
    files[rank] = de.path().string();
  }
  if (ec) return input_error(fmt::format("--flight-recorder {}: cannot list it", dir), ec.message());
  if (files.empty())
    return input_error(fmt::format("--flight-recorder {}: no dump (a file whose name ends in its rank)", dir), "",
                       "point it at the dumps (TORCH_FR_DUMP_TEMP_FILE<rank>)");
  std::vector<records::RecordRead> out;
  for (const auto& [rank, path] : files) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    if (!in.good() && !in.eof()) return input_error(fmt::format("cannot read {}", path));
    auto snap = snapshot_from_flight_recorder(buf.str(), rank, job);
    if (!snap) {
      Error e = snap.error();
      e.what = fmt::format("{}: {}", path, e.what);
      return e;
    }
    records::RecordRead r;
    r.segment = fs::path(path).filename().string();
    r.writer_alive = false;
    r.snapshot = std::move(*snap);
    out.push_back(std::move(r));
  }
  // One world for all: the largest any dump names (or the highest dump rank + 1).
  std::int64_t world = 0;
  for (const auto& r : out) world = std::max({world, r.snapshot->world_size, r.snapshot->rank + 1});
  for (auto& r : out) r.snapshot->world_size = world;
  return out;
}

}  // namespace scout::hang
