// Observers as threads over a real FileStore directory and real Gloo TCP on
// 127.0.0.1 (the Gloo BaseTest::spawn pattern), parameterized over group sizes.
#include "lib/transport/gather.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>
#include <unistd.h>

#include "lib/transport/auth.hpp"

namespace scout::transport {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("scout-gather-test-" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  StoreUri uri() const { return *parse_store_uri("file://" + path.string()); }
};

std::vector<std::uint8_t> blob_of(std::int64_t i) {
  return std::vector<std::uint8_t>(static_cast<std::size_t>(10 + 37 * i), static_cast<std::uint8_t>(i + 1));
}

// Runs `n` observers (skipping `absent`), each gathering blob_of(i); returns their results.
std::vector<Result<GatherResult>> run_observers(const TempDir& dir, std::int64_t n, std::vector<std::int64_t> absent,
                                                std::chrono::milliseconds timeout) {
  std::vector<std::optional<Result<GatherResult>>> out(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::find(absent.begin(), absent.end(), i) != absent.end()) continue;
    threads.emplace_back([&, i] {
      auto store = open_store(dir.uri(), false, timeout);
      ASSERT_TRUE(store.ok());
      GatherOptions o;
      o.key_namespace = "scout/test/a/0";
      o.observer = i;
      o.observers = n;
      o.timeout = timeout;
      o.listen_address = "127.0.0.1";
      out[i] = gather_blobs(**store, o, blob_of(i));
    });
  }
  for (auto& t : threads) t.join();
  std::vector<Result<GatherResult>> res;
  for (auto& r : out) res.push_back(r ? std::move(*r) : Result<GatherResult>(internal_error("absent")));
  return res;
}

class GatherTest : public ::testing::TestWithParam<int> {};

TEST_P(GatherTest, EveryObserverGetsEveryBlob) {
  TempDir dir;
  const int n = GetParam();
  auto results = run_observers(dir, n, {}, std::chrono::milliseconds(8000));
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].error().message();
    ASSERT_EQ(results[i]->blobs.size(), static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
      ASSERT_TRUE(results[i]->blobs[j].has_value()) << "observer " << i << " lacks " << j;
      EXPECT_EQ(*results[i]->blobs[j], blob_of(j));
    }
  }
  // A second probe over the same directory finds a fresh generation by itself.
  auto again = run_observers(dir, n, {}, std::chrono::milliseconds(8000));
  ASSERT_TRUE(again[0].ok());
  EXPECT_EQ(again[0]->generation, n > 1 ? 1 : 0);
  for (int j = 0; j < n; ++j) EXPECT_TRUE(again[0]->blobs[j].has_value());
}

INSTANTIATE_TEST_SUITE_P(Sizes, GatherTest, ::testing::Values(1, 2, 3, 5));

TEST(Gather, AnObserverThatNeverArrivesIsMissingAndTheOthersFinishInTime) {
  TempDir dir;
  const int n = 3;
  const std::int64_t absent = std::random_device{}() % n;
  std::printf("absent observer %lld\n", static_cast<long long>(absent));
  auto t0 = std::chrono::steady_clock::now();
  auto results = run_observers(dir, n, {absent}, std::chrono::milliseconds(3000));
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::milliseconds(6000));  // bounded by the timeout, never a hang
  for (int i = 0; i < n; ++i) {
    if (i == absent) continue;
    ASSERT_TRUE(results[i].ok()) << results[i].error().message();
    for (int j = 0; j < n; ++j) EXPECT_EQ(results[i]->blobs[j].has_value(), j != absent) << i << " " << j;
  }
}

TEST(Gather, AnObserverThatLeavesAfterRegisteringIsDroppedOnReform) {
  TempDir dir;
  const int n = 3;
  // Observer 2 announces itself (here and view keys) and then is gone: the
  // Gloo rendezvous fails, and the survivors re-form without it.
  {
    auto store = open_store(dir.uri(), false, std::chrono::milliseconds(1000));
    ASSERT_TRUE(store.ok());
    const char* one = "1";
    ASSERT_TRUE((*store)->set("scout/test/a/0/g0/r0/here/2", {one, one + 1}).ok());
    std::string view = "0,1,2,";
    ASSERT_TRUE((*store)->set("scout/test/a/0/g0/r0/view/2", {view.begin(), view.end()}).ok());
  }
  auto results = run_observers(dir, n, {2}, std::chrono::milliseconds(4000));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].error().message();
    EXPECT_TRUE(results[i]->blobs[0].has_value());
    EXPECT_TRUE(results[i]->blobs[1].has_value());
    EXPECT_FALSE(results[i]->blobs[2].has_value());
    EXPECT_GE(results[i]->rounds, 2);
  }
}

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
  EXPECT_FALSE(a.verify(s, "ctx/2").has_value());            // replayed as another observer
  EXPECT_FALSE(other_job.verify(s, "ctx/1").has_value());    // another job
  EXPECT_FALSE(wrong_secret.verify(s, "ctx/1").has_value()); // forged with a guessed token
  auto tampered = s;
  tampered[2] ^= 1;
  EXPECT_FALSE(a.verify(tampered, "ctx/1").has_value());
  EXPECT_FALSE(a.verify({1, 2}, "ctx/1").has_value());
  EXPECT_NE(a.key_namespace(), other_job.key_namespace());
  EXPECT_NE(a.key_namespace(), wrong_secret.key_namespace());
}

}  // namespace
}  // namespace scout::transport
