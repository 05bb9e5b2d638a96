#include "lib/checkpoint/replica_consensus.hpp"

#include <gtest/gtest.h>

namespace scout::checkpoint {
namespace {

FileDigest digest(const std::string& path, std::vector<std::pair<std::string, std::uint64_t>> tensors) {
  FileDigest d;
  d.path = path;
  for (auto& [name, hash] : tensors) d.tensors.push_back({name, DType::f32, {2, 2}, 16, hash, {}, false});
  return d;
}

ReplicaSet set_of(std::size_t n) {
  ReplicaSet s;
  s.shard = "replicas";
  for (std::size_t i = 0; i < n; ++i) s.files.push_back({"f" + std::to_string(i), static_cast<std::int64_t>(i)});
  return s;
}

TEST(ReplicaConsensus, AgreeingReplicasHaveNoDisagreement) {
  auto r = compare_replicas(set_of(3), {digest("f0", {{"a", 1}, {"b", 2}}), digest("f1", {{"a", 1}, {"b", 2}}),
                                        digest("f2", {{"a", 1}, {"b", 2}})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tensors, 2u);
  EXPECT_EQ(r->bytes, 32u);
  EXPECT_TRUE(r->disagreements.empty());
}

TEST(ReplicaConsensus, MinorityReplicaIsTheOutlier) {
  auto r = compare_replicas(set_of(4), {digest("f0", {{"a", 1}, {"b", 2}}), digest("f1", {{"a", 1}, {"b", 2}}),
                                        digest("f2", {{"a", 1}, {"b", 9}}), digest("f3", {{"a", 1}, {"b", 2}})});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->disagreements.size(), 1u);
  const auto& d = r->disagreements[0];
  EXPECT_EQ(d.tensor, "b");
  EXPECT_EQ(d.result.status, C3Status::attributed);
  EXPECT_EQ(d.result.outliers, (std::vector<bool>{false, false, true, false}));
}

TEST(ReplicaConsensus, TwoReplicasThatDisagreeAreInconclusive) {
  auto r = compare_replicas(set_of(2), {digest("f0", {{"a", 1}}), digest("f1", {{"a", 5}})});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->disagreements.size(), 1u);
  EXPECT_EQ(r->disagreements[0].result.status, C3Status::inconclusive);
}

TEST(ReplicaConsensus, MissingTensorIsBadInputNamingFileAndTensor) {
  auto r = compare_replicas(
      set_of(3), {digest("f0", {{"a", 1}, {"b", 2}}), digest("f1", {{"a", 1}}), digest("f2", {{"a", 1}, {"b", 2}})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ExitCode::bad_input);
  EXPECT_NE(r.error().what.find("'b'"), std::string::npos);
  EXPECT_NE(r.error().what.find("f1"), std::string::npos);
}

TEST(ReplicaConsensus, DtypeAndShapeMismatchesAreBadInput) {
  auto a = digest("f0", {{"w", 1}});
  auto b = a;
  b.path = "f1";
  b.tensors[0].dtype = DType::bf16;
  auto r = compare_replicas(set_of(2), {a, b});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("BF16"), std::string::npos);
  auto c = a;
  c.path = "f1";
  c.tensors[0].shape = {4};
  r = compare_replicas(set_of(2), {a, c});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("shape"), std::string::npos);
}

TEST(ReplicaConsensus, HashHexRoundTrips) {
  EXPECT_EQ(hash_hex(0xABCDEFu), "0x0000000000abcdef");
  EXPECT_EQ(parse_hash_hex(hash_hex(0xFEDCBA9876543210ULL)), 0xFEDCBA9876543210ULL);
  EXPECT_FALSE(parse_hash_hex("0x123"));
  EXPECT_FALSE(parse_hash_hex("0xzzzzzzzzzzzzzzzz"));
}

}  // namespace
}  // namespace scout::checkpoint
