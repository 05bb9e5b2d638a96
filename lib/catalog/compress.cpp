#include "lib/catalog/compress.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace scout::catalog {

ShapeSpace ShapeSpace::uniform(std::int64_t experts, std::vector<std::int64_t> rows) {
  ShapeSpace s;
  s.m_uniform = true;
  s.m_experts = experts;
  s.m_values = std::move(rows);
  return s;
}

ShapeSpace ShapeSpace::heterogeneous(std::int64_t experts, std::vector<std::int64_t> vectors) {
  ShapeSpace s;
  s.m_uniform = false;
  s.m_experts = experts;
  s.m_values = std::move(vectors);
  return s;
}

std::span<const std::int64_t> ShapeSpace::rows(std::size_t index, std::vector<std::int64_t>& scratch) const {
  const auto e = static_cast<std::size_t>(m_experts);
  if (m_uniform) {
    scratch.assign(e, m_values[index]);
    return scratch;
  }
  return std::span<const std::int64_t>(m_values.data() + index * e, e);
}

Status ShapeSpace::validate() const {
  if (m_experts < 1 || m_experts > k_max_experts)
    return usage_error(fmt::format("experts per kernel is {}", m_experts),
                       fmt::format("it must be between 1 and {}", k_max_experts));
  if (m_values.empty())
    return input_error("the shape space is empty", {},
                       "give --rows (e.g. 1-3457) or a --rows-file with at least one shape");
  if (!m_uniform && m_values.size() % static_cast<std::size_t>(m_experts) != 0)
    return internal_error("heterogeneous shape space is not a whole number of vectors");
  std::vector<std::int64_t> scratch;
  for (std::size_t i = 0; i < size(); ++i) {
    auto r = rows(i, scratch);
    bool any = false;
    for (std::size_t e = 0; e < r.size(); ++e) {
      if (r[e] < 0 || r[e] > k_max_rows)
        return input_error(fmt::format("shape {} gives expert {} {} rows", i + 1, e, r[e]),
                           fmt::format("row counts must be between 0 and {}", k_max_rows), "fix the row counts");
      any = any || r[e] > 0;
    }
    if (!any)
      return input_error(fmt::format("shape {} has no rows for any expert", i + 1),
                         "a shape without work has nothing to replay", "drop it from the shape space");
  }
  return Ok{};
}

CountVector shape_counts(const KernelConfig& config, std::span<const std::int64_t> rows,
                         const Observations* observations) {
  if (observations && !observations->empty()) {
    auto it = observations->find(std::vector<std::int64_t>(rows.begin(), rows.end()));
    if (it != observations->end()) return it->second;
  }
  return count_vector(config, rows);
}

namespace {

// Sort key of one shape: its class and its place in the tie order.
struct Key {
  std::uint64_t total_work;
  std::int64_t total_rows;
  std::uint32_t index;
  std::uint8_t fingerprint;
};

}  // namespace

Result<Compression> compress(const KernelConfig& config, const ShapeSpace& space, const Observations* observations) {
  if (auto s = validate(config); !s) return s.error();
  if (space.experts() != config.experts)
    return usage_error(fmt::format("the shape space has {} experts per shape but the kernel serves {}", space.experts(),
                                   config.experts),
                       {}, "make --experts match the length of the row vectors");
  if (auto s = space.validate(); !s) return s.error();
  if (space.size() > k_max_shapes)
    return input_error(fmt::format("the shape space has {} shapes", space.size()),
                       fmt::format("at most {} are supported", k_max_shapes),
                       "split the shape space into several catalogs");

  Compression out;
  out.shapes = space.size();
  std::vector<Key> keys(space.size());
  std::array<bool, k_count_dims> used{};  // dimensions some shape uses
  std::vector<std::int64_t> scratch;
  for (std::size_t i = 0; i < space.size(); ++i) {
    auto rows = space.rows(i, scratch);
    CountVector c = count_vector(config, rows);
    if (observations && !observations->empty()) {
      auto it = observations->find(std::vector<std::int64_t>(rows.begin(), rows.end()));
      if (it != observations->end()) {
        ++out.observed_shapes;
        if (it->second != c) ++out.observed_differ;
        c = it->second;
      }
    }
    for (int d = 0; d < k_count_dims; ++d)
      used[static_cast<std::size_t>(d)] = used[static_cast<std::size_t>(d)] || c[static_cast<std::size_t>(d)] != 0;
    keys[i] = Key{total_work_items(c), std::accumulate(rows.begin(), rows.end(), std::int64_t{0}),
                  static_cast<std::uint32_t>(i), static_cast<std::uint8_t>(fingerprint_of(c, config.sms).id())};
  }
  std::vector<int> dims;
  for (int d = 0; d < k_count_dims; ++d)
    if (used[static_cast<std::size_t>(d)]) dims.push_back(d);

  // Class ascending, then the tie order: more work, more rows, larger vector.
  std::vector<std::int64_t> scratch_b;
  std::sort(keys.begin(), keys.end(), [&](const Key& a, const Key& b) {
    if (a.fingerprint != b.fingerprint) return a.fingerprint < b.fingerprint;
    if (a.total_work != b.total_work) return a.total_work > b.total_work;
    if (a.total_rows != b.total_rows) return a.total_rows > b.total_rows;
    if (!space.is_uniform()) {
      auto ra = space.rows(a.index, scratch);
      auto rb = space.rows(b.index, scratch_b);
      if (!std::equal(ra.begin(), ra.end(), rb.begin(), rb.end()))
        return std::lexicographical_compare(rb.begin(), rb.end(), ra.begin(), ra.end());
    }
    return a.index < b.index;
  });

  auto covered_by = [&](const CountVector& a, const CountVector& b) {
    for (int d : dims)
      if (a[static_cast<std::size_t>(d)] < b[static_cast<std::size_t>(d)]) return false;
    return true;
  };

  std::size_t i = 0;
  while (i < keys.size()) {
    Regime regime;
    regime.fingerprint = fingerprint_from_id(keys[i].fingerprint);
    const std::uint8_t id = keys[i].fingerprint;
    for (; i < keys.size() && keys[i].fingerprint == id; ++i) {
      auto rows = space.rows(keys[i].index, scratch);
      CountVector c = shape_counts(config, rows, observations);
      ++regime.members;
      regime.obligations += keys[i].total_work;
      bool covered = false;
      for (std::size_t s = 0; s < regime.representative_counts.size(); ++s) {
        if (covered_by(regime.representative_counts[s], c)) {
          ++regime.representative_covers[s];
          covered = true;
          break;
        }
      }
      if (covered) continue;
      regime.representatives.push_back(keys[i].index);
      regime.representative_counts.push_back(c);
      regime.representative_covers.push_back(1);
    }
    // Present representatives ascending by shape order (rows for sorted spaces).
    std::vector<std::size_t> order(regime.representatives.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return regime.representatives[a] < regime.representatives[b]; });
    Regime sorted = regime;
    for (std::size_t k = 0; k < order.size(); ++k) {
      sorted.representatives[k] = regime.representatives[order[k]];
      sorted.representative_counts[k] = regime.representative_counts[order[k]];
      sorted.representative_covers[k] = regime.representative_covers[order[k]];
    }
    out.representatives += sorted.representatives.size();
    out.obligations += sorted.obligations;
    for (const CountVector& c : sorted.representative_counts) out.replay_work_items += total_work_items(c);
    out.regimes.push_back(std::move(sorted));
  }
  return out;
}

}  // namespace scout::catalog
