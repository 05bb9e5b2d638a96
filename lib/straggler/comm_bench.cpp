#include "lib/straggler/comm_bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include "lib/common/hex.hpp"
#include "lib/session/session.hpp"

namespace scout::straggler {

void compare_groups(std::vector<GroupCommTiming>& groups, double slow_ratio) {
  std::map<std::string, std::vector<std::size_t>> by_kind;
  for (std::size_t i = 0; i < groups.size(); ++i)
    if (groups[i].error.empty()) by_kind[groups[i].group.kind].push_back(i);
  for (const auto& [kind, idx] : by_kind) {
    for (auto i : idx) {
      std::vector<double> others;
      for (auto j : idx)
        if (j != i) others.push_back(groups[j].ns);
      auto& g = groups[i];
      if (others.empty()) {
        g.ratio = 1;
        g.slow = false;
        continue;
      }
      const double ref = median(others);
      g.ratio = ref > 0 ? g.ns / ref : 1;
      g.slow = g.ratio >= slow_ratio;
    }
  }
}

namespace {

// One member's part: every group it belongs to, in the mesh groups' order (the same order on every member).
void run_member(std::int64_t rank, const StoreOpener& open_store, const std::vector<GroupInfo>& groups,
                std::int64_t world, const CommBenchOptions& o, std::mutex& mu, std::vector<GroupCommTiming>& out,
                std::vector<std::string>& notes) {
  auto note = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    notes.push_back(fmt::format("rank {}: {}", rank, what));
  };
  auto fail_groups = [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    for (std::size_t gi = 0; gi < groups.size(); ++gi)
      if (std::find(groups[gi].members.begin(), groups[gi].members.end(), rank) != groups[gi].members.end() &&
          out[gi].error.empty() && out[gi].iterations_ns.empty())
        out[gi].error = why;
  };
  auto store = open_store();
  if (!store) return fail_groups(store.error().message());
  session::SessionOptions so;
  so.key_namespace = o.key_namespace;
  so.name = "bench";
  so.member = rank;
  so.id_space = world;
  so.timeout = o.timeout;
  so.listen_address = o.listen_address;
  so.expected = o.expected;
  auto s = session::Session::open(**store, so);
  if (!s) return fail_groups(s.error().message());
  const session::Bytes payload(o.payload_bytes, static_cast<std::uint8_t>(rank & 0xff));
  session::OpOptions op;
  op.timeout = o.timeout;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    if (std::find(g.members.begin(), g.members.end(), rank) == g.members.end() || g.members.size() < 2) continue;
    auto sub = (*s)->subgroup(fmt::format("g{}", gi), g.members, o.timeout);
    if (!sub) {
      note(fmt::format("{} group {}: {}", g.kind, hex64(g.id), sub.error().message()));
      continue;
    }
    op.name = "warm-up";
    if (auto w = (*sub)->all_gather(payload, op); !w) {
      note(fmt::format("{} group {}: {}", g.kind, hex64(g.id), w.error().message()));
      continue;
    }
    std::vector<double> iters;
    for (std::int64_t it = 0; it < o.iterations; ++it) {
      op.name = fmt::format("timed-{}", it);
      auto t = (*sub)->timed_all_gather(payload, op);
      if (!t) {
        note(fmt::format("{} group {}: {}", g.kind, hex64(g.id), t.error().message()));
        break;
      }
      // Every member of the group must have answered, else the iteration measured a smaller group.
      bool complete = true;
      double least = -1;
      for (auto m : g.members) {
        const auto mi = static_cast<std::size_t>(m);
        complete &= mi < t->value.from.size() && t->value.from[mi].state == session::Contribution::State::ok;
        const auto d = mi < t->durations_ns.size() ? t->durations_ns[mi] : -1;
        if (d >= 0) least = least < 0 ? static_cast<double>(d) : std::min(least, static_cast<double>(d));
      }
      if (!complete || least < 0) {
        note(fmt::format("{} group {}: iteration {} incomplete", g.kind, hex64(g.id), it));
        continue;
      }
      iters.push_back(least);
    }
    (*sub)->close();
    // Every local member computed the same values from the exchanged durations: the first one records them.
    std::lock_guard<std::mutex> lock(mu);
    if (out[gi].iterations_ns.empty() && !iters.empty()) {
      out[gi].iterations_ns = iters;
      out[gi].ns = median(iters);
      out[gi].error.clear();
    }
  }
  (*s)->close();
}

}  // namespace

CommBenchResult run_comm_bench(const StoreOpener& open_store, const std::vector<GroupInfo>& groups, std::int64_t world,
                               const std::vector<std::int64_t>& local_ranks, const CommBenchOptions& o) {
  CommBenchResult r;
  std::vector<GroupCommTiming> all(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) all[i].group = groups[i];
  std::mutex mu;
  std::vector<std::thread> threads;
  threads.reserve(local_ranks.size());
  for (auto rank : local_ranks)
    threads.emplace_back(run_member, rank, std::cref(open_store), std::cref(groups), world, std::cref(o), std::ref(mu),
                         std::ref(all), std::ref(r.notes));
  for (auto& t : threads) t.join();
  for (auto& g : all) {
    bool local = false;
    for (auto m : g.group.members) local |= std::find(local_ranks.begin(), local_ranks.end(), m) != local_ranks.end();
    if (!local || g.group.members.size() < 2) continue;
    if (g.iterations_ns.empty() && g.error.empty()) g.error = "no iteration completed";
    r.groups.push_back(std::move(g));
  }
  compare_groups(r.groups, o.slow_ratio);
  return r;
}

}  // namespace scout::straggler
