#include "lib/checkpoint/durable_file.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace scout::checkpoint {
namespace {

namespace fs = std::filesystem;

class DurableFileTest : public testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("scout_durable_" + std::to_string(::getpid()) + "_" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  fs::path m_dir;
};

TEST_F(DurableFileTest, ReplacesContentAndLeavesNoTempFile) {
  const std::string path = (m_dir / "ledger.json").string();
  ASSERT_TRUE(atomic_write_file(path, "first").ok());
  ASSERT_TRUE(atomic_write_file(path, "second, longer").ok());
  auto text = read_small_file(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "second, longer");
  EXPECT_EQ(std::distance(fs::directory_iterator(m_dir), fs::directory_iterator()), 1);
}

TEST_F(DurableFileTest, FailureIsUnavailableAndKeepsTheOldFile) {
  const std::string path = (m_dir / "missing_dir" / "x.json").string();
  auto st = atomic_write_file(path, "x");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ExitCode::unavailable);
}

TEST_F(DurableFileTest, ReadSmallFileEnforcesTheLimit) {
  const std::string path = (m_dir / "big").string();
  std::ofstream(path) << std::string(100, 'x');
  EXPECT_FALSE(read_small_file(path, 10).ok());
  EXPECT_TRUE(read_small_file(path, 100).ok());
  EXPECT_EQ(read_small_file((m_dir / "none").string()).error().code, ExitCode::bad_input);
}

TEST_F(DurableFileTest, SecondLockTimesOutUntilTheFirstIsReleased) {
  const std::string lock = (m_dir / "l.lock").string();
  auto first = FileLock::acquire(lock, std::chrono::milliseconds(100));
  ASSERT_TRUE(first.ok());
  auto second = FileLock::acquire(lock, std::chrono::milliseconds(50));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, ExitCode::unavailable);
  { FileLock released = std::move(*first); }
  EXPECT_TRUE(FileLock::acquire(lock, std::chrono::milliseconds(50)).ok());
}

}  // namespace
}  // namespace scout::checkpoint
