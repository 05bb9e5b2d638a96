// Stage 6 of a round (measures.hpp): the measure "link", per process-group kind. link(G, call) = min over G's
// members of wait (the last arriver's time inside: what the collective costs once everyone is there; a straggler
// leaves it alone). A group is slow in a round when its median link time is a high outlier among the groups of its
// kind (C3 statistical with 3 or more groups, kappa; the ratio rule with 2: link_min_ratio and link_min_absolute_ns)
// and it is slower than the others call by call in at least link_min_consistency of the calls (a slow link slows
// every call; a loaded host's descheduling only some).
//
// On a host with more runnable threads than CPUs a member descheduled inside a call (or woken late from it) keeps the
// whole group inside longer, in every call where it waits for a CPU: a group whose members waited longer for a CPU
// than the other groups' members looks slow without a slow link. A call completes only once each member has run,
// so the group's calls take about the sum of its members' CPU wait per call (schedstat over the round, per call the
// member completed) longer than another group's; where that sum exceeds the other groups' median, the group's mean
// link time with the excess taken out must still be slow by the ratio rule against the other groups' mean link
// time: only a link excess that stands out of its members' extra CPU wait names a link.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/straggler/measures/measures.hpp"

namespace scout::straggler::detail {

namespace {

// Per member of `v`, the median of the other members' values: what LeaveOneOut(v).median_without(j) gives, from the
// three middle values of v alone (no sort: a LeaveOneOut per call, over the 12,800 groups of a kind at 100k ranks,
// sorted them all, issue 40). With s the values sorted and m = n - 1 others, the k-th smallest of the others is
// s[k + 1] where v[j] <= s[k], s[k] otherwise (where v[j] equals s[k] at a later place, s[k] == s[k + 1]).
void medians_without(const std::vector<double>& v, std::vector<double>& scratch, std::vector<double>& out) {
  const std::size_t n = v.size();
  out.assign(n, 0.0);
  if (n < 2) return;
  const std::size_t m = n - 1;
  const std::size_t hi = m / 2, lo = m % 2 == 1 ? hi : hi - 1;
  scratch = v;
  const auto first = scratch.begin();
  std::nth_element(first, first + static_cast<std::ptrdiff_t>(lo), scratch.end());
  std::partial_sort(first + static_cast<std::ptrdiff_t>(lo) + 1, first + static_cast<std::ptrdiff_t>(hi) + 2,
                    scratch.end());
  const auto nth = [&](double x, std::size_t k) { return x <= scratch[k] ? scratch[k + 1] : scratch[k]; };
  for (std::size_t j = 0; j < n; ++j) out[j] = m % 2 == 1 ? nth(v[j], hi) : (nth(v[j], lo) + nth(v[j], hi)) / 2;
}

// Per kind, the keys every group of the kind shares and, per group and shared key, the least wait of its members
// (link(G, c)) and whether the wait is exact on every member.
struct KindLinks {
  std::vector<CallKey> shared;
  std::vector<double> least;  // row j: group j's least wait per shared key (-1 until a member's is read)
  std::vector<char> exact;    // a byte per key, not a std::vector<bool>'s bit (issue 40)
};

using GroupsByKind = std::map<std::string, std::vector<std::size_t>>;

// One member's calls at the kind's shared keys (row) taken into group j's least waits and the exact flags.
void take_waits(KindLinks& kl, std::size_t j, const CallTiming* const* row) {
  const std::size_t nk = kl.shared.size();
  double* least_of = kl.least.data() + j * nk;
  for (std::size_t k = 0; k < nk; ++k) {
    kl.exact[k] = kl.exact[k] && row[k]->wait_exact;
    const double w = static_cast<double>(row[k]->wait_ns);
    least_of[k] = least_of[k] < 0 ? w : std::min(least_of[k], w);
  }
}

// Fills every kind's least waits and exact flags. Each rank's calls are read once, in the table's order (ascending
// ranks, the order its blocks hold them in), for its group of every kind at once: read group by group and kind by
// kind, a dp group's members 64 ranks apart at 100k ranks, each member's calls came from cold memory once per kind
// (measure_link was a sixth of the decision at 100k ranks, issue 40). The least of the members' waits and the exact
// flags do not depend on the order the members are read in. Where the ranks are not 0..n-1 (or nearly) or a rank is
// in two groups of a kind, group by group as before. A member without calls shares none (an error otherwise).
void least_waits(const TimingTable& t, const RankIndex& ix, const GroupsByKind& by_kind,
                 std::vector<KindLinks>& kinds) {
  constexpr auto k_none = static_cast<std::uint32_t>(-1);
  const CallsByRank& ranks = t.ranks;
  const bool dense = ranks.dense();
  std::vector<std::vector<std::uint32_t>> group_at(kinds.size());  // per kind, by rank: its group's place (k_none)
  std::vector<std::size_t> walked;                                 // the kinds filled in the walk
  std::size_t q = 0;
  for (const auto& [kind, idx] : by_kind) {
    KindLinks& kl = kinds[q];
    const std::size_t at_kind = q++;
    if (idx.size() < 2 || kl.shared.empty()) continue;
    for (auto i : idx)
      for (auto member : t.groups[i].members)
        if (!ix.calls.find(member)) throw std::out_of_range("measure_link: a member without calls shares calls");
    bool in_one = dense;
    if (dense) {
      auto& at = group_at[at_kind];
      at.assign(static_cast<std::size_t>(ranks.back_rank()) + 1, k_none);
      for (std::size_t j = 0; j < idx.size() && in_one; ++j)
        for (auto member : t.groups[idx[j]].members) {
          // (Every member is in the table, so within its ranks.)
          auto& slot = at[static_cast<std::size_t>(member)];
          in_one = in_one && slot == k_none;
          slot = static_cast<std::uint32_t>(j);
        }
    }
    if (in_one) {
      walked.push_back(at_kind);
      continue;
    }
    group_at[at_kind].clear();
    CallsAtKeys calls_at(ix.key_sets, kl.shared);
    std::vector<const CallTiming*> row(kl.shared.size());
    for (std::size_t j = 0; j < idx.size(); ++j)
      for (auto member : t.groups[idx[j]].members) {
        calls_at(ix.key_sets.of(member), *ix.calls.find(member), row.data());
        take_waits(kl, j, row.data());
      }
  }
  if (walked.empty()) return;
  std::vector<CallsAtKeys> calls_at;  // per kind walked (each keeps its places for the set of the rank before)
  std::vector<std::vector<const CallTiming*>> rows;
  for (auto w : walked) {
    calls_at.emplace_back(ix.key_sets, kinds[w].shared);
    rows.emplace_back(kinds[w].shared.size());
  }
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const auto rank = static_cast<std::size_t>(ranks.rank_of(i));
    const RankCalls calls = ranks.calls_of(i);
    const std::uint32_t set = ix.key_sets.of(ranks.rank_of(i));
    for (std::size_t v = 0; v < walked.size(); ++v) {
      KindLinks& kl = kinds[walked[v]];
      const std::uint32_t j = group_at[walked[v]][rank];
      if (j == k_none) continue;
      const CallTiming** row = rows[v].data();
      calls_at[v](set, calls, row);
      take_waits(kl, j, row);
    }
  }
}

}  // namespace

void measure_link(const TimingTable& t, const DecideOptions& o, RoundResult& out, const RankIndex& ix) {
  // Per kind, each group's median link time over the calls all groups of the kind share.
  std::map<std::string, std::vector<std::size_t>> by_kind;
  for (std::size_t i = 0; i < t.groups.size(); ++i)
    if (is_mesh_kind(t.groups[i].kind) && t.groups[i].members.size() >= 2) by_kind[t.groups[i].kind].push_back(i);
  std::vector<KindLinks> kinds(by_kind.size());
  std::size_t q = 0;
  for (const auto& [kind, idx] : by_kind) {
    KindLinks& kl = kinds[q++];
    if (idx.size() < 2) continue;
    // The keys of the kind every group's members share: the keys common to every member of every group of the kind,
    // from their few distinct key sets at once (the common keys of each of 12,800 groups, then each key searched for
    // in every group's, were a third of measure_link at 100k ranks: issue 40).
    std::vector<std::uint32_t> member_sets;
    for (auto i : idx)
      for (auto r : t.groups[i].members) {
        const std::uint32_t set = ix.key_sets.of(r);
        if (member_sets.empty() || member_sets.back() != set) member_sets.push_back(set);
      }
    // ... whose wait is exact on every member of every group: an upper bound (a wait() returning, not the
    // call completing) says nothing about how long the link took.
    const std::uint32_t kind_id = t.kind_index(kind);
    kl.shared = ix.key_sets.common(std::move(member_sets));
    kl.shared.erase(
        std::remove_if(kl.shared.begin(), kl.shared.end(), [&](const CallKey& k) { return k.kind != kind_id; }),
        kl.shared.end());
    kl.least.assign(idx.size() * kl.shared.size(), -1);
    kl.exact.assign(kl.shared.size(), 1);
  }
  least_waits(t, ix, by_kind, kinds);
  q = 0;
  for (const auto& [kind, idx] : by_kind) {
    KindLinks& kl = kinds[q++];
    if (idx.size() < 2) continue;
    const std::vector<CallKey>& shared = kl.shared;
    const std::vector<double>& least = kl.least;
    const std::vector<char>& exact = kl.exact;
    std::vector<CallKey> keys;
    std::vector<std::size_t> at;  // each key's place in `shared`
    for (std::size_t k = 0; k < shared.size(); ++k)
      if (exact[k]) {
        keys.push_back(shared[k]);
        at.push_back(k);
      }
    if (static_cast<std::int64_t>(keys.size()) < o.min_calls) {
      spdlog::debug(
          "straggler: {} groups: {} calls every group shares with an exact wait, fewer than {}: no link "
          "measure this round",
          kind, keys.size(), o.min_calls);
      continue;
    }
    std::vector<double> link;
    std::vector<std::vector<double>> per_group;
    for (std::size_t j = 0; j < idx.size(); ++j) {
      std::vector<double> per_call;
      per_call.reserve(at.size());
      for (auto k : at) per_call.push_back(least[j * shared.size() + k]);
      link.push_back(median(per_call));
      per_group.push_back(std::move(per_call));
    }
    // A slow link slows every call of its group; a loaded host's descheduling slows some calls of any group.
    // Per call (the same call of every group of the kind), is the group slower than the others' median by the
    // ratio and the absolute floor? A slow group must be so in at least `link_min_consistency` of the calls. (Per
    // call the groups' link times sorted once: O(K G log G) for G groups and K calls.)
    std::vector<std::int64_t> slower(idx.size(), 0);
    std::vector<double> at_call(idx.size()), others, scratch;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      for (std::size_t j = 0; j < idx.size(); ++j) at_call[j] = per_group[j][k];
      medians_without(at_call, scratch, others);
      for (std::size_t j = 0; j < idx.size(); ++j) {
        const double ref = others[j];
        slower[j] += at_call[j] >= o.link_min_ratio * ref && at_call[j] - ref >= o.link_min_absolute_ns ? 1 : 0;
      }
    }
    std::vector<double> consistent(idx.size(), 0);
    for (std::size_t j = 0; j < idx.size(); ++j)
      consistent[j] = static_cast<double>(slower[j]) / static_cast<double>(keys.size());
    // Each group's mean link time, and its members' CPU wait per call (their main threads' runnable time without a
    // CPU; -1 where a member lacks counters), summed and the largest: a collective waits for its last member, so
    // the member kept longest from a CPU can delay it by its own wait, and members waiting by turns by theirs
    // together. The larger of the two explanations is taken out below. Summed alone, one starved member was
    // diluted by a partner that waited less than the other groups' members: a clean dp=2 x tp=2 job beside a build
    // (seed 1021091123) had rank 0 at 15.5-17 ms of CPU wait a call against 3-8 ms for the rest, its tp group's
    // link 11 ms against 0.8 ms, 6 ms of it explained summed, and the node was named (communication, 14x); its
    // largest member's wait explains 7.7-9 ms of it.
    std::vector<double> mean_link, cpu_wait, cpu_wait_max;
    for (std::size_t j = 0; j < idx.size(); ++j) {
      double sum = 0;
      for (double x : per_group[j]) sum += x;
      mean_link.push_back(sum / static_cast<double>(keys.size()));
      double w = 0, most = 0;
      for (auto r : t.groups[idx[j]].members) {
        const CpuPerCall* c = ix.cpu.find(r);
        w = !c || w < 0 ? -1 : w + c->runq_ns;
        most = !c || most < 0 ? -1 : std::max(most, c->runq_ns);
      }
      cpu_wait.push_back(w);
      cpu_wait_max.push_back(most);
    }
    std::vector<bool> slow(idx.size(), false);
    if (idx.size() >= 3) {
      StatisticalOptions so;
      so.kappa = o.kappa;
      so.min_relative = o.link_min_ratio - 1;
      so.min_absolute = o.link_min_absolute_ns;
      so.direction = Direction::high;
      auto c3 = c3_statistical(link, so);
      if (c3.status == C3Status::attributed)
        slow = c3.outliers;
      else if (c3.status == C3Status::inconclusive &&
               (c3.reason == C3Reason::majority_flagged || c3.reason == C3Reason::bimodal))
        out.widespread_kinds.insert(kind);
    }
    std::vector<bool> waits_known(idx.size());
    for (std::size_t j = 0; j < idx.size(); ++j) waits_known[j] = cpu_wait[j] >= 0;
    const LeaveOneOut other_links(link), other_means(mean_link), other_waits(cpu_wait, waits_known),
        other_waits_max(cpu_wait_max, waits_known);
    for (std::size_t j = 0; j < idx.size(); ++j) {
      const double ref = other_links.median_without(j);
      GroupRound g;
      g.group = idx[j];
      g.link_ns = link[j];
      g.ratio = ref > 0 ? link[j] / ref : (link[j] > 0 ? 1e9 : 1);
      g.calls = static_cast<std::int64_t>(keys.size());
      // Where its members waited longer for a CPU than the other groups' members, its mean link with that excess
      // taken out (none where counters are missing) must be slow against the others' mean.
      const double mean_ref = other_means.median_without(j);
      const double cpu_wait_excess = cpu_wait[j] >= 0 && other_waits.count_without(j) > 0
                                         ? std::max({0.0, cpu_wait[j] - other_waits.median_without(j),
                                                     cpu_wait_max[j] - other_waits_max.median_without(j)})
                                         : 0.0;
      const double discounted = mean_link[j] - cpu_wait_excess;
      const bool beyond_cpu_wait = cpu_wait_excess <= 0 || (discounted >= o.link_min_ratio * mean_ref &&
                                                            discounted - mean_ref >= o.link_min_absolute_ns);
      // Two groups: the ratio rule decides (C3 needs three for a strict minority).
      g.slow = (idx.size() >= 3 ? static_cast<bool>(slow[j])
                                : g.ratio >= o.link_min_ratio && link[j] - ref >= o.link_min_absolute_ns) &&
               consistent[j] >= o.link_min_consistency && beyond_cpu_wait;
      if (spdlog::should_log(spdlog::level::debug))
        spdlog::debug(
            "straggler: {} group {} calls {} link {:.3f} ms (x{:.3f}) consistent {:.2f} mean {:.3f} ms others {:.3f} "
            "ms cpu wait beyond the others' {:.3f} ms per call slow {}",
            kind, hex_id(t.groups[idx[j]].id), keys.size(), link[j] / 1e6, g.ratio, consistent[j], mean_link[j] / 1e6,
            mean_ref / 1e6, cpu_wait_excess / 1e6, g.slow);
      out.groups.push_back(g);
    }
    out.has_data = true;
  }
}

}  // namespace scout::straggler::detail
