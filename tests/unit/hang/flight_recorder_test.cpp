// Flight Recorder dumps in both of torch 2.15's forms (the pickled
// dump-on-timeout file and its JSON twin, written by one process from one
// recorder state: fuzz/corpus/flight_recorder/seed-*) give the same snapshot.
#include "lib/hang/flight_recorder.hpp"

#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "lib/topology/mesh.hpp"

using namespace scout;

namespace {

std::string slurp(const std::string& name) {
  std::ifstream in(std::string(SCOUT_SOURCE_DIR) + "/fuzz/corpus/flight_recorder/" + name, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace

TEST(FlightRecorder, PickledAndJsonDumpsGiveOneSnapshot) {
  const std::string pick = slurp("seed-pickle"), js = slurp("seed-json");
  ASSERT_FALSE(pick.empty());
  ASSERT_EQ(static_cast<unsigned char>(pick[0]), 0x80);  // a pickle, not JSON
  auto a = hang::snapshot_from_flight_recorder(pick, 0, "job");
  auto b = hang::snapshot_from_flight_recorder(js, 0, "job");
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(a->op_seq, b->op_seq);
  EXPECT_GE(a->recent.size(), 5u);  // all_reduce, broadcast, all_gather, barrier, sub-group all_reduce
  ASSERT_EQ(a->recent.size(), b->recent.size());
  for (std::size_t i = 0; i < a->recent.size(); ++i) {
    EXPECT_EQ(a->recent[i].fingerprint.type, b->recent[i].fingerprint.type) << i;
    EXPECT_EQ(a->recent[i].fingerprint.group, b->recent[i].fingerprint.group) << i;
    EXPECT_EQ(a->recent[i].fingerprint.group_seq, b->recent[i].fingerprint.group_seq) << i;
    EXPECT_EQ(a->recent[i].fingerprint.count, b->recent[i].fingerprint.count) << i;
    EXPECT_EQ(a->recent[i].fingerprint.dtype, b->recent[i].fingerprint.dtype) << i;
    EXPECT_EQ(a->recent[i].enter_ns, b->recent[i].enter_ns) << i;
  }
  EXPECT_EQ(a->pending.count, 6u);  // the last call: a 2x3 all_reduce
  EXPECT_EQ(a->collective_state, b->collective_state);
}

TEST(FlightRecorder, APickleNamingAClassIsRefusedByName) {
  // GLOBAL os.system, then a call: a dump never holds a class, and nothing is ever executed.
  const std::string evil(
      "\x80\x02"
      "cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03.",
      33);
  auto r = hang::snapshot_from_flight_recorder(evil, 0, "job");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ExitCode::bad_input);
  EXPECT_NE(r.error().message().find("os.system"), std::string::npos) << r.error().message();
}

TEST(FlightRecorder, MalformedDumpsAreBadInput) {
  for (std::string bad : {std::string("\x80\x02}q\x00(X\x07\x00\x00\x00"
                                      "entries",
                                      18),
                          std::string("{not json"), std::string("\x80\x02]q\x00.", 6),
                          std::string(R"({"entries": [{"profiling_name": 7}]})"), std::string(R"({"entries": 3})"),
                          std::string(R"({"entries": [], "pg_config": {"0": {"ranks": ["a"]}}})")}) {
    auto r = hang::snapshot_from_flight_recorder(bad, 0, "job");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ExitCode::bad_input) << bad;
  }
}

// Real dumps of tests/integration/trainers/fr_mesh_job.py (4 ranks, gloo, torch 2.15; dp=2 x tp=2 as
// new_group pgs or a DeviceMesh): tests/unit/hang/flight_recorder_dumps/<case>/{json,pickle}.
namespace {

std::string dumps(const std::string& name) {
  return std::string(SCOUT_SOURCE_DIR) + "/tests/unit/hang/flight_recorder_dumps/" + name;
}

}  // namespace

TEST(FlightRecorderDir, ACleanJobsLastBarrierIsDoneInBothForms) {
  // Every rank's newest entry is the closing barrier, retired with no completion time (gloo's way for a
  // completed op and a timed-out one alike): every member made it, so it completed.
  for (const char* form : {"json", "pickle"}) {
    auto reads = hang::read_flight_recorder_dir(dumps("clean_groups/") + form, "job");
    ASSERT_TRUE(reads.ok()) << reads.error().message();
    ASSERT_EQ(reads->size(), 4u);
    for (const auto& r : *reads) {
      EXPECT_EQ(r.snapshot->pending.type, records::CollectiveType::barrier) << form;
      EXPECT_EQ(r.snapshot->collective_state, records::CollectiveState::done) << form << " rank " << r.snapshot->rank;
    }
  }
}

TEST(FlightRecorderDir, RanksAreReplicasOnlyWhereTheDumpsSaySo) {
  // DeviceMesh pgs name their dims (mesh_dp, mesh_tp): rank = dp * 2 + tp.
  auto mesh = hang::read_flight_recorder_dir(dumps("clean_mesh/json"), "job");
  ASSERT_TRUE(mesh.ok()) << mesh.error().message();
  for (const auto& r : *mesh) {
    const auto& c = r.snapshot->coords;
    EXPECT_EQ(c[static_cast<int>(Dim::dp)], r.snapshot->rank / 2) << r.snapshot->rank;
    EXPECT_EQ(c[static_cast<int>(Dim::tp)], r.snapshot->rank % 2) << r.snapshot->rank;
  }
  // new_group pgs name nothing: two families, neither taken for replicas (no dp coordinate), and no two
  // ranks at one coordinate.
  auto groups = hang::read_flight_recorder_dir(dumps("clean_groups/json"), "job");
  ASSERT_TRUE(groups.ok()) << groups.error().message();
  std::set<std::array<std::int64_t, k_dim_count>> seen;
  for (const auto& r : *groups) {
    EXPECT_EQ(r.snapshot->coords[static_cast<int>(Dim::dp)], 0) << r.snapshot->rank;
    EXPECT_TRUE(seen.insert(r.snapshot->coords).second) << r.snapshot->rank;
  }
  // A dump missing (rank 1 exited): the pgs it was in cannot be told, so every rank stands alone.
  auto exited = hang::read_flight_recorder_dir(dumps("exit_rank1_mesh/json"), "job");
  ASSERT_TRUE(exited.ok()) << exited.error().message();
  ASSERT_EQ(exited->size(), 3u);
  for (const auto& r : *exited) EXPECT_EQ(r.snapshot->coords[static_cast<int>(Dim::pp)], r.snapshot->rank);
}

TEST(FlightRecorderDir, TruncatedDumpsAreBadInputNamingTheFile) {
  const std::string src = dumps("clean_groups/");
  const std::string dir = ::testing::TempDir() + "/scout_fr_truncated";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* name : {"pickle/rank_0", "json/rank_0.json"}) {
    std::ifstream in(src + name, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string whole = buf.str();
    ASSERT_GT(whole.size(), 100u);
    for (std::size_t cut : {std::size_t{1}, whole.size() / 2, whole.size() - 1}) {
      const std::string path = dir + "/rank_0";
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
      std::ofstream(path, std::ios::binary) << whole.substr(0, cut);
      auto r = hang::read_flight_recorder_dir(dir, "job");
      ASSERT_FALSE(r.ok()) << name << " cut at " << cut;
      EXPECT_EQ(r.error().code, ExitCode::bad_input) << name << " cut at " << cut;
      EXPECT_NE(r.error().message().find("rank_0"), std::string::npos) << r.error().message();
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorderDir, AWorldNoJobHasIsBadInputNotAnAllocation) {
  const std::string dir = ::testing::TempDir() + "/scout_fr_world";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/rank_0.json") << R"({"entries": [], "pg_config": {"x": {"ranks": "[0, 99999999]"}}})";
  auto r = hang::read_flight_recorder_dir(dir, "job");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ExitCode::bad_input) << r.error().message();
  std::filesystem::remove_all(dir);
}
