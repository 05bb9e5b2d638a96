// Flight Recorder dumps in both of torch 2.15's forms (the pickled
// dump-on-timeout file and its JSON twin, written by one process from one
// recorder state: fuzz/corpus/flight_recorder/seed-*) give the same snapshot.
#include "lib/hang/flight_recorder.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

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
