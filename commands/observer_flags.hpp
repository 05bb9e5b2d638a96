// The flags of every command that joins the job's observers in a session
// (probe-hang, observe; replay and straggler next): which job and attempt,
// which rendezvous store and who hosts it, how many observers and which one
// this is, how long it may take, the job token and the Gloo address. One
// place, so they are spelled, documented and validated alike everywhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "lib/session/join.hpp"
#include "lib/transport/store.hpp"

namespace CLI {
class App;
}

namespace scout {

// As parsed (no validation yet).
struct ObserverFlags {
  std::string job;
  std::string attempt;
  std::string store;           // URI; "" = per-job default (nodes > 1 only)
  bool store_host = false;     // tcp://: host the TCPStore here
  bool no_store_host = false;  // tcp://: never host, only join
  std::int64_t nodes = 1;
  std::int64_t node_index = -1;  // -1: the command derives it (probe-hang: from the lowest local rank)
  double timeout_s = 10;
  std::string token_file;
  std::string listen;
};

// Validated.
struct ObserverSettings {
  using HostStore = session::HostStore;
  std::string job;
  std::string attempt;
  std::optional<transport::StoreUri> store;
  HostStore host_store = HostStore::auto_observer0;
  std::int64_t nodes = 1;
  std::optional<std::int64_t> node_index;
  std::chrono::milliseconds timeout{10000};
  std::string token_file;
  std::string listen_address;
};

// The most observers (nodes) a session admits.
inline constexpr std::int64_t k_max_observers = 100000;

// Adds --job --attempt --store --store-host --no-store-host --nodes
// --node-index --timeout --token-file --listen to `cmd`. `timeout_help`
// says what the timeout bounds for this command.
void add_observer_flags(
    CLI::App& cmd, ObserverFlags& flags,
    const std::string& timeout_help =
        "Seconds the whole probe may take; observers that do not answer by then are named unreachable");

// Validates `flags`; throws FatalError (usage) naming the flag that is wrong.
ObserverSettings to_observer_settings(const ObserverFlags& flags);

}  // namespace scout
