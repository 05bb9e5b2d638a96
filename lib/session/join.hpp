// How an observer reaches the job's rendezvous store: the choices every
// command that joins observers shares (commands/observer_flags.hpp parses
// them), and the address its Gloo device should bind.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/transport/store.hpp"

namespace scout::session {

// tcp://: host the TCPStore here (always), never, or when this is observer 0 and no store answers yet.
enum class HostStore { never, always, auto_observer0 };

struct JoinedStore {
  std::unique_ptr<transport::KeyValueStore> store;
  transport::StoreUri uri;
  bool hosted_here = false;
  std::string listen_address;  // what the Gloo device should bind ("" = automatic)
};

// Opens `store` (absent: the per-job default directory) for observer
// `member`, hosting a tcp:// store per `host` (auto: observer 0 hosts, and
// joins instead when one already answers; an etcd:// cluster is always joined). `listen` ""
// picks the address that routes to a tcp:// store or to an etcd:// store's first member. Errors: the store cannot be
// reached or hosted.
Result<JoinedStore> join_store(const std::string& job, const std::optional<transport::StoreUri>& store, HostStore host,
                               std::int64_t member, const std::string& listen, std::chrono::milliseconds timeout);

// A rejoin is tried only with at least this much of a command's time left.
inline constexpr std::chrono::milliseconds k_least_rejoin_time{1500};

// Whether the tcp:// store this observer joined no longer answers: its connection was closed (the launcher that
// hosted it exited). A store hosted here, a replicated etcd:// store and a store directory are never rejoined.
bool store_went_away(const JoinedStore& joined);

// Joins `gone`'s store again at the same address once it went away (store_went_away), within 3/4 of `budget` (at
// least k_least_rejoin_time): observer 0 (host auto) hosts it where nothing answers, the others wait for it there.
// `notes` receives why, and why it failed. Each command rejoins at most once per run (probe-hang: its one gather;
// straggler: its rounds). Errors: the store cannot be reached or hosted again.
Result<JoinedStore> rejoin_store(const std::string& job, const JoinedStore& gone, HostStore host, std::int64_t member,
                                 const std::string& listen, std::chrono::milliseconds budget,
                                 std::vector<std::string>& notes);

// The local address that routes to host:port (no packet is sent), or "".
std::string address_towards(const std::string& host, std::uint16_t port);

// This host's name ("localhost" when it has none).
std::string host_name();

}  // namespace scout::session
