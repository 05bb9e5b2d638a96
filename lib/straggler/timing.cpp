#include "lib/straggler/timing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "lib/common/hex.hpp"
#include "lib/common/prefetch.hpp"
#include "lib/records/layout.hpp"

namespace scout::straggler {

double median(std::vector<double> v) {
  return median_in_place(v.data(), v.data() + v.size());
}

namespace {

// A row of this many values or more is selected in by its middle band (middle_to_front) first.
constexpr std::ptrdiff_t k_band_sample = 128;
constexpr std::ptrdiff_t k_band_min = 8 * k_band_sample;

// Moves the values of [first, first + n) (n >= k_band_min) between two bounds a sample of them puts about the middle
// to the front in one pass (branch free: the value at i swapped with the first past the front whatever it is, so the
// row stays a reordering of itself), counting those below and above the bounds. Returns how many are in front.
std::ptrdiff_t middle_to_front(double* first, std::ptrdiff_t n, std::ptrdiff_t& below, std::ptrdiff_t& above) {
  constexpr std::ptrdiff_t k_reach = 16;
  std::array<double, k_band_sample> sample;
  for (std::ptrdiff_t j = 0; j < k_band_sample; ++j) sample[static_cast<std::size_t>(j)] = first[j * n / k_band_sample];
  std::sort(sample.begin(), sample.end());
  const double lo = sample[k_band_sample / 2 - k_reach], hi = sample[k_band_sample / 2 + k_reach - 1];
  std::ptrdiff_t front = 0;
  below = 0;
  above = 0;
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const double x = first[i];
    const bool under = x<lo, over = x> hi;
    below += under;
    above += over;
    first[i] = first[front];
    first[front] = x;
    front += !(under || over);
  }
  return front;
}

// For LeaveOneOut: the values at `places` (ascending, distinct; 0, 1, n - 2 and n - 1 among them) of `sorted`'s n >=
// k_band_min values sorted, as (place, value) in ascending places into `kept`; `sorted` reordered.
bool select_places(std::vector<double>& sorted, const std::ptrdiff_t* places, const std::ptrdiff_t* places_end,
                   std::vector<std::pair<std::size_t, double>>& kept) {
  // The same values as the selections place by place (a place of the values sorted holds one value however it is
  // found), with fewer passes over a large group's values (eleven LeaveOneOuts per peer group of 1600 members at 100k
  // ranks, each a nth_element per place, were ~5% of the decision: issue 40): the two least and the two largest in
  // one pass, the middle places among the values a sample puts about the middle (middle_to_front). False (nothing
  // kept) where a value is NaN or the middle band misses a middle place: then place by place.
  const auto n = static_cast<std::ptrdiff_t>(sorted.size());
  double least[2] = {sorted[0], sorted[1]}, most[2] = {sorted[0], sorted[1]};
  if (least[1] < least[0]) std::swap(least[0], least[1]);
  if (most[0] < most[1]) std::swap(most[0], most[1]);
  bool nan = least[0] != least[0] || least[1] != least[1];
  for (std::ptrdiff_t i = 2; i < n; ++i) {
    const double x = sorted[static_cast<std::size_t>(i)];
    nan = nan || x != x;
    if (x < least[1]) {
      least[1] = x < least[0] ? least[0] : x;
      least[0] = std::min(least[0], x);
    }
    if (x > most[1]) {
      most[1] = x > most[0] ? most[0] : x;
      most[0] = std::max(most[0], x);
    }
  }
  if (nan) return false;
  std::ptrdiff_t below = 0, above = 0;
  const std::ptrdiff_t front = middle_to_front(sorted.data(), n, below, above);
  if (below + front + above != n) return false;
  for (const std::ptrdiff_t* it = places; it != places_end; ++it)
    if (*it > 1 && *it < n - 2 && (*it < below || *it >= below + front)) return false;
  // (Places ascending: the least two, the middle ones, the largest two.)
  kept.emplace_back(0, least[0]);
  kept.emplace_back(1, least[1]);
  std::ptrdiff_t from = 0;
  for (const std::ptrdiff_t* it = places; it != places_end; ++it) {
    const std::ptrdiff_t p = *it;
    if (p <= 1 || p >= n - 2) continue;
    const auto at = sorted.begin() + (p - below);
    std::nth_element(sorted.begin() + from, at, sorted.begin() + front);
    kept.emplace_back(static_cast<std::size_t>(p), *at);
    from = p - below + 1;
  }
  kept.emplace_back(static_cast<std::size_t>(n - 2), most[1]);
  kept.emplace_back(static_cast<std::size_t>(n - 1), most[0]);
  return true;
}

}  // namespace

double median_in_place(double* first, double* last) {
  const std::ptrdiff_t n = last - first;
  if (n <= 0) return 0;
  // A peer group's row (1600 members at 100k ranks): the values between two bounds a sample of them puts about the
  // middle moved to the front (middle_to_front), and the middle places selected among the front's few alone. The
  // same middle values: where the bounds miss the middle, the whole row as below (nth_element over the whole row,
  // its compares mispredicted about half the time, was a tenth of the decision at 100k ranks: issue 40).
  if (n >= k_band_min) {
    std::ptrdiff_t below = 0, above = 0;
    const std::ptrdiff_t front = middle_to_front(first, n, below, above);
    const std::ptrdiff_t upper = n / 2 - below, lower = (n % 2 == 0 ? n / 2 - 1 : n / 2) - below;
    if (below + front + above == n && lower >= 0 && upper < front) {
      double* mid = first + upper;
      std::nth_element(first, mid, first + front);
      const double m = *mid;
      if (n % 2 == 1) return m;
      return (*std::max_element(first, mid) + m) / 2;
    }
  }
  double* mid = first + n / 2;
  std::nth_element(first, mid, last);
  double hi = *mid;
  if (n % 2 == 1) return hi;
  double lo = *std::max_element(first, mid);
  return (lo + hi) / 2;
}

LeaveOneOut::LeaveOneOut(std::vector<double> values, const std::vector<bool>& counted)
    : m_values(std::move(values)), m_counted(m_values.size(), 1) {
  std::vector<double> sorted;  // the counted values, sorted only at the places kept
  sorted.reserve(m_values.size());
  for (std::size_t i = 0; i < m_values.size(); ++i) {
    m_counted[i] = counted.empty() || counted[i] ? 1 : 0;
    if (m_counted[i]) sorted.push_back(m_values[i]);
  }
  const auto n = static_cast<std::ptrdiff_t>(sorted.size());
  m_count = sorted.size();
  // The places nth_without reads with n counted: 0 and 1 (the least), n - 2 and n - 1 (the largest), and the
  // middle of n (a member not counted) and of n - 1 (a member counted, the place after each one too).
  std::array<std::ptrdiff_t, 9> places = {
      0, 1, n - 2, n - 1, n / 2 - 1, n / 2, (n - 1) / 2 - 1, (n - 1) / 2, (n - 1) / 2 + 1};
  std::sort(places.begin(), places.end());
  const auto distinct = std::unique(places.begin(), places.end());
  if (n >= k_band_min && select_places(sorted, places.data(), places.data() + (distinct - places.begin()), m_places))
    return;
  // Place by place in ascending order, each selected among the values after the one before (all larger or equal).
  std::ptrdiff_t from = 0;
  for (auto it = places.begin(); it != distinct; ++it) {
    const std::ptrdiff_t p = *it;
    if (p < 0 || p >= n) continue;
    std::nth_element(sorted.begin() + from, sorted.begin() + p, sorted.end());
    m_places.emplace_back(static_cast<std::size_t>(p), sorted[static_cast<std::size_t>(p)]);
    from = p + 1;
  }
}

double LeaveOneOut::sorted_at(std::size_t p) const {
  for (const auto& [at, v] : m_places)
    if (at == p) return v;
  throw std::logic_error("LeaveOneOut: a place not kept");
}

double LeaveOneOut::nth_without(std::size_t i, std::size_t k) const {
  // With s the counted values sorted: i's value taken out of them, the k-th is s[k + 1] where the value is at or
  // before k, s[k] where after. Where its value v is <= s[k] it is at or before k or, at a later place, equal to s[k]
  // and so to s[k + 1]: either way s[k + 1].
  const double at_k = sorted_at(k);
  return m_counted[i] && m_values[i] <= at_k ? sorted_at(k + 1) : at_k;
}

std::size_t LeaveOneOut::count_without(std::size_t i) const {
  return m_count - (m_counted[i] ? 1 : 0);
}

double LeaveOneOut::median_without(std::size_t i) const {
  // As median(): the element at n / 2 of the others sorted, with the one before it averaged in where n is even.
  const std::size_t n = count_without(i);
  if (n == 0) return 0;
  const double hi = nth_without(i, n / 2);
  if (n % 2 == 1) return hi;
  const double lo = nth_without(i, n / 2 - 1);
  return (lo + hi) / 2;
}

double LeaveOneOut::min_without(std::size_t i, double none) const {
  return count_without(i) == 0 ? none : nth_without(i, 0);
}

double LeaveOneOut::max_without(std::size_t i, double none) const {
  const std::size_t n = count_without(i);
  return n == 0 ? none : nth_without(i, n - 1);
}

std::vector<GroupInfo> mesh_groups(const Mesh& mesh) {
  std::vector<GroupInfo> out;
  std::vector<std::int64_t> world(static_cast<std::size_t>(mesh.world_size()));
  for (std::int64_t r = 0; r < mesh.world_size(); ++r) world[static_cast<std::size_t>(r)] = r;
  const std::uint64_t world_id = records::layout::group_id(world.data(), world.size());
  bool world_listed = false;
  for (Dim d : k_all_dims) {
    if (mesh.size(d) <= 1) continue;
    for (auto& members : mesh.process_groups(d)) {
      GroupInfo g;
      g.id = records::layout::group_id(members.data(), members.size());
      g.kind = std::string(dim_name(d));
      g.members = std::move(members);
      world_listed |= g.id == world_id;
      out.push_back(std::move(g));
    }
  }
  if (!world_listed && mesh.world_size() > 1) out.push_back(GroupInfo{world_id, "world", world});
  return out;
}

const CallTiming* RankCalls::find(CallKey key) const {
  const CallKey* it = std::lower_bound(m_keys, m_keys + m_n, key);
  return it != m_keys + m_n && *it == key ? m_calls + (it - m_keys) : nullptr;
}

const CallTiming& RankCalls::at(CallKey key) const {
  const CallTiming* c = find(key);
  if (!c) throw std::out_of_range("RankCalls::at: no call at the key");
  return *c;
}

void CallsByRank::reserve(std::size_t ranks) {
  m_runs.reserve(ranks);
}

namespace {

// Room for `n` more rows in the last of `blocks`: a new block where there is not (its capacity is never exceeded, so
// that the runs' rows stay where they are). Blocks of 1024 rows (40 KB of timings, 16 KB of keys: below malloc's
// threshold for a mapping of their own, so a freed table's blocks are reused by the next, their pages already faulted
// in, as the per-rank arrays were).
template <class T>
std::vector<T>& room_for(std::vector<std::vector<T>>& blocks, std::size_t n) {
  constexpr std::size_t k_block = 1024;
  if (blocks.empty() || blocks.back().capacity() - blocks.back().size() < n) {
    blocks.emplace_back().reserve(std::max(k_block, n));
  }
  return blocks.back();
}

}  // namespace

CallsByRank::Run& CallsByRank::run_of(std::int64_t rank) {
  if (m_runs.empty() || m_runs.back().rank < rank) return m_runs.emplace_back(Run{rank, 0, 0, 0, 0, 0, false});
  auto it =
      std::lower_bound(m_runs.begin(), m_runs.end(), rank, [](const Run& r, std::int64_t x) { return r.rank < x; });
  if (it == m_runs.end() || it->rank != rank) it = m_runs.insert(it, Run{rank, 0, 0, 0, 0, 0, false});
  // The run after it no longer follows the run its keys were compared with (or this one's change).
  if (std::next(it) != m_runs.end()) std::next(it)->same_keys = false;
  return *it;
}

void CallsByRank::put_keys(Run& run, const CallKey* keys, bool share) {
  const auto i = static_cast<std::size_t>(&run - m_runs.data());
  run.same_keys = false;
  if (share && i > 0) {
    const Run& before = m_runs[i - 1];
    if (before.n == run.n &&
        (run.n == 0 || std::equal(keys, keys + run.n, m_key_blocks[before.key_block].data() + before.key_first))) {
      run.key_block = before.key_block;
      run.key_first = before.key_first;
      run.same_keys = true;
      return;
    }
  }
  std::vector<CallKey>& block = room_for(m_key_blocks, run.n);
  run.key_block = static_cast<std::uint32_t>(m_key_blocks.size() - 1);
  run.key_first = static_cast<std::uint32_t>(block.size());
  block.insert(block.end(), keys, keys + run.n);
}

RankCalls CallsByRank::assign(std::int64_t rank, const std::vector<Entry>& entries,
                              std::vector<std::uint32_t>& scratch) {
  Run& run = run_of(rank);
  // Its timings appended to the last block (a run elsewhere left unused: a rank read twice in a round, rare), its keys
  // gathered beside them and then found to be the rank before's or appended.
  std::vector<CallTiming>& block = room_for(m_blocks, entries.size());
  run.block = static_cast<std::uint32_t>(m_blocks.size() - 1);
  run.first = static_cast<std::uint32_t>(block.size());
  std::vector<CallKey>& keys = m_keys_scratch;
  keys.clear();
  // A rank's calls in call order are in key order kind by kind (a group's sequence numbers ascend): where they are,
  // the calls of each of the few kinds in turn are the calls in key order (sorting every rank's calls, assign was a
  // third of build_table's samples at 10k ranks, issue 40).
  constexpr std::uint32_t k_few = 16;
  std::array<std::size_t, k_few> count{};  // per kind, how many
  std::array<std::uint64_t, k_few> last_seq{};
  bool by_kind = true;
  for (const auto& [key, c] : entries) {
    if (key.kind >= k_few || (count[key.kind] > 0 && last_seq[key.kind] >= key.seq)) {
      by_kind = false;
      break;
    }
    ++count[key.kind];
    last_seq[key.kind] = key.seq;
  }
  if (by_kind) {
    // Kind by kind, each a walk of the entries (still in the cache), appended.
    const std::size_t end = block.size() + entries.size();
    for (std::uint32_t k = 0; k < k_few && block.size() < end; ++k) {
      if (count[k] == 0) continue;
      for (const auto& e : entries)
        if (e.first.kind == k) {
          keys.push_back(e.first);
          block.push_back(e.second);
        }
    }
  } else {
    // Else the entries' places sorted by key, of a repeated key in the order appended (as a stable sort, without its
    // buffer allocated per rank: issue 40), so that the last one appended ends its run; each call copied once.
    std::vector<std::uint32_t>& order = scratch;
    order.resize(entries.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return entries[a].first != entries[b].first ? entries[a].first < entries[b].first : a < b;
    });
    for (std::size_t i = 0; i < order.size(); ++i)
      if (i + 1 == order.size() || entries[order[i + 1]].first != entries[order[i]].first) {
        keys.push_back(entries[order[i]].first);
        block.push_back(entries[order[i]].second);
      }
  }
  run.n = static_cast<std::uint32_t>(block.size() - run.first);
  put_keys(run, keys.data(), true);
  return calls_of(static_cast<std::size_t>(&run - m_runs.data()));
}

void CallsByRank::set(std::int64_t rank, CallKey key, const CallTiming& call) {
  Run& run = run_of(rank);
  const RankCalls now = calls_of(static_cast<std::size_t>(&run - m_runs.data()));
  // Its calls with `key` set, appended as a new run (tests build tables call by call: the old run left unused).
  std::vector<CallKey> keys(now.keys(), now.keys() + now.size());
  std::vector<CallTiming> calls(now.timings(), now.timings() + now.size());
  const auto at = std::lower_bound(keys.begin(), keys.end(), key);
  const auto place = at - keys.begin();
  if (at != keys.end() && *at == key) {
    calls[static_cast<std::size_t>(place)] = call;
  } else {
    keys.insert(at, key);
    calls.insert(calls.begin() + place, call);
  }
  std::vector<CallTiming>& block = room_for(m_blocks, calls.size());
  run.block = static_cast<std::uint32_t>(m_blocks.size() - 1);
  run.first = static_cast<std::uint32_t>(block.size());
  block.insert(block.end(), calls.begin(), calls.end());
  run.n = static_cast<std::uint32_t>(calls.size());
  put_keys(run, keys.data(), false);
}

void CallsByRank::erase(CallKey key) {
  // Every run copied into new blocks without the calls taken out (and the unused runs of ranks read again); runs that
  // shared their keys share them still.
  std::vector<std::vector<CallTiming>> old;
  std::vector<std::vector<CallKey>> old_keys;
  old.swap(m_blocks);
  old_keys.swap(m_key_blocks);
  const CallKey* shared_old = nullptr;  // the keys of the run before, in the old blocks
  std::uint32_t shared_block = 0, shared_first = 0, shared_n = 0;
  for (auto& run : m_runs) {
    const CallTiming* first = run.n == 0 ? nullptr : old[run.block].data() + run.first;
    const CallKey* keys = run.n == 0 ? nullptr : old_keys[run.key_block].data() + run.key_first;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < run.n; ++i) kept += keys[i] == key ? 0 : 1;
    std::vector<CallTiming>& block = room_for(m_blocks, kept);
    run.block = static_cast<std::uint32_t>(m_blocks.size() - 1);
    run.first = static_cast<std::uint32_t>(block.size());
    for (std::size_t i = 0; i < run.n; ++i)
      if (keys[i] != key) block.push_back(first[i]);
    if (keys != nullptr && keys == shared_old && run.n == shared_n) {
      run.key_block = shared_block;
      run.key_first = shared_first;
    } else {
      std::vector<CallKey>& kb = room_for(m_key_blocks, kept);
      run.key_block = static_cast<std::uint32_t>(m_key_blocks.size() - 1);
      run.key_first = static_cast<std::uint32_t>(kb.size());
      for (std::size_t i = 0; i < run.n; ++i)
        if (keys[i] != key) kb.push_back(keys[i]);
      shared_old = keys;
      shared_n = run.n;
      shared_block = run.key_block;
      shared_first = run.key_first;
    }
    run.n = static_cast<std::uint32_t>(kept);
    // (same_keys kept: two runs with the same keys still have the same keys without `key`.)
  }
}

RankCalls CallsByRank::at(std::int64_t rank) const {
  const auto it = find(rank);
  if (it == end()) throw std::out_of_range("CallsByRank::at: no such rank");
  return calls_of(it.index());
}

CallsByRank::const_iterator CallsByRank::find(std::int64_t rank) const {
  const auto it =
      std::lower_bound(m_runs.begin(), m_runs.end(), rank, [](const Run& r, std::int64_t x) { return r.rank < x; });
  if (it == m_runs.end() || it->rank != rank) return end();
  return {this, static_cast<std::size_t>(it - m_runs.begin())};
}

std::uint32_t TimingTable::kind_index(const std::string& name) const {
  return static_cast<std::uint32_t>(std::find(kinds.begin(), kinds.end(), name) - kinds.begin());
}

std::uint32_t TimingTable::add_kind(const std::string& name) {
  const std::uint32_t k = kind_index(name);
  if (k == kinds.size()) kinds.push_back(name);
  return k;
}

void UsedCalls::add(const TimingTable& t) {
  kinds = t.kinds;  // t's kinds begin with these
  // Both in rank order, walked side by side: a rank of the table gets its used keys and the table's merged (into one
  // scratch array), the same array as the rank before where that is the same (most ranks), one found by hash or a new
  // one otherwise; a rank not in the table (or without calls in it) keeps its own.
  std::unordered_multimap<std::uint64_t, std::uint32_t> by_hash;  // a set's keys hashed -> the set
  const auto hash_of = [](const std::vector<CallKey>& keys) {
    std::uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (const auto& key : keys) h = (h ^ (key.seq * 0xFF51AFD7ED558CCDULL + key.kind)) * 0xC4CEB9FE1A85EC53ULL;
    return h;
  };
  for (std::uint32_t s = 0; s < sets.size(); ++s) by_hash.emplace(hash_of(sets[s]), s);
  const auto intern = [&](const std::vector<CallKey>& keys, std::uint32_t last) {
    if (last < sets.size() && sets[last] == keys) return last;
    const std::uint64_t h = hash_of(keys);
    for (auto [it, end] = by_hash.equal_range(h); it != end; ++it)
      if (sets[it->second] == keys) return it->second;
    const auto s = static_cast<std::uint32_t>(sets.size());
    sets.push_back(keys);
    by_hash.emplace(h, s);
    return s;
  };
  constexpr auto k_none = static_cast<std::uint32_t>(-1);
  std::vector<std::pair<std::int64_t, std::uint32_t>> out;
  out.reserve(std::max(ranks.size(), t.ranks.size()));
  std::vector<CallKey> merged;
  std::uint32_t last = k_none;         // the array of the last rank merged
  std::uint32_t last_before = k_none;  // ... its used keys before
  RankCalls last_calls;                // (a view of the table's)
  const auto same_keys = [](const RankCalls& a, const RankCalls& b) {
    return a.keys() == b.keys() ? a.size() == b.size()
                                : std::equal(a.keys(), a.keys() + a.size(), b.keys(), b.keys() + b.size());
  };
  auto old = ranks.begin();
  for (std::size_t i = 0; i < t.ranks.size(); ++i) {
    const std::int64_t rank = t.ranks.rank_of(i);
    const RankCalls calls = t.ranks.calls_of(i);
    while (old != ranks.end() && old->first < rank) out.push_back(*old++);
    const bool had = old != ranks.end() && old->first == rank;
    if (calls.empty()) {
      if (had) out.push_back(*old++);
      continue;
    }
    const std::uint32_t before = had ? (old++)->second : k_none;
    // The same used keys and calls as the rank before (most ranks): its merged array, without merging again (a merge
    // and a compare per rank of the earlier rounds' keys, which grow round by round, issue 40).
    // (The table noted where a rank's keys are the rank before's as it built them: those are not read again here,
    // cold. A rank before without calls has other keys than this one's: last_calls, then, is an earlier rank's.)
    if (last != k_none && before == last_before && (t.ranks.same_keys_as_before(i) || same_keys(calls, last_calls))) {
      out.emplace_back(rank, last);
      last_calls = calls;
      continue;
    }
    last_before = before;
    last_calls = calls;
    merged.clear();
    std::size_t u = 0;
    const std::size_t n_used = before == k_none ? 0 : sets[before].size();
    for (const auto& [key, c] : calls) {
      while (u < n_used && sets[before][u] < key) merged.push_back(sets[before][u++]);
      if (u < n_used && sets[before][u] == key) ++u;
      merged.push_back(key);
    }
    for (; u < n_used; ++u) merged.push_back(sets[before][u]);
    last = intern(merged, last);
    out.emplace_back(rank, last);
  }
  out.insert(out.end(), old, ranks.end());
  ranks.swap(out);
}

const std::vector<CallKey>* UsedCalls::of(std::int64_t rank, std::size_t& hint) const {
  if (hint >= ranks.size() || ranks[hint].first != rank) {
    hint = static_cast<std::size_t>(
        std::lower_bound(ranks.begin(), ranks.end(), rank, [](const auto& e, std::int64_t r) { return e.first < r; }) -
        ranks.begin());
    if (hint == ranks.size() || ranks[hint].first != rank) return nullptr;
  }
  return &sets[ranks[hint++].second];
}

void latest_completed_before(const std::vector<records::CollectiveEvent>& ev, std::vector<std::ptrdiff_t>& out) {
  std::vector<std::size_t> done;
  latest_completed_before(ev, out, done);
}

void latest_completed_before(const std::vector<records::CollectiveEvent>& ev, std::vector<std::ptrdiff_t>& out,
                             std::vector<std::size_t>& done) {
  const std::size_t n = ev.size();
  out.assign(n, -1);
  // Where the calls completed in call order (their exits ascending, equal ones allowed: calls one after another),
  // the latest completion before a call is the last earlier call that completed by its enter: no sort and no tree.
  done.clear();  // the calls that completed, in call order
  done.reserve(n);
  bool in_order = true;
  for (std::size_t i = 0; i < n && in_order; ++i) {
    if (ev[i].exit_ns <= 0) continue;
    in_order = done.empty() || ev[done.back()].exit_ns <= ev[i].exit_ns;
    done.push_back(i);
  }
  if (in_order) {
    // Where the enters ascend too (calls entered in call order: every ring scout reads, the simulator's too), how
    // many of the earlier completions were by a call's enter only grows: one walk (with a bisection per call,
    // latest_completed_before was a fifth of build_table's samples at 10k ranks, issue 40); a bisection otherwise.
    std::size_t earlier = 0;  // how many of `done` come before call i
    std::size_t by = 0;       // how many of those completed by call i's enter, where the enters ascend
    bool enters_ascend = true;
    for (std::size_t i = 0; i < n; ++i) {
      while (earlier < done.size() && done[earlier] < i) ++earlier;
      enters_ascend = enters_ascend && (i == 0 || ev[i - 1].enter_ns <= ev[i].enter_ns);
      if (enters_ascend) {
        while (by < earlier && ev[done[by]].exit_ns <= ev[i].enter_ns) ++by;
        if (by > 0) out[i] = static_cast<std::ptrdiff_t>(done[by - 1]);
        continue;
      }
      const auto first = done.begin();
      const auto last = std::upper_bound(first, first + static_cast<std::ptrdiff_t>(earlier), ev[i].enter_ns,
                                         [&](std::int64_t enter, std::size_t j) { return enter < ev[j].exit_ns; });
      if (last != first) out[i] = static_cast<std::ptrdiff_t>(*std::prev(last));
    }
    return;
  }
  std::vector<std::int64_t> exits;  // the distinct completions, ascending
  exits.reserve(n);
  for (const auto& e : ev)
    if (e.exit_ns > 0) exits.push_back(e.exit_ns);
  std::sort(exits.begin(), exits.end());
  exits.erase(std::unique(exits.begin(), exits.end()), exits.end());
  // tree[p] (1-based): the best call among those inserted whose exit's place lies in p's Fenwick range.
  std::vector<std::ptrdiff_t> tree(exits.size() + 1, -1);
  auto better = [&](std::ptrdiff_t a, std::ptrdiff_t b) {  // a beats b: later exit, of equal exits the later call
    if (a < 0) return false;
    if (b < 0) return true;
    const std::int64_t xa = ev[static_cast<std::size_t>(a)].exit_ns, xb = ev[static_cast<std::size_t>(b)].exit_ns;
    return xa != xb ? xa > xb : a > b;
  };
  for (std::size_t i = 0; i < n; ++i) {
    // Calls 0 .. i-1 are in the tree: the best of those whose exit is <= this call's enter.
    const auto places =
        static_cast<std::size_t>(std::upper_bound(exits.begin(), exits.end(), ev[i].enter_ns) - exits.begin());
    std::ptrdiff_t best = -1;
    for (std::size_t p = places; p > 0; p &= p - 1)
      if (better(tree[p], best)) best = tree[p];
    out[i] = best;
    if (ev[i].exit_ns <= 0) continue;
    const std::size_t place =
        static_cast<std::size_t>(std::lower_bound(exits.begin(), exits.end(), ev[i].exit_ns) - exits.begin()) + 1;
    for (std::size_t p = place; p < tree.size(); p += p & (~p + 1))
      if (better(static_cast<std::ptrdiff_t>(i), tree[p])) tree[p] = static_cast<std::ptrdiff_t>(i);
  }
}

namespace {

// A group's place in the table by its id: an open-addressed array of (id, place) slots (linear probing, at most half
// full), with a few ids seen last in front of it (a rank's events name its three or four groups by turns; hashing each
// of 3.6M events' ids was 13% of build_table at 10k ranks). At 100k ranks each rank's events name two groups the
// rank before did not (its pp and dp groups), 25,600 groups in all: in a std::unordered_map each lookup was a few
// cache misses, 4% of the decision (issue 40); here one, in a 1 MB array.
class GroupLookup {
 public:
  static constexpr std::size_t k_none = static_cast<std::size_t>(-1);

  explicit GroupLookup(std::size_t expected) {
    std::size_t bits = 4;
    while ((std::size_t{1} << bits) < 2 * expected + 2) ++bits;
    resize(bits);
    m_recent.fill({0, k_none});
  }
  // The group's place (k_none: not in the table).
  std::size_t find(std::uint64_t id) {
    for (const auto& [seen, at] : m_recent)
      if (seen == id && at != k_none) return at;
    for (std::size_t i = slot(id);; i = (i + 1) & m_mask) {
      const auto& [key, at] = m_slots[i];
      if (at == k_none) return k_none;
      if (key == id) {
        m_recent[m_next] = {id, at};
        m_next = (m_next + 1) % m_recent.size();
        return at;
      }
    }
  }
  // Adds `id` at place `at` (an id already there keeps its place, as std::unordered_map::emplace).
  void add(std::uint64_t id, std::size_t at) {
    if (2 * (m_size + 1) > m_slots.size()) {
      auto old = std::move(m_slots);
      resize(m_bits + 1);
      for (const auto& [key, place] : old)
        if (place != k_none) put(key, place);
    }
    put(id, at);
  }

 private:
  void resize(std::size_t bits) {
    m_bits = bits;
    m_mask = (std::size_t{1} << bits) - 1;
    m_slots.assign(std::size_t{1} << bits, {0, k_none});
    m_size = 0;
  }
  std::size_t slot(std::uint64_t id) const {
    return static_cast<std::size_t>((id * 0x9E3779B97F4A7C15ULL) >> (64 - m_bits));
  }
  void put(std::uint64_t id, std::size_t at) {
    for (std::size_t i = slot(id);; i = (i + 1) & m_mask) {
      auto& [key, place] = m_slots[i];
      if (place == k_none) {
        m_slots[i] = {id, at};
        ++m_size;
        return;
      }
      if (key == id) return;
    }
  }

  std::vector<std::pair<std::uint64_t, std::size_t>> m_slots;  // (id, place); place k_none: empty
  std::size_t m_bits = 0, m_mask = 0, m_size = 0;
  std::array<std::pair<std::uint64_t, std::size_t>, 8> m_recent;  // (id, place); place k_none: empty
  std::size_t m_next = 0;
};

}  // namespace

namespace {

// build_table, where `find_unknown` after a walk of the events for the groups the mesh does not know; without it,
// false as soon as an event names one (`t` then half built).
bool build_table(const RoundEvidence& round, const std::vector<GroupInfo>& known, const UsedCalls* exclude,
                 bool find_unknown, TimingTable& t) {
  t.groups = known;
  if (exclude) t.kinds = exclude->kinds;
  GroupLookup group_of(t.groups.size());
  for (std::size_t i = 0; i < t.groups.size(); ++i) group_of.add(t.groups[i].id, i);
  // Groups the mesh does not know: members are the ranks seen calling them.
  if (find_unknown)
    for (const auto& r : round.ranks)
      for (const auto& e : r.events) {
        if (e.op_seq == 0 || group_of.find(e.fingerprint.group) != GroupLookup::k_none) continue;
        group_of.add(e.fingerprint.group, t.groups.size());
        t.groups.push_back(GroupInfo{e.fingerprint.group, "group:" + hex64(e.fingerprint.group), {}});
      }
  std::vector<bool> unknown(t.groups.size());
  for (std::size_t i = 0; i < t.groups.size(); ++i) unknown[i] = t.groups[i].kind.rfind("group:", 0) == 0;
  if (std::find(unknown.begin(), unknown.end(), true) != unknown.end())
    for (const auto& r : round.ranks)
      for (const auto& e : r.events) {
        if (e.op_seq == 0) continue;
        const std::size_t gi = group_of.find(e.fingerprint.group);
        auto& g = t.groups[gi];
        if (unknown[gi] && std::find(g.members.begin(), g.members.end(), r.rank) == g.members.end())
          g.members.push_back(r.rank);
      }
  for (auto& g : t.groups) std::sort(g.members.begin(), g.members.end());
  std::vector<std::uint32_t> kind_of(t.groups.size());  // per group, its kind's index
  for (std::size_t i = 0; i < t.groups.size(); ++i) kind_of[i] = t.add_kind(t.groups[i].kind);

  // A call is the same call only where the ranks agree on what it is: keys whose (type, count) differ are dropped at
  // the end. The votes in key order, each rank's calls walked beside them as soon as they are built, still in the
  // cache (most ranks make the same calls: O(K) per rank; a std::map of the keys, one lookup per rank and call, was a
  // third of build_table at 10k ranks, and a walk of every rank's calls after the table was built, a sixth at 100k).
  struct Vote {
    CallKey key;
    std::uint8_t type = 0;
    std::uint64_t count = 0;
    bool differs = false;
  };
  std::vector<Vote> votes, fresh, merged;
  const auto vote = [&](const RankCalls& calls) {
    fresh.clear();
    auto v = votes.begin();
    for (const auto& [key, c] : calls) {
      while (v != votes.end() && v->key < key) ++v;
      if (v != votes.end() && v->key == key) {
        if (v->type != c.type || v->count != c.count) v->differs = true;
      } else {
        fresh.push_back(Vote{key, c.type, c.count, false});
      }
    }
    if (fresh.empty()) return;
    merged.clear();
    std::merge(votes.begin(), votes.end(), fresh.begin(), fresh.end(), std::back_inserter(merged),
               [](const Vote& a, const Vote& b) { return a.key < b.key; });
    votes.swap(merged);
  };
  bool reread = false;  // a rank read twice in the round (its last read counts)

  std::vector<records::CollectiveEvent> ev;
  std::vector<RankCalls::Entry> entries;
  std::vector<std::ptrdiff_t> latest;  // per call, latest_completed_before
  std::vector<std::size_t> latest_scratch;
  std::vector<std::uint32_t> assign_scratch;
  std::size_t used_hint = 0;
  t.ranks.reserve(round.ranks.size());
  // Per kind, the largest sequence number among the used keys of `used_max_of` (ranks mostly share their array of
  // used keys): a call past it, as most of a round's calls are, is not used, without a bisection of the array per
  // call (2.5% of the decision at 100k ranks, issue 40). 0 with used_any false: no used key of the kind.
  const std::vector<CallKey>* used_max_of = nullptr;
  std::vector<std::uint64_t> used_max;
  std::vector<char> used_any;
  for (std::size_t ri = 0; ri < round.ranks.size(); ++ri) {
    const RankEvents& r = round.ranks[ri];
    // The next rank's ring asked for while this one's is read: each ring is its own allocation, read cold (the first
    // read of a ring was ~5% of the decision at 100k ranks, issue 40).
    if (ri + 1 < round.ranks.size()) {
      const auto& next = round.ranks[ri + 1].events;
      prefetch_range(next.data(), next.data() + next.size());
    }
    // (The ranks come in ascending order: each rank's entries are added at the maps' end, O(1) with the hint.)
    t.nodes.insert_or_assign(t.nodes.end(), r.rank, r.node);
    // The rank's calls (op_seq 0: no call) in op_seq order: its ring itself where it is so already (no copy).
    const auto by_seq = [](const auto& a, const auto& b) { return a.op_seq < b.op_seq; };
    const bool as_is = std::none_of(r.events.begin(), r.events.end(), [](const auto& e) { return e.op_seq == 0; }) &&
                       std::is_sorted(r.events.begin(), r.events.end(), by_seq);
    if (!as_is) {
      ev.clear();
      for (const auto& e : r.events)
        if (e.op_seq != 0) ev.push_back(e);
      if (!std::is_sorted(ev.begin(), ev.end(), by_seq)) std::sort(ev.begin(), ev.end(), by_seq);
    }
    const std::vector<records::CollectiveEvent>& evs = as_is ? r.events : ev;
    const std::vector<CallKey>* used = exclude ? exclude->of(r.rank, used_hint) : nullptr;
    if (used && used != used_max_of) {
      used_max_of = used;
      used_max.assign(t.kinds.size(), 0);
      used_any.assign(t.kinds.size(), 0);
      for (const auto& key : *used) {
        if (key.kind >= used_max.size()) {
          used_max.resize(key.kind + 1, 0);
          used_any.resize(key.kind + 1, 0);
        }
        used_max[key.kind] = std::max(used_max[key.kind], key.seq);
        used_any[key.kind] = 1;
      }
    }
    const auto is_used = [&](CallKey key) {
      return key.kind < used_any.size() && used_any[key.kind] && key.seq <= used_max[key.kind] &&
             std::binary_search(used->begin(), used->end(), key);
    };
    entries.clear();
    latest_completed_before(evs, latest, latest_scratch);
    for (std::size_t i = 0; i < evs.size(); ++i) {
      const auto& e = evs[i];
      const std::size_t gi = group_of.find(e.fingerprint.group);
      if (gi == GroupLookup::k_none) return false;  // a group the mesh does not know (without find_unknown)
      // An exit closed by a later call of its group (ExitKind::ordered) is only an upper bound on its
      // completion: neither its wait nor the compute after it is timed.
      auto timed = [](const records::CollectiveEvent& x) {
        return x.exit_ns > 0 && x.exit_kind != records::ExitKind::ordered;
      };
      if (!timed(e) || e.enter_ns <= 0 || e.exit_ns < e.enter_ns) continue;
      // The latest completion the rank had seen when it entered this call (unknown when that one is an
      // upper bound).
      if (latest[i] < 0) continue;  // the oldest call of the ring: what came before it is gone
      const auto& before = evs[static_cast<std::size_t>(latest[i])];
      const std::int64_t prev = before.exit_ns;
      if (!timed(before)) continue;
      const CallKey key{kind_of[gi], e.fingerprint.group_seq};
      if (used && is_used(key)) continue;
      CallTiming c;
      c.compute_ns = std::max<std::int64_t>(0, e.enter_ns - prev);
      c.wait_ns = e.exit_ns - e.enter_ns;
      c.wait_exact = e.exit_kind != records::ExitKind::waited;
      c.type = static_cast<std::uint8_t>(e.fingerprint.type);
      c.count = e.fingerprint.count;
      c.op_seq = e.op_seq;
      entries.push_back({key, c});
    }
    if (!t.ranks.empty() && t.ranks.back_rank() >= r.rank) {  // (the ranks come in ascending order: never here)
      const auto was = t.ranks.find(r.rank);
      reread |= was != t.ranks.end() && !(*was).second.empty();
    }
    const RankCalls calls = t.ranks.assign(r.rank, entries, assign_scratch);
    if (!reread) vote(calls);
  }
  if (reread) {  // a rank read twice: its earlier read voted; the votes again over the calls kept
    votes.clear();
    for (const auto& [rank, calls] : t.ranks) vote(calls);
  }
  for (const auto& v : votes) {
    if (!v.differs) continue;
    ++t.misaligned;
    t.ranks.erase(v.key);
  }
  return true;
}

}  // namespace

TimingTable build_table(const RoundEvidence& round, const std::vector<GroupInfo>& known, const UsedCalls* exclude) {
  // Most rounds' events name only the mesh's groups: the table is built in one walk of the events, and built again
  // after a walk for the groups the mesh does not know only where an event names one (that walk first, every
  // round, read every rank's ring once more: issue 40).
  TimingTable t;
  if (build_table(round, known, exclude, false, t)) return t;
  TimingTable again;
  build_table(round, known, exclude, true, again);
  return again;
}

}  // namespace scout::straggler

namespace scout::straggler {

namespace {

// A round's ranks by rank, for the next round's reads to find their earlier read: a dense array where the ranks are
// 0..n-1 (or nearly), a map otherwise (a std::map of 100k ranks per round, built twice per round, was most of
// cpu_per_call and stopped_per_round at 100k ranks). Of a rank read twice, the last read counts.
class ReadsByRank {
 public:
  explicit ReadsByRank(const RoundEvidence& round) {
    std::int64_t top = -1;
    bool negative = false;
    for (const auto& r : round.ranks) {
      top = std::max(top, r.rank);
      negative |= r.rank < 0;
    }
    if (!negative && top < 2 * static_cast<std::int64_t>(round.ranks.size()) + 64) {
      m_dense.assign(static_cast<std::size_t>(top + 1), nullptr);
      for (const auto& r : round.ranks) m_dense[static_cast<std::size_t>(r.rank)] = &r;
    } else {
      m_sparse = true;
      for (const auto& r : round.ranks) m_map[r.rank] = &r;
    }
  }
  const RankEvents* find(std::int64_t rank) const {
    if (m_sparse) {
      auto it = m_map.find(rank);
      return it == m_map.end() ? nullptr : it->second;
    }
    return rank >= 0 && static_cast<std::size_t>(rank) < m_dense.size() ? m_dense[static_cast<std::size_t>(rank)]
                                                                        : nullptr;
  }

 private:
  bool m_sparse = false;
  std::vector<const RankEvents*> m_dense;
  std::map<std::int64_t, const RankEvents*> m_map;
};

}  // namespace

std::vector<std::map<std::int64_t, CpuPerCall>> cpu_per_call(const std::vector<RoundEvidence>& evidence) {
  std::vector<std::map<std::int64_t, CpuPerCall>> out(evidence.size());
  for (std::size_t i = 1; i < evidence.size(); ++i) {
    const ReadsByRank before(evidence[i - 1]);
    for (const auto& r : evidence[i].ranks) {
      const RankEvents* earlier = before.find(r.rank);
      if (!earlier) continue;
      const RankEvents& b = *earlier;
      if (r.cpu_ns < 0 || r.runq_ns < 0 || b.cpu_ns < 0 || b.runq_ns < 0 || r.written <= b.written ||
          r.cpu_ns < b.cpu_ns || r.runq_ns < b.runq_ns)
        continue;  // no counters, no call in between, or another process (counters went back)
      const double calls = static_cast<double>(r.written - b.written);
      CpuPerCall c{static_cast<double>(r.cpu_ns - b.cpu_ns) / calls,
                   static_cast<double>(r.runq_ns - b.runq_ns) / calls};
      if (r.main_cpu_ns >= 0 && b.main_cpu_ns >= 0 && r.main_cpu_ns >= b.main_cpu_ns)
        c.main_cpu_ns = static_cast<double>(r.main_cpu_ns - b.main_cpu_ns) / calls;
      if (r.nivcsw >= 0 && b.nivcsw >= 0 && r.nivcsw >= b.nivcsw)
        c.nivcsw = static_cast<double>(r.nivcsw - b.nivcsw) / calls;
      c.calls = static_cast<std::int64_t>(r.written - b.written);
      c.window_ns = r.read_ns > b.read_ns ? r.read_ns - b.read_ns : 0;
      if (r.throttled_ns >= 0 && b.throttled_ns >= 0 && r.throttled_ns >= b.throttled_ns &&
          r.nr_throttled >= b.nr_throttled && r.nr_periods >= b.nr_periods) {
        c.throttled_ns = static_cast<double>(r.throttled_ns - b.throttled_ns) / calls;
        c.nr_throttled = r.nr_throttled - b.nr_throttled;
        c.nr_periods = r.nr_periods - b.nr_periods;
      }
      c.quota_us = r.quota_us;
      c.period_us = r.period_us;
      const auto per_call = [&](std::int64_t now, std::int64_t then, double scale) {
        return now >= 0 && then >= 0 && now >= then ? static_cast<double>(now - then) * scale / calls : -1.0;
      };
      c.majflt = per_call(r.majflt, b.majflt, 1);
      c.read_bytes = per_call(r.read_bytes, b.read_bytes, 1);
      c.mem_stall_ns = per_call(r.mem_stall_us, b.mem_stall_us, 1000);
      if (r.mem_limit_hits >= 0 && b.mem_limit_hits >= 0 && r.mem_limit_hits >= b.mem_limit_hits)
        c.mem_limit_hits = r.mem_limit_hits - b.mem_limit_hits;
      out[i].insert_or_assign(out[i].end(), r.rank, c);  // (ranks in ascending order: O(1) at the end)
    }
  }
  return out;
}

std::vector<std::map<std::int64_t, StoppedWindow>> stopped_per_round(const std::vector<RoundEvidence>& evidence) {
  std::vector<std::map<std::int64_t, StoppedWindow>> out(evidence.size());
  for (std::size_t i = 1; i < evidence.size(); ++i) {
    const ReadsByRank before(evidence[i - 1]);
    for (const auto& r : evidence[i].ranks) {
      const RankEvents* earlier = before.find(r.rank);
      if (!earlier || r.state_samples <= 0 || r.stopped_samples < 0 || r.stopped_samples > r.state_samples) continue;
      const RankEvents& b = *earlier;
      // Evidence comes from files and other observers: no window that overflows, no absurd call count.
      std::int64_t window = 0;
      if (r.written <= b.written || r.written - b.written > (std::uint64_t{1} << 40) || r.read_ns <= b.read_ns ||
          __builtin_sub_overflow(r.read_ns, b.read_ns, &window))
        continue;
      out[i].insert_or_assign(
          out[i].end(), r.rank,
          StoppedWindow{r.state_samples, r.stopped_samples, window, static_cast<std::int64_t>(r.written - b.written)});
    }
  }
  return out;
}

}  // namespace scout::straggler
