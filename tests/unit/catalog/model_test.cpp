#include "lib/catalog/model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "lib/catalog/compress.hpp"
#include "tests/unit/test_seed.hpp"

namespace scout::catalog {
namespace {

std::vector<std::int64_t> range(std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> v;
  for (std::int64_t r = lo; r <= hi; ++r) v.push_back(r);
  return v;
}

CountVector simulate(const KernelConfig& cfg, std::span<const std::int64_t> rows) {
  std::vector<WorkItem> all;
  for (Kernel k : k_all_kernels) {
    auto items = enumerate_work_items(cfg, rows, k);
    all.insert(all.end(), items.begin(), items.end());
  }
  return count_items(all);
}

// The paper's published case (Table 4 as reviewed in seeds/000): one expert,
// H = O = 128, rows 1..3457, tiles 64x64x32, 108 SMs.
TEST(CatalogModel, PaperCaseGivesFourRegimesAndSixteenRepresentatives) {
  KernelConfig cfg;  // defaults are the paper's configuration; spelled out for the reader
  cfg.tile_m = 64, cfg.tile_n = 64, cfg.tile_k = 32, cfg.sms = 108, cfg.hidden = 128, cfg.output_dim = 128,
  cfg.experts = 1;
  auto result = compress(cfg, ShapeSpace::uniform(1, range(1, 3457)));
  ASSERT_TRUE(result.ok()) << result.error().message();
  const Compression& c = *result;
  EXPECT_EQ(c.shapes, 3457u);
  EXPECT_EQ(c.regimes.size(), 4u);
  EXPECT_EQ(c.representatives, 16u);
  EXPECT_EQ(c.obligations, 1134224u);
  // One rotation through the representatives runs 5,960 work items: the
  // paper's count of "selected execution-path occurrences" for its injections.
  EXPECT_EQ(c.replay_work_items, 5960u);
  std::vector<std::int64_t> reps;
  for (const auto& r : c.regimes)
    for (std::size_t i : r.representatives) reps.push_back(static_cast<std::int64_t>(i) + 1);
  std::sort(reps.begin(), reps.end());
  EXPECT_EQ(reps, (std::vector<std::int64_t>{31, 32, 63, 800, 831, 832, 1696, 1727, 1728, 3360, 3391, 3392, 3424, 3455,
                                             3456, 3457}));
  const double reduction = 1.0 - static_cast<double>(c.representatives) / static_cast<double>(c.shapes);
  EXPECT_NEAR(reduction * 100.0, 99.54, 0.005);
  // Every member is covered exactly once in the accounting.
  std::uint64_t members = 0;
  for (const auto& r : c.regimes) {
    std::uint64_t covered = 0;
    for (auto n : r.representative_covers) covered += n;
    EXPECT_EQ(covered, r.members);
    members += r.members;
  }
  EXPECT_EQ(members, 3457u);
}

TEST(CatalogModel, PaperCaseRegimeBoundariesFollowFromTheTiling) {
  KernelConfig cfg;
  auto result = compress(cfg, ShapeSpace::uniform(1, range(1, 3457)));
  ASSERT_TRUE(result.ok());
  // weight_grad has 4 output tiles x ceil(rows/32) chunks: < 108 items up to
  // 832 rows, <= 216 up to 1728; the linear kernels have 2 x ceil(rows/64)
  // tiles: < 108 up to 3392 rows.
  std::vector<std::pair<std::string, std::uint64_t>> got;
  for (const auto& r : result->regimes) got.emplace_back(fingerprint_label(r.fingerprint), r.members);
  std::vector<std::pair<std::string, std::uint64_t>> want{{"underfilled/underfilled/underfilled", 832},
                                                          {"underfilled/underfilled/one_repeat", 1728 - 832},
                                                          {"underfilled/underfilled/multi_repeat", 3392 - 1728},
                                                          {"one_repeat/one_repeat/multi_repeat", 3457 - 3392}};
  EXPECT_EQ(got, want);
}

// The paper's grouped configurations: 2 to 16 experts per kernel keep 18 to 48
// representatives of 2,048 admitted shapes (uniform rows 1..2048, same tiles,
// H = O = 128, 108 SMs), more as experts are added.
TEST(CatalogModel, GroupedConfigurationsKeepEighteenToFortyEight) {
  std::vector<std::uint64_t> kept;
  for (std::int64_t experts : {2, 4, 8, 16}) {
    KernelConfig cfg;
    cfg.experts = experts;
    auto c = compress(cfg, ShapeSpace::uniform(experts, range(1, 2048)));
    ASSERT_TRUE(c.ok()) << c.error().message();
    kept.push_back(c->representatives);
  }
  EXPECT_EQ(kept.front(), 18u);
  EXPECT_EQ(kept.back(), 48u);
  EXPECT_TRUE(std::is_sorted(kept.begin(), kept.end()));
}

TEST(CatalogModel, ClosedFormCountsEqualSimulatedScheduler) {
  const unsigned seed = test_support::test_seed32();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("ClosedFormCountsEqualSimulatedScheduler seed %u\n", seed);
  auto uni = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    KernelConfig cfg;
    cfg.tile_m = uni(1, 9), cfg.tile_n = uni(1, 9), cfg.tile_k = uni(1, 9);
    cfg.sms = uni(1, 24), cfg.hidden = uni(1, 30), cfg.output_dim = uni(1, 30), cfg.experts = uni(1, 5);
    std::vector<std::int64_t> rows;
    for (std::int64_t e = 0; e < cfg.experts; ++e) rows.push_back(uni(0, 3) == 0 ? 0 : uni(1, 60));
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " tile " << cfg.tile_m << "x" << cfg.tile_n << "x"
                                      << cfg.tile_k << " sms " << cfg.sms << " H " << cfg.hidden << " O "
                                      << cfg.output_dim << " E " << cfg.experts);
    ASSERT_EQ(count_vector(cfg, rows), simulate(cfg, rows));
  }
}

TEST(CatalogModel, QueueRepeatMeansTheCtaRanEarlierWork) {
  KernelConfig cfg;
  cfg.sms = 4, cfg.tile_m = 2, cfg.tile_n = 2, cfg.tile_k = 2, cfg.hidden = 4, cfg.output_dim = 4, cfg.experts = 2;
  std::vector<std::int64_t> rows{3, 5};
  for (Kernel k : k_all_kernels) {
    for (const WorkItem& w : enumerate_work_items(cfg, rows, k)) {
      EXPECT_EQ(w.cta, w.slot % cfg.sms);
      const bool repeat =
          k == Kernel::weight_grad ? weight_grad_role(w.role).queue_repeat : linear_role(w.role).queue_repeat;
      EXPECT_EQ(repeat, w.slot >= cfg.sms);
      EXPECT_EQ(repeat, w.iteration > 0);
    }
  }
}

TEST(CatalogModel, RoleNamesRoundTrip) {
  for (Kernel k : k_all_kernels)
    for (int r = 0; r < role_count(k); ++r) EXPECT_EQ(parse_role_name(k, role_name(k, r)), r) << role_name(k, r);
  EXPECT_EQ(role_name(Kernel::forward, role_index(LinearRole{true, false, Position::last, true})),
            "last+m_tail+queue_repeat");
  EXPECT_EQ(role_name(Kernel::weight_grad, role_index(WeightGradRole{true, Position::last, Position::first, false})),
            "reduction_last+reduction_tail/tile_first");
  EXPECT_EQ(parse_role_name(Kernel::forward, "reduction_last/tile_first"), -1);
}

TEST(CatalogModel, PressureClasses) {
  EXPECT_EQ(pressure_of(107, 108), Pressure::underfilled);
  EXPECT_EQ(pressure_of(108, 108), Pressure::one_repeat);
  EXPECT_EQ(pressure_of(216, 108), Pressure::one_repeat);
  EXPECT_EQ(pressure_of(217, 108), Pressure::multi_repeat);
  for (int id = 0; id < k_fingerprint_ids; ++id) EXPECT_EQ(fingerprint_from_id(id).id(), id);
}

TEST(CatalogModel, TileParsingAndValidation) {
  auto t = parse_tile("128x64x16", KernelConfig{});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->tile_m, 128);
  EXPECT_EQ(t->tile_n, 64);
  EXPECT_EQ(t->tile_k, 16);
  for (const char* bad : {"0x64x32", "64x64", "64x-1x32", "axbxc", "64x64x32x1", "64x64x99999"}) {
    auto r = parse_tile(bad, KernelConfig{});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ExitCode::usage);
  }
  KernelConfig zero;
  zero.sms = 0;
  EXPECT_FALSE(validate(zero).ok());
  KernelConfig ok;
  EXPECT_TRUE(validate(ok).ok());
}

}  // namespace
}  // namespace scout::catalog
