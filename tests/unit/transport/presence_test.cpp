// Presence announcements over a real FileStore directory: the store counter
// under concurrency, validation of what is read back, and which announced
// observers count as strays (and why).
#include "lib/transport/presence.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "lib/common/clock.hpp"
#include "lib/transport/auth.hpp"

namespace scout::transport {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr std::int64_t k_s = 1'000'000'000;
constexpr std::int64_t k_now = 1'800'000'000 * k_s;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("scout-presence-test-" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::unique_ptr<KeyValueStore> open() const {
    auto s = open_store(*parse_store_uri("file://" + path.string()), false, milliseconds(2000));
    EXPECT_TRUE(s.ok());
    return std::move(*s);
  }
};

PresenceEntry entry(const JobToken& t, std::int64_t observer, std::int64_t pid) {
  return {.key_id = t.key_id(),
          .attempt = t.attempt(),
          .observer = observer,
          .host = "h",
          .pid = pid,
          .authenticated = t.authenticated(),
          .written_ns = k_now};
}

bool all_alive(std::int64_t) {
  return true;
}
bool none_alive(std::int64_t) {
  return false;
}

TEST(StoreCounter, ConcurrentAddsHandOutDistinctValues) {
  TempDir dir;
  constexpr int k_threads = 6, k_adds = 40;
  std::vector<std::vector<std::int64_t>> got(k_threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t)
    threads.emplace_back([&, t] {
      auto store = dir.open();  // its own store object and file descriptors, like another process
      for (int i = 0; i < k_adds; ++i) {
        auto v = store->add("scout/j/presence/n", 1, milliseconds(5000));
        ASSERT_TRUE(v.ok()) << v.error().message();
        got[t].push_back(*v);
      }
    });
  for (auto& t : threads) t.join();
  std::set<std::int64_t> all;
  for (const auto& g : got) all.insert(g.begin(), g.end());
  EXPECT_EQ(all.size(), std::size_t{k_threads * k_adds});
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), k_threads * k_adds);
  EXPECT_EQ(*dir.open()->add("scout/j/presence/n", 0, milliseconds(1000)), k_threads * k_adds);
}

TEST(StoreCounter, CorruptCounterIsAnInputError) {
  TempDir dir;
  auto store = dir.open();
  ASSERT_TRUE(store->add("c", 3, milliseconds(1000)).ok());
  // Find the counter's file (the only one) and spoil it.
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir.path)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  std::ofstream(files[0], std::ios::trunc) << "12x";
  auto v = store->add("c", 1, milliseconds(1000));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ExitCode::bad_input);
  EXPECT_NE(v.error().message().find("corrupt"), std::string::npos);
}

TEST(Presence, RoundTripsAndRejectsMalformedEntries) {
  auto t = JobToken::from_secret("job", "a1", "s", true);
  auto e = entry(t, 3, 4242);
  auto back = decode_presence(encode_presence(e));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->key_id, e.key_id);
  EXPECT_EQ(back->attempt, "a1");
  EXPECT_EQ(back->observer, 3);
  EXPECT_EQ(back->pid, 4242);
  EXPECT_TRUE(back->authenticated);
  EXPECT_EQ(back->written_ns, k_now);
  for (std::string bad :
       {std::string("not json"), std::string("[]"), std::string("{}"),
        std::string(
            R"({"key_id":"k","attempt":"","observer":-1,"host":"h","pid":1,"authenticated":true,"written_ns":0})"),
        std::string(
            R"({"key_id":"k","attempt":"","observer":0,"host":"h","pid":0,"authenticated":true,"written_ns":0})"),
        std::string(
            R"({"key_id":"k","attempt":"","observer":0,"host":"h\u0007","pid":1,"authenticated":true,"written_ns":0})"),
        std::string(R"({"key_id":"k","attempt":"","observer":0,"host":"h","pid":1,"authenticated":1,"written_ns":0})"),
        std::string(
            R"({"key_id":"k","attempt":"","observer":"0","host":"h","pid":1,"authenticated":true,"written_ns":0})"),
        std::string(5000, ' ')}) {
    auto d = decode_presence(bad);
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) EXPECT_EQ(d.error().code, ExitCode::bad_input);
  }
}

TEST(Presence, KeyIdDependsOnTokenAndAttemptButRevealsNeither) {
  auto a = JobToken::from_secret("job", "a1", "s", true);
  EXPECT_EQ(a.key_id(), JobToken::from_secret("job", "a1", "s", true).key_id());
  EXPECT_NE(a.key_id(), JobToken::from_secret("job", "a1", "t", true).key_id());
  EXPECT_NE(a.key_id(), JobToken::from_secret("job", "a2", "s", true).key_id());
  EXPECT_EQ(a.key_id().size(), 16u);
  EXPECT_EQ(a.key_namespace().find(a.key_id()), std::string::npos);
  // The presence prefix is the same for every token and attempt of a job: that is where strays meet.
  EXPECT_EQ(a.presence_prefix(), JobToken::from_secret("job", "a2", "t", false).presence_prefix());
  EXPECT_NE(a.presence_prefix(), JobToken::from_secret("other", "a1", "s", true).presence_prefix());
}

TEST(Presence, StraysAreFoundWithTheirReasons) {
  TempDir dir;
  auto mine = JobToken::from_secret("job", "a1", "s", true);
  auto other_token = JobToken::from_secret("job", "a1", "x", true);
  auto other_attempt = JobToken::from_secret("job", "a0", "s", true);
  auto no_token = JobToken::from_secret("job", "a1", "", false);
  auto store = dir.open();
  auto peer_store = dir.open();
  const auto prefix = mine.presence_prefix();
  ASSERT_TRUE(announce_presence(*store, prefix, entry(mine, 0, 100), milliseconds(1000)).ok());
  auto peer_key = announce_presence(*peer_store, prefix, entry(mine, 1, 101), milliseconds(1000));
  ASSERT_TRUE(peer_key.ok());
  {
    auto s1 = dir.open(), s2 = dir.open(), s3 = dir.open();
    ASSERT_TRUE(announce_presence(*s1, prefix, entry(other_token, 1, 200), milliseconds(1000)).ok());
    ASSERT_TRUE(
        announce_presence(*s1, prefix, entry(other_token, 1, 200), milliseconds(1000)).ok());  // twice: listed once
    ASSERT_TRUE(announce_presence(*s2, prefix, entry(other_attempt, 2, 201), milliseconds(1000)).ok());
    ASSERT_TRUE(announce_presence(*s3, prefix, entry(no_token, 3, 202), milliseconds(1000)).ok());
    auto old = entry(other_token, 4, 203);
    old.written_ns = k_now - 120 * k_s;
    ASSERT_TRUE(announce_presence(*s3, prefix, old, milliseconds(1000)).ok());
    // A malformed slot is noted, not believed, and does not stop the scan.
    auto slot = s3->add(prefix + "/n", 1, milliseconds(1000));
    ASSERT_TRUE(slot.ok());
    std::string junk = "{\"key_id\": 5}";
    ASSERT_TRUE(s3->set(prefix + "/" + std::to_string(*slot - 1), std::vector<char>(junk.begin(), junk.end())).ok());
  }
  // One peer finished: its entry stays (cleanup leaves it), marked ended.
  ASSERT_TRUE(end_presence(*peer_store, *peer_key, entry(mine, 1, 101)).ok());
  peer_store->cleanup();

  auto scan = read_presence(*store, prefix, milliseconds(2000));
  ASSERT_TRUE(scan.ok()) << scan.error().message();
  EXPECT_EQ(scan->entries.size(), 7u);
  ASSERT_EQ(scan->notes.size(), 1u);
  EXPECT_NE(scan->notes[0].find("key_id"), std::string::npos) << scan->notes[0];

  auto strays = find_strays(*scan, entry(mine, 0, 100), k_now + k_s, 60 * k_s, all_alive);
  ASSERT_EQ(strays.size(), 3u);
  std::map<std::int64_t, std::string> why;
  for (const auto& s : strays) why[s.entry.pid] = s.reason;
  EXPECT_NE(why[200].find("another job token"), std::string::npos) << why[200];
  EXPECT_NE(why[200].find("observer 1"), std::string::npos) << why[200];
  EXPECT_NE(why[201].find("attempt 'a0'"), std::string::npos) << why[201];
  EXPECT_NE(why[202].find("no job token"), std::string::npos) << why[202];
  // From the unauthenticated observer's side, the others hold a token it lacks.
  auto seen_by_untokened = find_strays(*scan, entry(no_token, 3, 202), k_now + k_s, 60 * k_s, all_alive);
  bool found = false;
  for (const auto& s : seen_by_untokened)
    if (s.entry.pid == 100) found = s.reason.find("holds a job token and this observer has none") != std::string::npos;
  EXPECT_TRUE(found);
  // Processes known dead on this host are not reported.
  EXPECT_TRUE(find_strays(*scan, entry(mine, 0, 100), k_now + k_s, 60 * k_s, none_alive).empty());
}

TEST(Presence, AnObserverThatMetNobodyFindsTheJobsObserversOfAnotherKeyThatRanMeanwhile) {
  TempDir dir;
  auto mine = JobToken::from_secret("job", "a1", "s", true);
  auto other_token = JobToken::from_secret("job", "a1", "x", true);
  auto other_attempt = JobToken::from_secret("job", "a0", "s", true);
  const auto prefix = mine.presence_prefix();
  // Real times: end_presence stamps ended_ns with the real clock.
  const std::int64_t now = realtime_ns();
  const std::int64_t since = now - 10 * k_s;  // when the lone observer's probe began
  auto at = [&](const JobToken& t, std::int64_t observer, std::int64_t pid) {
    auto e = entry(t, observer, pid);
    e.written_ns = now - 5 * k_s;
    return e;
  };
  {
    auto s1 = dir.open(), s2 = dir.open(), s3 = dir.open();
    // Ended after `since`: a contemporary, though no longer a stray of anyone's probe.
    auto ended_late = at(other_token, 0, 300);
    auto k1 = announce_presence(*s1, prefix, ended_late, milliseconds(1000));
    ASSERT_TRUE(k1.ok());
    ASSERT_TRUE(end_presence(*s1, *k1, ended_late).ok());
    // Ended long before `since` (a probe of an hour ago): not a contemporary.
    auto ended_early = at(other_token, 1, 301);
    ended_early.written_ns = now - 3600 * k_s;
    ended_early.ended_ns = now - 3590 * k_s;
    const std::string text = encode_presence(ended_early);
    auto slot = s2->add(prefix + "/n", 1, milliseconds(1000));
    ASSERT_TRUE(slot.ok());
    const std::string key = prefix + "/" + std::to_string(*slot - 1);
    ASSERT_TRUE(s2->set(key, std::vector<char>(text.begin(), text.end())).ok());
    s2->keep(key);
    // Still running, another attempt.
    ASSERT_TRUE(announce_presence(*s3, prefix, at(other_attempt, 2, 302), milliseconds(1000)).ok());
    s1->cleanup();
    s2->cleanup();
    s3->cleanup();
  }
  auto store = dir.open();
  auto scan = read_presence(*store, prefix, milliseconds(2000));
  ASSERT_TRUE(scan.ok()) << scan.error().message();
  ASSERT_EQ(scan->entries.size(), 3u);  // cleanup() leaves presence entries
  const auto self = at(mine, 3, 100);
  auto met = find_contemporaries(*scan, self, since, now + k_s, 60 * k_s, all_alive);
  std::map<std::int64_t, std::string> why;
  for (const auto& s : met) why[s.entry.pid] = s.why;
  EXPECT_EQ(why.size(), 2u);
  EXPECT_EQ(why[300], "it holds another job token");
  EXPECT_EQ(why[302], "it probes attempt 'a0', this probe attempt 'a1'");
  EXPECT_FALSE(why.count(301));
  // A stray is an observer still running: the ended ones are not.
  auto strays = find_strays(*scan, self, now + k_s, 60 * k_s, all_alive);
  ASSERT_EQ(strays.size(), 1u);
  EXPECT_EQ(strays[0].entry.pid, 302);
}

TEST(Presence, EntriesLiveInARingOfSlots) {
  TempDir dir;
  auto mine = JobToken::from_secret("job", "a1", "s", true);
  const auto prefix = mine.presence_prefix();
  auto store = dir.open();
  for (std::int64_t i = 0; i < k_presence_max_slots + 3; ++i)
    ASSERT_TRUE(announce_presence(*store, prefix, entry(mine, i, 1000 + i), milliseconds(1000)).ok());
  auto scan = read_presence(*store, prefix, milliseconds(5000));
  ASSERT_TRUE(scan.ok());
  EXPECT_EQ(scan->entries.size(), static_cast<std::size_t>(k_presence_max_slots));  // the oldest were overwritten
  std::set<std::int64_t> pids;
  for (const auto& e : scan->entries) pids.insert(e.pid);
  EXPECT_FALSE(pids.count(1000));
  EXPECT_TRUE(pids.count(1000 + k_presence_max_slots + 2));
}

}  // namespace
}  // namespace scout::transport
