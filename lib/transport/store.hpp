// The rendezvous store observers meet through
// (docs/contracts.md "Rendezvous and transport"): file://DIR (Gloo's FileStore), tcp://HOST:PORT (c10d's
// TCPStore from the LibTorch module, hosted by scout or joined) or etcd://HOST:PORT,... (an etcd v3
// cluster, never hosted by scout: lib/transport/etcd_store.hpp). Values are
// plain bytes; every blocking call takes a timeout; errors are values.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/common/error.hpp"

namespace scout::transport {

// One host:port of a store (an etcd member's client URL).
struct StoreEndpoint {
  std::string host;
  std::uint16_t port = 0;
};

// A parsed --store URI.
struct StoreUri {
  enum class Kind { file, tcp, etcd };
  Kind kind = Kind::file;
  std::string path;        // file: the directory
  std::string host;        // tcp: host name or address
  std::uint16_t port = 0;  // tcp: port
  std::string text;        // as written
  // file: the directory is scout's own (default_store_uri): removed, with
  // everything in it, when the last process using it closes its store.
  bool remove_when_unused = false;
  std::vector<StoreEndpoint> endpoints;  // etcd: the members' client addresses, in the order given
};

// Parses "file://DIR", "tcp://HOST:PORT" or "etcd://HOST:PORT[,HOST:PORT...]"; usage errors
// name what is wrong.
Result<StoreUri> parse_store_uri(const std::string& text);

// A key-value store shared by a probe's observers.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // Sets `key` to `value` (non-empty). Session keys are written once per probe; a key set
  // again is replaced (presence entries: a ring slot reused, an entry marked ended).
  virtual Status set(const std::string& key, const std::vector<char>& value) = 0;
  // Value of `key`, waiting up to `timeout` for it to appear.
  virtual Result<std::vector<char>> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Whether `key` exists now (never blocks on the key).
  virtual Result<bool> check(const std::string& key) = 0;
  // Atomically adds `delta` to the integer counter at `key` (created at 0) and
  // returns the new value; add(key, 0) reads it. Counters outlive cleanup().
  virtual Result<std::int64_t> add(const std::string& key, std::int64_t delta, std::chrono::milliseconds timeout) = 0;
  // Removes the keys this process set (best effort; FileStore never deletes otherwise).
  virtual void cleanup() = 0;
  // "file:///dir", "tcp://host:port (hosted)" or "etcd://h1:p1,h2:p2": for messages.
  virtual std::string describe() const = 0;
  // cleanup() leaves `key` (set by this process, last set before this call) where it is.
  virtual void keep(const std::string& key) = 0;
};

// Opens the store of `uri`. `host_server`: for tcp://, host the TCPStore in
// this process (else join a running one; etcd:// is never hosted). `timeout` bounds connecting
// (etcd://: until one member answers) and, for etcd://, each later set/check/add.
// file:// creates the directory (0700) when it is missing.
Result<std::unique_ptr<KeyValueStore>> open_store(const StoreUri& uri, bool host_server,
                                                  std::chrono::milliseconds timeout);

// The default store for observers on one host when --store is absent: a
// per-user, per-job directory under /dev/shm (or /tmp), created 0700 and
// removed when the last observer using it closes its store (even when the
// command ends in an error or a timeout), so that nothing stays behind.
StoreUri default_store_uri(const std::string& job);

}  // namespace scout::transport
