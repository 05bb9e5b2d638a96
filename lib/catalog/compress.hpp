// Dominance and compression: the admitted shape space, measured observations
// that replace model counts, and the catalog of representatives.
//
// A covers B when F(A) == F(B) and c(A) >= c(B) componentwise (c holds each
// kernel's work items and role counts, so "per kernel A's work >= B's" is part
// of it). The catalog keeps, per fingerprint class, the maximal elements: a
// shape is kept unless another shape covers it. Shapes with equal count
// vectors cover each other; one of them is kept, chosen by larger total work
// (work items of the three kernels), then larger total rows, then the
// lexicographically larger row vector. This is the minimum covering set: a
// maximal vector is covered only by shapes with the same vector.
//
// Algorithm (sort-filter skyline): compute (F, total work) for every shape,
// sort each class by the tie order, then sweep it once keeping a skyline.
// Strict dominance implies strictly more total work items, so a shape can only
// be covered by one that comes earlier; each shape is compared with the
// skyline so far, over only the dimensions some shape in the space uses.
// Memory is O(shapes) keys plus the skyline's vectors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lib/catalog/model.hpp"

namespace scout::catalog {

// Most shapes one catalog admits (memory: about 40 bytes per shape).
inline constexpr std::size_t k_max_shapes = 20'000'000;

// The admitted shapes: either one row count for all experts (uniform) or a
// row vector per shape (heterogeneous), each vector of config.experts entries.
class ShapeSpace {
 public:
  // Uniform space: every expert gets the same row count, one shape per entry
  // of `rows` (sorted ascending, duplicates removed by the caller).
  static ShapeSpace uniform(std::int64_t experts, std::vector<std::int64_t> rows);
  // Heterogeneous space: `vectors` holds shapes * experts row counts, shape-major.
  static ShapeSpace heterogeneous(std::int64_t experts, std::vector<std::int64_t> vectors);

  std::size_t size() const {
    return m_uniform ? m_values.size() : m_values.size() / static_cast<std::size_t>(m_experts);
  }
  std::int64_t experts() const { return m_experts; }
  bool is_uniform() const { return m_uniform; }
  // The row vector of shape `index`; `scratch` backs it for uniform spaces.
  std::span<const std::int64_t> rows(std::size_t index, std::vector<std::int64_t>& scratch) const;
  // Checks every row count against the model's bounds and that no shape is all zeros.
  Status validate() const;

 private:
  bool m_uniform = true;
  std::int64_t m_experts = 1;
  std::vector<std::int64_t> m_values;
};

// Measured count vectors, keyed by row vector (one entry per expert).
using Observations = std::map<std::vector<std::int64_t>, CountVector>;

// One fingerprint class of the catalog.
struct Regime {
  Fingerprint fingerprint;
  std::uint64_t members = 0;                 // shapes in the class
  std::uint64_t obligations = 0;             // work items of all members (all covered)
  std::vector<std::size_t> representatives;  // shape indices, ascending by rows
  std::vector<CountVector> representative_counts;
  std::vector<std::uint64_t> representative_covers;  // members first covered by each representative
};

// The result of compression.
struct Compression {
  std::vector<Regime> regimes;  // ascending by fingerprint id
  std::uint64_t shapes = 0;
  std::uint64_t representatives = 0;
  std::uint64_t obligations = 0;        // work items over every admitted shape
  std::uint64_t replay_work_items = 0;  // work items of the representatives
  std::uint64_t observed_shapes = 0;    // shapes whose counts came from observations
  std::uint64_t observed_differ = 0;    // of those, how many differ from the model
};

// Counts of shape `rows`: the observation when one covers it, else the model.
CountVector shape_counts(const KernelConfig& config, std::span<const std::int64_t> rows,
                         const Observations* observations);

// Compresses `space` under `config`; `observations` (may be null) replace the
// model's counts for the shapes they name. Fails only on invalid input.
Result<Compression> compress(const KernelConfig& config, const ShapeSpace& space,
                             const Observations* observations = nullptr);

}  // namespace scout::catalog
