// One Gloo TCP context over an agreed, renumbered set of processes, formed
// through a KeyValueStore prefix, with every collective bounded by a timeout
// and every Gloo exception turned into an Error. This is the transport layer
// below lib/session: it knows nothing of membership, authentication or
// re-forming. Gloo itself (and the libibverbs, libnl and hiredis it links) is
// in scout's network module, libscout_net.so, loaded by the first call here
// (lib/transport/net_module.hpp), so commands that never meet peers do not
// pay its start-up. A Gloo context is unusable after any error (DEPENDENCIES.md
// "Gloo behavior"): once an operation failed, poisoned() is true and every
// later call fails at once; the caller forms a new group over a new prefix.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/transport/store.hpp"

namespace gloo {
namespace transport {
class Device;
}
}  // namespace gloo

namespace scout::transport {

// The TCP device of this process (one per process, shared by every group it
// forms). `address` "" = this host's name when it resolves, else 127.0.0.1.
Result<std::shared_ptr<gloo::transport::Device>> make_tcp_device(const std::string& address);

// What one process sent and received through its groups (payload bytes of
// the collectives, as the algorithms move them) and how many pairs it opened.
struct TrafficCounters {
  std::uint64_t bytes_out = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t connections = 0;  // pairs connected (size - 1 per group formed)
  std::uint64_t collectives = 0;  // Gloo calls made (each one is >= 1 latency round)
};

// How long GlooGroup::connect waits for one pair's connection once its peer's
// address is known (a live peer in the same formation answers in
// milliseconds; one that left the formation never does): a quarter of the
// connect timeout, from 2 s to 5 s, never more than the timeout.
inline std::chrono::milliseconds pair_connect_wait(std::chrono::milliseconds timeout) {
  using std::chrono::milliseconds;
  return std::min(timeout, std::clamp(timeout / 4, milliseconds(2000), milliseconds(5000)));
}

class GlooGroup {
 public:
  // Connects `rank` of `size` through the store keys under `prefix` (Gloo's
  // full mesh of the group, size - 1 pairs per process). `timeout` bounds the
  // rendezvous (waiting for the peers' addresses in the store) and is the
  // default for the collectives; each pair then connects within
  // pair_connect_wait(timeout).
  static Result<std::unique_ptr<GlooGroup>> connect(KeyValueStore& store, const std::string& prefix, int rank, int size,
                                                    const std::shared_ptr<gloo::transport::Device>& device,
                                                    std::chrono::milliseconds timeout, TrafficCounters* counters);
  virtual ~GlooGroup() = default;
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  int rank() const { return m_rank; }
  int size() const { return m_size; }
  bool poisoned() const { return m_poisoned; }

  // Every rank's `mine` (the same number of 64-bit words on every rank), in rank order.
  virtual Result<std::vector<std::uint64_t>> all_gather_words(const std::vector<std::uint64_t>& mine,
                                                              std::chrono::milliseconds timeout) = 0;
  // Concatenation of every rank's `mine`; `sizes` (in rank order, agreed
  // beforehand, sizes[rank()] == mine.size()) says how long each one is.
  virtual Result<std::vector<std::uint8_t>> all_gather_bytes(const std::vector<std::uint8_t>& mine,
                                                             const std::vector<std::uint64_t>& sizes,
                                                             std::chrono::milliseconds timeout) = 0;
  // `size` bytes from `root` (its `data`; others pass anything) to every rank.
  virtual Result<std::vector<std::uint8_t>> broadcast_bytes(int root, const std::vector<std::uint8_t>& data,
                                                            std::uint64_t size, std::chrono::milliseconds timeout) = 0;
  virtual Status barrier(std::chrono::milliseconds timeout) = 0;

 protected:
  // The implementation is Gloo's, in scout's network module (lib/transport/net_module.hpp).
  GlooGroup() = default;
  int m_rank = 0;
  int m_size = 1;
  bool m_poisoned = false;
};

}  // namespace scout::transport
