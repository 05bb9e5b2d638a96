#include "lib/catalog/compress.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "tests/unit/test_seed.hpp"

namespace scout::catalog {
namespace {

// c(shape) by simulating every work item (independent of the closed form).
CountVector simulate(const KernelConfig& cfg, std::span<const std::int64_t> rows) {
  std::vector<WorkItem> all;
  for (Kernel k : k_all_kernels) {
    auto items = enumerate_work_items(cfg, rows, k);
    all.insert(all.end(), items.begin(), items.end());
  }
  return count_items(all);
}

// The tie order of the definition: more total work, more total rows, the
// lexicographically larger vector; true when shape a is preferred to b.
bool preferred(const CountVector& ca, std::span<const std::int64_t> ra, const CountVector& cb,
               std::span<const std::int64_t> rb) {
  if (total_work_items(ca) != total_work_items(cb)) return total_work_items(ca) > total_work_items(cb);
  const auto sa = std::accumulate(ra.begin(), ra.end(), std::int64_t{0}),
             sb = std::accumulate(rb.begin(), rb.end(), std::int64_t{0});
  if (sa != sb) return sa > sb;
  return std::lexicographical_compare(rb.begin(), rb.end(), ra.begin(), ra.end());
}

// All-pairs reference: a shape is a representative unless another shape of
// its fingerprint covers it strictly, or covers it equally and is preferred.
std::set<std::vector<std::int64_t>> brute_force(const KernelConfig& cfg, const ShapeSpace& space) {
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<CountVector> counts;
  std::vector<int> fps;
  std::vector<std::int64_t> scratch;
  for (std::size_t i = 0; i < space.size(); ++i) {
    auto r = space.rows(i, scratch);
    shapes.emplace_back(r.begin(), r.end());
    counts.push_back(simulate(cfg, r));
    fps.push_back(fingerprint_of(counts.back(), cfg.sms).id());
  }
  std::set<std::vector<std::int64_t>> reps;
  for (std::size_t b = 0; b < shapes.size(); ++b) {
    bool dominated = false;
    for (std::size_t a = 0; a < shapes.size() && !dominated; ++a) {
      if (a == b || fps[a] != fps[b] || !covers(counts[a], counts[b])) continue;
      dominated = counts[a] != counts[b] || preferred(counts[a], shapes[a], counts[b], shapes[b]);
    }
    if (!dominated) reps.insert(shapes[b]);
  }
  return reps;
}

std::set<std::vector<std::int64_t>> fast(const KernelConfig& cfg, const ShapeSpace& space, const Compression& c) {
  std::set<std::vector<std::int64_t>> reps;
  std::vector<std::int64_t> scratch;
  for (const auto& r : c.regimes)
    for (std::size_t i : r.representatives) {
      auto rows = space.rows(i, scratch);
      reps.emplace(rows.begin(), rows.end());
    }
  return reps;
}

TEST(CatalogCompress, AgreesWithAllPairsDominanceOnRandomDomains) {
  const unsigned seed = test_support::test_seed32();
  std::printf("AgreesWithAllPairsDominanceOnRandomDomains seed %u\n", seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto uni = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 120; ++trial) {
    KernelConfig cfg;
    cfg.tile_m = uni(1, 8), cfg.tile_n = uni(1, 8), cfg.tile_k = uni(1, 8);
    cfg.sms = uni(1, 24), cfg.hidden = uni(1, 20), cfg.output_dim = uni(1, 20);
    const bool uniform = trial % 2 == 0;
    cfg.experts = uniform ? uni(1, 3) : uni(1, 4);
    ShapeSpace space = ShapeSpace::uniform(1, {});
    if (uniform) {
      std::set<std::int64_t> rows;
      const auto n = uni(1, 80);
      for (int i = 0; i < n; ++i) rows.insert(uni(1, 120));
      space = ShapeSpace::uniform(cfg.experts, std::vector<std::int64_t>(rows.begin(), rows.end()));
    } else {
      std::set<std::vector<std::int64_t>> vectors;
      const auto n = uni(1, cfg.experts == 1 ? 40 : 60);  // E = 1 has only 40 non-zero vectors
      while (static_cast<std::int64_t>(vectors.size()) < n) {
        std::vector<std::int64_t> v;
        for (std::int64_t e = 0; e < cfg.experts; ++e) v.push_back(uni(0, 40));
        if (std::any_of(v.begin(), v.end(), [](auto r) { return r > 0; })) vectors.insert(v);
      }
      std::vector<std::int64_t> flat;
      for (const auto& v : vectors) flat.insert(flat.end(), v.begin(), v.end());
      space = ShapeSpace::heterogeneous(cfg.experts, std::move(flat));
    }
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " tile " << cfg.tile_m << "x" << cfg.tile_n << "x"
                                      << cfg.tile_k << " sms " << cfg.sms << " H " << cfg.hidden << " O "
                                      << cfg.output_dim << " E " << cfg.experts << " shapes " << space.size());
    auto c = compress(cfg, space);
    ASSERT_TRUE(c.ok()) << c.error().message();
    ASSERT_EQ(fast(cfg, space, *c), brute_force(cfg, space));
    // Coverage: every shape is covered by a representative of its class.
    std::vector<std::int64_t> scratch, scratch_b;
    std::uint64_t obligations = 0;
    for (std::size_t i = 0; i < space.size(); ++i) {
      auto rows = space.rows(i, scratch);
      const CountVector ci = count_vector(cfg, rows);
      obligations += total_work_items(ci);
      const Fingerprint fi = fingerprint_of(ci, cfg.sms);
      bool found = false;
      for (const auto& r : c->regimes)
        for (std::size_t k = 0; k < r.representatives.size() && !found; ++k)
          found = r.fingerprint == fi && covers(r.representative_counts[k], ci);
      ASSERT_TRUE(found) << "shape " << i << " is not covered";
    }
    EXPECT_EQ(c->obligations, obligations);
  }
}

TEST(CatalogCompress, ObservationsReplaceModelCounts) {
  KernelConfig cfg;
  cfg.sms = 108;
  std::vector<std::int64_t> rows;
  for (std::int64_t r = 1; r <= 64; ++r) rows.push_back(r);
  ShapeSpace space = ShapeSpace::uniform(1, rows);
  auto base = compress(cfg, space);
  ASSERT_TRUE(base.ok());
  // Without observations 1..31 collapse onto 31. Observe that shape 5 ran one
  // more forward tile as a queue repeat (e.g. a kernel that splits its work
  // differently): it must now be kept, and only that differs from the model.
  Observations obs;
  CountVector c5 = count_vector(cfg, std::vector<std::int64_t>{5});
  c5[static_cast<std::size_t>(kernel_offset(Kernel::forward))] += 1;
  c5[static_cast<std::size_t>(
      count_index(Kernel::forward, role_index(LinearRole{true, false, Position::last, true})))] += 1;
  obs[{5}] = c5;
  obs[{9}] = count_vector(cfg, std::vector<std::int64_t>{9});        // agrees with the model
  obs[{1000}] = count_vector(cfg, std::vector<std::int64_t>{1000});  // outside the space: ignored
  auto with = compress(cfg, space, &obs);
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(with->observed_shapes, 2u);
  EXPECT_EQ(with->observed_differ, 1u);
  auto reps = [&](const Compression& c) {
    std::set<std::int64_t> s;
    for (const auto& r : c.regimes)
      for (std::size_t i : r.representatives) s.insert(rows[i]);
    return s;
  };
  // Rows 1..31 share one count vector (31 is kept); the observed 5 now covers
  // 31 strictly, so 5 replaces it and nothing else changes.
  std::set<std::int64_t> expected = reps(*base);
  EXPECT_EQ(expected.count(31), 1u);
  expected.erase(31);
  expected.insert(5);
  EXPECT_EQ(reps(*with), expected);
}

TEST(CatalogCompress, RejectsInvalidSpaces) {
  KernelConfig cfg;
  EXPECT_EQ(compress(cfg, ShapeSpace::uniform(1, {})).error().code, ExitCode::bad_input);
  EXPECT_EQ(compress(cfg, ShapeSpace::uniform(1, {-3})).error().code, ExitCode::bad_input);
  KernelConfig two = cfg;
  two.experts = 2;
  EXPECT_EQ(compress(two, ShapeSpace::heterogeneous(2, {0, 0})).error().code, ExitCode::bad_input);
  EXPECT_EQ(compress(cfg, ShapeSpace::uniform(2, {4})).error().code, ExitCode::usage);  // experts != config.experts
  KernelConfig zero_tile;
  zero_tile.tile_k = 0;
  EXPECT_EQ(compress(zero_tile, ShapeSpace::uniform(1, {4})).error().code, ExitCode::usage);
}

TEST(CatalogCompress, ScalesToManyShapesWithFewRepresentatives) {
  // 200,000 shapes in one pass (timing lives in bench/catalog_bench.cpp).
  KernelConfig cfg;
  std::vector<std::int64_t> rows;
  for (std::int64_t r = 1; r <= 200000; ++r) rows.push_back(r);
  auto c = compress(cfg, ShapeSpace::uniform(1, rows));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->shapes, 200000u);
  EXPECT_LT(c->representatives, 100u);
  std::uint64_t members = 0;
  for (const auto& r : c->regimes) members += r.members;
  EXPECT_EQ(members, 200000u);
}

}  // namespace
}  // namespace scout::catalog
