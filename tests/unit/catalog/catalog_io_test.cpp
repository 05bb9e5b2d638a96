#include "lib/catalog/catalog_io.hpp"

#include <dirent.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "lib/common/file.hpp"

namespace scout::catalog {
namespace {

TEST(CatalogRows, RangesAndLists) {
  auto r = parse_rows_spec("1-5, 3,9");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, (std::vector<std::int64_t>{1, 2, 3, 4, 5, 9}));
  for (const char* bad : {"", "0", "-3", "5-2", "1-", "a", "1,,2", "3-x", "0-4", "1-3000000000", "1-20000001",
                          "1-15000000,20000000-26000000"}) {
    auto e = parse_rows_spec(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().code, ExitCode::usage) << bad;
  }
}

TEST(CatalogRows, OverlappingRangesMergeBeforeTheLimit) {
  // Overlaps count once: two copies of a range within the limit are within it.
  auto r = parse_rows_spec("4-6,1-3,5-9,2");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  auto twice = parse_rows_spec("1-1000000,1-1000000,500000-1500000");
  ASSERT_TRUE(twice.ok()) << twice.error().message();
  ASSERT_EQ(twice->size(), 1500000u);
  EXPECT_EQ(twice->front(), 1);
  EXPECT_EQ(twice->back(), 1500000);
  auto over = parse_rows_spec("1-10000000,10000002-20000003");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ExitCode::usage);
}

TEST(CatalogRows, FileFormats) {
  auto text = parse_rows_file("# experts: 3\n1, 0, 7\n\n2 2 2  # two each\n1,0,7\n", std::nullopt, "f");
  ASSERT_TRUE(text.ok()) << text.error().message();
  EXPECT_EQ(text->experts, 3);
  EXPECT_EQ(text->values, (std::vector<std::int64_t>{1, 0, 7, 2, 2, 2}));
  EXPECT_EQ(text->duplicates, 1u);
  auto json = parse_rows_file(R"([[1,2],[3,4]])", 2, "f");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->values, (std::vector<std::int64_t>{1, 2, 3, 4}));
  auto doc =
      parse_rows_file(R"({"schema":"scout.catalog.rows","schema_version":"1.0","shapes":[[5]]})", std::nullopt, "f");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(doc->values, (std::vector<std::int64_t>{5}));
  const char* bad[] = {"",      "1,2\n3\n",           "1,-2\n", "0,0\n", "[[1,2],[3]]", "[[1,\"a\"]]",
                       "[1,2]", "{\"shapes\":[[1]]}", "1,x\n",  "[[1,2]"};
  for (const char* b : bad) {
    auto e = parse_rows_file(b, std::nullopt, "f");
    ASSERT_FALSE(e.ok()) << b;
    EXPECT_EQ(e.error().code, ExitCode::bad_input) << b;
  }
  EXPECT_FALSE(parse_rows_file("1,2\n", 3, "f").ok());  // --experts disagrees
}

TEST(CatalogObservations, RoundTripAndValidation) {
  KernelConfig cfg;
  cfg.experts = 2;
  Observations obs;
  obs[{3, 70}] = count_vector(cfg, std::vector<std::int64_t>{3, 70});
  obs[{0, 9}] = count_vector(cfg, std::vector<std::int64_t>{0, 9});
  const std::string text = observations_to_json(cfg, obs).dump();
  auto back = parse_observations(text, cfg, "obs.json");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(*back, obs);

  KernelConfig other = cfg;
  other.sms = 132;
  auto e = parse_observations(text, other, "obs.json");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("another kernel configuration"), std::string::npos);

  auto mutate = [&](auto f) {
    nlohmann::json j = nlohmann::json::parse(text);
    f(j);
    return parse_observations(j.dump(), cfg, "obs.json");
  };
  EXPECT_FALSE(mutate([](auto& j) { j["schema_version"] = "2.0"; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["observations"][0]["kernels"]["forward"]["work_items"] = 999; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["observations"][0]["kernels"]["forward"]["roles"]["sideways"] = 1; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["observations"][0]["kernels"].erase("weight_grad"); }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["observations"][1]["rows"] = j["observations"][0]["rows"]; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["observations"][0]["rows"] = {1, -1}; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["observations"][0]["rows"] = {1}; }).ok());
  EXPECT_FALSE(parse_observations("{not json", cfg, "obs.json").ok());
}

Environment sample_env() {
  EnvOverrides o;
  const char* values[] = {"NVIDIA A100-SXM4-80GB", "108", "8.0", "12.4", "12.4", "2.21.5", "2.4.0"};
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = values[i];
  return detect_environment(o);
}

TEST(CatalogDocument, RoundTripAndRejections) {
  KernelConfig cfg;
  std::vector<std::int64_t> rows{31, 32, 63, 64};
  ShapeSpace space = ShapeSpace::uniform(1, rows);
  auto c = compress(cfg, space);
  ASSERT_TRUE(c.ok());
  CatalogProvenance prov;
  prov.created_at = "2026-11-29T08:00:00.000Z";
  prov.rows_source = "--rows 31,32,63,64";
  const Environment env = sample_env();
  const std::string text = catalog_to_json(env, cfg, space, *c, prov).dump();
  auto loaded = parse_catalog(text, "cat.json");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  EXPECT_TRUE(compare(loaded->environment, env).empty());
  EXPECT_EQ(loaded->shapes, 4u);
  EXPECT_EQ(loaded->representatives, c->representatives);

  auto mutate = [&](auto f) {
    nlohmann::json j = nlohmann::json::parse(text);
    f(j);
    return parse_catalog(j.dump(), "cat.json");
  };
  auto v2 = mutate([](auto& j) { j["schema_version"] = "2.0"; });
  ASSERT_FALSE(v2.ok());
  EXPECT_EQ(v2.error().code, ExitCode::bad_input);
  EXPECT_NE(v2.error().message().find("schema version 2.0"), std::string::npos) << v2.error().message();
  EXPECT_NE(v2.error().message().find("rebuild the catalog"), std::string::npos);
  EXPECT_FALSE(mutate([](auto& j) { j["kernel"]["tile"]["k"] = 0; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["kernel"]["sms"] = -1; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["kernel"]["model_version"] = 99; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["environment"].erase("cuda"); }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["environment"]["cuda"] = 12; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["schema"] = "scout.verdict"; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["totals"]["representatives"] = 9; }).ok());
  EXPECT_FALSE(parse_catalog("[]", "cat.json").ok());
}

TEST(CatalogEnvironment, ComparisonNamesEachDifferingField) {
  const Environment a = sample_env();
  EnvOverrides o;
  const char* values[] = {"NVIDIA A100-SXM4-80GB", "108", "8.0", "12.4", "13.0", "2.21.5", "2.5.1"};
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = values[i];
  const Environment b = detect_environment(o);
  auto d = compare(a, b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].field, EnvField::cuda);
  EXPECT_EQ(d[0].recorded, "12.4");
  EXPECT_EQ(d[0].current, "13.0");
  EXPECT_EQ(d[1].field, EnvField::torch);
  EnvOverrides bad;
  bad[static_cast<std::size_t>(EnvField::sm_count)] = "-4";
  EXPECT_EQ(validate_overrides(bad).error().code, ExitCode::usage);
  bad[static_cast<std::size_t>(EnvField::sm_count)] = " 12.4";
  EXPECT_FALSE(validate_overrides(bad).ok());
}

}  // namespace
}  // namespace scout::catalog
