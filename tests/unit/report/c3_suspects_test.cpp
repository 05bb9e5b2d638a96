#include "lib/report/c3_suspects.hpp"

#include <gtest/gtest.h>

namespace scout {
namespace {

TEST(C3Suspects, OutliersBecomeSuspectsInPeerOrder) {
  std::vector<std::uint64_t> xs = {5, 7, 5, 7, 5};
  C3Result r = c3_exact(xs);
  ASSERT_EQ(r.status, C3Status::attributed);
  auto a = attribute_c3("replica", {10, 11, 12, 13, 14}, C3Mode::exact, r, nlohmann::json::array());
  ASSERT_TRUE(a.majority);
  EXPECT_EQ(xs[*a.majority], 5u);
  EXPECT_EQ(a.outliers, (std::vector<std::size_t>{1, 3}));
  auto s = suspects_from_c3(
      a, "value_differs_from_majority",
      [](std::size_t i) {
        return nlohmann::json{{"position", i}};
      },
      [](std::int64_t r) { return "node" + std::to_string(r); });
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].rank, 11);
  EXPECT_EQ(s[0].node, "node11");
  EXPECT_EQ(s[0].reason, "value_differs_from_majority");
  EXPECT_EQ(s[1].evidence["position"], 3);
}

TEST(C3Suspects, FillSetsEveryFieldPerPeer) {
  C3Result r = c3_exact(std::vector<std::uint64_t>{1, 1, 2});
  auto a = attribute_c3("replica", {0, 1, 2}, C3Mode::exact, r, nlohmann::json::array());
  auto s = suspects_from_c3(a, [](std::size_t i, Suspect& sp) {
    EXPECT_EQ(sp.rank, 2);  // the member id before fill
    sp.rank = -1;
    sp.reason = "r" + std::to_string(i);
    sp.evidence = 42;  // not an object: replaced by an empty one
  });
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].rank, -1);
  EXPECT_EQ(s[0].reason, "r2");
  EXPECT_TRUE(s[0].evidence.is_object());
  EXPECT_TRUE(s[0].evidence.empty());
}

TEST(C3Suspects, InconclusiveNamesNobody) {
  C3Result r = c3_exact(std::vector<std::uint64_t>{1, 2});
  ASSERT_EQ(r.status, C3Status::inconclusive);
  auto a = attribute_c3("pair", {0, 1}, C3Mode::exact, r, nlohmann::json::array());
  EXPECT_FALSE(a.decided());
  EXPECT_FALSE(a.majority);
  EXPECT_TRUE(suspects_from_c3(a, [](std::size_t, Suspect&) { FAIL(); }).empty());
}

}  // namespace
}  // namespace scout
