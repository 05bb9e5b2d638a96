#include "lib/transport/presence.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "lib/common/clock.hpp"

namespace scout::transport {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

bool printable(const std::string& s, std::size_t max_len) {
  if (s.size() > max_len) return false;
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

std::string encode_presence(const PresenceEntry& e) {
  return json{{"key_id", e.key_id},
              {"attempt", e.attempt},
              {"observer", e.observer},
              {"host", e.host},
              {"pid", e.pid},
              {"authenticated", e.authenticated},
              {"written_ns", e.written_ns},
              {"ended_ns", e.ended_ns}}
      .dump();
}

Result<PresenceEntry> decode_presence(std::string_view text) {
  if (text.size() > k_presence_max_bytes)
    return input_error(fmt::format("presence entry of {} bytes (at most {})", text.size(), k_presence_max_bytes));
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return input_error("presence entry is not a JSON object");
  PresenceEntry e;
  auto str = [&](const char* k, std::string& out, std::size_t max_len) -> Status {
    if (!j.contains(k) || !j[k].is_string() || !printable(j[k].get<std::string>(), max_len))
      return input_error(
          fmt::format("presence entry: '{}' must be a printable string of at most {} bytes", k, max_len));
    out = j[k].get<std::string>();
    return Ok{};
  };
  auto num = [&](const char* k, std::int64_t& out, std::int64_t lo) -> Status {
    if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<std::int64_t>() < lo)
      return input_error(fmt::format("presence entry: '{}' must be an integer of at least {}", k, lo));
    out = j[k].get<std::int64_t>();
    return Ok{};
  };
  if (auto s = str("key_id", e.key_id, 64); !s) return s.error();
  if (auto s = str("attempt", e.attempt, 256); !s) return s.error();
  if (auto s = str("host", e.host, 256); !s) return s.error();
  if (auto s = num("observer", e.observer, 0); !s) return s.error();
  if (auto s = num("pid", e.pid, 1); !s) return s.error();
  if (auto s = num("written_ns", e.written_ns, 0); !s) return s.error();
  if (j.contains("ended_ns"))  // absent from entries of scout before it
    if (auto s = num("ended_ns", e.ended_ns, 0); !s) return s.error();
  if (!j.contains("authenticated") || !j["authenticated"].is_boolean())
    return input_error("presence entry: 'authenticated' must be true or false");
  e.authenticated = j["authenticated"].get<bool>();
  return e;
}

Result<std::string> announce_presence(KeyValueStore& store, const std::string& prefix, const PresenceEntry& entry,
                                      std::chrono::milliseconds timeout) {
  auto slot = store.add(prefix + "/n", 1, timeout);
  if (!slot) return slot.error();
  const std::string key = fmt::format("{}/{}", prefix, (*slot - 1) % k_presence_max_slots);
  const std::string text = encode_presence(entry);
  if (auto s = store.set(key, std::vector<char>(text.begin(), text.end())); !s) return s.error();
  store.keep(key);
  return key;
}

Status end_presence(KeyValueStore& store, const std::string& key, PresenceEntry entry) {
  entry.ended_ns = realtime_ns();
  const std::string text = encode_presence(entry);
  auto s = store.set(key, std::vector<char>(text.begin(), text.end()));
  store.keep(key);
  return s;
}

Result<PresenceScan> read_presence(KeyValueStore& store, const std::string& prefix, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto count = store.add(prefix + "/n", 0, timeout);
  if (!count) return count.error();
  PresenceScan scan;
  for (std::int64_t slot = std::max<std::int64_t>(0, *count - k_presence_max_slots); slot < *count; ++slot) {
    if (Clock::now() >= deadline) {
      scan.notes.push_back(fmt::format("presence: stopped reading at slot {} of {} (timeout)", slot, *count));
      break;
    }
    const std::string key = fmt::format("{}/{}", prefix, slot % k_presence_max_slots);
    auto exists = store.check(key);
    if (!exists) return exists.error();
    if (!*exists) continue;  // removed (the default store directory goes with its last user)
    auto value = store.get(
        key, std::max(std::chrono::milliseconds(1), std::min(std::chrono::milliseconds(200), left(deadline))));
    if (!value) continue;  // removed between check and get
    auto entry = decode_presence(std::string_view(value->data(), value->size()));
    if (!entry) {
      scan.notes.push_back(fmt::format("presence slot {}: {}", slot, entry.error().message()));
      continue;
    }
    scan.entries.push_back(std::move(*entry));
  }
  return scan;
}

namespace {

// Why `e` could not have joined `self`'s probe, in words.
std::string why_kept_out(const PresenceEntry& e, const PresenceEntry& self) {
  if (e.attempt != self.attempt)
    return fmt::format("it probes attempt '{}', this probe attempt '{}'", e.attempt, self.attempt);
  if (!e.authenticated && self.authenticated) return "it has no job token";
  if (e.authenticated && !self.authenticated) return "it holds a job token and this observer has none";
  return "it holds another job token";
}

// The entries of another key id that `keep` accepts, one per (host, pid, observer), ordered.
template <typename Keep>
std::vector<StrayObserver> other_kind(const PresenceScan& scan, const PresenceEntry& self, Keep&& keep) {
  std::vector<StrayObserver> out;
  std::set<std::tuple<std::string, std::int64_t, std::int64_t>> seen;
  for (const auto& e : scan.entries) {
    if (e.key_id == self.key_id || !keep(e)) continue;
    if (!seen.emplace(e.host, e.pid, e.observer).second) continue;
    std::string why = why_kept_out(e, self);
    out.push_back({e,
                   fmt::format("observer {} on {} (pid {}) was not admitted: {} (key id {})", e.observer, e.host, e.pid,
                               why, e.key_id),
                   why});
  }
  std::sort(out.begin(), out.end(), [](const StrayObserver& a, const StrayObserver& b) {
    return std::tie(a.entry.observer, a.entry.host, a.entry.pid) <
           std::tie(b.entry.observer, b.entry.host, b.entry.pid);
  });
  return out;
}

}  // namespace

std::vector<StrayObserver> find_strays(const PresenceScan& scan, const PresenceEntry& self, std::int64_t now_ns,
                                       std::int64_t max_age_ns, bool (*alive)(std::int64_t pid)) {
  return other_kind(scan, self, [&](const PresenceEntry& e) {
    if (e.ended_ns != 0) return false;  // its probe is over: not a stray of this one
    if (now_ns - e.written_ns > max_age_ns) return false;
    return !(e.host == self.host && alive != nullptr && !alive(e.pid));
  });
}

std::vector<StrayObserver> find_contemporaries(const PresenceScan& scan, const PresenceEntry& self,
                                               std::int64_t since_ns, std::int64_t now_ns, std::int64_t max_age_ns,
                                               bool (*alive)(std::int64_t pid)) {
  return other_kind(scan, self, [&](const PresenceEntry& e) {
    if (e.ended_ns != 0) return e.ended_ns >= since_ns;
    if (now_ns - e.written_ns > max_age_ns) return false;
    return !(e.host == self.host && alive != nullptr && !alive(e.pid));
  });
}

}  // namespace scout::transport
