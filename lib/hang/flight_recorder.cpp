#include "lib/hang/flight_recorder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <sstream>

#include "lib/pickle/pickle.hpp"
#include "lib/records/layout.hpp"
#include "lib/topology/mesh.hpp"

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

// What to do with a dump cut short: it was still being written (a rank killed mid-dump leaves a partial
// file) or was copied in part.
constexpr const char* k_truncated_hint =
    "a dump cut short (its rank was killed while dumping, or the file was copied in part): move it out of the "
    "directory (its rank then reads as one that left no dump) or take the whole file torch wrote";

Result<json> parse_dump(const std::string& text) {
  if (text.empty()) return input_error("the Flight Recorder dump is empty", "", k_truncated_hint);
  if (static_cast<unsigned char>(text[0]) == 0x80) {  // pickle PROTO opcode: the dump-on-timeout form
    pickle::Policy policy;
    policy.max_bytes = std::size_t{256} << 20;
    auto doc = pickle::parse(std::as_bytes(std::span(text.data(), text.size())), policy);
    if (!doc) {
      Error e = doc.error();
      const bool cut =
          e.what.find("ends without STOP") != std::string::npos || e.what.find("truncated") != std::string::npos;
      e.what = fmt::format("the pickled Flight Recorder dump cannot be read{}: {}",
                           cut ? fmt::format(" (truncated: {} bytes)", text.size()) : "", e.what);
      if (cut) e.hint = k_truncated_hint;
      return e;
    }
    return json_of(*doc->root, 0);
  }
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // Cut short: the parser ran to the last byte (an unclosed document, string or number), not a wrong byte.
    if (text.front() == '{' && e.byte >= text.size())
      return input_error(fmt::format("the JSON Flight Recorder dump is truncated: it ends at byte {} inside its "
                                     "document",
                                     text.size()),
                         "", k_truncated_hint);
    return input_error("the Flight Recorder dump is neither JSON nor a pickle", e.what(),
                       "give torch's dumps: the pickled dump-on-timeout files (TORCH_FR_DUMP_TEMP_FILE<rank>) or "
                       "torch._C._distributed_c10d._dump_fr_trace_json() output");
  } catch (const std::exception& e) {
    return input_error("the Flight Recorder dump is neither JSON nor a pickle", e.what(),
                       "give torch's dumps: the pickled dump-on-timeout files (TORCH_FR_DUMP_TEMP_FILE<rank>) or "
                       "torch._C._distributed_c10d._dump_fr_trace_json() output");
  }
}

// The dump formats read and tested: torch's FlightRecorder "version" field, "2.9" (torch 2.8.0, the first whose
// gloo records: ProcessGroupGloo's recorder) and "2.10" (torch 2.9.0 and later; 2.9.1 to 2.15.0), in both forms, the
// same fields (bench/fr_versions_result.txt). torch 2.7 and older record no gloo op (their dumps are NCCL's, format 2.4
// in 2.7.1, and empty for a gloo job).
constexpr const char* k_formats_read =
    "scout reads Flight Recorder dumps of format 2.x whose entries carry profiling_name, process_group, record_id "
    "and collective_seq_id / p2p_seq_id (tested: format 2.9 of torch 2.8.0, 2.10 of torch 2.9.1 to 2.15.0)";

// The minor of a dump's "version" ("2.9" -> 9), where it has one of format 2.
std::optional<int> format_minor(const json& doc) {
  auto it = doc.find("version");
  if (it == doc.end() || !it->is_string()) return std::nullopt;
  const std::string& v = it->get_ref<const std::string&>();
  if (!v.starts_with("2.") || v.size() < 3 || v.size() > 6) return std::nullopt;
  int minor = 0;
  for (std::size_t i = 2; i < v.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(v[i]))) return std::nullopt;
    minor = minor * 10 + (v[i] - '0');
  }
  return minor;
}

// A dump scout can read: a "version" of format 2 ("2.<minor>", every torch 2.x's) where it has one, and
// entries that carry the fields the snapshot is made of (a dump of another format, or a partial one,
// would otherwise read as calls of sequence 0 on an unknown group: never evidence to name a rank by).
Status check_format(const json& doc) {
  std::string version = "(none)";
  if (auto it = doc.find("version"); it != doc.end()) {
    if (!it->is_string())
      return input_error(fmt::format("the Flight Recorder dump's \"version\" is {}, not a format like \"2.10\"",
                                     it->dump().substr(0, 40)),
                         "", k_formats_read);
    version = it->get<std::string>();
    const auto dot = version.find('.');
    const bool numeric = dot != std::string::npos && dot > 0 && dot + 1 < version.size() && version.size() < 16 &&
                         std::all_of(version.begin(), version.end(),
                                     [](char c) { return c == '.' || std::isdigit(static_cast<unsigned char>(c)); }) &&
                         version.find('.', dot + 1) == std::string::npos;
    if (!numeric || version.substr(0, dot) != "2")
      return input_error(fmt::format("the Flight Recorder dump is of format version \"{}\", not one scout reads",
                                     version.substr(0, 40)),
                         "", fmt::format("{}; give the dumps of a torch 2.x job", k_formats_read));
  }
  for (const auto& e : doc["entries"]) {
    if (!e.is_object()) return input_error("a Flight Recorder entry is not an object");
    const auto p2p = e.find("is_p2p");
    const bool is_p2p = p2p != e.end() && p2p->is_boolean() && p2p->get<bool>();
    for (const char* key :
         {"profiling_name", "process_group", "record_id", is_p2p ? "p2p_seq_id" : "collective_seq_id"}) {
      if (e.contains(key)) continue;
      return input_error(
          fmt::format("the Flight Recorder dump (format version {}) has an entry{} without \"{}\"", version,
                      e.contains("record_id") ? fmt::format(" (record_id {})", e["record_id"].dump()) : std::string(),
                      key),
          "", fmt::format("{}: a partial dump, or one of another format", k_formats_read));
    }
  }
  return Ok{};
}

}  // namespace

namespace {

// Process groups over the same members ("twins": e.g. a new_group over the whole world beside the
// default group) have one scout id, and the publisher counts their calls together (one counter per
// id, docs/torch.md), while the Flight Recorder numbers each pg's collectives apart
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

// What all the dumps together say of each pg: its members by name, where no dump's pg_config
// lists them (gloo's recorder lists one config, keyed by ""), taken from the ranks whose dumps
// hold entries of that pg (pg names are agreed by every member: torch numbers new groups in
// creation order on every rank). `complete`: every rank of the world left a dump, so the
// members seen are all the members.
struct KnownGroups {
  std::map<std::string, std::vector<std::int64_t>> seen;  // pg name -> ranks whose dump holds its entries
  std::int64_t world = 0;                                 // the largest any dump names
  bool complete = false;
};

Result<records::RankSnapshot> snapshot_from_document(const json& doc, std::int64_t rank, const std::string& job,
                                                     const KnownGroups* known = nullptr) {
  if (!doc.is_object() || !doc.contains("entries") || !doc["entries"].is_array())
    return input_error("the Flight Recorder dump has no \"entries\" list", "",
                       "give a dump made by torch's Flight Recorder");
  if (auto ok = check_format(doc); !ok) return ok.error();
  // Process groups: name and desc -> member ranks.
  std::map<std::string, std::vector<std::int64_t>> by_name, by_desc;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> configured;  // (pg name, members) per pg_config entry
  std::int64_t world = std::max(rank + 1, known ? known->world : 0);
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
    if (name == "0" || desc == "default_pg") {
      std::vector<std::int64_t> all(static_cast<std::size_t>(world));
      for (std::int64_t i = 0; i < world; ++i) all[static_cast<std::size_t>(i)] = i;
      return all;
    }
    if (known) {
      // Seen in every dump: its members are the ranks that called it. With a dump missing, a pg
      // seen on fewer ranks than the world may lack the missing one: its own id, compared with nothing
      // it is not.
      auto it = known->seen.find(name);
      if (it != known->seen.end() && (known->complete || it->second.size() == static_cast<std::size_t>(world)))
        return it->second;
      return {-1, static_cast<std::int64_t>(std::hash<std::string>{}(name)&0x7fffffff)};
    }
    if (by_name.size() <= 2) {
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

namespace {

// The world a dump names: its own rank, and every rank its pg_config lists. `configured` gets the
// member lists of its named pgs (gloo's one config keyed by "" names a pg it does not say).
std::int64_t world_named(const json& doc, std::int64_t rank, std::vector<std::vector<std::int64_t>>* configured) {
  std::int64_t world = rank + 1;
  if (!doc.contains("pg_config") || !doc["pg_config"].is_object()) return world;
  for (const auto& [key, cfg] : doc["pg_config"].items()) {
    if (!cfg.is_object() || !cfg.contains("ranks")) continue;
    Result<std::vector<std::int64_t>> ranks = std::vector<std::int64_t>{};
    if (cfg["ranks"].is_string()) {
      ranks = parse_ranks(cfg["ranks"].get<std::string>());
    } else if (cfg["ranks"].is_array()) {
      for (const auto& r : cfg["ranks"])
        if (r.is_number_integer()) ranks->push_back(r.get<std::int64_t>());
    }
    if (!ranks) continue;
    for (auto r : *ranks) world = std::max(world, r + 1);
    if (!key.empty() && !ranks->empty()) configured->push_back(*ranks);
  }
  return world;
}

// The elements of a list of shapes (an entry's input_sizes or output_sizes); nullopt when it is not
// one, or too large to be a tensor's.
std::optional<std::uint64_t> elements(const json& e, const char* key) {
  if (!e.contains(key) || !e[key].is_array()) return std::nullopt;
  std::uint64_t total = 0;
  for (const auto& shape : e[key]) {
    if (!shape.is_array()) return std::nullopt;
    std::uint64_t n = 1;
    for (const auto& d : shape) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0) return std::nullopt;
      const auto v = static_cast<std::uint64_t>(d.get<std::int64_t>());
      if (v != 0 && n > (std::uint64_t{1} << 62) / v) return std::nullopt;
      n *= v;
    }
    total += n;
    if (total > (std::uint64_t{1} << 62)) return std::nullopt;
  }
  return total;
}

// The world a dump's calls on the default pg (the whole world) tell by their sizes: an all-gather's
// output holds every member's input (gloo records it as one [world, ...] tensor, NCCL as world
// tensors; the tensor form as world times the input), a reduce-scatter's input every member's
// output. 0 when no such call tells it (gloo's dumps carry no world size, and its one pg_config
// entry lists the last pg registered), -1 when its calls tell different worlds.
std::int64_t world_by_sizes(const json& doc) {
  std::int64_t world = 0;
  for (const auto& e : doc["entries"]) {
    // Fields of another type than torch writes are left to the snapshot's reading (a clear error).
    if (!e.is_object() || !e.contains("process_group") || !e["process_group"].is_array() ||
        e["process_group"].size() < 2 || !e.contains("profiling_name") || !e["profiling_name"].is_string() ||
        (e.contains("is_p2p") && (!e["is_p2p"].is_boolean() || e["is_p2p"].get<bool>())))
      continue;
    const auto& pg = e["process_group"];
    if (!(pg[0].is_string() && pg[0].get<std::string>() == "0") &&
        !(pg[1].is_string() && pg[1].get<std::string>() == "default_pg"))
      continue;
    const auto t = type_of(e["profiling_name"].get<std::string>());
    const bool gather = t == CollectiveType::all_gather || t == CollectiveType::all_gather_into_tensor;
    const bool scatter = t == CollectiveType::reduce_scatter || t == CollectiveType::reduce_scatter_tensor;
    if (!gather && !scatter) continue;
    auto in = elements(e, "input_sizes"), out = elements(e, "output_sizes");
    if (!in || !out) continue;
    const auto part = gather ? *in : *out, whole = gather ? *out : *in;
    if (part == 0 || whole % part != 0 || whole / part > static_cast<std::uint64_t>(k_max_flight_recorder_world))
      continue;
    const auto w = static_cast<std::int64_t>(whole / part);
    if (world != 0 && world != w) return -1;
    world = w;
  }
  return world;
}

// The dump's newest entry (by record_id) was retired: completed, or (gloo) timed out.
bool last_retired(const json& doc) {
  const json* last = nullptr;
  for (const auto& e : doc["entries"])
    if (e.is_object() && (!last || int_field(e, "record_id") >= int_field(*last, "record_id"))) last = &e;
  return last && (last->value("retired", false) || last->value("state", std::string()) == "completed");
}

// The dump's newest entry (by record_id) is a gloo op (profiling_name "gloo:...").
bool last_gloo(const json& doc) {
  const json* last = nullptr;
  for (const auto& e : doc["entries"])
    if (e.is_object() && (!last || int_field(e, "record_id") >= int_field(*last, "record_id"))) last = &e;
  return last && last->value("profiling_name", std::string()).starts_with("gloo:");
}

// A rank's newest call counts as inside because gloo retires a timed-out op like a completed one.
// But an op every member of its group issued, with the same arguments, and every member retired (or
// went past) did complete: nobody was missing from it. So a retired newest call is done when each
// member's dump holds it, the same call, retired; a clean job's dumps then read as finished, not
// as every rank inside its last barrier. gloo's recorder retires a call after it returns, on
// another thread: a dump taken just after the call returned can hold it unretired (measured: 2 of 3
// clean DDP jobs of bench/fr_vs_frtrace.py dumped one or two ranks' closing barrier unretired, the
// others' retired, and read as a group stall). So a gloo call that every member holds with the same
// arguments is done on every member once at least one member retired it or went past it, the
// others' gloo entries unretired: every member entered it, so nobody was missing from it, and gloo
// retires it at its timeout anyway (where every member retired it, the rule above already reads it
// done). Only in a group whose members are told (`told`: --world, or a pg_config's list), never one
// guessed from the ranks that dumped: survivors of a last rank that stopped, the world not given, also
// hold one call, some retired at their timeout and some dumped before their recorder retired it
// (bench/fr_vs_frtrace.py, groups/stop, seed 39 run 1). A member whose newest entry is not gloo's
// (NCCL's unretired "started" op) must still have retired it. `groups`: scout group id -> members,
// where the dumps tell; `gloo`: the dump's newest entry is a gloo op.
void settle_completed(std::vector<records::RecordRead>& reads, const std::vector<char>& retired,
                      const std::vector<char>& gloo, const std::map<std::uint64_t, std::vector<std::int64_t>>& groups,
                      const std::set<std::uint64_t>& told) {
  std::map<std::int64_t, std::size_t> at;
  for (std::size_t i = 0; i < reads.size(); ++i) at[reads[i].snapshot->rank] = i;
  std::vector<char> done(reads.size(), 0);
  for (std::size_t i = 0; i < reads.size(); ++i) {
    const auto& s = *reads[i].snapshot;
    if (s.recent.empty() || s.collective_state != records::CollectiveState::inside) continue;
    const auto& f = s.recent.back().fingerprint;
    auto g = groups.find(f.group);
    if (g == groups.end()) continue;
    const bool relaxed = told.count(f.group) > 0;  // an unretired gloo entry may count
    if (!retired[i] && !(relaxed && gloo[i])) continue;
    bool all = true, any_settled = false;
    for (auto m : g->second) {
      auto it = at.find(m);
      if (it == at.end()) {
        all = false;
        break;
      }
      const auto& ms = *reads[it->second].snapshot;
      bool made = false;
      for (std::size_t k = 0; k < ms.recent.size() && !made; ++k) {
        const auto& e = ms.recent[k].fingerprint;
        if (e.group != f.group || e.group_seq != f.group_seq) continue;
        if (e.type != f.type || e.count != f.count || e.dtype != f.dtype) continue;
        const bool settled = k + 1 < ms.recent.size() || retired[it->second];
        made = settled || (relaxed && gloo[it->second]);
        any_settled = any_settled || settled;
      }
      all = all && made;
      if (!all) break;
    }
    done[i] = all && any_settled;
  }
  for (std::size_t i = 0; i < reads.size(); ++i) {
    if (!done[i]) continue;
    auto& s = *reads[i].snapshot;
    auto& last = s.recent.back();
    last.exit_ns = last.enter_ns + 1;
    s.collective_state = records::CollectiveState::done;
    s.phase = records::Phase::unknown;
  }
}

// The mesh dim a DeviceMesh group's description names ("mesh_tp" -> tp), if any.
std::optional<Dim> dim_of_desc(const std::string& desc) {
  if (!desc.starts_with("mesh_")) return std::nullopt;
  static const std::map<std::string, Dim> k = {
      {"dp", Dim::dp},         {"dp_replicate", Dim::dp}, {"ddp", Dim::dp},     {"replicate", Dim::dp},
      {"dp_shard", Dim::fsdp}, {"fsdp", Dim::fsdp},       {"shard", Dim::fsdp}, {"tp", Dim::tp},
      {"pp", Dim::pp},         {"cp", Dim::cp},           {"ep", Dim::ep}};
  auto it = k.find(desc.substr(5));
  return it == k.end() ? std::nullopt : std::optional<Dim>(it->second);
}

// Where nothing told the world (gloo's dumps, no all-gather on the default pg) and every rank up to the
// highest that dumped left a dump, the pgs that show a member beyond them: in a family of pgs (one
// DeviceMesh dim by its description, else a run of unnamed pgs in creation order, torch's numbered names)
// whose members, as the dumps that called them tell, partition the ranks that dumped, a pg smaller than
// the family's largest. Measured (groups layout, the last rank exited, torch 2.12 to 2.15): rank 3's tp pg
// was called by rank 2 alone and its dp pg by rank 1 alone, beside pgs of two; gloo had retired the
// survivors' failed calls, so read as a world of 3 the dumps were a job whose ranks all finished (healthy).
// A member a rank that dumped cannot be (it would hold the pg's calls: the one rank's calls returned, so
// every member made them), so it is a rank beyond those that dumped. Not proof of one (a job may make
// uneven pgs; the world is still untold): such dumps are never read as a job that ended, and the note says
// which pgs. (name, rank) of each such pg's callers, in name order.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> short_pgs(
    const std::map<std::string, std::vector<std::int64_t>>& seen, const std::set<std::string>& configured,
    const std::map<std::string, std::string>& desc_of, std::int64_t world) {
  std::map<std::string, std::vector<std::pair<std::string, const std::vector<std::int64_t>*>>> families;
  std::vector<std::pair<std::int64_t, std::pair<std::string, const std::vector<std::int64_t>*>>> numbered;
  for (const auto& [name, ranks] : seen) {
    auto desc = desc_of.find(name);
    if (name == "0" || configured.count(name) || (desc != desc_of.end() && desc->second == "default_pg")) continue;
    if (desc != desc_of.end()) {
      if (auto d = dim_of_desc(desc->second)) {
        families[fmt::format("dim:{}", static_cast<int>(*d))].emplace_back(name, &ranks);
        continue;
      }
    }
    const bool number = !name.empty() && name.size() < 10 && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    if (number) numbered.push_back({std::stoll(name), {name, &ranks}});
  }
  std::sort(numbered.begin(), numbered.end());
  {
    std::set<std::int64_t> covered;
    std::vector<std::pair<std::string, const std::vector<std::int64_t>*>> run;
    int index = 0;
    for (const auto& [n, pg] : numbered) {
      bool disjoint = true;
      for (auto r : *pg.second) disjoint = disjoint && !covered.count(r);
      if (!disjoint) break;  // not a run that partitions the world: the ones before stand
      covered.insert(pg.second->begin(), pg.second->end());
      run.push_back(pg);
      if (static_cast<std::int64_t>(covered.size()) == world) {
        families[fmt::format("new:{}", index++)] = std::move(run);
        run.clear();
        covered.clear();
      }
    }
  }
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  for (const auto& [key, pgs] : families) {
    std::set<std::int64_t> covered;
    std::size_t total = 0, largest = 0;
    for (const auto& [name, ranks] : pgs) {
      covered.insert(ranks->begin(), ranks->end());
      total += ranks->size();
      largest = std::max(largest, ranks->size());
    }
    // A partition of the ranks that dumped (a DeviceMesh dim's pgs may not be one: then it tells nothing).
    if (total != covered.size() || static_cast<std::int64_t>(covered.size()) != world || largest < 2) continue;
    for (const auto& [name, ranks] : pgs)
      if (ranks->size() < largest) out.emplace_back(name, *ranks);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Each rank's coordinates from the pgs' structure, so that the decision compares ranks only with their
// true equivalents. The pgs of one family (one DeviceMesh dim by its description, else a run of
// unnamed pgs in creation order, torch's pg names) must partition the world; each family is a dim and a
// rank's coordinate in it is its index in its pg.
// Only a family named dp (DeviceMesh's dp, dp_replicate) makes replicas: an unnamed family becomes
// tp, cp or ep, whose ranks are compared only within one pg, since the dumps cannot tell which of
// two families holds replicas. Ranks alike in every family are apart in one more such dim. Where the
// dumps cannot tell the structure (a pg's members unknown, families that do not partition the world
// or fit no row-major mesh), every rank is its own stage (pp = world): compared only within one
// pg, never as a replica. Only the world's pgs: every rank a replica (dp = world), as before.
void place_by_groups(std::vector<records::RecordRead>& reads, std::int64_t world,
                     const std::map<std::string, std::vector<std::int64_t>>& members,
                     const std::map<std::string, std::string>& desc_of, bool unknown_members) {
  // (unknown_members: a pg whose members the dumps do not tell)
  // "dim:<d>" or "new:<i>" (the i-th run of unnamed pgs, in creation order, that partitions the world) ->
  // member sets. torch names pgs by a counter in creation order, and a family of pgs is created together.
  std::map<std::string, std::set<std::vector<std::int64_t>>> families;
  std::vector<std::pair<std::int64_t, const std::vector<std::int64_t>*>> unnamed;  // (creation number, members)
  bool unordered = false;
  std::set<std::vector<std::int64_t>> distinct;
  for (const auto& [name, m] : members) {
    if (m.size() <= 1 || static_cast<std::int64_t>(m.size()) >= world || !distinct.insert(m).second) continue;
    auto d = desc_of.count(name) ? dim_of_desc(desc_of.at(name)) : std::nullopt;
    if (d) {
      families[fmt::format("dim:{}", static_cast<int>(*d))].insert(m);
      continue;
    }
    const bool number = !name.empty() && name.size() < 10 && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    if (!number) unordered = true;
    unnamed.emplace_back(number ? std::stoll(name) : 0, &m);
  }
  std::sort(unnamed.begin(), unnamed.end());
  {
    std::set<std::int64_t> covered;
    int index = 0;
    for (const auto& [n, m] : unnamed) {
      bool disjoint = true;
      for (auto r : *m) disjoint = disjoint && !covered.count(r);
      if (!disjoint) {
        unordered = true;  // a run that does not partition the world
        break;
      }
      covered.insert(m->begin(), m->end());
      families[fmt::format("new:{}", index)].insert(*m);
      if (static_cast<std::int64_t>(covered.size()) == world) {
        covered.clear();
        ++index;
      }
    }
    if (!covered.empty()) unordered = true;
  }
  if (unordered) unknown_members = true;
  auto set_all = [&](auto&& coords_of) {
    for (auto& r : reads) r.snapshot->coords = coords_of(r.snapshot->rank);
  };
  auto alone = [&]() {
    set_all([](std::int64_t r) {
      Coords c{0, 0, 0, 0, 0, 0};
      c[static_cast<int>(Dim::pp)] = r;
      return c;
    });
  };
  if (families.empty() && !unknown_members) return;  // every rank a replica (the default coordinates)
  if (families.empty() || unknown_members || world <= 0 || world > (std::int64_t{1} << 20)) return alone();
  std::vector<Coords> coords(static_cast<std::size_t>(world), Coords{0, 0, 0, 0, 0, 0});
  Coords sizes{1, 1, 1, 1, 1, 1};
  std::set<Dim> used;
  std::vector<Dim> free_dims = {Dim::tp, Dim::cp, Dim::ep};
  auto take_free = [&]() -> std::optional<Dim> {
    for (Dim d : free_dims)
      if (!used.count(d)) return d;
    return std::nullopt;
  };
  std::vector<std::pair<std::optional<Dim>, const std::set<std::vector<std::int64_t>>*>> order;
  for (const auto& [key, sets] : families)
    if (key.starts_with("dim:")) order.emplace_back(static_cast<Dim>(std::stoi(key.substr(4))), &sets);
  for (const auto& [key, sets] : families)
    if (key.starts_with("new:")) order.emplace_back(std::nullopt, &sets);
  for (auto& [dim, sets] : order) {
    if (!dim) dim = take_free();
    if (!dim || used.count(*dim)) return alone();
    used.insert(*dim);
    std::vector<char> seen(static_cast<std::size_t>(world), 0);
    std::size_t size = sets->begin()->size(), covered = 0;
    for (const auto& m : *sets) {
      if (m.size() != size) return alone();
      for (std::size_t i = 0; i < m.size(); ++i) {
        if (m[i] < 0 || m[i] >= world || seen[m[i]]) return alone();
        seen[m[i]] = 1;
        coords[m[i]][static_cast<int>(*dim)] = static_cast<std::int64_t>(i);
        ++covered;
      }
    }
    if (static_cast<std::int64_t>(covered) != world) return alone();
    sizes[static_cast<int>(*dim)] = static_cast<std::int64_t>(size);
  }
  std::int64_t product = 1;
  for (auto z : sizes) product *= z;
  if (product > world || world % product != 0) return alone();
  if (product < world) {
    auto d = take_free();
    if (!d) return alone();
    std::map<Coords, std::int64_t> next;
    for (std::int64_t r = 0; r < world; ++r) coords[r][static_cast<int>(*d)] = next[coords[r]]++;
    sizes[static_cast<int>(*d)] = world / product;
    for (const auto& [c, n] : next)
      if (n != world / product) return alone();
  }
  auto mesh = mesh_from_coordinates(sizes, [&](const Mesh& m) {
    for (std::int64_t r = 0; r < world; ++r)
      if (m.rank(coords[r]) != r) return false;
    return true;
  });
  if (!mesh) return alone();
  set_all([&](std::int64_t r) { return coords[static_cast<std::size_t>(r)]; });
}

}  // namespace

std::string untold_world_note(const DumpsWorld& w) {
  if (!w.told_by.empty()) return {};
  return fmt::format(
      "the dumps do not tell the world size (gloo's carry none, and no all-gather or reduce-scatter on the default "
      "pg gathers it): read as {} ranks, the highest that dumped or that a pg_config names; a last rank that left no "
      "dump (rank {} or beyond) can only be seen with --world N{}",
      w.world, w.world,
      w.short_pgs.empty()
          ? std::string()
          : fmt::format("; a rank beyond them likely left none: {} smaller than other pgs of their family, so "
                        "no call is taken as done by every member",
                        fmt::join(w.short_pgs, ", ")));
}

void qualify_verdict(const DumpsWorld& w, Verdict& v) {
  if (const auto note = untold_world_note(w); !note.empty()) v.details["notes"].push_back(note);
  if (w.short_pgs.empty() || !v.suspects.empty() ||
      (v.status != VerdictStatus::healthy && v.status != VerdictStatus::group_stall))
    return;
  v.status = VerdictStatus::inconclusive;
  v.scope = Scope::job;
  v.action = "escalate";
  v.details["kind"] = "inconclusive";
  v.summary = fmt::format(
      "read as {} ranks (nothing tells the world), the dumps show {} smaller than other pgs of their family: a "
      "rank beyond those that dumped likely left no dump and the survivors' calls failed for it (gloo retires a "
      "failed call like a finished one); give --world N to name a missing last rank",
      w.world, fmt::join(w.short_pgs, ", "));
}

Result<std::vector<records::RecordRead>> read_flight_recorder_dir(const std::string& dir, const std::string& job,
                                                                  std::optional<std::int64_t> world_given,
                                                                  DumpsWorld* world_source) {
  namespace fs = std::filesystem;
  // A world this reader can hold: a pg_config naming a rank beyond it is not a torch dump of a real job
  // (an impossible one ran out of memory).
  constexpr std::int64_t k_max_dump_world = k_max_flight_recorder_world;
  if (world_given && (*world_given <= 0 || *world_given > k_max_dump_world))
    return input_error(fmt::format("--flight-recorder {}: a world of {} ranks", dir, *world_given), "",
                       fmt::format("give the job's world size, 1 to {}", k_max_dump_world));
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
  if (world_given && files.rbegin()->first >= *world_given)
    return input_error(
        fmt::format("--flight-recorder {}: {} is the dump of rank {}, beyond the world of {} ranks", dir,
                    fs::path(files.rbegin()->second).filename().string(), files.rbegin()->first, *world_given),
        "", "give the job's world size (--world, --mesh), or move the other job's dumps out");
  // Every dump first: what they say together (the world, each pg's members) shapes each snapshot.
  std::vector<std::pair<std::int64_t, json>> docs;
  std::vector<std::string> paths;
  KnownGroups known;
  std::vector<std::vector<std::int64_t>> configured;  // every pg_config's member lists
  std::map<std::string, std::string> desc_of;         // pg name -> its description
  std::int64_t by_sizes = 0;                          // the world the default pg's calls tell (-1: they disagree)
  for (const auto& [rank, path] : files) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    if (!in.good() && !in.eof()) return input_error(fmt::format("cannot read {}", path));
    auto doc = parse_dump(buf.str());
    // torch's JSON dump leaves "entries" out where the recorder holds none (torch 2.7's of a gloo job).
    if (doc && doc->is_object() && !doc->contains("entries") && doc->contains("version"))
      (*doc)["entries"] = json::array();
    if (doc && (!doc->is_object() || !doc->contains("entries") || !(*doc)["entries"].is_array()))
      doc = input_error("the Flight Recorder dump has no \"entries\" list", "",
                        "give a dump made by torch's Flight Recorder");
    if (!doc) {
      Error e = doc.error();
      e.what = fmt::format("{}: {}", path, e.what);
      return e;
    }
    known.world = std::max(known.world, world_named(*doc, rank, &configured));
    if (const auto w = world_by_sizes(*doc); w != 0 && by_sizes != -1)
      by_sizes = by_sizes == 0 || by_sizes == w ? w : -1;
    for (const auto& e : (*doc)["entries"]) {
      if (!e.is_object() || !e.contains("process_group") || !e["process_group"].is_array() ||
          e["process_group"].empty() || !e["process_group"][0].is_string())
        continue;
      const auto& name = e["process_group"][0].get<std::string>();
      if (e["process_group"].size() >= 2 && e["process_group"][1].is_string())
        desc_of[name] = e["process_group"][1].get<std::string>();
      auto& ranks = known.seen[name];
      if (ranks.empty() || ranks.back() != rank) ranks.push_back(rank);
    }
    docs.emplace_back(rank, std::move(*doc));
    paths.push_back(path);
  }
  if (known.world > k_max_dump_world)
    return input_error(fmt::format("--flight-recorder {}: a dump's pg_config names rank {}, beyond {} ranks", dir,
                                   known.world - 1, k_max_dump_world),
                       "", "give the dumps torch's Flight Recorder wrote for the job");
  if (world_given) {
    if (known.world > *world_given)
      return input_error(fmt::format("--flight-recorder {}: a dump's pg_config names rank {}, beyond the world of {} "
                                     "ranks",
                                     dir, known.world - 1, *world_given),
                         "", "give the job's world size (--world, --mesh)");
    // gloo's dumps name no world: the last ranks may have left none, and are missing all the same.
    known.world = *world_given;
  } else if (by_sizes >= known.world) {
    // Not given: the default pg's all-gathers and reduce-scatters tell it by their sizes (a DDP
    // job's first call gathers every rank's parameter count), so the last ranks that left no dump
    // are missing too. Never below what the dumps name, nor where its calls tell different worlds.
    known.world = by_sizes;
  }
  // No entry in any of torch's dumps: a recorder that saw nothing is no evidence either way. Measured:
  // torch 2.8.0 records nothing unless TORCH_FR_BUFFER_SIZE is set (its default is 0; 2.15's is 2000),
  // and torch 2.7.1's recorder is NCCL's alone (format 2.4: a gloo job's dumps are empty). Read, such
  // dumps made a hung job healthy ("no rank has published progress yet").
  {
    bool any_entry = false;
    std::string version;
    for (const auto& [rank, doc] : docs) {
      any_entry = any_entry || !doc["entries"].empty();
      if (doc.contains("version") && doc["version"].is_string()) version = doc["version"].get<std::string>();
    }
    const auto minor = format_minor(docs.front().second);
    if (!any_entry && !version.empty())
      return input_error(
          fmt::format("--flight-recorder {}: no dump holds an entry (format version {}): the Flight Recorder "
                      "recorded nothing",
                      dir, version),
          minor && *minor < 9 ? "torch before 2.8 records no gloo collective in its Flight Recorder (only NCCL's)"
                              : "its buffer was off (TORCH_FR_BUFFER_SIZE unset or 0: torch 2.8 to 2.10 record "
                                "nothing by default), or the job made no collective call",
          fmt::format("run the job with TORCH_FR_BUFFER_SIZE=2000 (for gloo, on torch 2.8 or later) or with scout's "
                      "publisher; {}",
                      k_formats_read));
  }
  known.complete = static_cast<std::int64_t>(docs.size()) == known.world;
  std::vector<records::RecordRead> out;
  std::vector<char> retired, gloo;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const auto& [rank, doc] = docs[i];
    Result<records::RankSnapshot> snap = input_error("");
    try {
      snap = snapshot_from_document(doc, rank, job, &known);
    } catch (const nlohmann::json::exception& e) {
      snap = input_error("the Flight Recorder dump has a field of an unexpected type", e.what(),
                         "give a dump made by torch's Flight Recorder");
    }
    if (!snap) {
      Error e = snap.error();
      e.what = fmt::format("{}: {}", paths[i], e.what);
      return e;
    }
    records::RecordRead r;
    r.segment = fs::path(paths[i]).filename().string();
    r.writer_alive = false;
    r.snapshot = std::move(*snap);
    out.push_back(std::move(r));
    retired.push_back(last_retired(doc));
    gloo.push_back(last_gloo(doc));
  }
  // One world for all: the given one, else the largest any dump names (or the highest dump rank + 1).
  std::int64_t world = known.world;
  for (const auto& r : out) world = std::max({world, r.snapshot->world_size, r.snapshot->rank + 1});
  for (auto& r : out) r.snapshot->world_size = world;
  // The groups whose members the dumps tell: the world, and every pg seen in a complete set of dumps.
  std::map<std::uint64_t, std::vector<std::int64_t>> groups;
  {
    std::vector<std::int64_t> all(static_cast<std::size_t>(world));
    for (std::int64_t i = 0; i < world; ++i) all[static_cast<std::size_t>(i)] = i;
    groups[records::layout::group_id(all.data(), all.size())] = all;
    for (const auto& [name, ranks] : known.seen)
      if (known.complete) groups[records::layout::group_id(ranks.data(), ranks.size())] = ranks;
    for (auto& ranks : configured) {
      std::sort(ranks.begin(), ranks.end());
      groups[records::layout::group_id(ranks.data(), ranks.size())] = ranks;
    }
  }
  // The groups whose members are told (a pg_config's list, or any group once the world is told: given,
  // a pg_config listing every rank, or the default pg's calls' sizes), not guessed from the ranks that
  // left a dump.
  std::set<std::uint64_t> told;
  {
    const char* told_by = world_given ? "given" : by_sizes == world ? "collective_sizes" : "";
    for (const auto& ranks : configured)
      if (!*told_by && static_cast<std::int64_t>(ranks.size()) == world) told_by = "pg_config";
    const bool world_told = *told_by != 0;
    for (const auto& [id, ranks] : groups)
      if (world_told) told.insert(id);
    for (const auto& ranks : configured) told.insert(records::layout::group_id(ranks.data(), ranks.size()));
    // The world untold, pgs that show a member beyond the ranks that dumped (short_pgs): the groups guessed
    // from who dumped (the world's, each pg's callers) may lack it, so no call in them is taken as done.
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> short_ones;
    if (!world_told && known.complete) {
      std::set<std::string> configured_names;
      for (const auto& [rank, doc] : docs)
        if (doc.contains("pg_config") && doc["pg_config"].is_object())
          for (const auto& [key, cfg] : doc["pg_config"].items()) {
            if (!key.empty()) configured_names.insert(key);
            if (cfg.is_object() && cfg.contains("name") && cfg["name"].is_string() &&
                !cfg["name"].get<std::string>().empty())
              configured_names.insert(cfg["name"].get<std::string>());
          }
      short_ones = short_pgs(known.seen, configured_names, desc_of, world);
    }
    if (!short_ones.empty()) std::erase_if(groups, [&](const auto& g) { return !told.count(g.first); });
    if (world_source) {
      *world_source = {world, told_by, {}};
      for (const auto& [name, ranks] : short_ones)
        world_source->short_pgs.push_back(
            fmt::format("pg {} (called only by rank{} {})", name, ranks.size() > 1 ? "s" : "", fmt::join(ranks, ", ")));
    }
  }
  settle_completed(out, retired, gloo, groups, told);
  // Each pg's members (its config's, else the dumps that called it when all are here); the world's apart.
  std::map<std::string, std::vector<std::int64_t>> members;
  bool unknown_members = false;
  for (const auto& [rank, doc] : docs)
    if (doc.contains("pg_config") && doc["pg_config"].is_object())
      for (const auto& [key, cfg] : doc["pg_config"].items()) {
        if (key.empty() || !cfg.is_object() || !cfg.contains("ranks")) continue;
        std::vector<std::int64_t> m;
        if (cfg["ranks"].is_string()) {
          if (auto p = parse_ranks(cfg["ranks"].get<std::string>())) m = *p;
        } else if (cfg["ranks"].is_array()) {
          for (const auto& r : cfg["ranks"])
            if (r.is_number_integer()) m.push_back(r.get<std::int64_t>());
        }
        std::sort(m.begin(), m.end());
        members[key] = m;
        if (cfg.contains("desc") && cfg["desc"].is_string()) desc_of.try_emplace(key, cfg["desc"].get<std::string>());
      }
  for (const auto& [name, ranks] : known.seen) {
    if (members.count(name) || name == "0" || (desc_of.count(name) && desc_of[name] == "default_pg")) continue;
    if (known.complete || static_cast<std::int64_t>(ranks.size()) == world)
      members[name] = ranks;
    else
      unknown_members = true;
  }
  place_by_groups(out, world, members, desc_of, unknown_members);
  return out;
}

}  // namespace scout::hang
