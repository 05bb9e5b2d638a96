#include "lib/report/verdict.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

namespace scout {
namespace {

// Validates `doc` against schemas/verdict.schema.json; returns the errors.
std::string schema_errors(const nlohmann::ordered_json& ordered) {
  nlohmann::json doc = nlohmann::json::parse(ordered.dump());
  std::ifstream in(std::string(SCOUT_SOURCE_DIR) + "/schemas/verdict.schema.json");
  nlohmann::json schema_doc = nlohmann::json::parse(in);
  valijson::Schema schema;
  valijson::SchemaParser parser;
  valijson::adapters::NlohmannJsonAdapter schema_adapter(schema_doc);
  parser.populateSchema(schema_adapter, schema);
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter doc_adapter(doc);
  if (validator.validate(schema, doc_adapter, &results)) return {};
  std::string out;
  valijson::ValidationResults::Error e;
  while (results.popError(e)) out += e.description + "\n";
  return out.empty() ? "invalid" : out;
}

TEST(Verdict, HealthyEnvelopeValidates) {
  Verdict v;
  v.command = "consensus";
  v.details = {{"mode", "exact"}, {"count", 4}, {"identified_by", "position"}};
  auto j = to_json(v);
  EXPECT_EQ(schema_errors(j), "");
  EXPECT_EQ(j["schema"], "scout.verdict");
  EXPECT_TRUE(j["job"].is_null());
  EXPECT_EQ(exit_code_for(v), ExitCode::healthy);
}

TEST(Verdict, AttributedVerdictCarriesSuspectsAndGroups) {
  auto r = c3_exact(std::vector<std::uint64_t>{1, 1, 1, 2});
  Verdict v;
  v.command = "consensus";
  v.job = "j1";
  v.status = VerdictStatus::attributed;
  v.scope = Scope::rank;
  v.suspects.push_back({3, "node0", "value_differs_from_majority", {{"value", 2}}});
  v.groups.push_back(make_group_run("replica", {0, 2, 4, 6}, C3Mode::exact, r, {1, 1, 1, 2}));
  v.details = {{"mode", "exact"}, {"count", 4}, {"identified_by", "rank"}};
  auto j = to_json(v);
  EXPECT_EQ(schema_errors(j), "");
  EXPECT_EQ(j["groups"][0]["outliers"], nlohmann::ordered_json({6}));
  EXPECT_EQ(exit_code_for(v), ExitCode::attributed);
  std::string text = render_text(v);
  EXPECT_NE(text.find("rank 3"), std::string::npos);
  EXPECT_NE(text.find("attributed"), std::string::npos);
  EXPECT_EQ(text.find("notes:"), std::string::npos);
  // A command's notes (details.<command>.notes) and a suspect's cause are in the text too.
  v.suspects[0].evidence["cause"] = "blocked";
  v.details["straggler"] = {{"notes", {"rank 5 was flagged in 1 of 3 rounds"}}};
  text = render_text(v);
  EXPECT_NE(text.find("(cause blocked)"), std::string::npos) << text;
  EXPECT_NE(text.find("notes:\n  - rank 5 was flagged in 1 of 3 rounds\n"), std::string::npos) << text;
}

TEST(Verdict, SchemaRejectsAttributedWithoutSuspects) {
  Verdict v;
  v.command = "probe";
  v.status = VerdictStatus::attributed;
  EXPECT_NE(schema_errors(to_json(v)), "");
}

TEST(Verdict, ExitCodes) {
  Verdict v;
  v.status = VerdictStatus::inconclusive;
  EXPECT_EQ(exit_code_for(v), ExitCode::inconclusive);
  v.status = VerdictStatus::group_stall;
  EXPECT_EQ(exit_code_for(v), ExitCode::inconclusive);
}

TEST(Verdict, TimestampIsRfc3339Utc) {
  std::string t = now_rfc3339();
  ASSERT_EQ(t.size(), 24u);
  EXPECT_EQ(t.back(), 'Z');
  EXPECT_EQ(t[10], 'T');
}

TEST(VerdictFromJson, ReadsBackWhatToJsonWrote) {
  Verdict v;
  v.command = "probe-hang";
  v.job = "j";
  v.created_at = "2026-12-03T04:00:00.000Z";
  v.status = VerdictStatus::attributed;
  v.scope = Scope::rank;
  v.summary = "rank 3";
  v.action = "restart_in_place";
  v.suspects.push_back({3, "node1", "process_stopped", {{"step", 7}}});
  v.suspects.push_back({-1, "", "node_unreachable", nlohmann::json::object()});
  C3Result r = c3_exact(std::vector<std::uint64_t>{1, 1, 2});
  v.groups.push_back(make_group_run("replica", {0, 2, 4}, C3Mode::exact, r, nlohmann::json::array({1, 1, 2})));
  v.details = {{"kind", "stopped_rank"}, {"ranks", nlohmann::json::array()}};
  const auto j = nlohmann::json(to_json(v));
  auto back = verdict_from_json(j);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(nlohmann::json(to_json(*back)), j);
}

TEST(VerdictFromJson, RefusesWhatIsNotAVerdict) {
  Verdict v;
  v.command = "probe-hang";
  v.created_at = "x";
  const auto good = nlohmann::json(to_json(v));
  ASSERT_TRUE(verdict_from_json(good));
  auto broken = [&](auto change) {
    auto j = good;
    change(j);
    auto r = verdict_from_json(j);
    EXPECT_FALSE(r) << j.dump();
    if (!r) EXPECT_EQ(r.error().code, ExitCode::bad_input);
  };
  broken([](nlohmann::json& j) { j = nlohmann::json::array(); });
  broken([](nlohmann::json& j) { j["schema"] = "other"; });
  broken([](nlohmann::json& j) { j["status"] = "fine"; });
  broken([](nlohmann::json& j) { j["scope"] = 3; });
  broken([](nlohmann::json& j) { j.erase("details"); });
  broken([](nlohmann::json& j) { j["suspects"] = {{{"rank", "3"}, {"node", nullptr}, {"reason", "r"}}}; });
  broken([](nlohmann::json& j) {
    j["groups"] = {{{"kind", "replica"},
                    {"members", {0}},
                    {"outliers", {}},
                    {"reason", "r"},
                    {"mode", "fuzzy"},
                    {"status", "agree"}}};
  });
}

}  // namespace
}  // namespace scout
