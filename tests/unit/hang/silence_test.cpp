// The one silence rule shared by decide() and `scout observe`.
#include "lib/hang/silence.hpp"

#include <gtest/gtest.h>

namespace scout::hang {
namespace {

records::RankSnapshot snap(std::uint64_t op_seq, std::int64_t progress, std::int64_t heartbeat, std::int64_t start) {
  records::RankSnapshot s;
  s.op_seq = op_seq;
  s.progress_ns = progress;
  s.heartbeat_ns = heartbeat;
  s.start_ns = start;
  return s;
}

TEST(Silence, LastProgressFallsBackToHeartbeatThenStart) {
  EXPECT_EQ(last_progress_ns(snap(1, 30, 20, 10)), 30);
  EXPECT_EQ(last_progress_ns(snap(1, 0, 20, 10)), 20);
  EXPECT_EQ(last_progress_ns(snap(1, 0, 0, 10)), 10);
}

TEST(Silence, NewestProgressOfRanksThatPublished) {
  Silence s;
  s.add_rank(snap(0, 0, 0, 900), ProcessState::alive);  // still starting up: no stall, no progress
  EXPECT_FALSE(s.stalled(10'000, 100));
  EXPECT_EQ(s.silent_ns(10'000), 0);
  s.add_rank(snap(5, 500, 0, 1), ProcessState::alive);
  s.add_rank(snap(5, 800, 0, 1), ProcessState::alive);
  EXPECT_EQ(s.newest_progress_ns(), 800);
  EXPECT_EQ(s.silent_ns(1000), 200);
  EXPECT_TRUE(s.silent(1000, 200));
  EXPECT_FALSE(s.silent(999, 200));
  EXPECT_FALSE(s.bad_process());
}

TEST(Silence, StoppedDeadOrTornWithDeadWriterIsAStallAtOnce) {
  for (auto st : {ProcessState::stopped, ProcessState::exited, ProcessState::gone}) {
    Silence s;
    s.add_rank(snap(5, 1000, 0, 1), ProcessState::alive);
    s.add_rank(snap(5, 1000, 0, 1), st);
    EXPECT_TRUE(s.stalled(1001, 1'000'000)) << process_state_name(st);
  }
  Silence torn;
  torn.add_issue("torn", true);
  EXPECT_FALSE(torn.bad_process());
  torn.add_issue("stale", false);
  EXPECT_FALSE(torn.bad_process());
  torn.add_issue("torn", false);
  EXPECT_TRUE(torn.bad_process());
}

TEST(Silence, OfNodeEvidence) {
  NodeEvidence e;
  RankEvidence r;
  r.snapshot = snap(3, 700, 0, 1);
  r.process.state = ProcessState::alive;
  e.ranks.push_back(r);
  e.issues.push_back({"scout.j.1", "torn", "", 1, false});
  auto s = silence_of(e);
  EXPECT_EQ(s.newest_progress_ns(), 700);
  EXPECT_TRUE(s.bad_process());
}

}  // namespace
}  // namespace scout::hang
