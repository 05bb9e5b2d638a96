#include "lib/transport/gather.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <spdlog/spdlog.h>
#include <thread>
#include <unistd.h>

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
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override {
    auto until = std::min(m_deadline, Clock::now() + timeout);
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

std::string encode_set(const std::vector<std::int64_t>& v) {
  std::string s;
  for (auto x : v) s += fmt::format("{},", x);
  return s;
}

std::shared_ptr<gloo::transport::Device> make_device(const std::string& address) {
  gloo::transport::tcp::attr attr;
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
}

// Polls `keys` until all exist or `until`; returns which exist.
Result<std::vector<bool>> await_keys(KeyValueStore& kv, const std::vector<std::string>& keys, Clock::time_point until) {
  std::vector<bool> have(keys.size(), false);
  while (true) {
    bool all = true;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (have[i]) continue;
      auto c = kv.check(keys[i]);
      if (!c) return c.error();
      have[i] = *c;
      all = all && have[i];
    }
    if (all || Clock::now() >= until) return have;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

}  // namespace

Result<GatherResult> gather_blobs(KeyValueStore& kv, const GatherOptions& o, const std::vector<std::uint8_t>& mine) {
  const auto start = Clock::now();
  const auto deadline = start + o.timeout;
  GatherResult result;
  result.blobs.assign(static_cast<std::size_t>(o.observers), std::nullopt);
  result.blobs[o.observer] = mine;
  if (o.observers <= 1) return result;

  // The first generation nobody closed.
  std::int64_t gen = 0;
  for (; gen < 100000; ++gen) {
    bool closed = false;
    for (std::int64_t i = 0; i < o.observers && !closed; ++i) {
      auto c = kv.check(fmt::format("{}/g{}/closed/{}", o.key_namespace, gen, i));
      if (!c) return c.error();
      closed = *c;
    }
    if (!closed) break;
  }
  result.generation = gen;
  const std::string base = fmt::format("{}/g{}", o.key_namespace, gen);

  std::vector<std::int64_t> members(static_cast<std::size_t>(o.observers));
  for (std::int64_t i = 0; i < o.observers; ++i) members[i] = i;
  std::shared_ptr<gloo::transport::Device> device;
  const char* one = "1";

  for (int round = 0; round < 4 && members.size() > 1; ++round) {
    result.rounds = round + 1;
    const std::string pfx = fmt::format("{}/r{}", base, round);
    auto set_here = kv.set(fmt::format("{}/here/{}", pfx, o.observer), std::vector<char>(one, one + 1));
    if (!set_here) {
      result.notes.push_back(fmt::format("round {}: {}", round, set_here.error().message()));
      return set_here.error();
    }
    spdlog::info("gather: observer {} of {} registered in round {} of generation {}", o.observer, o.observers, round, gen);
    // Round 0 waits longest: that is where observers started at different times meet.
    auto remaining = left(deadline);
    auto here_until = Clock::now() + (round == 0 ? milliseconds(o.timeout.count() * 45 / 100) : remaining / 4);
    std::vector<std::string> here_keys;
    for (auto m : members) here_keys.push_back(fmt::format("{}/here/{}", pfx, m));
    auto have = await_keys(kv, here_keys, here_until);
    if (!have) return have.error();
    std::vector<std::int64_t> present;
    for (std::size_t i = 0; i < members.size(); ++i)
      if ((*have)[i]) present.push_back(members[i]);
    if (present.size() < members.size())
      result.notes.push_back(fmt::format("round {}: {} of {} observers arrived", round, present.size(), members.size()));
    if (present.size() <= 1) {
      members = present;
      break;
    }

    // Agree on who is there before forming the group.
    const std::string view = encode_set(present);
    auto set_view = kv.set(fmt::format("{}/view/{}", pfx, o.observer), std::vector<char>(view.begin(), view.end()));
    if (!set_view) return set_view.error();
    auto view_until = Clock::now() + left(deadline) / 4;
    bool agreed = true;
    for (auto m : present) {
      if (m == o.observer) continue;
      auto theirs = kv.get(fmt::format("{}/view/{}", pfx, m), std::max(milliseconds(1), left(view_until)));
      if (!theirs || std::string(theirs->begin(), theirs->end()) != view) {
        agreed = false;
        break;
      }
    }
    if (!agreed) {
      result.notes.push_back(fmt::format("round {}: observers saw different sets; re-forming", round));
      members = present;
      continue;
    }

    // Form the Gloo group over the agreed set and all-gather.
    const auto my_index = std::find(present.begin(), present.end(), o.observer) - present.begin();
    const int size = static_cast<int>(present.size());
    try {
      if (!device) device = make_device(o.listen_address);
      auto gloo_timeout = std::max(milliseconds(100), round == 0 ? std::min(left(deadline) / 2, left(deadline) - milliseconds(o.timeout.count() / 5))
                                                                  : left(deadline));
      GlooStoreAdapter store(kv, pfx + "/gloo/", Clock::now() + gloo_timeout);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(static_cast<int>(my_index), size);
      ctx->setTimeout(gloo_timeout);
      ctx->connectFullMesh(store, device);
      std::vector<std::uint64_t> sizes(present.size());
      std::uint64_t my_size = mine.size();
      gloo::AllgatherOptions so(ctx);
      so.setInput(&my_size, 1);
      so.setOutput(sizes.data(), sizes.size());
      so.setTimeout(gloo_timeout);
      gloo::allgather(so);
      std::uint64_t total = 0;
      for (auto s : sizes) {
        if (s > (std::uint64_t{64} << 20)) throw gloo::IoException("an observer announced an evidence blob over 64 MiB");
        total += s;
      }
      std::vector<std::uint8_t> all(std::max<std::uint64_t>(total, 1));
      std::vector<std::size_t> counts(sizes.begin(), sizes.end());
      std::vector<std::uint8_t> in = mine;
      gloo::AllgathervOptions vo(ctx);
      vo.setInput(in.data(), in.size());
      vo.setOutput(all.data(), counts);
      vo.setTimeout(gloo_timeout);
      gloo::allgatherv(vo);
      std::size_t off = 0;
      for (std::size_t i = 0; i < present.size(); ++i) {
        result.blobs[present[i]] = std::vector<std::uint8_t>(all.begin() + static_cast<std::ptrdiff_t>(off),
                                                             all.begin() + static_cast<std::ptrdiff_t>(off + counts[i]));
        off += counts[i];
      }
      members = present;
      spdlog::info("gather: all-gathered {} blobs in round {}", present.size(), round);
      break;
    } catch (const std::exception& e) {
      // The context is poisoned; survivors re-form without whoever is gone.
      result.notes.push_back(fmt::format("round {}: gloo: {}", round, e.what()));
      spdlog::info("gather round {} failed: {}", round, e.what());
      members = present;
      for (std::size_t i = 0; i < result.blobs.size(); ++i)
        if (static_cast<std::int64_t>(i) != o.observer) result.blobs[i].reset();
      if (left(deadline) < milliseconds(50)) break;
    }
  }

  kv.cleanup();
  (void)kv.set(fmt::format("{}/closed/{}", base, o.observer), std::vector<char>(one, one + 1));
  // Leave only when the others are done with the store too: an observer that
  // hosts it takes it down on exit, and a peer still cleaning up would then
  // wait out its timeout. Bounded: a peer that died is not waited for long.
  std::vector<std::string> closed_keys;
  for (auto m : members)
    if (m != o.observer) closed_keys.push_back(fmt::format("{}/closed/{}", base, m));
  (void)await_keys(kv, closed_keys, Clock::now() + std::min(milliseconds(2000), left(deadline)));
  spdlog::info("gather: generation {} closed", gen);
  return result;
}

}  // namespace scout::transport
