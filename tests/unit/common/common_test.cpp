// The one-home utilities of lib/common: files, /proc, clocks, hex, schema checks.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "lib/common/clock.hpp"
#include "lib/common/file.hpp"
#include "lib/common/hex.hpp"
#include "lib/common/proc.hpp"
#include "lib/common/schema.hpp"
#include "tests/unit/test_seed.hpp"

namespace scout {
namespace {

namespace fs = std::filesystem;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("scout_common_" + std::to_string(std::random_device{}()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  fs::path m_dir;
};

TEST_F(FileTest, AtomicWriteReplacesAndLeavesNoTemporaryFile) {
  const std::string path = (m_dir / "doc.json").string();
  ASSERT_TRUE(atomic_write_file(path, "first").ok());
  ASSERT_TRUE(atomic_write_file(path, "second, longer").ok());
  auto back = read_small_file(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "second, longer");
  EXPECT_EQ(std::distance(fs::directory_iterator(m_dir), fs::directory_iterator()), 1);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
}

TEST_F(FileTest, AtomicWriteFailuresAreUnavailableAndKeepTheOldFile) {
  const std::string path = (m_dir / "doc.json").string();
  ASSERT_TRUE(atomic_write_file(path, "old").ok());
  auto missing = atomic_write_file((m_dir / "no" / "such" / "x.json").string(), "x");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ExitCode::unavailable);
  EXPECT_FALSE(atomic_write_file(m_dir.string() + "/", "x").ok());
  EXPECT_EQ(*read_small_file(path), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(m_dir), fs::directory_iterator()), 1);
}

TEST_F(FileTest, ReadSmallFileEnforcesTheLimitAndRejectsDirectories) {
  const std::string path = (m_dir / "big").string();
  std::ofstream(path) << std::string(100, 'x');
  EXPECT_FALSE(read_small_file(path, 10).ok());
  EXPECT_TRUE(read_small_file(path, 100).ok());
  EXPECT_EQ(read_small_file((m_dir / "none").string()).error().code, ExitCode::bad_input);
  EXPECT_EQ(read_small_file(m_dir.string()).error().code, ExitCode::bad_input);
}

TEST(Proc, ParsesStatWithOddCommandNames) {
  proc::Stat st;
  std::string line = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10";
  ASSERT_TRUE(proc::parse_stat(line, &st));
  EXPECT_EQ(st.state, 'S');
  EXPECT_EQ(st.start_ticks, 98765u);
  EXPECT_FALSE(st.has_exit_status);
  EXPECT_FALSE(proc::parse_stat("garbage", &st));
  EXPECT_FALSE(proc::parse_stat("1 (x) S 1 2", &st));
  EXPECT_FALSE(proc::parse_stat("1 (x) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19", &st));
}

TEST(Proc, ReadsTheExitStatusOfAZombie) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(7);
  proc::Stat st;
  bool zombie = false;
  for (int i = 0; i < 500 && !zombie; ++i) {  // polls the state, no timing asserted
    zombie = proc::read_stat(child, &st) && st.state == 'Z';
    if (!zombie) usleep(10000);
  }
  ASSERT_TRUE(zombie);
  ASSERT_TRUE(st.has_exit_status);
  EXPECT_TRUE(WIFEXITED(st.exit_status));
  EXPECT_EQ(WEXITSTATUS(st.exit_status), 7);
  EXPECT_TRUE(proc::pid_alive(child));
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_FALSE(proc::read_stat(child, &st));
  EXPECT_FALSE(proc::pid_alive(-1));
  EXPECT_FALSE(proc::pid_alive(0));
  EXPECT_TRUE(proc::pid_alive(getpid()));
}

TEST(Clock, RealtimeIsEpochNanoseconds) {
  const auto a = realtime_ns();
  const auto b =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GT(a, std::int64_t{1'600'000'000} * 1'000'000'000);
  EXPECT_LT(std::llabs(b - a), std::int64_t{60} * 1'000'000'000);
  const auto m1 = monotonic_ns();  // two statements: the order of evaluation is then defined
  const auto m2 = monotonic_ns();
  EXPECT_LE(m1, m2);
}

TEST(Hex, OneSpellingRoundTrips) {
  EXPECT_EQ(hex64(0), "0x0000000000000000");
  EXPECT_EQ(hex64(0xbde5a2c9d27e0be1ULL), "0xbde5a2c9d27e0be1");
  EXPECT_EQ(hex64(13683074425010892737ULL), "0xbde40bb18a01afc1");
  const std::uint64_t seed = test_support::test_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t v = rng();
    EXPECT_EQ(parse_hex64(hex64(v)), v);
  }
  EXPECT_EQ(parse_hex64("0xBDE5A2C9D27E0BE1"), 0xbde5a2c9d27e0be1ULL);
  for (const char* bad : {"", "0x", "bde5a2c9d27e0be1", "0xbde5a2c9d27e0be", "0xbde5a2c9d27e0be10",
                          "0xbde5a2c9d27e0bg1", "1xbde5a2c9d27e0be1"})
    EXPECT_FALSE(parse_hex64(bad)) << bad;
}

TEST(Schema, ChecksNameAndMajorVersion) {
  auto doc = [](nlohmann::json schema, nlohmann::json version) {
    return nlohmann::json{{"schema", schema}, {"schema_version", version}};
  };
  EXPECT_TRUE(check_schema(doc("scout.x", "1.0"), "scout.x", 1, "f", "h").ok());
  EXPECT_TRUE(check_schema(doc("scout.x", "1.7"), "scout.x", 1, "f", "h").ok());
  auto v2 = check_schema(doc("scout.x", "2.0"), "scout.x", 1, "f", "h");
  ASSERT_FALSE(v2.ok());
  EXPECT_EQ(v2.error().code, ExitCode::bad_input);
  EXPECT_NE(v2.error().message().find("schema version 2.0"), std::string::npos);
  for (const auto& bad :
       {doc("scout.y", "1.0"), doc(5, "1.0"), doc("scout.x", 1), doc("scout.x", "1"), doc("scout.x", "1.x"),
        doc("scout.x", "-1.0"), nlohmann::json::array(), nlohmann::json{{"schema", "scout.x"}}})
    EXPECT_FALSE(check_schema(bad, "scout.x", 1, "f", "h").ok()) << bad.dump();
}

}  // namespace
}  // namespace scout
