// Gloo's side of lib/transport/gloo_group.hpp: built into scout's network
// module (libscout_net.so, lib/transport/net_module.hpp), never into scout_core.
#include "lib/transport/gloo_group.hpp"

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <mutex>
#include <thread>

#include "lib/transport/net_module_impl.hpp"

namespace scout::transport {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds left(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

// Gloo's store interface over a KeyValueStore under a prefix; errors become
// gloo::IoException, the exception Gloo's rendezvous expects.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(KeyValueStore& kv, std::string prefix, Clock::time_point deadline)
      : m_kv(kv), m_prefix(std::move(prefix)), m_deadline(deadline) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    auto s = m_kv.set(m_prefix + key, data);
    if (!s) throw gloo::IoException(s.error().message());
  }
  std::vector<char> get(const std::string& key) override {
    auto v = m_kv.get(m_prefix + key, left(m_deadline));
    if (!v) throw gloo::IoException(v.error().message());
    return *v;
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, left(m_deadline)); }
  // Gloo passes its context timeout, which connect() sets to the pair wait;
  // the rendezvous itself is bounded by this adapter's deadline.
  void wait(const std::vector<std::string>& keys, const milliseconds& /*gloo_timeout*/) override {
    const auto until = m_deadline;
    for (const auto& k : keys) {
      while (true) {
        auto c = m_kv.check(m_prefix + k);
        if (!c) throw gloo::IoException(c.error().message());
        if (*c) break;
        if (Clock::now() >= until) throw gloo::IoException(fmt::format("timed out waiting for store key {}", k));
        std::this_thread::sleep_for(milliseconds(5));
      }
    }
  }

 private:
  KeyValueStore& m_kv;
  std::string m_prefix;
  Clock::time_point m_deadline;
};

// Children of `rank` in a binomial broadcast tree rooted at `root` over `size` ranks.
std::uint64_t binomial_children(int rank, int root, int size) {
  const int v = (rank - root + size) % size;
  std::uint64_t children = 0;
  for (int mask = 1; mask < size; mask <<= 1) {
    if (v & mask) break;
    if (v + mask < size) ++children;
  }
  return children;
}

// Gloo's TCP pairs write to their sockets without MSG_NOSIGNAL: a write to a peer that just died raises
// SIGPIPE, whose default action ends this process (seen in CI: a session unit test ended by SIGPIPE when a
// member exited mid all-gather). Ignored, the write fails with EPIPE, which Gloo reports as an I/O error
// and the session treats as a lost member. A handler the host program installed is left alone.
void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction now {};
    if (::sigaction(SIGPIPE, nullptr, &now) == 0 && now.sa_handler == SIG_DFL) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigemptyset(&ignore.sa_mask);
      ::sigaction(SIGPIPE, &ignore, nullptr);
    }
  });
}

Result<std::shared_ptr<gloo::transport::Device>> tcp_device(const std::string& address) {
  ignore_sigpipe_once();
  gloo::transport::tcp::attr attr;
  try {
    if (!address.empty()) {
      attr.hostname = address;
      return gloo::transport::tcp::CreateDevice(attr);
    }
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) {
      try {
        attr.hostname = host;
        return gloo::transport::tcp::CreateDevice(attr);
      } catch (const std::exception& e) {
        spdlog::debug("gloo device on {} failed ({}); using 127.0.0.1", host, e.what());
      }
    }
    attr.hostname = "127.0.0.1";
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return unavailable_error(fmt::format("cannot open a Gloo TCP device on '{}'", attr.hostname), e.what(),
                             "give --listen ADDRESS with an address of this host");
  }
}

class GlooGroupImpl final : public GlooGroup {
 public:
  GlooGroupImpl(int rank, int size, TrafficCounters* counters) : m_counters(counters) {
    m_rank = rank;
    m_size = size;
  }
  void set_context(std::shared_ptr<gloo::Context> context) { m_context = std::move(context); }
  Result<std::vector<std::uint64_t>> all_gather_words(const std::vector<std::uint64_t>& mine,
                                                      milliseconds timeout) override;
  Result<std::vector<std::uint8_t>> all_gather_bytes(const std::vector<std::uint8_t>& mine,
                                                     const std::vector<std::uint64_t>& sizes,
                                                     milliseconds timeout) override;
  Result<std::vector<std::uint8_t>> broadcast_bytes(int root, const std::vector<std::uint8_t>& data, std::uint64_t size,
                                                    milliseconds timeout) override;
  Status barrier(milliseconds timeout) override;

 private:
  template <typename F>
  Status guarded(const char* what, F&& f);
  std::shared_ptr<gloo::Context> m_context;
  std::uint32_t m_tag = 0;
  TrafficCounters* m_counters = nullptr;
};

template <typename F>
Status GlooGroupImpl::guarded(const char* what, F&& f) {
  if (m_poisoned) return unavailable_error(fmt::format("{}: the group failed before and must be re-formed", what));
  try {
    f();
    if (m_counters) ++m_counters->collectives;
    return Ok{};
  } catch (const std::exception& e) {
    m_poisoned = true;
    return unavailable_error(fmt::format("{} failed", what), e.what());
  }
}

Result<std::unique_ptr<GlooGroup>> connect_group(KeyValueStore& store, const std::string& prefix, int rank, int size,
                                                 const std::shared_ptr<gloo::transport::Device>& device,
                                                 milliseconds timeout, TrafficCounters* counters) {
  auto g = std::make_unique<GlooGroupImpl>(rank, size, counters);
  try {
    GlooStoreAdapter adapter(store, prefix, Clock::now() + timeout);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    // Gloo waits 5 times a pair's timeout (the context's when the pair is
    // made) for its first connection (tcp/pair.h, waitUntil): a peer that left
    // this formation (its listener accepts, nothing claims the connection)
    // held a member here for 5 x 7.5 s in CI while the others re-formed
    // without it. So pairs are made with a fifth of the pair wait, and the
    // collectives get `timeout` back afterwards.
    ctx->setTimeout(std::max(milliseconds(1), pair_connect_wait(timeout) / 5));
    auto dev = device;
    ctx->connectFullMesh(adapter, dev);
    ctx->setTimeout(timeout);
    g->set_context(std::move(ctx));
  } catch (const std::exception& e) {
    return unavailable_error(fmt::format("cannot connect a group of {} through the store", size), e.what());
  }
  if (counters) counters->connections += static_cast<std::uint64_t>(size - 1);
  return std::unique_ptr<GlooGroup>(std::move(g));
}

Result<std::vector<std::uint64_t>> GlooGroupImpl::all_gather_words(const std::vector<std::uint64_t>& mine,
                                                                   milliseconds timeout) {
  if (mine.empty()) return internal_error("all-gather of words: nothing to send");
  std::vector<std::uint64_t> out(static_cast<std::size_t>(m_size) * mine.size());
  std::vector<std::uint64_t> in = mine;
  auto s = guarded("all-gather of sizes", [&] {
    gloo::AllgatherOptions o(m_context);
    o.setInput(in.data(), in.size());
    o.setOutput(out.data(), out.size());
    o.setTag(++m_tag);
    o.setTimeout(timeout);
    gloo::allgather(o);
  });
  if (!s) return s.error();
  if (m_counters) {
    m_counters->bytes_out += 8u * mine.size() * static_cast<std::uint64_t>(m_size - 1);
    m_counters->bytes_in += 8u * mine.size() * static_cast<std::uint64_t>(m_size - 1);
  }
  return out;
}

Result<std::vector<std::uint8_t>> GlooGroupImpl::all_gather_bytes(const std::vector<std::uint8_t>& mine,
                                                                  const std::vector<std::uint64_t>& sizes,
                                                                  milliseconds timeout) {
  if (sizes.size() != static_cast<std::size_t>(m_size) || sizes[static_cast<std::size_t>(m_rank)] != mine.size())
    return internal_error("all-gather: the sizes do not match the group");
  std::uint64_t total = 0;
  for (auto s : sizes) total += s;
  std::vector<std::uint8_t> all(std::max<std::uint64_t>(total, 1));
  std::vector<std::size_t> counts(sizes.begin(), sizes.end());
  std::vector<std::uint8_t> in = mine;
  if (in.empty()) in.push_back(0);  // Gloo wants a buffer even for a zero count
  auto s = guarded("all-gather", [&] {
    gloo::AllgathervOptions o(m_context);
    o.setInput(in.data(), mine.size());
    o.setOutput(all.data(), counts);
    o.setTag(++m_tag);
    o.setTimeout(timeout);
    gloo::allgatherv(o);
  });
  if (!s) return s.error();
  all.resize(total);
  if (m_counters && m_size > 1) {
    // Gloo's ring: each rank sends every block but its right neighbour's, receives every block but its own.
    m_counters->bytes_out += total - sizes[static_cast<std::size_t>((m_rank + 1) % m_size)];
    m_counters->bytes_in += total - sizes[static_cast<std::size_t>(m_rank)];
  }
  return all;
}

Result<std::vector<std::uint8_t>> GlooGroupImpl::broadcast_bytes(int root, const std::vector<std::uint8_t>& data,
                                                                 std::uint64_t size, milliseconds timeout) {
  if (root < 0 || root >= m_size)
    return internal_error(fmt::format("broadcast: root {} outside a group of {}", root, m_size));
  if (m_rank == root && data.size() != size)
    return internal_error("broadcast: the root's data does not match its size");
  std::vector<std::uint8_t> out(std::max<std::uint64_t>(size, 1));
  std::vector<std::uint8_t> in = data;
  if (in.empty()) in.push_back(0);
  auto s = guarded("broadcast", [&] {
    gloo::BroadcastOptions o(m_context);
    if (m_rank == root) o.setInput(in.data(), size);
    o.setOutput(out.data(), size);
    o.setRoot(root);
    o.setTag(++m_tag);
    o.setTimeout(timeout);
    gloo::broadcast(o);
  });
  if (!s) return s.error();
  out.resize(size);
  if (m_counters && m_size > 1) {
    if (m_rank != root) m_counters->bytes_in += size;
    m_counters->bytes_out += size * binomial_children(m_rank, root, m_size);
  }
  return out;
}

Status GlooGroupImpl::barrier(milliseconds timeout) {
  return guarded("barrier", [&] {
    gloo::BarrierOptions o(m_context);
    o.setTag(++m_tag);
    o.setTimeout(timeout);
    gloo::barrier(o);
  });
}

}  // namespace

namespace net_impl {

void make_tcp_device(const std::string& address, Result<std::shared_ptr<gloo::transport::Device>>& out) {
  out = tcp_device(address);
}

void connect(KeyValueStore& store, const std::string& prefix, int rank, int size,
             const std::shared_ptr<gloo::transport::Device>& device, milliseconds timeout, TrafficCounters* counters,
             Result<std::unique_ptr<GlooGroup>>& out) {
  out = connect_group(store, prefix, rank, size, device, timeout, counters);
}

}  // namespace net_impl

}  // namespace scout::transport
