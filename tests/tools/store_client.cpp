// A store client for the store integration tests (tests/integration/test_etcd_store.py): opens
// --store's URI as an observer does (transport::open_store, never hosting) and runs the operations
// given, in order, printing one JSON line per operation with its result and how long it took.
//
//   scout_test_store_client URI TIMEOUT_MS OP...
//   OP: set:KEY=VALUE  get:KEY  check:KEY  add:KEY=DELTA  adds:KEY=COUNT (COUNT add(KEY, 1))
//       cleanup  keep:KEY
// The first line is the open ({"op":"open",...}). Exits 0 when every operation succeeded, 1 when
// one failed (the rest are not run), 2 on bad usage.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "lib/common/parse.hpp"
#include "lib/transport/store.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void print(const nlohmann::json& line) {
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace scout;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s URI TIMEOUT_MS OP...\n", argv[0]);
    return 2;
  }
  auto uri = transport::parse_store_uri(argv[1]);
  auto timeout_ms = parse_int(argv[2], "TIMEOUT_MS");
  if (!uri || !timeout_ms) {
    std::fprintf(stderr, "%s\n", (!uri ? uri.error() : timeout_ms.error()).message().c_str());
    return 2;
  }
  const std::chrono::milliseconds timeout(*timeout_ms);
  spdlog::set_default_logger(spdlog::stderr_logger_mt("store_client"));  // stdout holds the results
  auto t = Clock::now();
  auto opened = transport::open_store(*uri, false, timeout);
  if (!opened) {
    print({{"op", "open"}, {"ok", false}, {"error", opened.error().message()}, {"ms", ms_since(t)}});
    return 1;
  }
  print({{"op", "open"}, {"ok", true}, {"store", (*opened)->describe()}, {"ms", ms_since(t)}});
  transport::KeyValueStore& store = **opened;
  for (int i = 3; i < argc; ++i) {
    const std::string op = argv[i];
    const auto colon = op.find(':');
    const std::string name = op.substr(0, colon);
    const std::string arg = colon == std::string::npos ? "" : op.substr(colon + 1);
    const auto eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    nlohmann::json line = {{"op", name}, {"key", key}};
    std::string error;
    t = Clock::now();
    if (name == "set") {
      auto r = store.set(key, std::vector<char>(value.begin(), value.end()));
      if (!r) error = r.error().message();
    } else if (name == "get") {
      auto r = store.get(key, timeout);
      if (r)
        line["value"] = std::string(r->begin(), r->end());
      else
        error = r.error().message();
    } else if (name == "check") {
      auto r = store.check(key);
      if (r)
        line["exists"] = *r;
      else
        error = r.error().message();
    } else if (name == "add" || name == "adds") {
      auto n = parse_int(value, "DELTA");
      if (!n) {
        std::fprintf(stderr, "%s\n", n.error().message().c_str());
        return 2;
      }
      nlohmann::json values = nlohmann::json::array();
      for (std::int64_t k = 0; k < (name == "adds" ? *n : 1) && error.empty(); ++k) {
        auto r = store.add(key, name == "adds" ? 1 : *n, timeout);
        if (r)
          values.push_back(*r);
        else
          error = r.error().message();
      }
      line["values"] = values;
    } else if (name == "cleanup") {
      store.cleanup();
    } else if (name == "keep") {
      store.keep(key);
    } else {
      std::fprintf(stderr, "unknown operation %s\n", op.c_str());
      return 2;
    }
    line["ok"] = error.empty();
    if (!error.empty()) line["error"] = error;
    line["ms"] = ms_since(t);
    print(line);
    if (!error.empty()) return 1;
  }
  return 0;
}
