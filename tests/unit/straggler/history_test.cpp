#include "lib/straggler/history.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "lib/checkpoint/durable_file.hpp"
#include "tests/unit/straggler/sim.hpp"
#include "tests/unit/test_seed.hpp"

namespace scout::straggler {
namespace {

std::vector<GroupTimes> times_of(const sim::Spec& s) {
  auto ev = sim::run(s);
  std::vector<TimingTable> tables;
  for (auto& r : ev) tables.push_back(build_table(r, mesh_groups(s.mesh), nullptr));
  return group_times(ev, tables);
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/scout-history-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(StragglerHistory, GroupTimesMeasureComputeLinkAndStep) {
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=4");
  auto g = times_of(s);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_NEAR(g[0].compute_ns, s.compute_ns, 0.05 * s.compute_ns);
  EXPECT_NEAR(g[0].link_ns, s.link_ns, 0.1 * s.link_ns);
  EXPECT_GT(g[0].step_ns, s.compute_ns);
}

// A wait that ends when the trainer's wait() returns (ExitKind::waited) is an upper bound: it gives a group no
// link time for its baseline, while the compute after it still counts.
TEST(StragglerHistory, WaitedExitsGiveNoLinkTime) {
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=4");
  s.link_factor = [](const GroupInfo&) { return 20.0; };  // the wait() returned late on every call
  auto ev = sim::run(s);
  for (auto& round : ev)
    for (auto& r : round.ranks)
      for (auto& e : r.events) e.exit_kind = records::ExitKind::waited;
  std::vector<TimingTable> tables;
  for (auto& r : ev) tables.push_back(build_table(r, mesh_groups(s.mesh), nullptr));
  auto g = group_times(ev, tables);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_LT(g[0].link_ns, 0);  // none
  EXPECT_NEAR(g[0].compute_ns, s.compute_ns, 0.05 * s.compute_ns);
}

TEST(StragglerHistory, AFleetSlowdownDriftsFromItsOwnHistoryAndJitterDoesNot) {
  std::uint64_t seed = test_support::test_seed();
  std::printf("seed=%llu\n", static_cast<unsigned long long>(seed));
  History h;
  h.job = "j";
  DriftOptions o;
  sim::Spec s;
  s.mesh = *Mesh::parse("dp=4,tp=2");
  s.ranks_per_node = 2;
  for (int i = 0; i < 4; ++i) {
    s.seed = seed + static_cast<std::uint64_t>(i);
    std::int64_t based = -1;
    auto d = check_and_append(h, times_of(s), o, &based);
    EXPECT_TRUE(d.empty()) << "run " << i;
    if (i < 3) {
      EXPECT_EQ(based, 0);
    }
  }
  // Every rank 1.8x slower: spatially nothing stands out, temporally every group drifts.
  s.fleet_factor = [](std::int64_t) { return 1.8; };
  s.seed = seed + 100;
  auto d = check_and_append(h, times_of(s), o);
  ASSERT_FALSE(d.empty());
  std::set<std::string> groups;
  for (auto& x : d) {
    if (x.measure == "compute_ns") {
      groups.insert(x.group);
      EXPECT_NEAR(x.ratio, 1.8, 0.15);
    }
  }
  EXPECT_EQ(groups.size(), 7u);  // dp=4,tp=2: 2 dp groups, 4 tp groups, the world
}

TEST(StragglerHistory, FileRoundTripsIsLockedAndRefusesOtherJobsAndGarbage) {
  TempDir dir;
  const std::string path = (dir.path / "h.json").string();
  sim::Spec s;
  for (int i = 0; i < 3; ++i) {
    auto r = update_history(path, "job-a", times_of(s), {}, std::chrono::milliseconds(1000));
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_TRUE(r->drifts.empty());
  }
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), {});
  auto h = parse_history(text, "job-a", path);
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->groups.size(), 1u);
  EXPECT_EQ(h->groups.begin()->second.at("compute_ns").size(), 3u);
  auto other = update_history(path, "job-b", times_of(s), {}, std::chrono::milliseconds(1000));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, ExitCode::bad_input);
  for (const char* bad :
       {"{", "[]", R"({"schema":"x"})",
        R"({"schema":"scout.straggler-history","version":1,"job":"job-a","groups":{"g":{"compute_ns":[-1]}}})",
        R"({"schema":"scout.straggler-history","version":1,"job":"job-a","groups":{"g":{"bogus":[1]}}})"}) {
    auto p = parse_history(bad, "job-a", path);
    EXPECT_FALSE(p.ok()) << bad;
    if (!p.ok()) {
      EXPECT_EQ(p.error().code, ExitCode::bad_input);
    }
  }
  // A held lock times out as unavailable, the file untouched.
  auto lock = checkpoint::FileLock::acquire(path + ".lock", std::chrono::milliseconds(100));
  ASSERT_TRUE(lock.ok());
  auto blocked = update_history(path, "job-a", times_of(s), {}, std::chrono::milliseconds(200));
  ASSERT_FALSE(blocked.ok());
  EXPECT_EQ(blocked.error().code, ExitCode::unavailable);
}

}  // namespace
}  // namespace scout::straggler
