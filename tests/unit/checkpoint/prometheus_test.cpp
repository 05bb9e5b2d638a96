#include "lib/checkpoint/prometheus.hpp"

#include <gtest/gtest.h>

namespace scout::checkpoint {
namespace {

TEST(Prometheus, LabelValuesAreEscaped) {
  EXPECT_EQ(prometheus_escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(prometheus_escape("plain"), "plain");
}

TEST(Prometheus, LedgerGaugesAndRoles) {
  Ledger l;
  l.job = "j\"1";
  ledger_add_checkpoint(l, "/c/1", CheckpointState::pending, "ok", "t");
  ledger_add_checkpoint(l, "/c/2", CheckpointState::corrupt, "bad", "t");
  const std::string t = prometheus_text(l, std::nullopt, 0);
  EXPECT_NE(t.find("scout_ckpt_checkpoints{job=\"j\\\"1\",state=\"corrupt\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("scout_ckpt_checkpoints{job=\"j\\\"1\",state=\"pending\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("role=\"latest\",checkpoint=\"/c/1\""), std::string::npos) << t;
  EXPECT_NE(t.find("scout_ckpt_verified_present{job=\"j\\\"1\"} 0\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("scout_ckpt_last_run"), std::string::npos) << "no run, no run gauges";
}

TEST(Prometheus, RunGauges) {
  Ledger l;
  l.job = "j";
  RunStats run;
  run.exit_code = 1;
  run.checked = 3;
  run.bytes = 4096;
  run.seconds = 0.5;
  const std::string t = prometheus_text(l, run, 1700000000);
  EXPECT_NE(t.find("scout_ckpt_last_run_timestamp_seconds{job=\"j\"} 1700000000\n"), std::string::npos) << t;
  EXPECT_NE(t.find("scout_ckpt_last_run_exit_code{job=\"j\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("scout_ckpt_last_run_checked{job=\"j\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("scout_ckpt_last_run_bytes{job=\"j\"} 4096\n"), std::string::npos) << t;
  EXPECT_NE(t.find("scout_ckpt_last_run_seconds{job=\"j\"} 0.5\n"), std::string::npos) << t;
}

TEST(Prometheus, UnwritableFileIsAnError) {
  Ledger l;
  l.job = "j";
  EXPECT_FALSE(write_prometheus("/nonexistent-dir-for-scout/x.prom", l, std::nullopt).ok());
}

}  // namespace
}  // namespace scout::checkpoint
