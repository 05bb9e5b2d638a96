#include "lib/transport/etcd_store.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "lib/common/base64.hpp"
#include "lib/common/hex.hpp"
#include "lib/common/parse.hpp"
#include "lib/transport/socket_io.hpp"

namespace scout::transport {

namespace {

using Clock = SocketClock;
using json = nlohmann::json;
using std::chrono::milliseconds;

// Largest reply read from a member (etcd's default request limit is 1.5 MiB; a range of one key
// is a little more than its value in base64).
constexpr std::size_t k_max_reply_bytes = 64u << 20;
// Pause after every member failed once, before asking them again (an election in progress).
constexpr milliseconds k_round_pause{100};
// get(): the first and the longest pause between reads of a key that is not there yet.
constexpr milliseconds k_poll_first{5}, k_poll_longest{200};
// cleanup(): its whole budget at most, and the deletes per transaction (etcd's --max-txn-ops is 128).
constexpr milliseconds k_cleanup_budget{3000};
constexpr std::size_t k_deletes_per_txn = 100;

std::string seconds_text(milliseconds d) {
  return fmt::format("{:.1f} s", static_cast<double>(d.count()) / 1000);
}

// One HTTP reply: its status code and body (de-chunked).
struct HttpReply {
  int status = 0;
  std::string body;
};

// Decodes a chunked body; false when it is malformed or incomplete.
bool dechunk(std::string_view in, std::string& out) {
  out.clear();
  for (;;) {
    const auto eol = in.find("\r\n");
    if (eol == std::string_view::npos) return false;
    std::size_t size = 0;
    std::size_t i = 0;
    for (; i < eol && std::isxdigit(static_cast<unsigned char>(in[i])); ++i)
      size = size * 16 + static_cast<std::size_t>(std::isdigit(static_cast<unsigned char>(in[i]))
                                                      ? in[i] - '0'
                                                      : std::tolower(static_cast<unsigned char>(in[i])) - 'a' + 10);
    if (i == 0 || size > k_max_reply_bytes) return false;
    in.remove_prefix(eol + 2);
    if (size == 0) return true;
    if (in.size() < size + 2) return false;
    out.append(in.substr(0, size));
    in.remove_prefix(size + 2);
  }
}

// Value of header `name` (lower case) in `head`, or "".
std::string header_value(std::string_view head, std::string_view name) {
  std::size_t pos = 0;
  while ((pos = head.find("\r\n", pos)) != std::string_view::npos) {
    pos += 2;
    const auto end = std::min(head.find("\r\n", pos), head.size());
    const std::string_view line = head.substr(pos, end - pos);
    const auto colon = line.find(':');
    if (colon != std::string_view::npos && colon == name.size()) {
      bool same = true;
      for (std::size_t k = 0; k < colon && same; ++k)
        same = std::tolower(static_cast<unsigned char>(line[k])) == name[k];
      if (same) {
        std::string v(line.substr(colon + 1));
        v.erase(0, v.find_first_not_of(" \t"));
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
        return v;
      }
    }
  }
  return {};
}

// POSTs `body` to http://ep`path` and reads the whole reply by `deadline`; on failure *why says
// what happened, in words.
std::optional<HttpReply> http_post(const StoreEndpoint& ep, std::string_view path, const std::string& body,
                                   Clock::time_point deadline, std::string* why) {
  const auto started = Clock::now();
  const int fd = connect_by(ep.host, ep.port, deadline, why);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const std::string host = ep.host.find(':') != std::string::npos ? "[" + ep.host + "]" : ep.host;
  const std::string request = fmt::format(
      "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Connection: close\r\n\r\n{}",
      path, host, ep.port, body.size(), body);
  if (!send_all(fd, reinterpret_cast<const unsigned char*>(request.data()), request.size(), deadline)) {
    *why = Clock::now() >= deadline ? "the request could not be sent in time" : "the connection failed while sending";
    return std::nullopt;
  }
  std::string raw;
  std::size_t head_end = std::string::npos, content_length = std::string::npos;
  unsigned char buf[16384];
  for (;;) {
    std::size_t got = 0;
    const RecvOutcome r = recv_some(fd, buf, sizeof buf, deadline, &got);
    if (r == RecvOutcome::timed_out) {
      *why = fmt::format("no {} within {} (a stopped, overloaded or cut-off member)",
                         raw.empty() ? "answer" : "complete answer",
                         seconds_text(std::chrono::duration_cast<milliseconds>(Clock::now() - started)));
      return std::nullopt;
    }
    if (r == RecvOutcome::failed) {
      *why = "the connection failed while reading the answer";
      return std::nullopt;
    }
    if (r == RecvOutcome::data) raw.append(reinterpret_cast<const char*>(buf), got);
    if (raw.size() > k_max_reply_bytes) {
      *why = "the answer is too large";
      return std::nullopt;
    }
    if (head_end == std::string::npos && (head_end = raw.find("\r\n\r\n")) != std::string::npos) {
      const std::string length = header_value(std::string_view(raw).substr(0, head_end), "content-length");
      if (!length.empty()) {
        auto n = parse_int(length, "Content-Length");
        if (!n || *n < 0) {
          *why = "the answer has a bad Content-Length";
          return std::nullopt;
        }
        content_length = static_cast<std::size_t>(*n);
      }
    }
    const bool complete = head_end != std::string::npos && content_length != std::string::npos &&
                          raw.size() >= head_end + 4 + content_length;
    if (complete || r == RecvOutcome::end_of_stream) break;
  }
  if (head_end == std::string::npos || !raw.starts_with("HTTP/1.") || raw.size() < 12) {
    *why = raw.empty() ? "the connection was closed without an answer" : "the answer is not HTTP";
    return std::nullopt;
  }
  HttpReply reply;
  auto status = parse_int(std::string_view(raw).substr(9, 3), "HTTP status");
  if (!status) {
    *why = "the answer has no HTTP status";
    return std::nullopt;
  }
  reply.status = static_cast<int>(*status);
  const std::string_view head = std::string_view(raw).substr(0, head_end);
  const std::string_view rest = std::string_view(raw).substr(head_end + 4);
  if (header_value(head, "transfer-encoding").find("chunked") != std::string::npos) {
    if (!dechunk(rest, reply.body)) {
      *why = "the answer ended early (chunked body incomplete)";
      return std::nullopt;
    }
  } else if (content_length != std::string::npos) {
    if (rest.size() < content_length) {
      *why = "the answer ended early";
      return std::nullopt;
    }
    reply.body = std::string(rest.substr(0, content_length));
  } else {
    reply.body = std::string(rest);
  }
  return reply;
}

// etcd's JSON gateway writes int64 fields as strings and leaves out zero values.
std::int64_t int_field(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (it->is_string()) {
    auto v = parse_int(it->get<std::string>(), name);
    return v ? *v : 0;
  }
  return 0;
}

// A key as it stands: absent, or its value and the revision of its last change.
struct KeyState {
  bool exists = false;
  std::string value;
  std::int64_t mod_revision = 0;
};

// A counter's value: "N" then, after a space, the hex tag of the add() that wrote it.
struct Counter {
  std::int64_t value = 0;
  std::string tag;
};

std::optional<Counter> parse_counter(const std::string& text) {
  Counter c;
  const auto space = text.find(' ');
  auto v = parse_int(std::string_view(text).substr(0, space), "counter");
  if (!v) return std::nullopt;
  c.value = *v;
  if (space != std::string::npos) c.tag = text.substr(space + 1);
  return c;
}

class EtcdKeyValueStore final : public KeyValueStore {
 public:
  EtcdKeyValueStore(StoreUri uri, milliseconds op_timeout) : m_uri(std::move(uri)), m_op_timeout(op_timeout) {}

  Status set(const std::string& key, const std::vector<char>& value) override {
    json body = {{"key", wire_key(key)}, {"value", base64_encode(std::string_view(value.data(), value.size()))}};
    auto r = call("/v3/kv/put", body, Clock::now() + m_op_timeout);
    if (!r) return with_what(r.error(), fmt::format("cannot write key {} to the store {}", key, m_uri.text));
    std::lock_guard lock(m_keys_mutex);
    if (std::find(m_keys.begin(), m_keys.end(), key) == m_keys.end()) m_keys.push_back(key);
    return Ok{};
  }

  Result<std::vector<char>> get(const std::string& key, milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    milliseconds pause = k_poll_first;
    for (;;) {
      auto state = read(key, deadline);
      if (!state)
        return with_what(state.error(), fmt::format("key {} did not appear in the store {}", key, m_uri.text));
      if (state->exists) return std::vector<char>(state->value.begin(), state->value.end());
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left <= milliseconds(0))
        return unavailable_error(fmt::format("key {} did not appear in the store {}", key, m_uri.text),
                                 fmt::format("waited {}", seconds_text(timeout)));
      std::this_thread::sleep_for(std::min(pause, left));
      pause = std::min(pause * 2, k_poll_longest);
    }
  }

  Result<bool> check(const std::string& key) override {
    json body = {{"key", wire_key(key)}, {"count_only", true}};
    auto r = call("/v3/kv/range", body, Clock::now() + m_op_timeout);
    if (!r) return with_what(r.error(), fmt::format("cannot read the store {}", m_uri.text));
    return int_field(*r, "count") > 0;
  }

  // A read of the counter, then a transaction that writes the new value only if the key has not
  // changed since (mod_revision; 0 while it does not exist), again on a conflict. A transaction
  // whose answer was lost may have been applied: the tag written with the value says whether the
  // current value is this call's, so the delta is added once.
  Result<std::int64_t> add(const std::string& key, std::int64_t delta, milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    std::random_device random;
    const std::string tag = hex64(std::uint64_t{random()} << 32 | random());
    const std::string what = fmt::format("cannot update counter {} in the store {}", key, m_uri.text);
    bool attempted = false;
    for (;;) {
      auto state = read(key, deadline);
      if (!state) return with_what(state.error(), what);
      Counter current;
      if (state->exists) {
        auto parsed = parse_counter(state->value);
        if (!parsed)
          return input_error(fmt::format("counter {} in the store {} is not a counter", key, m_uri.text),
                             fmt::format("its value is '{}'", state->value.substr(0, 40)),
                             "use another job id, or delete the key with etcdctl");
        current = *parsed;
      }
      if (attempted && current.tag == tag) return current.value;  // the lost answer's write
      if (delta == 0) return current.value;
      const std::string next = fmt::format("{} {}", current.value + delta, tag);
      json body = {
          {"compare", json::array({{{"key", wire_key(key)},
                                    {"target", "MOD"},
                                    {"result", "EQUAL"},
                                    {"mod_revision", std::to_string(state->mod_revision)}}})},
          {"success", json::array({{{"request_put", {{"key", wire_key(key)}, {"value", base64_encode(next)}}}}})}};
      attempted = true;
      auto r = call("/v3/kv/txn", body, deadline);
      if (!r) return with_what(r.error(), what);
      if (r->value("succeeded", false)) return current.value + delta;
      if (Clock::now() >= deadline)
        return unavailable_error(what, fmt::format("other writers kept changing it for {}", seconds_text(timeout)));
    }
  }

  void cleanup() override {
    std::vector<std::string> keys;
    {
      std::lock_guard lock(m_keys_mutex);
      keys.swap(m_keys);
    }
    const auto deadline = Clock::now() + std::min(m_op_timeout, k_cleanup_budget);
    for (std::size_t i = 0; i < keys.size(); i += k_deletes_per_txn) {
      json ops = json::array();
      for (std::size_t k = i; k < std::min(keys.size(), i + k_deletes_per_txn); ++k)
        ops.push_back({{"request_delete_range", {{"key", wire_key(keys[k])}}}});
      auto r = call("/v3/kv/txn", json{{"success", ops}}, deadline);
      if (!r) {
        spdlog::debug("{}: cleanup left {} keys: {}", m_uri.text, keys.size() - i, r.error().message());
        return;
      }
    }
  }

  void keep(const std::string& key) override {
    std::lock_guard lock(m_keys_mutex);
    std::erase(m_keys, key);
  }

  std::string describe() const override { return m_uri.text; }

  // A read that any member answers, by `deadline` (open_etcd_store's first contact).
  Status reach(Clock::time_point deadline) {
    auto r = call("/v3/kv/range", json{{"key", wire_key("")}, {"count_only", true}}, deadline);
    if (!r) return with_what(r.error(), fmt::format("cannot reach the store {}", m_uri.text));
    return Ok{};
  }

 private:
  static std::string wire_key(const std::string& key) { return base64_encode(std::string(k_etcd_key_root) + key); }

  static Error with_what(Error e, std::string what) {
    e.what = std::move(what);
    return e;
  }

  Result<KeyState> read(const std::string& key, Clock::time_point deadline) {
    auto r = call("/v3/kv/range", json{{"key", wire_key(key)}}, deadline);
    if (!r) return r.error();
    KeyState s;
    auto kvs = r->find("kvs");
    if (kvs == r->end() || !kvs->is_array() || kvs->empty()) return s;
    const json& kv = kvs->front();
    auto value = base64_decode(kv.value("value", ""));
    if (!value) return unavailable_error("", "a member answered a value that is not base64");
    s.exists = true;
    s.value = std::move(*value);
    s.mod_revision = int_field(kv, "mod_revision");
    return s;
  }

  // Sends one request to the members in turn, starting with the one that answered last, until one
  // answers it or `deadline` passes. Error: every member tried, and why each failed last.
  Result<json> call(std::string_view path, const json& body, Clock::time_point deadline) {
    const std::string text = body.dump();
    const std::size_t n = m_uri.endpoints.size();
    std::vector<std::string> why(n);
    for (;;) {
      const std::size_t first = m_preferred.load();
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t at = (first + i) % n;
        const auto now = Clock::now();
        if (now >= deadline) break;
        const auto& ep = m_uri.endpoints[at];
        std::string failed;
        auto reply = http_post(ep, path, text, std::min(deadline, now + k_etcd_request_timeout), &failed);
        if (reply && reply->status == 200) {
          json doc = json::parse(reply->body, nullptr, false);
          if (!doc.is_discarded() && doc.is_object()) {
            if (at != first) {
              spdlog::info("store {}: {}:{} answers ({}:{}: {})", m_uri.text, ep.host, ep.port,
                           m_uri.endpoints[first].host, m_uri.endpoints[first].port,
                           why[first].empty() ? "skipped" : why[first]);
              m_preferred.store(at);
            }
            return doc;
          }
          failed = "its answer is not JSON";
        } else if (reply) {
          json doc = json::parse(reply->body, nullptr, false);
          const std::string message = !doc.is_discarded() && doc.is_object()
                                          ? doc.value("message", doc.value("error", std::string()))
                                          : reply->body.substr(0, 200);
          // gRPC's InvalidArgument (3): a request no member will take (a value over etcd's limit).
          if (!doc.is_discarded() && doc.is_object() && int_field(doc, "code") == 3)
            return unavailable_error("", fmt::format("{}:{} refused the request: {}", ep.host, ep.port, message),
                                     "keep values under etcd's --max-request-bytes (1.5 MiB by default)");
          failed = fmt::format("HTTP {}: {}", reply->status, message);
        }
        why[at] = failed;
        spdlog::debug("store {}: {}:{} {}: {}", m_uri.text, ep.host, ep.port, path, failed);
      }
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left <= milliseconds(0)) break;
      std::this_thread::sleep_for(std::min(left, k_round_pause));
    }
    std::string tried;
    for (std::size_t i = 0; i < n; ++i)
      tried += fmt::format("{}{}:{}: {}", i ? ", " : "", m_uri.endpoints[i].host, m_uri.endpoints[i].port,
                           why[i].empty() ? "not asked in time" : why[i]);
    return unavailable_error("", fmt::format("no etcd member answered in time ({})", tried),
                             "check that a majority of the etcd cluster runs and that --store lists its members' "
                             "client addresses (etcdctl endpoint health)");
  }

  StoreUri m_uri;
  milliseconds m_op_timeout;
  std::atomic<std::size_t> m_preferred{0};
  std::mutex m_keys_mutex;
  std::vector<std::string> m_keys;  // set by this process, removed by cleanup()
};

}  // namespace

Result<std::unique_ptr<KeyValueStore>> open_etcd_store(const StoreUri& uri, milliseconds timeout) {
  if (uri.kind != StoreUri::Kind::etcd || uri.endpoints.empty())
    return internal_error(fmt::format("{} is no etcd:// store", uri.text));
  auto store = std::make_unique<EtcdKeyValueStore>(uri, timeout);
  if (auto reached = store->reach(Clock::now() + timeout); !reached) return reached.error();
  return std::unique_ptr<KeyValueStore>(std::move(store));
}

}  // namespace scout::transport
