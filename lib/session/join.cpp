#include "lib/session/join.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "lib/transport/tcp_store_dialect.hpp"

namespace scout::session {

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  return host;
}

std::string address_towards(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || res == nullptr) return {};
  std::string out;
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0) {
    if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof local;
      char buf[INET_ADDRSTRLEN] = {};
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
          inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf))
        out = buf;
    }
    close(fd);
  }
  freeaddrinfo(res);
  return out;
}

Result<JoinedStore> join_store(const std::string& job, const std::optional<transport::StoreUri>& store, HostStore host,
                               std::int64_t member, const std::string& listen, std::chrono::milliseconds timeout) {
  JoinedStore out;
  out.uri = store ? *store : transport::default_store_uri(job);
  const bool tcp = out.uri.kind == transport::StoreUri::Kind::tcp;
  // etcd:// is a cluster of its own that scout never hosts: every observer joins it.
  const bool networked = tcp || out.uri.kind == transport::StoreUri::Kind::etcd;
  bool try_host = tcp && (host == HostStore::always || (host == HostStore::auto_observer0 && member == 0));
  const bool may_host = try_host && host == HostStore::auto_observer0;
  const auto began = std::chrono::steady_clock::now();
  bool answered = false;  // a store already answered there when observer 0 looked
  if (may_host) {
    // A store that already answers there (torchrun's agent on this node, a trainer's) is joined
    // without trying to host it: hosting loads the default LibTorch module first (1.13's), which then
    // cannot speak to a torch 2.x store, and observer 0 of a torchrun job went on alone. Nothing
    // listening is refused at once, so hosting a new store costs no wait here.
    using namespace std::chrono_literals;
    auto d = transport::probe_store_dialect(out.uri.host, out.uri.port,
                                            std::min<std::chrono::milliseconds>(timeout, 1500ms));
    if (d != transport::StoreDialect::unknown) {
      spdlog::info("{} already answers ({}): joining it", out.uri.text, transport::store_dialect_name(d));
      try_host = false;
      answered = true;
    }
  }
  using namespace std::chrono_literals;
  const auto left = [&] {
    return std::max<std::chrono::milliseconds>(200ms, timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                    std::chrono::steady_clock::now() - began));
  };
  // A store that answered may be on its way out: torchrun's agent exits with its store once its workers
  // failed, seconds after a node's loss (campaign 4x2, kill of node 3 on torchrun's store, seed 44002: every
  // observer, observer 0 too, timed out joining it after 7.4 s and decided alone). Observer 0 joins it with a
  // short bound first and, where nothing answers any longer, hosts it after all while the others still try.
  auto opened = transport::open_store(out.uri, try_host,
                                      answered ? std::min<std::chrono::milliseconds>(timeout, 2500ms) : timeout);
  if (!opened && answered) {
    const auto d = transport::probe_store_dialect(out.uri.host, out.uri.port, std::min(left(), 1500ms));
    try_host = d == transport::StoreDialect::unknown;
    spdlog::info("joining {} failed ({}); {}", out.uri.text, opened.error().why,
                 try_host ? "nothing answers there now: hosting it" : "it still answers: joining it again");
    opened = transport::open_store(out.uri, try_host, left());
  }
  if (!opened && try_host && may_host) {
    // Someone (the launcher, or a store-host observer) already serves it: join.
    spdlog::info("hosting {} failed ({}); joining it", out.uri.text, opened.error().why);
    opened = transport::open_store(out.uri, false, answered ? left() : timeout);
  }
  if (!opened) return opened.error();
  out.hosted_here = try_host && (*opened)->describe().find("hosted") != std::string::npos;
  out.store = std::move(*opened);
  out.listen_address = listen;
  // The route to the store (etcd: its first member; no packet is sent, so a dead member still gives the
  // interface that reaches the cluster).
  if (out.listen_address.empty() && networked) out.listen_address = address_towards(out.uri.host, out.uri.port);
  return out;
}

bool store_went_away(const JoinedStore& joined) {
  if (joined.uri.kind != transport::StoreUri::Kind::tcp || joined.hosted_here) return false;
  return !joined.store->check("scout/store-alive");
}

Result<JoinedStore> rejoin_store(const std::string& job, const JoinedStore& gone, HostStore host, std::int64_t member,
                                 const std::string& listen, std::chrono::milliseconds budget,
                                 std::vector<std::string>& notes) {
  // Measured, 3 namespace nodes, one powered off, observers on torchrun's store (load 15-20): both other
  // observers joined it, it went away with node 0's agent, and each then read it in vain and decided alone
  // (inconclusive, 4 of 7 runs together with another cause). Here observer 0 hosts it again where nothing
  // answers, the others wait to connect there, and all meet in a new session.
  notes.push_back(fmt::format("the store {} went away after this observer joined it: rejoining", gone.uri.text));
  spdlog::warn("{}", notes.back());
  auto again = join_store(job, gone.uri, host, member, listen, std::max(k_least_rejoin_time, budget * 3 / 4));
  if (!again) notes.push_back(fmt::format("cannot reach the store again: {}", again.error().message()));
  return again;
}

}  // namespace scout::session
