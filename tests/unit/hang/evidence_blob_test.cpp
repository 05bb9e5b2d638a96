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

TEST(EvidenceBlob, TheSeedsDecodeTheCompactFormToo) {
  for (const char* name : {"seed-one-rank", "seed-compact"}) {
    auto e = deserialize(corpus_file(name));
    ASSERT_TRUE(e.ok()) << name << ": " << e.error().message();
  }
  auto e = *deserialize(corpus_file("seed-compact"));
  ASSERT_EQ(e.ranks.size(), 2u);
  EXPECT_FALSE(e.ranks[0].ring.has_value());
  ASSERT_TRUE(e.ranks[1].ring.has_value());
  EXPECT_EQ(e.ranks[1].ring->events, 2u);
}

TEST(EvidenceBlob, ARingDigestBesideARingOrWithMoreNamesThanCallsIsBadInput) {
  NodeEvidence e;
  e.observer = 0;
  RankEvidence r;
  r.snapshot.rank = 0;
  r.snapshot.world_size = 1;
  records::CollectiveEvent ev;
  ev.fingerprint.group = 7;
  ev.fingerprint.group_seq = 1;
  r.snapshot.recent = {ev};
  r.ring = ring_digest(r.snapshot.recent);
  e.ranks = {r};
  EXPECT_FALSE(deserialize(serialize(e)).ok());  // a digest and a ring: which one?
  e.ranks[0].snapshot.recent.clear();
  EXPECT_TRUE(deserialize(serialize(e)).ok());
  e.ranks[0].ring->groups = {1, 2};  // two groups named by one call
  EXPECT_FALSE(deserialize(serialize(e)).ok());
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
