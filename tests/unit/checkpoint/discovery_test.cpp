#include "lib/checkpoint/discovery.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace scout::checkpoint {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/scout-discovery-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "x";
}

TEST(Discovery, SubdirectoriesInNaturalOrderAndOnlyCheckpoints) {
  TempDir t;
  touch(t.path / "step_10" / "model_rank0.safetensors");
  touch(t.path / "step_9" / "model_rank0.safetensors");
  touch(t.path / "step_100" / "scout-ckpt.json");
  touch(t.path / "logs" / "train.log");
  touch(t.path / ".hidden" / "model_rank0.safetensors");
  auto found = discover_checkpoints({t.path.string()});
  ASSERT_TRUE(found.ok()) << found.error().message();
  std::vector<std::string> want = {(t.path / "step_9").string(), (t.path / "step_10").string(),
                                   (t.path / "step_100").string()};
  EXPECT_EQ(*found, want);
}

TEST(Discovery, RootThatIsACheckpointIsItself) {
  TempDir t;
  touch(t.path / "ck" / "model_rank0.safetensors");
  auto found = discover_checkpoints({(t.path / "ck/").string()});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, std::vector<std::string>{(t.path / "ck").string()});
}

TEST(Discovery, RootThatIsNotADirectoryIsBadInput) {
  auto found = discover_checkpoints({"/nonexistent-scout-root"});
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.error().code, ExitCode::bad_input);
}

TEST(Discovery, LayoutNeedsMeshOrManifest) {
  TempDir t;
  touch(t.path / "model_rank0.safetensors");
  std::optional<Manifest> m;
  auto l = resolve_layout(LayoutRequest{}, t.path.string(), m);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code, ExitCode::usage);
  auto missing = resolve_layout(LayoutRequest{}, (t.path / "nope").string(), m);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ExitCode::bad_input);
}

TEST(Discovery, DefaultLedgerPath) {
  EXPECT_EQ(*default_ledger_path("j", "/x/l.json"), "/x/l.json");
  ::setenv("SCOUT_STATE_DIR", "/state", 1);
  EXPECT_EQ(*default_ledger_path("job-1.a_b", ""), "/state/verify-ckpt/job-1.a_b.ledger.json");
  ::unsetenv("SCOUT_STATE_DIR");
  EXPECT_EQ(default_ledger_path("", "").error().code, ExitCode::usage);
  EXPECT_EQ(default_ledger_path("a/b", "").error().code, ExitCode::usage);
}

}  // namespace
}  // namespace scout::checkpoint
