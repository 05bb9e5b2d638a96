// The store URI parser and the job token's signatures (pure logic); the
// session over real stores and Gloo is tested in tests/unit/session/.
#include <gtest/gtest.h>

#include "lib/transport/auth.hpp"
#include "lib/transport/store.hpp"

namespace scout::transport {
namespace {

TEST(StoreUri, ParsesAndRejects) {
  auto f = parse_store_uri("file:///tmp/x");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->path, "/tmp/x");
  auto t = parse_store_uri("tcp://10.0.0.1:29600");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->host, "10.0.0.1");
  EXPECT_EQ(t->port, 29600);
  EXPECT_FALSE(parse_store_uri("tcp://host").ok());
  EXPECT_FALSE(parse_store_uri("tcp://host:0").ok());
  EXPECT_FALSE(parse_store_uri("tcp://host:99999").ok());
  EXPECT_FALSE(parse_store_uri("file://relative").ok());
  EXPECT_FALSE(parse_store_uri("redis://x:1").ok());
}

TEST(JobToken, ForgedOrForeignBlobsAreRejected) {
  auto a = JobToken::from_secret("job", "0", "secret", true);
  auto other_job = JobToken::from_secret("job2", "0", "secret", true);
  auto wrong_secret = JobToken::from_secret("job", "0", "guess", true);
  std::vector<std::uint8_t> blob = {1, 2, 3, 4, 5};
  auto s = a.sign(blob, "ctx/1");
  auto ok = a.verify(s, "ctx/1");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(*ok, blob);
  EXPECT_FALSE(a.verify(s, "ctx/2").has_value());             // replayed as another observer
  EXPECT_FALSE(other_job.verify(s, "ctx/1").has_value());     // another job
  EXPECT_FALSE(wrong_secret.verify(s, "ctx/1").has_value());  // forged with a guessed token
  auto tampered = s;
  tampered[2] ^= 1;
  EXPECT_FALSE(a.verify(tampered, "ctx/1").has_value());
  EXPECT_FALSE(a.verify({1, 2}, "ctx/1").has_value());
  EXPECT_NE(a.key_namespace(), other_job.key_namespace());
  EXPECT_NE(a.key_namespace(), wrong_secret.key_namespace());
}

}  // namespace
}  // namespace scout::transport
