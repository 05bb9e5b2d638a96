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

TEST(StoreUri, EtcdListsEveryMember) {
  auto e = parse_store_uri("etcd://h1:2379,10.0.0.2:2380,[::1]:2381");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->kind, StoreUri::Kind::etcd);
  ASSERT_EQ(e->endpoints.size(), 3u);
  EXPECT_EQ(e->endpoints[0].host, "h1");
  EXPECT_EQ(e->endpoints[1].port, 2380);
  EXPECT_EQ(e->endpoints[2].host, "::1");
  EXPECT_EQ(e->host, "h1");  // the first member: where the Gloo device's route is found
  EXPECT_EQ(e->port, 2379);
  for (const char* bad : {"etcd://", "etcd://h1", "etcd://h1:2379,", "etcd://,h1:2379", "etcd://h1:0",
                          "etcd://h1:2379,h2:port", "etcd://h1:2379,h1:2379"}) {
    auto r = parse_store_uri(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ExitCode::usage) << bad;
  }
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
