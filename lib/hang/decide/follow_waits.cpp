// Stage 4, follow waits. Reads: the positions (pending call, its state, the
// highest sequence each rank reached in each group, whether its ring is
// complete) and the groups' members (the mesh's, or, for a group the mesh does
// not know, the ranks that mention it). Rule: a rank inside (or failed in) a
// call waits for the members of the call's group whose history ends before the
// call's number; a member whose ring wrapped without the group is not judged.
// Following the waits from rank to rank ends at ranks in no call, or in a call
// every member entered; a cycle ends nowhere. No threshold.
#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

#include "lib/hang/decide/stages.hpp"

namespace scout::hang::stages {

const std::vector<std::int64_t>& Waits::blockers(std::int64_t r) const {
  static const std::vector<std::int64_t> none;
  return call_of.empty() || call_of[r] < 0 ? none : calls[call_of[r]].blockers;
}

std::vector<std::int64_t> Waits::ends(const std::vector<std::int64_t>& from, std::int64_t world,
                                      const std::function<bool(std::int64_t)>& stop) const {
  std::vector<char> seen(static_cast<std::size_t>(world), 0);
  std::vector<char> call_seen(calls.size(), 0);
  std::vector<std::int64_t> stack, out;
  for (auto w : from) {
    seen[w] = 1;
    if (call_of[w] >= 0 && !call_seen[call_of[w]]) {
      call_seen[call_of[w]] = 1;
      for (auto b : calls[call_of[w]].blockers) stack.push_back(b);
    }
  }
  while (!stack.empty()) {
    auto b = stack.back();
    stack.pop_back();
    if (seen[b]) continue;
    seen[b] = 1;
    if (!waiting(b) || (stop && stop(b))) {
      out.push_back(b);
      continue;
    }
    if (!call_seen[call_of[b]]) {
      call_seen[call_of[b]] = 1;
      for (auto c : calls[call_of[b]].blockers) stack.push_back(c);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Waits Waits::none(std::int64_t world) {
  Waits w;
  w.call_of.assign(static_cast<std::size_t>(world), -1);
  return w;
}

// For every rank inside (or failed in) a call: the members of that call's
// group that never entered it (their history ends before its number), once per
// distinct call. Following those waits from rank to rank (Waits::ends) ends at
// ranks in no call, or in a call every member entered; a cycle of waits ends nowhere.
Waits follow_waits(const Positions& pos, std::int64_t world) {
  Waits out;
  out.call_of.assign(static_cast<std::size_t>(world), -1);
  // Ranks that mention each group the mesh does not know: its members as far as anyone can tell.
  std::unordered_map<std::uint64_t, std::vector<std::int64_t>> mentioned;
  for (std::int64_t r = 0; r < world; ++r)
    for (const auto& [g, seq] : pos.ranks[r].reached)
      if (!pos.roles.known(g)) mentioned[g].push_back(r);
  for (auto& [g, m] : mentioned) std::sort(m.begin(), m.end());
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::int64_t> index;
  for (std::int64_t w = 0; w < world; ++w) {
    const auto& p = pos.ranks[w];
    if (!p.s || !p.entered || !p.call) continue;
    const auto g = p.s->pending.group;
    const auto q = p.s->pending.group_seq;
    const std::vector<std::int64_t>* members = nullptr;
    if (auto it = pos.roles.by_id.find(g); it != pos.roles.by_id.end())
      members = &it->second.members;
    else if (auto m = mentioned.find(g); m != mentioned.end())
      members = &m->second;
    if (!members || !std::binary_search(members->begin(), members->end(), w)) continue;
    auto [it, fresh] = index.try_emplace({g, q}, static_cast<std::int64_t>(out.calls.size()));
    if (fresh) {
      Waits::CallWait cw{g, q, {}, 0};
      for (auto b : *members) {
        if (b < 0 || b >= world) continue;
        const auto& bp = pos.ranks[b];
        if (!bp.s) {
          ++cw.unseen;
          continue;
        }
        auto rit = bp.reached.find(g);
        if (rit == bp.reached.end() && !bp.complete) continue;  // its history no longer tells
        if ((rit == bp.reached.end() ? 0 : rit->second) < q) cw.blockers.push_back(b);
      }
      out.calls.push_back(std::move(cw));
    }
    out.call_of[w] = it->second;
  }
  return out;
}

}  // namespace scout::hang::stages
