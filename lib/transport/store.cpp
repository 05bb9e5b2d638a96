#include "lib/transport/store.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "lib/common/parse.hpp"
#include "lib/plugin/module_loader.hpp"
#include "lib/transport/etcd_store.hpp"
#include "lib/transport/net_module.hpp"
#include "lib/transport/tcp_store_abi.hpp"
#include "lib/transport/tcp_store_dialect.hpp"

namespace scout::transport {

namespace {

// One HOST:PORT of --store `text` (IPv6 hosts in brackets); `form` is what the user should write.
Result<StoreEndpoint> parse_endpoint(std::string_view item, const std::string& text, std::string_view form) {
  const auto colon = item.rfind(':');
  if (item.empty() || colon == std::string_view::npos || colon == 0)
    return usage_error(fmt::format("--store {}: expected {}", text, form),
                       item.empty() ? "an address is empty" : fmt::format("'{}' has no port", item));
  StoreEndpoint ep;
  ep.host = std::string(item.substr(0, colon));
  if (ep.host.size() > 2 && ep.host.front() == '[' && ep.host.back() == ']')
    ep.host = ep.host.substr(1, ep.host.size() - 2);
  auto port = parse_int(item.substr(colon + 1), "--store port");
  if (!port || *port < 1 || *port > 65535)
    return usage_error(fmt::format("--store {}: the port must be a number from 1 to 65535", text),
                       fmt::format("'{}' in '{}'", item.substr(colon + 1), item));
  ep.port = static_cast<std::uint16_t>(*port);
  return ep;
}

}  // namespace

Result<StoreUri> parse_store_uri(const std::string& text) {
  StoreUri uri;
  uri.text = text;
  constexpr std::string_view k_file = "file://", k_tcp = "tcp://", k_etcd = "etcd://";
  std::string_view t = text;
  if (t.starts_with(k_file)) {
    uri.kind = StoreUri::Kind::file;
    uri.path = std::string(t.substr(k_file.size()));
    if (uri.path.empty() || uri.path.front() != '/')
      return usage_error(fmt::format("--store {}: the directory must be an absolute path", text), {},
                         "write file:///shared/dir (three slashes)");
    return uri;
  }
  if (t.starts_with(k_tcp)) {
    uri.kind = StoreUri::Kind::tcp;
    auto ep = parse_endpoint(t.substr(k_tcp.size()), text, "tcp://HOST:PORT");
    if (!ep) return ep.error();
    uri.host = ep->host;
    uri.port = ep->port;
    return uri;
  }
  if (t.starts_with(k_etcd)) {
    uri.kind = StoreUri::Kind::etcd;
    std::string_view rest = t.substr(k_etcd.size());
    constexpr std::string_view k_form = "etcd://HOST:PORT[,HOST:PORT...] (the members' client addresses)";
    for (;;) {
      const auto comma = rest.find(',');
      auto ep = parse_endpoint(rest.substr(0, comma), text, k_form);
      if (!ep) return ep.error();
      for (const auto& seen : uri.endpoints)
        if (seen.host == ep->host && seen.port == ep->port)
          return usage_error(fmt::format("--store {}: {}:{} is listed twice", text, ep->host, ep->port), {},
                             "name each etcd member once");
      uri.endpoints.push_back(*ep);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
    uri.host = uri.endpoints.front().host;
    uri.port = uri.endpoints.front().port;
    return uri;
  }
  return usage_error(fmt::format("--store {}: unknown store kind", text),
                     "scout knows file://DIR, tcp://HOST:PORT and etcd://HOST:PORT[,HOST:PORT...]");
}

StoreUri default_store_uri(const std::string& job) {
  std::string safe;
  for (char c : job.substr(0, 100))
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  struct stat st {};
  std::string base = ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
  StoreUri uri;
  uri.kind = StoreUri::Kind::file;
  uri.path = fmt::format("{}/scout-store-{}-{}", base, getuid(), safe);
  uri.text = "file://" + uri.path;
  uri.remove_when_unused = true;
  return uri;
}

namespace {

// A store directory this process uses, held by a shared flock on the
// directory itself. The last user to let go (the one that then gets the lock
// exclusively) removes the directory with everything in it; a process that
// opens the path while it is being removed waits for the removal and makes it
// anew (the path then names another inode than the one it locked).
class DirectoryLease {
 public:
  static Result<std::unique_ptr<DirectoryLease>> take(const std::string& path, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
        return unavailable_error(fmt::format("cannot create the store directory {}", path), std::strerror(errno),
                                 "give --store file://DIR with a directory you can write");
      int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0 && errno != ENOENT)
        return unavailable_error(fmt::format("cannot open the store directory {}", path), std::strerror(errno));
      if (fd >= 0) {
        bool locked = false;
        while (!(locked = ::flock(fd, LOCK_SH | LOCK_NB) == 0) && (errno == EWOULDBLOCK || errno == EINTR) &&
               std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        struct stat held {
        }, named{};
        if (locked && ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino)
          return std::unique_ptr<DirectoryLease>(new DirectoryLease(path, fd));
        ::close(fd);  // removed by its last user meanwhile: make it anew
      }
      if (std::chrono::steady_clock::now() >= deadline)
        return unavailable_error(fmt::format("timed out taking the store directory {}", path),
                                 "another scout process keeps removing it");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  ~DirectoryLease() {
    // Exclusive means no other process holds it: nobody else uses the store now, and a
    // newcomer waits (see take). Converting may drop the shared lock first; we leave anyway.
    if (::flock(m_fd, LOCK_EX | LOCK_NB) == 0) {
      std::error_code ec;
      std::filesystem::remove_all(m_path, ec);
    }
    ::close(m_fd);
  }
  DirectoryLease(const DirectoryLease&) = delete;
  DirectoryLease& operator=(const DirectoryLease&) = delete;

 private:
  DirectoryLease(std::string path, int fd) : m_path(std::move(path)), m_fd(fd) {}
  std::string m_path;
  int m_fd;
};

// A FileStore (the network module's) and the lease of its directory, released after it.
class LeasedStore final : public KeyValueStore {
 public:
  LeasedStore(std::unique_ptr<DirectoryLease> lease, std::unique_ptr<KeyValueStore> store)
      : m_lease(std::move(lease)), m_store(std::move(store)) {}
  Status set(const std::string& key, const std::vector<char>& value) override { return m_store->set(key, value); }
  Result<std::vector<char>> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return m_store->get(key, timeout);
  }
  Result<bool> check(const std::string& key) override { return m_store->check(key); }
  Result<std::int64_t> add(const std::string& key, std::int64_t delta, std::chrono::milliseconds timeout) override {
    return m_store->add(key, delta, timeout);
  }
  void cleanup() override { m_store->cleanup(); }
  void keep(const std::string& key) override { m_store->keep(key); }
  std::string describe() const override { return m_store->describe(); }

 private:
  std::unique_ptr<DirectoryLease> m_lease;  // declared first: destroyed after the store
  std::unique_ptr<KeyValueStore> m_store;
};

// The LibTorch module's TCPStore, through its C ABI.
struct TcpAbi {
  scout_tcp_store_open_fn open = nullptr;
  scout_tcp_store_set_fn set = nullptr;
  scout_tcp_store_get_fn get = nullptr;
  scout_tcp_store_check_fn check = nullptr;
  scout_tcp_store_add_fn add = nullptr;
  scout_tcp_store_delete_fn remove = nullptr;
  scout_tcp_store_free_fn free = nullptr;
  scout_tcp_store_close_fn close = nullptr;
};

Result<TcpAbi> load_tcp_abi() {
  TcpAbi abi;
  const char* names[] = {"scout_tcp_store_open",  "scout_tcp_store_set",    "scout_tcp_store_get",
                         "scout_tcp_store_check", "scout_tcp_store_delete", "scout_tcp_store_free",
                         "scout_tcp_store_close", "scout_tcp_store_add"};
  void* syms[8] = {};
  for (int i = 0; i < 8; ++i) {
    auto s = torch_module_symbol(names[i]);
    if (!s) return s.error();
    syms[i] = *s;
  }
  abi.open = reinterpret_cast<scout_tcp_store_open_fn>(syms[0]);
  abi.set = reinterpret_cast<scout_tcp_store_set_fn>(syms[1]);
  abi.get = reinterpret_cast<scout_tcp_store_get_fn>(syms[2]);
  abi.check = reinterpret_cast<scout_tcp_store_check_fn>(syms[3]);
  abi.remove = reinterpret_cast<scout_tcp_store_delete_fn>(syms[4]);
  abi.free = reinterpret_cast<scout_tcp_store_free_fn>(syms[5]);
  abi.close = reinterpret_cast<scout_tcp_store_close_fn>(syms[6]);
  abi.add = reinterpret_cast<scout_tcp_store_add_fn>(syms[7]);
  return abi;
}

class TcpKeyValueStore final : public KeyValueStore {
 public:
  TcpKeyValueStore(TcpAbi abi, void* handle, std::string text)
      : m_abi(abi), m_handle(handle), m_text(std::move(text)) {}
  ~TcpKeyValueStore() override { m_abi.close(m_handle); }

  Status set(const std::string& key, const std::vector<char>& value) override {
    char err[512] = {};
    if (m_abi.set(m_handle, key.c_str(), value.data(), value.size(), err, sizeof err) != 0)
      return unavailable_error(fmt::format("cannot write key {} to the store {}", key, m_text), err);
    m_keys.push_back(key);
    return Ok{};
  }
  Result<std::vector<char>> get(const std::string& key, std::chrono::milliseconds timeout) override {
    char err[512] = {};
    void* out = nullptr;
    std::size_t len = 0;
    if (m_abi.get(m_handle, key.c_str(), timeout.count(), &out, &len, err, sizeof err) != 0)
      return unavailable_error(fmt::format("key {} did not appear in the store {}", key, m_text), err);
    std::vector<char> v(static_cast<char*>(out), static_cast<char*>(out) + len);
    m_abi.free(out);
    return v;
  }
  Result<bool> check(const std::string& key) override {
    char err[512] = {};
    int exists = 0;
    if (m_abi.check(m_handle, key.c_str(), &exists, err, sizeof err) != 0)
      return unavailable_error(fmt::format("cannot read the store {}", m_text), err);
    return exists != 0;
  }
  Result<std::int64_t> add(const std::string& key, std::int64_t delta, std::chrono::milliseconds) override {
    // c10d's TCPStore bounds each request by the timeout it was opened with.
    char err[512] = {};
    std::int64_t value = 0;
    if (m_abi.add(m_handle, key.c_str(), delta, &value, err, sizeof err) != 0)
      return unavailable_error(fmt::format("cannot update counter {} in the store {}", key, m_text), err);
    return value;
  }
  void cleanup() override {
    for (const auto& k : m_keys) m_abi.remove(m_handle, k.c_str());
    m_keys.clear();
  }
  void keep(const std::string& key) override { std::erase(m_keys, key); }
  std::string describe() const override { return m_text; }

 private:
  TcpAbi m_abi;
  void* m_handle;
  std::string m_text;
  std::vector<std::string> m_keys;
};

}  // namespace

Result<std::unique_ptr<KeyValueStore>> open_store(const StoreUri& uri, bool host_server,
                                                  std::chrono::milliseconds timeout) {
  if (uri.kind == StoreUri::Kind::etcd) return open_etcd_store(uri, timeout);  // never hosted here
  if (uri.kind == StoreUri::Kind::file) {
    std::unique_ptr<DirectoryLease> lease;
    if (uri.remove_when_unused) {
      auto taken = DirectoryLease::take(uri.path, timeout);
      if (!taken) return taken.error();
      lease = std::move(*taken);
    }
    if (::mkdir(uri.path.c_str(), 0700) != 0 && errno != EEXIST)
      return unavailable_error(fmt::format("cannot create the store directory {}", uri.path), std::strerror(errno),
                               "give --store file://DIR with a directory you can write");
    struct stat st {};
    if (::stat(uri.path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return unavailable_error(fmt::format("the store path {} is not a directory", uri.path));
    if (::access(uri.path.c_str(), W_OK | X_OK) != 0)
      return unavailable_error(fmt::format("the store directory {} is not writable", uri.path), std::strerror(errno));
    auto net = net_module();
    if (!net) return net.error();
    Result<std::unique_ptr<KeyValueStore>> store = internal_error("the network module opened no store");
    (*net)->open_file_store(uri.path, store);
    if (!store || !lease) return store;
    return std::unique_ptr<KeyValueStore>(std::make_unique<LeasedStore>(std::move(lease), std::move(*store)));
  }
  // A store another process hosts (torchrun's, a trainer's): its TCPStore protocol decides which
  // module's client can talk to it (1.13's and 2.x's are incompatible both ways).
  StoreDialect dialect = StoreDialect::unknown;
  if (!host_server) {
    // Find out first, within the timeout and without LibTorch, whether a store answers there at all:
    // c10d's client blocks without a bound on a server that accepts but never answers.
    using std::chrono::milliseconds;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (auto why = await_listener(uri.host, uri.port, timeout); !why.empty())
      return unavailable_error(fmt::format("cannot reach the store {}", uri.text),
                               fmt::format("{} (tried for {:.1f} s)", why, static_cast<double>(timeout.count()) / 1000),
                               "start the store first (--store-host on one observer, or the launcher's), or check "
                               "--store's host and port");
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    auto waited = std::clamp(left, milliseconds(1), milliseconds(1500));
    dialect = probe_store_dialect(uri.host, uri.port, waited);
    if (dialect == StoreDialect::silent) {  // once more, longer: a server on a loaded host may be slow
      waited = std::clamp(left - waited, milliseconds(1), milliseconds(5000));
      dialect = probe_store_dialect(uri.host, uri.port, waited);
    }
    spdlog::debug("store {} speaks the TCPStore protocol of {}", uri.text, store_dialect_name(dialect));
    if (dialect == StoreDialect::silent)
      // Either torch's client would block in its first reply's recv, past every timeout of ours
      // (measured: torch 1.13's add() on a SIGSTOPped 2.x server, probe-hang --timeout 5 still there at 120 s).
      return unavailable_error(
          fmt::format("the store {} accepted a connection but never answered", uri.text),
          fmt::format("it answered neither torch 1.x's nor torch 2.x's TCPStore query within {:.1f} s: the process "
                      "that hosts it is not running (stopped, in a frozen cgroup, under a debugger), or it is "
                      "another service",
                      static_cast<double>(waited.count()) / 1000),
          "check --store's host and port (the observers' store, not a trainer's port) and the process that hosts "
          "it (torchrun's agent on that node), or give --store a store hosted elsewhere (--store-host on a healthy "
          "node, or file://DIR)");
    if (dialect == StoreDialect::torch1)
      return unavailable_error(
          fmt::format("the store {} speaks the TCPStore protocol of torch 1.x", uri.text),
          "scout's LibTorch module speaks torch 2.x's (torch 1.x and 2.x TCPStore clients and servers cannot talk "
          "to each other), and scout no longer supports torch 1.x jobs",
          "run the job on torch 2.x, or give the observers a store of their own (--store file://DIR, or "
          "--store-host on one node)");
  }
  auto abi = load_tcp_abi();
  if (!abi)
    return unavailable_error(fmt::format("the tcp:// store needs scout's LibTorch module: {}", abi.error().what),
                             abi.error().why, "use --store file://DIR, or install libscout_torch.so next to scout");
  char err[512] = {};
  void* h = abi->open(uri.host.c_str(), uri.port, host_server ? 1 : 0, timeout.count(), err, sizeof err);
  if (h == nullptr)
    return unavailable_error(fmt::format("cannot {} the store {}", host_server ? "host" : "reach", uri.text), err,
                             host_server ? "is the port in use? choose another one"
                                         : "start it with --store-host on one node, or check host and port");
  return std::unique_ptr<KeyValueStore>(
      std::make_unique<TcpKeyValueStore>(*abi, h, uri.text + (host_server ? " (hosted here)" : "")));
}

}  // namespace scout::transport
