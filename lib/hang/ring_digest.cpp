#include "lib/hang/ring_digest.hpp"

#include <algorithm>

namespace scout::hang {

namespace {

// Index of `v` in `list`, appended when absent.
template <typename T>
std::uint64_t name_of(std::vector<T>& list, T v) {
  auto it = std::find(list.begin(), list.end(), v);
  if (it != list.end()) return static_cast<std::uint64_t>(it - list.begin());
  list.push_back(v);
  return list.size() - 1;
}

struct Hashes {
  std::uint64_t a = 0xcbf29ce484222325ull;  // FNV-1a over 64-bit words
  std::uint64_t b = 0x9e3779b97f4a7c15ull;  // a splitmix64-finalized chain
  void add(std::uint64_t x) {
    a = (a ^ x) * 0x100000001b3ull;
    std::uint64_t z = b + x + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    b = z ^ (z >> 31);
  }
};

}  // namespace

RingDigest ring_digest(const std::vector<records::CollectiveEvent>& ring) {
  RingDigest d;
  Hashes h;
  d.events = ring.size();
  h.add(ring.size());
  for (const auto& e : ring) {
    const auto& f = e.fingerprint;
    h.add(name_of(d.groups, f.group));
    h.add(name_of(d.values, f.root_or_op));
    h.add(f.group_seq);
    h.add(f.count);
    h.add(std::uint64_t{static_cast<std::uint8_t>(f.type)} | std::uint64_t{f.dtype} << 8 |
          std::uint64_t{e.failed} << 16 | std::uint64_t{e.exit_ns != 0} << 17);
  }
  d.a = h.a;
  d.b = h.b;
  return d;
}

std::optional<std::vector<records::CollectiveEvent>> rebuild_ring(const std::vector<records::CollectiveEvent>& rep_ring,
                                                                  const RingDigest& rep, const RingDigest& own) {
  if (!rep.same_shape(own) || rep_ring.size() != rep.events || rep.groups.size() != own.groups.size() ||
      rep.values.size() != own.values.size())
    return std::nullopt;
  std::vector<records::CollectiveEvent> out = rep_ring;
  for (auto& e : out) {
    auto& f = e.fingerprint;
    const auto g = std::find(rep.groups.begin(), rep.groups.end(), f.group) - rep.groups.begin();
    const auto v = std::find(rep.values.begin(), rep.values.end(), f.root_or_op) - rep.values.begin();
    if (static_cast<std::size_t>(g) >= own.groups.size() || static_cast<std::size_t>(v) >= own.values.size())
      return std::nullopt;
    f.group = own.groups[static_cast<std::size_t>(g)];
    f.root_or_op = own.values[static_cast<std::size_t>(v)];
  }
  if (!(ring_digest(out) == own)) return std::nullopt;
  return out;
}

}  // namespace scout::hang
