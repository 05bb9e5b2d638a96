#include "lib/trace/trace.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "lib/common/file.hpp"
#include "lib/trace/sources.hpp"
#include "tests/unit/test_seed.hpp"

namespace scout::trace {
namespace {

using json = nlohmann::ordered_json;
constexpr std::int64_t k_t0 = 1'700'000'000'000'000'000;  // an absolute CLOCK_REALTIME ns

records::CollectiveEvent call(std::uint64_t group, std::uint64_t seq, std::uint64_t op_seq, std::int64_t enter_us,
                              std::int64_t exit_us,
                              records::CollectiveType type = records::CollectiveType::all_reduce) {
  records::CollectiveEvent e;
  e.fingerprint.group = group;
  e.fingerprint.type = type;
  e.fingerprint.dtype = 1;
  e.fingerprint.count = 1024;
  e.fingerprint.root_or_op = 0;
  e.fingerprint.group_seq = seq;
  e.op_seq = op_seq;
  e.enter_ns = k_t0 + enter_us * 1000;
  e.exit_ns = exit_us < 0 ? 0 : k_t0 + exit_us * 1000;
  e.exit_kind = exit_us < 0 ? records::ExitKind::unknown : records::ExitKind::completed;
  return e;
}

std::vector<json> of_phase(const json& doc, const std::string& ph) {
  std::vector<json> out;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

// The structural rules every trace keeps: times >= 0, and on every (pid, tid) the slices nest.
void expect_well_formed(const json& doc) {
  ASSERT_TRUE(doc.contains("traceEvents"));
  EXPECT_EQ(doc["displayTimeUnit"], "ms");
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::pair<double, double>>> per_track;
  std::set<std::pair<std::int64_t, std::int64_t>> named;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    ASSERT_TRUE(ph == "X" || ph == "i" || ph == "M") << e.dump();
    const std::pair<std::int64_t, std::int64_t> track{e["pid"].get<std::int64_t>(), e["tid"].get<std::int64_t>()};
    if (ph == "M" && e["name"] == "thread_name") named.insert(track);
    if (ph == "M") continue;
    ASSERT_GE(e["ts"].get<double>(), 0.0) << e.dump();
    if (ph == "X") {
      ASSERT_GE(e["dur"].get<double>(), 0.0) << e.dump();
      per_track[track].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
    }
  }
  for (auto& [track, slices] : per_track) {
    EXPECT_TRUE(named.count(track)) << "slices on an unnamed track " << track.first << "/" << track.second;
    std::sort(slices.begin(), slices.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> open;
    for (const auto& [s, e] : slices) {
      while (!open.empty() && open.back() <= s) open.pop_back();
      ASSERT_TRUE(open.empty() || open.back() >= e)
          << "slices overlap without nesting on " << track.first << "/" << track.second << " at " << s;
      open.push_back(e);
    }
  }
}

TEST(Trace, TracksPerRankNamedByHostWithOneSlicePerCall) {
  TraceInput in;
  in.job = "J";
  in.command = "records trace";
  in.end_ns = k_t0 + 10'000'000;
  for (std::int64_t r = 0; r < 4; ++r) {
    Track t;
    t.rank = r;
    t.host = r < 2 ? "nodeA" : "nodeB";
    t.events = {call(0xabcdef0123456789ULL, 1, 1, 100, 200), call(0xabcdef0123456789ULL, 2, 2, 300, 400)};
    in.tracks.push_back(t);
  }
  TraceStats st;
  const json doc = build(in, &st);
  expect_well_formed(doc);
  EXPECT_EQ(st.tracks, 4);
  EXPECT_EQ(st.slices, 8);
  std::map<std::int64_t, std::string> process, thread;
  for (const auto& m : of_phase(doc, "M")) {
    if (m["name"] == "process_name") process[m["pid"]] = m["args"]["name"];
    if (m["name"] == "thread_name") thread[m["tid"]] = m["args"]["name"];
  }
  EXPECT_EQ(process, (std::map<std::int64_t, std::string>{{1, "nodeA"}, {2, "nodeB"}}));
  EXPECT_EQ(thread[0], "rank 0 (nodeA)");
  EXPECT_EQ(thread[3], "rank 3 (nodeB)");
  const auto slices = of_phase(doc, "X");
  ASSERT_EQ(slices.size(), 8u);
  const json& s = slices[0];
  EXPECT_EQ(s["name"], "all_reduce");
  EXPECT_EQ(s["args"]["group"], "0xabcdef0123456789");
  EXPECT_EQ(s["args"]["seq"], 1);
  EXPECT_EQ(s["args"]["op"], "all_reduce");
  EXPECT_EQ(s["args"]["count"], 1024);
  EXPECT_EQ(s["args"]["state"], "done");
  EXPECT_TRUE(s["args"]["dtype"].is_string());
  EXPECT_DOUBLE_EQ(s["ts"].get<double>(), 0.0);  // the base is the earliest call
  EXPECT_DOUBLE_EQ(s["dur"].get<double>(), 100.0);
  EXPECT_EQ(doc["otherData"]["base_ns"], std::to_string(k_t0 + 100'000));
  EXPECT_EQ(doc["otherData"]["schema"], "scout.trace");
}

TEST(Trace, AnOpenCallRunsToTheEndAndTheSuspectsStalledCallIsMarked) {
  TraceInput in;
  in.end_ns = k_t0 + 5'000'000;  // 5 s after t0
  for (std::int64_t r = 0; r < 3; ++r) {
    Track t;
    t.rank = r;
    t.host = "h";
    t.events = {call(7, 1, 1, 0, 50), call(7, 2, 2, 100, -1)};
    t.pending = t.events.back().fingerprint;
    t.state = records::CollectiveState::inside;
    in.tracks.push_back(t);
  }
  in.suspects.push_back({1, "h", "argument_divergence", {}});
  const json doc = build(in);
  expect_well_formed(doc);
  int open = 0, suspect_slices = 0;
  for (const auto& s : of_phase(doc, "X")) {
    if (!s["args"].value("open", false)) continue;
    ++open;
    EXPECT_DOUBLE_EQ(s["ts"].get<double>() + s["dur"].get<double>(), 5000.0);  // 5 ms
    EXPECT_EQ(s["args"]["state"], "inside");
    if (s["args"].value("suspect", false)) {
      ++suspect_slices;
      EXPECT_EQ(s["tid"], 1);
      EXPECT_EQ(s["cname"], "terrible");
      EXPECT_NE(s["cat"].get<std::string>().find("suspect"), std::string::npos);
    }
  }
  EXPECT_EQ(open, 3);
  EXPECT_EQ(suspect_slices, 1);
  int suspect_marks = 0;
  for (const auto& i : of_phase(doc, "i"))
    if (i["args"].value("suspect", false)) {
      ++suspect_marks;
      EXPECT_EQ(i["tid"], 1);
      EXPECT_EQ(i["s"], "t");
      EXPECT_EQ(i["name"], "suspect: argument_divergence");
    }
  EXPECT_EQ(suspect_marks, 1);
}

TEST(Trace, ASuspectOutsideAnyCallGetsAStalledSliceFromItsLastActivity) {
  TraceInput in;
  in.end_ns = k_t0 + 1'000'000;
  Track t;
  t.rank = 2;
  t.host = "h";
  t.phase = records::Phase::forward;
  t.events = {call(7, 1, 1, 0, 50)};
  in.tracks.push_back(t);
  in.suspects.push_back({2, "", "stopped_rank", {}});
  const json doc = build(in);
  expect_well_formed(doc);
  const auto slices = of_phase(doc, "X");
  ASSERT_EQ(slices.size(), 2u);
  const json& stall = slices[1].value("cat", "") == "stall,suspect" ? slices[1] : slices[0];
  EXPECT_EQ(stall["name"], "stalled (forward)");
  EXPECT_TRUE(stall["args"]["suspect"].get<bool>());
  EXPECT_DOUBLE_EQ(stall["ts"].get<double>(), 50.0);                                 // the last call's exit
  EXPECT_DOUBLE_EQ(stall["ts"].get<double>() + stall["dur"].get<double>(), 1000.0);  // 1 ms
}

TEST(Trace, CallsThatOverlapWithoutNestingGoToAnotherLane) {
  TraceInput in;
  Track t;
  t.rank = 5;
  t.host = "h";
  t.events = {call(1, 1, 1, 0, 100), call(2, 1, 2, 50, 150), call(1, 2, 3, 60, 70)};
  in.tracks.push_back(t);
  TraceStats st;
  const json doc = build(in, &st);
  expect_well_formed(doc);
  EXPECT_EQ(st.lanes, 1);
  std::set<std::int64_t> tids;
  for (const auto& s : of_phase(doc, "X")) tids.insert(s["tid"].get<std::int64_t>());
  EXPECT_EQ(tids, (std::set<std::int64_t>{5, k_lane_tid_base + 5 * k_max_lanes + 1}));
}

TEST(Trace, RandomRingsAlwaysGiveWellFormedTraces) {
  const unsigned seed = test_support::test_seed32();
  SCOPED_TRACE(::testing::Message() << "SCOUT_TEST_SEED=" << seed);
  std::mt19937 rng(seed);
  for (int round = 0; round < 50; ++round) {
    TraceInput in;
    const int ranks = 1 + static_cast<int>(rng() % 6);
    std::int64_t latest = 0;
    for (int r = 0; r < ranks; ++r) {
      Track t;
      t.rank = r;
      t.host = "h" + std::to_string(rng() % 3);
      std::int64_t at = rng() % 1000;
      for (int c = 0; c < static_cast<int>(rng() % 20); ++c) {
        const std::int64_t len = rng() % 300;
        const bool open = rng() % 8 == 0;
        t.events.push_back(call(rng() % 3, c + 1, c + 1, at, open ? -1 : at + len));
        at += static_cast<std::int64_t>(rng() % 200);  // the next call may start inside this one
        latest = std::max(latest, at + len);
      }
      in.tracks.push_back(t);
    }
    if (rng() % 2) in.end_ns = k_t0 + latest * 1000 + 10;
    if (ranks > 1) in.suspects.push_back({static_cast<std::int64_t>(rng() % ranks), "", "stopped_rank", {}});
    TraceStats st;
    const json doc = build(in, &st);
    expect_well_formed(doc);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(st.tracks, ranks);
  }
}

hang::NodeEvidence node_evidence(std::int64_t observer, const std::string& host, std::vector<std::int64_t> ranks,
                                 std::int64_t world) {
  hang::NodeEvidence n;
  n.observer = observer;
  n.node = host;
  n.job = "J";
  for (auto r : ranks) {
    hang::RankEvidence e;
    e.snapshot.rank = r;
    e.snapshot.world_size = world;
    e.snapshot.recent = {call(9, 1, 1, 0, 10)};
    n.ranks.push_back(e);
  }
  return n;
}

std::map<std::int64_t, std::string> thread_names(const json& doc) {
  std::map<std::int64_t, std::string> out;
  for (const auto& m : of_phase(doc, "M"))
    if (m["name"] == "thread_name") out[m["tid"]] = m["args"]["name"];
  return out;
}

TEST(TraceSources, HangEvidenceWithoutARingGivesAPositionSlice) {
  hang::NodeEvidence n = node_evidence(0, "nodeA", {0, 1}, 2);
  n.ranks[1].ring = hang::RingDigest{};
  n.ranks[1].snapshot.progress_ns = k_t0 + 200'000;
  Verdict v;
  v.command = "probe-hang";
  v.job = "J";
  v.status = VerdictStatus::attributed;
  v.suspects.push_back(Suspect{1, "nodeA", "dead_rank", nlohmann::json::object()});
  hang::ProbeEvidence seen;
  seen.nodes = {n, std::nullopt};
  seen.now_ns = k_t0 + 1'000'000;
  const json doc = build(from_hang(seen, v));
  expect_well_formed(doc);
  std::map<std::int64_t, std::vector<json>> slices;
  for (const auto& s : of_phase(doc, "X")) slices[s["tid"]].push_back(s);
  ASSERT_EQ(slices[0].size(), 1u);
  EXPECT_EQ(slices[0][0]["cat"], "collective");
  ASSERT_EQ(slices[1].size(), 1u);  // no ring: its position, from its last progress to the probe, marked suspect
  EXPECT_EQ(slices[1][0]["cat"], "position,suspect");
  EXPECT_DOUBLE_EQ(slices[1][0]["ts"].get<double>(), 200.0);
  EXPECT_EQ(thread_names(doc)[1], "rank 1 (node 0: nodeA)");  // the host from the node when the record has none
  EXPECT_EQ(doc["otherData"]["observers_missing"], 1);
  EXPECT_EQ(doc["otherData"]["silent_nodes"], json::array({1}));
  bool probe = false, suspect = false, silent = false;
  for (const auto& i : of_phase(doc, "i")) {
    probe |= i["cat"] == "probe";
    suspect |= i["args"].value("suspect", false) && i["tid"] == 1;
    silent |= i["name"] == "node 1: no evidence (observer silent)" && i["s"] == "g";
  }
  EXPECT_TRUE(probe);
  EXPECT_TRUE(suspect);
  EXPECT_TRUE(silent);
}

TEST(TraceSources, AProbeOfSeveralNodesHasATrackForEveryRankOfEveryNodeThatAnswered) {
  // Node 0 and 1 gave their evidence, node 2 only its position (ranks 4, 5), node 3 nothing.
  hang::ProbeEvidence seen;
  seen.nodes = {node_evidence(0, "h0", {0, 1}, 8), node_evidence(1, "h1", {2, 3}, 8), std::nullopt, std::nullopt};
  hang::NodeEvidence third = node_evidence(2, "h2", {4, 5}, 8);
  seen.positions = {std::nullopt, std::nullopt, hang::node_position(third), std::nullopt};
  seen.now_ns = k_t0 + 1'000'000;
  Verdict v;
  v.command = "probe-hang";
  v.job = "J";
  v.status = VerdictStatus::inconclusive;
  TraceStats st;
  const json doc = build(from_hang(seen, v), &st);
  expect_well_formed(doc);
  EXPECT_EQ(st.tracks, 6);
  const auto names = thread_names(doc);
  EXPECT_EQ(names.at(0), "rank 0 (node 0: h0)");
  EXPECT_EQ(names.at(3), "rank 3 (node 1: h1)");
  EXPECT_EQ(names.at(4), "rank 4 (node 2)");
  EXPECT_EQ(names.at(5), "rank 5 (node 2)");
  std::set<std::int64_t> with_slices;
  for (const auto& s : of_phase(doc, "X")) with_slices.insert(s["tid"].get<std::int64_t>());
  EXPECT_EQ(with_slices, (std::set<std::int64_t>{0, 1, 2, 3, 4, 5}));  // no empty track
  std::set<std::string> processes;
  for (const auto& m : of_phase(doc, "M"))
    if (m["name"] == "process_name") processes.insert(m["args"]["name"]);
  EXPECT_EQ(processes, (std::set<std::string>{"node 0 (h0)", "node 1 (h1)", "node 2"}));
  EXPECT_EQ(doc["otherData"]["silent_nodes"], json::array({3}));
  EXPECT_EQ(doc["otherData"]["observers_gathered"], 2);
  EXPECT_EQ(doc["otherData"]["observers_position_only"], 1);
  EXPECT_FALSE(doc["otherData"].contains("decided_alone"));
  for (const auto& t : doc["otherData"]["tracks"]) EXPECT_EQ(t["node"], t["rank"].get<std::int64_t>() / 2);
  int silent = 0;
  for (const auto& i : of_phase(doc, "i")) silent += i["name"] == "node 3: no evidence (observer silent)" ? 1 : 0;
  EXPECT_EQ(silent, 1);
}

TEST(TraceSources, AnObserverThatDecidedAloneSaysSoAndMarksNoNodeSilent) {
  hang::ProbeEvidence seen;
  seen.nodes = {node_evidence(2, "h2", {4, 5}, 8)};  // the store unreachable: its own node only
  seen.now_ns = k_t0 + 1'000'000;
  seen.local_only = true;
  Verdict v;
  v.command = "probe-hang";
  v.job = "J";
  v.status = VerdictStatus::inconclusive;
  const json doc = build(from_hang(seen, v));
  expect_well_formed(doc);
  EXPECT_EQ(thread_names(doc).at(4), "rank 4 (node 2: h2)");
  EXPECT_TRUE(doc["otherData"]["decided_alone"].is_string());
  EXPECT_EQ(doc["otherData"]["silent_nodes"], json::array());
}

TEST(TraceSources, AStragglersFlaggedRoundsAreMarkedOnItsTrack) {
  std::vector<straggler::RoundEvidence> rounds(3);
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    rounds[i].baseline = i == 0;
    for (std::int64_t r = 0; r < 3; ++r) {
      straggler::RankEvents e;
      e.rank = r;
      e.node = "h";
      e.read_ns = k_t0 + static_cast<std::int64_t>(i) * 1'000'000'000;
      for (std::int64_t c = 0; c <= static_cast<std::int64_t>(i); ++c)
        e.events.push_back(call(4, c + 1, c + 1, c * 1'000'000 - 500'000, c * 1'000'000 - 400'000));
      rounds[i].ranks.push_back(e);
    }
  }
  Verdict v;
  v.command = "straggler";
  v.status = VerdictStatus::attributed;
  v.suspects.push_back(Suspect{2, "h", "compute", nlohmann::json::object()});
  v.details = {
      {"straggler",
       {{"per_round", {{{"flagged", {2}}, {"flagged_ranks", 1}}, {{"flagged", {0, 2}}, {"flagged_ranks", 2}}}}}}};
  const json doc = build(from_straggler(rounds, v));
  expect_well_formed(doc);
  std::set<std::int64_t> flagged_rounds;
  for (const auto& s : of_phase(doc, "X"))
    if (s["args"].contains("flagged_round")) {
      EXPECT_EQ(s["tid"], 2);  // rank 0 was flagged once, never named
      flagged_rounds.insert(s["args"]["flagged_round"].get<std::int64_t>());
    }
  EXPECT_EQ(flagged_rounds, (std::set<std::int64_t>{1, 2}));
  int calls = 0;
  for (const auto& s : of_phase(doc, "X")) calls += s["tid"] == 0 ? 1 : 0;
  EXPECT_EQ(calls, 3);  // every call once, though three reads saw the first
}

TEST(TraceSources, AWriteThatFailsIsAnUnavailableErrorRecordedInTheVerdict) {
  TraceInput in;
  Track t;
  t.rank = 0;
  t.events = {call(1, 1, 1, 0, 10)};
  in.tracks.push_back(t);
  Verdict v;
  auto e = write_for_verdict(in, "/nonexistent-dir-for-scout/trace.json", v);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, ExitCode::unavailable);
  EXPECT_FALSE(v.details["trace"]["written"].get<bool>());
  const auto dir = std::filesystem::temp_directory_path() / ("scout-trace-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.json").string();
  Verdict ok;
  EXPECT_FALSE(write_for_verdict(in, path, ok).has_value());
  EXPECT_TRUE(ok.details["trace"]["written"].get<bool>());
  auto text = read_small_file(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(nlohmann::json::parse(*text)["traceEvents"].size(), build(in)["traceEvents"].size());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace scout::trace
