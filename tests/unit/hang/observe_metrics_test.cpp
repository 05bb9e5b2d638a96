#include "lib/hang/observe_metrics.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "lib/common/file.hpp"
#include "lib/common/prometheus.hpp"

namespace scout::hang {
namespace {

bool has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

TEST(ObserveMetrics, FreshDaemonIsUpWithNoVerdict) {
  ObserveMetrics m;
  m.job = "j";
  const std::string t = observe_metrics_text(m);
  EXPECT_TRUE(has(t, "# TYPE scout_observe_up gauge\nscout_observe_up{job=\"j\"} 1\n")) << t;
  EXPECT_TRUE(has(t, "# TYPE scout_observe_stalls_seen_total counter\nscout_observe_stalls_seen_total{job=\"j\"} 0\n"))
      << t;
  EXPECT_FALSE(has(t, "scout_observe_last_verdict")) << "no verdict, no verdict gauges";
  EXPECT_FALSE(has(t, "scout_observe_rank_silence_seconds")) << "no records, no per-rank samples";
}

TEST(ObserveMetrics, VerdictSilenceAndRanks) {
  ObserveMetrics m;
  m.job = "train\"42";
  m.rounds = 7;
  m.stalls_seen = 2;
  m.verdicts = 1;
  m.records = 2;
  m.has_verdict = true;
  m.verdict_command = "probe-hang";
  m.verdict_status = "attributed";
  m.verdict_exit_code = 1;
  m.verdict_unix_seconds = 1700000000;
  m.silence_seconds = 12.5;
  m.ranks = {{0, 12.5}, {3, 40}};
  m.round_unix_seconds = 1700000001;
  m.up = false;
  const std::string t = observe_metrics_text(m);
  const std::string job = "job=\"train\\\"42\"";
  EXPECT_TRUE(has(t, "scout_observe_up{" + job + "} 0\n")) << t;
  EXPECT_TRUE(has(t, "scout_observe_rounds_total{" + job + "} 7\n")) << t;
  EXPECT_TRUE(has(t, "scout_observe_stalls_seen_total{" + job + "} 2\n")) << t;
  EXPECT_TRUE(has(
      t, "scout_observe_last_verdict{" + job + ",command=\"probe-hang\",status=\"attributed\",exit_code=\"1\"} 1\n"))
      << t;
  EXPECT_TRUE(has(t, "scout_observe_last_verdict_timestamp_seconds{" + job + "} 1700000000\n")) << t;
  EXPECT_TRUE(has(t, "scout_observe_silence_seconds{" + job + "} 12.5\n")) << t;
  EXPECT_TRUE(has(t, "scout_observe_rank_silence_seconds{" + job + ",rank=\"3\"} 40\n")) << t;
  // One HELP/TYPE pair per family, even with several samples.
  EXPECT_EQ(t.find("# TYPE scout_observe_rank_silence_seconds"), t.rfind("# TYPE scout_observe_rank_silence_seconds"));
}

TEST(ObserveMetricsFile, CountsEachStallOnceAndWritesUpZeroAtStop) {
  char dir[] = "/tmp/scout-observe-metrics-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/m.prom";
  ObserveMetricsFile f(file, "j");
  f.stall("a");
  f.stall("a");  // a failed probe retried: the same stall
  f.stall("b");
  Silence silence;
  f.round(silence, {{2, 1'000'000'000}}, 1, 3'500'000'000);
  Verdict v;
  v.command = "observe";
  v.status = VerdictStatus::attributed;
  f.verdict(v);
  EXPECT_EQ(f.metrics().stalls_seen, 2);
  EXPECT_EQ(f.metrics().verdict_exit_code, 1);
  ASSERT_TRUE(f.write());
  f.stopped();
  auto text = read_small_file(file);
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(has(*text, "scout_observe_up{job=\"j\"} 0\n")) << *text;
  EXPECT_TRUE(has(*text, "scout_observe_rank_silence_seconds{job=\"j\",rank=\"2\"} 2.5\n")) << *text;
  EXPECT_TRUE(has(*text, "status=\"attributed\",exit_code=\"1\"} 1\n")) << *text;
  ObserveMetricsFile bad("/nonexistent-dir-for-scout/m.prom", "j");
  EXPECT_FALSE(bad.write());
  EXPECT_TRUE(ObserveMetricsFile("", "j").write()) << "no file, nothing to fail";
  std::remove(file.c_str());
  ::rmdir(dir);
}

TEST(PrometheusText, LabelsAreEscapedAndUnwritableFileIsAnError) {
  PrometheusText t;
  t.metric("m", "gauge", "help", {{"a", "x\"y\\z\nw"}}, 0.25);
  EXPECT_EQ(t.text(), "# HELP m help\n# TYPE m gauge\nm{a=\"x\\\"y\\\\z\\nw\"} 0.25\n");
  PrometheusText bare;
  bare.sample("n", {}, 3);
  EXPECT_EQ(bare.text(), "n 3\n");
  EXPECT_FALSE(write_prometheus_textfile("/nonexistent-dir-for-scout/x.prom", "x").ok());
}

}  // namespace
}  // namespace scout::hang
