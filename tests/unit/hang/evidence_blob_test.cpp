// Evidence blobs a peer sends: malformed ones are bad input, never an
// exception out of deserialize (regressions found by fuzz/targets/evidence_blob.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "lib/hang/evidence.hpp"

namespace scout::hang {
namespace {

std::vector<std::uint8_t> corpus_file(const std::string& name) {
  std::ifstream in(std::string(SCOUT_SOURCE_DIR) + "/fuzz/corpus/evidence_blob/" + name, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(EvidenceBlob, RoundTrips) {
  NodeEvidence e;
  e.observer = 1;
  e.node = "n1";
  RankEvidence r;
  r.snapshot.rank = 1;
  r.snapshot.world_size = 2;
  e.ranks.push_back(r);
  auto back = deserialize(serialize(e));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->ranks.size(), 1u);
}

TEST(EvidenceBlob, NestedIndefiniteByteStringsAreBadInputNotAStackOverflow) {
  auto blob = corpus_file("regress-indefinite-bytes");
  ASSERT_GT(blob.size(), 20000u);
  auto back = deserialize(blob);
  EXPECT_FALSE(back.ok());
}

TEST(EvidenceBlob, DeclaredHugeArrayIsBadInput) {
  // CBOR array header claiming 2^64-1 elements: nlohmann throws out_of_range
  // from from_cbor even with exceptions off.
  std::vector<std::uint8_t> blob = {0xa1, 0x61, 'v', 0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  auto r = deserialize(blob);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ExitCode::bad_input);
  auto found = corpus_file("regress-cbor-excessive-array-size");
  ASSERT_FALSE(found.empty());
  auto f = deserialize(found);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code, ExitCode::bad_input);
}

}  // namespace
}  // namespace scout::hang
