// The local replay peers: forked processes, each one peer of the run (runner.hpp), and what they gathered.
#include "lib/replay/local_peers.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "lib/common/file.hpp"
#include "lib/session/join.hpp"

namespace scout::replay {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

Result<std::string> make_store_dir() {
  const char* base =
      fs::is_directory("/dev/shm") ? "/dev/shm" : (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  std::string tmpl = fmt::format("{}/scout-replay-XXXXXX", base);
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    return unavailable_error(fmt::format("cannot create a store directory under {}", base), std::strerror(errno),
                             "free space or set TMPDIR");
  return std::string(buf.data());
}

// Where the peers of one run meet: a store and whether this peer hosts it.
struct PeerStore {
  transport::StoreUri uri;
  bool host = false;
};

// The child: one peer; writes what it gathered to DIR/out-<i>.json (i: its local index).
[[noreturn]] void peer_main(const std::string& dir, std::int64_t local, const PeerStore& ps, const PeerRunOptions& po) {
  int code = 0;
  try {
    setenv("SCOUT_REPLAY_PEER", std::to_string(po.peer).c_str(), 1);
    auto store = transport::open_store(ps.uri, ps.host, po.timeout);
    nlohmann::json out;
    if (!store) {
      out = {{"error", store.error().message()}};
      code = 5;
    } else {
      auto r = run_peer(**store, po);
      if (!r) {
        out = {{"error", r.error().message()}, {"code", to_int(r.error().code)}};
        code = 5;
      } else {
        nlohmann::json all = nlohmann::json::array();
        for (const auto& e : r->all) all.push_back(e ? to_json(*e) : nlohmann::json());
        out = {{"all", all}, {"notes", r->notes}};
      }
      if (ps.uri.kind == transport::StoreUri::Kind::tcp)
        wait_all_done(**store, po.key_namespace, po.peers, po.timeout, true, ps.host);
    }
    const std::string text = out.dump();
    if (auto w = atomic_write_file(fmt::format("{}/out-{}.json", dir, local), text); !w) code = 5;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scout replay: peer %lld: %s\n", static_cast<long long>(po.peer), e.what());
    code = 70;
  }
  std::fflush(nullptr);
  _exit(code);
}

}  // namespace

void wait_all_done(transport::KeyValueStore& store, const std::string& key_namespace, std::int64_t peers,
                   std::chrono::milliseconds timeout, bool count_self, bool host) {
  const std::string key = key_namespace + "/done";
  if (count_self) (void)store.add(key, 1, timeout);
  if (!host) return;
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    auto n = store.add(key, 0, timeout);
    if (!n || *n >= peers) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string peer_listen_address(const std::optional<transport::StoreUri>& shared, std::int64_t nodes) {
  if (!shared || nodes <= 1) return "127.0.0.1";
  if (shared->kind == transport::StoreUri::Kind::tcp || shared->kind == transport::StoreUri::Kind::etcd)
    return session::address_towards(shared->host, shared->port);  // etcd: its first member
  return {};
}

Result<PeersOutcome> run_local_peers(const LocalPeersOptions& o, const std::vector<RecipeInstance>& recipes,
                                     const std::vector<Injection>& injections,
                                     const std::optional<transport::StoreUri>& shared, std::int64_t node_index,
                                     std::int64_t nodes, const std::string& ns, bool parent_hosts) {
  auto made = make_store_dir();
  if (!made) return made.error();
  const std::string dir = *made;
  const auto timeout = o.timeout;
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (std::int64_t i = 0; i < o.peers; ++i) {
    PeerRunOptions po;
    po.recipes = recipes;
    po.peer = node_index * o.peers + i;
    po.peers = nodes * o.peers;
    po.seed = o.seed;
    po.threads = o.threads;
    po.repeat = o.repeat;
    po.device = o.device == "cuda" ? fmt::format("cuda:{}", po.peer) : o.device;  // modulo the GPUs there
    po.key_namespace = ns;
    po.timeout = timeout;
    po.injections = injections;
    po.rank = po.peer;
    po.compute_lock = dir + "/compute.lock";  // timed one at a time, on the CPUs or on a GPU they share
    po.listen_address = peer_listen_address(shared, nodes);
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    po.node = host;
    PeerStore ps;
    if (shared) {
      ps.uri = *shared;
      ps.host = shared->kind == transport::StoreUri::Kind::tcp && node_index == 0 && i == 0 && !parent_hosts;
    } else {
      ps.uri = transport::StoreUri{};  // file://
      ps.uri.path = dir + "/store";
      ps.uri.text = "file://" + ps.uri.path;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      for (auto p : pids) kill(p, SIGKILL);
      for (auto p : pids) waitpid(p, nullptr, 0);
      std::error_code ec;
      fs::remove_all(dir, ec);
      return unavailable_error("cannot start peer processes", std::strerror(errno), "free resources and retry");
    }
    if (pid == 0) peer_main(dir, i, ps, po);
    pids.push_back(pid);
  }
  // Every transport step is bounded; the whole run is too.
  const auto deadline =
      Clock::now() + timeout * static_cast<std::int64_t>(2 * recipes.size() + 4) + std::chrono::seconds(30);
  PeersOutcome res;
  auto& codes = res.codes;
  codes.assign(pids.size(), -1);
  std::size_t left = pids.size();
  while (left > 0) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -1) continue;
      int st = 0;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
    }
    if (left == 0) break;
    if (Clock::now() > deadline) {
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (codes[i] == -1) kill(pids[i], SIGKILL);
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (codes[i] == -1) {
          waitpid(pids[i], nullptr, 0);
          codes[i] = 137;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  // The first peer that gathered decides (every peer holds the same evidence).
  std::optional<nlohmann::json> gathered;
  for (std::int64_t i = 0; i < o.peers; ++i) {
    const std::int64_t g = node_index * o.peers + i;
    auto text = read_small_file(fmt::format("{}/out-{}.json", dir, i));
    if (!text) {
      res.errors.push_back(fmt::format("peer {} wrote nothing (exit {})", g, codes[static_cast<std::size_t>(i)]));
      continue;
    }
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object() && j.contains("all") && j["all"].is_array() && !gathered) {
      gathered = j["all"];
      for (const auto& n : j.value("notes", nlohmann::json::array()))
        res.notes.push_back(fmt::format("peer {}: {}", g, n.get<std::string>()));
    } else if (j.is_object() && j.contains("error") && j["error"].is_string()) {
      res.errors.push_back(fmt::format("peer {}: {}", g, j["error"].get<std::string>()));
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!gathered) {
    const bool module_missing = !res.errors.empty() && res.errors[0].find("module") != std::string::npos;
    return unavailable_error(
        "replay: no peer gathered the evidence", res.errors.empty() ? "every peer failed" : res.errors[0],
        module_missing ? "build scout with LibTorch (-DSCOUT_WITH_TORCH=ON) or set SCOUT_TORCH_MODULE"
                       : "rerun with --log-level info; raise --timeout on a loaded machine");
  }
  for (const auto& e : *gathered) {
    if (e.is_null()) {
      res.evidence.emplace_back(std::nullopt);
      continue;
    }
    auto pe = peer_evidence_from_json(e);
    res.evidence.emplace_back(pe ? std::optional(std::move(*pe)) : std::nullopt);
  }
  return res;
}

}  // namespace scout::replay
