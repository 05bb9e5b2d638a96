#include "lib/hang/position.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "lib/hang/silence.hpp"
#include "lib/hang/thresholds.hpp"

namespace scout::hang {

namespace {

constexpr std::uint32_t k_magic = 0x31504353;  // "SCP1"
constexpr std::uint16_t k_version = 1;
constexpr std::uint16_t k_flag_clean = 1;

// A 64-bit mix of a rank (splitmix64's finalizer): the wrapping sum of the mixes of a node's ranks
// tells two sets of ranks apart where their plain sums agree (a rank counted twice, another missing).
std::uint64_t mix(std::int64_t rank) {
  auto z = static_cast<std::uint64_t>(rank) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename T>
void put(std::vector<std::uint8_t>& out, std::size_t at, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out[at + i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(v) >> (8 * i));
}

template <typename T>
T get(const std::vector<std::uint8_t>& in, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(in[at + i]) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

NodePosition node_position(const NodeEvidence& e) {
  NodePosition p;
  p.observer = e.observer;
  p.collected_ns = e.collected_ns;
  const Silence silence = silence_of(e);
  p.newest_progress_ns = silence.newest_progress_ns();
  p.clean = !e.ranks.empty() && e.issues.empty() && !silence.bad_process();
  for (const auto& r : e.ranks) p.world_size = std::max(p.world_size, r.snapshot.world_size);
  for (const auto& r : e.ranks) {
    const auto& s = r.snapshot;
    ++p.ranks;
    p.rank_sum += s.rank;
    p.rank_mix_sum = static_cast<std::int64_t>(static_cast<std::uint64_t>(p.rank_mix_sum) + mix(s.rank));
    p.clean = p.clean && r.writer_alive && r.process.state == ProcessState::alive &&
              s.collective_state != records::CollectiveState::failed && s.phase != records::Phase::comm_error &&
              s.phase != records::Phase::terminated && s.world_size == p.world_size && s.rank >= 0 &&
              s.rank < p.world_size && p.world_size <= k_max_positions_world;
  }
  return p;
}

std::vector<std::uint8_t> encode_node_position(const NodeEvidence& evidence) {
  const NodePosition p = node_position(evidence);
  std::vector<std::uint8_t> out(k_node_position_bytes, 0);
  put<std::uint32_t>(out, 0, k_magic);
  put<std::uint16_t>(out, 4, k_version);
  put<std::uint16_t>(out, 6, p.clean ? k_flag_clean : 0);
  const std::int64_t fields[] = {p.observer, p.collected_ns, p.newest_progress_ns, p.world_size,
                                 p.ranks,    p.rank_sum,     p.rank_mix_sum};
  for (std::size_t i = 0; i < std::size(fields); ++i) put<std::int64_t>(out, 8 + 8 * i, fields[i]);
  return out;
}

std::optional<NodePosition> decode_node_position(const std::vector<std::uint8_t>& in) {
  if (in.size() != k_node_position_bytes || get<std::uint32_t>(in, 0) != k_magic ||
      get<std::uint16_t>(in, 4) != k_version)
    return std::nullopt;
  const auto flags = get<std::uint16_t>(in, 6);
  if ((flags & ~k_flag_clean) != 0) return std::nullopt;
  NodePosition p;
  p.clean = (flags & k_flag_clean) != 0;
  std::int64_t* fields[] = {&p.observer, &p.collected_ns, &p.newest_progress_ns, &p.world_size,
                            &p.ranks,    &p.rank_sum,     &p.rank_mix_sum};
  for (std::size_t i = 0; i < std::size(fields); ++i) *fields[i] = get<std::int64_t>(in, 8 + 8 * i);
  // Times and counts are never negative (the mix sum may be anything).
  for (std::size_t i = 0; i + 1 < std::size(fields); ++i)
    if (*fields[i] < 0) return std::nullopt;
  return p;
}

bool positions_prove_healthy(const std::vector<std::optional<NodePosition>>& positions, std::int64_t threshold_ns) {
  if (positions.empty()) return false;
  const std::int64_t world = positions.front() ? positions.front()->world_size : 0;
  if (world <= 0 || world > k_max_positions_world) return false;
  std::int64_t ranks = 0, sum = 0, now = 0, newest = 0;
  std::uint64_t mixes = 0;
  for (std::size_t i = 0; i < positions.size(); ++i) {
    const auto& p = positions[i];
    if (!p || !p->clean || p->world_size != world || p->observer != static_cast<std::int64_t>(i) || p->ranks <= 0 ||
        p->ranks > world || p->rank_sum < 0 || p->rank_sum > world * world)
      return false;
    ranks += p->ranks;
    sum += p->rank_sum;
    mixes += static_cast<std::uint64_t>(p->rank_mix_sum);
    if (ranks > world || sum < 0) return false;  // more ranks than the world
    now = std::max(now, p->collected_ns);
    newest = std::max(newest, p->newest_progress_ns);
  }
  if (ranks != world || sum != world * (world - 1) / 2) return false;
  std::uint64_t expected = 0;
  for (std::int64_t r = 0; r < world; ++r) expected += mix(r);
  if (mixes != expected) return false;
  // No rank published yet: starting up, not silent (the silence rule's own reading).
  return newest == 0 || now - newest < threshold_ns;
}

std::optional<std::vector<std::int64_t>> position_ranks(const NodePosition& p) {
  const std::int64_t n = p.ranks;
  if (n <= 0 || n > k_max_positions_world || p.world_size > k_max_positions_world) return std::nullopt;
  const std::int64_t spread = n * (n - 1) / 2;  // the sum of 0..n-1
  if (p.rank_sum < spread || (p.rank_sum - spread) % n != 0) return std::nullopt;
  const std::int64_t first = (p.rank_sum - spread) / n;
  std::vector<std::int64_t> out;
  std::uint64_t mixes = 0;
  for (std::int64_t r = first; r < first + n; ++r) {
    mixes += mix(r);
    out.push_back(r);
  }
  if (mixes != static_cast<std::uint64_t>(p.rank_mix_sum)) return std::nullopt;
  return out;
}

NodeEvidence compact_evidence(const NodeEvidence& evidence) {
  NodeEvidence out = evidence;
  for (auto& r : out.ranks) {
    r.ring = ring_digest(r.snapshot.recent);
    r.snapshot.recent.clear();
    r.snapshot.recent.shrink_to_fit();
  }
  return out;
}

std::vector<std::int64_t> select_ring_holders(const std::vector<std::optional<NodeEvidence>>& compact) {
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::int64_t> holder;  // digest -> lowest node index
  for (std::size_t i = 0; i < compact.size(); ++i) {
    if (!compact[i]) continue;
    for (const auto& r : compact[i]->ranks) {
      if (!r.ring || r.ring->events == 0) continue;
      holder.try_emplace({r.ring->a, r.ring->b}, static_cast<std::int64_t>(i));
    }
  }
  std::vector<std::int64_t> out;
  for (const auto& [digest, node] : holder) out.push_back(node);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

RingRestore restore_rings(std::vector<std::optional<NodeEvidence>>& nodes) {
  struct Rep {
    const std::vector<records::CollectiveEvent>* ring;
    RingDigest digest;
  };
  std::map<std::pair<std::uint64_t, std::uint64_t>, Rep> reps;
  for (const auto& n : nodes) {
    if (!n) continue;
    for (const auto& r : n->ranks) {
      if (r.ring) continue;  // compact: no ring to lend
      auto d = ring_digest(r.snapshot.recent);
      const std::pair key{d.a, d.b};
      reps.try_emplace(key, Rep{&r.snapshot.recent, std::move(d)});
    }
  }
  RingRestore out;
  for (auto& n : nodes) {
    if (!n) continue;
    for (auto& r : n->ranks) {
      if (!r.ring) continue;
      const RingDigest own = std::move(*r.ring);
      r.ring.reset();
      if (own.events == 0) continue;
      auto it = reps.find({own.a, own.b});
      auto rebuilt = it == reps.end() ? std::nullopt : rebuild_ring(*it->second.ring, it->second.digest, own);
      if (!rebuilt) {
        r.ring_lost = true;
        ++out.lost;
        continue;
      }
      r.snapshot.recent = std::move(*rebuilt);
      ++out.restored;
    }
  }
  return out;
}

}  // namespace scout::hang
