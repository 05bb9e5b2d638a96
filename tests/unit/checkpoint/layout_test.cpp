#include "lib/checkpoint/layout.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace scout::checkpoint {
namespace {

namespace fs = std::filesystem;

class LayoutTest : public testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("scout_layout_" + std::to_string(::getpid()) + "_" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  void touch(const std::string& name) { std::ofstream(m_dir / name) << "x"; }
  fs::path m_dir;
};

TEST_F(LayoutTest, MeshGroupsRanksIntoReplicaSetsPerRole) {
  for (int r = 0; r < 8; ++r) {
    touch("model_rank" + std::to_string(r) + ".safetensors");
    touch("optim_rank" + std::to_string(r) + ".pt");
  }
  touch("README.txt");
  auto l = layout_from_directory(m_dir.string(), "dp=4,tp=2");
  ASSERT_TRUE(l.ok()) << l.error().message();
  ASSERT_EQ(l->sets.size(), 4u);  // 2 roles x 2 tp shards
  for (const auto& s : l->sets) {
    ASSERT_EQ(s.files.size(), 4u);
    for (std::size_t i = 1; i < 4; ++i)
      EXPECT_EQ(s.files[i].rank - s.files[i - 1].rank, 2);  // dp=4,tp=2: {0,2,4,6}, {1,3,5,7}
  }
  EXPECT_EQ(l->sets[0].shard, "model_rank{rank}.safetensors tp=0");
}

TEST_F(LayoutTest, MissingRankIsBadInputNamingIt) {
  for (int r : {0, 1, 3}) touch("rank" + std::to_string(r) + ".safetensors");
  auto l = layout_from_directory(m_dir.string(), "dp=4");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code, ExitCode::bad_input);
  EXPECT_NE(l.error().what.find("rank 2"), std::string::npos) << l.error().what;
}

TEST_F(LayoutTest, RankOutsideTheMeshAndDuplicatesAreBadInput) {
  for (int r = 0; r < 3; ++r) touch("rank" + std::to_string(r) + ".pt");
  EXPECT_FALSE(layout_from_directory(m_dir.string(), "dp=2").ok());
  touch("rank01.pt");
  auto l = layout_from_directory(m_dir.string(), "dp=3");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.error().what.find("two files"), std::string::npos);
}

TEST_F(LayoutTest, ExplicitPatternAndReplicas) {
  for (int r = 0; r < 3; ++r) touch("shard-" + std::to_string(r) + ".bin");
  auto l = layout_from_directory(m_dir.string(), "dp=3", "shard-{rank}.bin");
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->file_count(), 3u);
  EXPECT_EQ(layout_from_directory(m_dir.string(), "dp=3", "no-placeholder").error().code, ExitCode::usage);
  auto r = layout_from_replicas({(m_dir / "shard-0.bin").string(), (m_dir / "shard-1.bin").string()});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->sets[0].files[1].rank, -1);
  EXPECT_EQ(layout_from_replicas({(m_dir / "shard-0.bin").string()}).error().code, ExitCode::usage);
  EXPECT_EQ(layout_from_replicas({(m_dir / "shard-0.bin").string(), (m_dir / "shard-0.bin").string()}).error().code,
            ExitCode::usage);
}

}  // namespace
}  // namespace scout::checkpoint
