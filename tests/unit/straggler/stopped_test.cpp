#include "lib/straggler/stopped.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "lib/straggler/decide.hpp"
#include "lib/straggler/evidence.hpp"
#include "tests/unit/straggler/sim.hpp"
#include "tests/unit/test_seed.hpp"

namespace scout::straggler {
namespace {

std::uint64_t fresh_seed() {
  std::uint64_t s = test_support::test_seed();
  std::printf("straggler stopped test seed=%llu\n", static_cast<unsigned long long>(s));
  return s;
}

// One rank's numbers in one recorded round: compute and wait per call (ms), and its state samples.
struct Rank {
  double compute_ms, wait_ms;
  std::int64_t samples = 0, stopped = 0;  // samples 0: not sampled
};

TimingTable round_table(const std::vector<Rank>& ranks, std::uint64_t first_call, std::int64_t calls) {
  TimingTable t;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto rank = static_cast<std::int64_t>(r);
    sim::add_uniform_calls(t, rank, ranks[r].compute_ms, ranks[r].wait_ms, first_call, calls);
    if (ranks[r].samples > 0) t.stopped[rank] = StoppedWindow{ranks[r].samples, ranks[r].stopped, 1'500'000'000, calls};
  }
  return t;
}

Decision decide_rounds(const std::vector<std::vector<Rank>>& rounds, std::int64_t calls,
                       std::vector<RoundResult>* results = nullptr) {
  const Mesh mesh = *Mesh::parse("dp=4");
  std::vector<TimingTable> tables;
  std::vector<RoundResult> out;
  std::uint64_t first = 1;
  for (const auto& r : rounds) {
    tables.push_back(round_table(r, first, calls));
    first += static_cast<std::uint64_t>(calls);
    out.push_back(analyse_round(tables.back(), mesh, DecideOptions{}));
  }
  auto d = decide(out, tables, mesh, DecideOptions{});
  if (results) *results = std::move(out);
  return d;
}

// The shape of the torch 2.x miss (campaign seed 20263318, rank 3 duty-cycled at 2.74x, its stops inside its
// collectives): every rank waiting ~70 ms per call, rank 3 a little less (42.9, 63.1, 65.8 ms against
// 70.8-74.6), its compute 1.57x its peers', then 1.00x and 1.00x. Timing names no one; the state samples,
// rank 3 stopped in 1 - 1/2.74 of them and its peers in none, name it, stopped.
TEST(StragglerStopped, ARankStoppedInsideItsCollectivesIsNamedByItsStateSamples) {
  const std::int64_t n = 375;  // 1.5 s at one sample per 4 ms
  const auto stopped = static_cast<std::int64_t>(static_cast<double>(n) * (1 - 1 / 2.74));
  std::vector<std::vector<Rank>> rounds = {
      {{20.1, 72.3}, {19.8, 74.6}, {20.4, 70.8}, {31.5, 42.9}},
      {{20.0, 71.9}, {20.3, 73.0}, {19.7, 72.4}, {20.1, 63.1}},
      {{19.9, 73.5}, {20.2, 71.2}, {20.0, 72.8}, {20.0, 65.8}},
  };
  EXPECT_TRUE(decide_rounds(rounds, 12).suspects.empty()) << "timing alone should not name it (the miss)";
  for (auto& r : rounds) {
    for (std::size_t i = 0; i < 3; ++i) r[i].samples = n;
    r[3].samples = n;
    r[3].stopped = stopped;
  }
  std::vector<RoundResult> results;
  auto d = decide_rounds(rounds, 12, &results);
  ASSERT_EQ(d.suspects.size(), 1u);
  const auto& s = d.suspects[0];
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.reason, "compute");
  EXPECT_EQ(s.flagged_rounds, 3);
  EXPECT_EQ(s.evidence["measure"], "stopped");
  EXPECT_EQ(s.evidence["cause"], "stopped");
  EXPECT_NEAR(s.ratio, 2.74, 0.02);
  EXPECT_NEAR(s.evidence["stopped_share"].get<double>(), 0.635, 0.005);
  EXPECT_EQ(s.evidence["state_samples"], 3 * n);
  EXPECT_EQ(s.evidence["cause_figures"]["stopped_samples"], 3 * stopped);
  for (const auto& r : results)
    for (const auto& rr : r.peers.at(0).ranks)
      if (rr.rank != 3) EXPECT_FALSE(rr.flagged) << "rank " << rr.rank;
}

TEST(StragglerStopped, AStopOnceOrAFewStoppedSamplesOrAJobStoppedAlikeNameNoOne) {
  const std::int64_t n = 375;
  auto clean = [&] {
    std::vector<std::vector<Rank>> rounds(3);
    for (auto& r : rounds) r = {{20.0, 30.0, n, 0}, {20.4, 29.7, n, 0}, {19.7, 30.2, n, 0}, {20.1, 30.1, n, 0}};
    return rounds;
  };
  // A debugger attached once: rank 1 stopped for 40% of one round of three. Flagged there, not named.
  auto once = clean();
  once[1][1].stopped = 150;
  std::vector<RoundResult> results;
  EXPECT_TRUE(decide_rounds(once, 12, &results).suspects.empty());
  EXPECT_TRUE(results[1].peers.at(0).ranks.at(1).flagged);
  // Stopped in under 5% of the samples of every round (a short attach per round): never flagged.
  auto few = clean();
  for (auto& r : few) r[2].stopped = 15;
  EXPECT_TRUE(decide_rounds(few, 12, &results).suspects.empty());
  for (const auto& r : results) EXPECT_FALSE(r.peers.at(0).ranks.at(2).flagged);
  // The whole job suspended alike (every rank stopped in 30-40% of the samples): no straggler.
  auto all = clean();
  for (auto& r : all)
    for (std::size_t i = 0; i < 4; ++i) r[i].stopped = 110 + 10 * static_cast<std::int64_t>(i);
  EXPECT_TRUE(decide_rounds(all, 12).suspects.empty());
  // Too few samples to say (20 needed): a round whose sampler barely ran.
  auto thin = clean();
  for (auto& r : thin) {
    for (auto& x : r) x.samples = 10;
    r[0].stopped = 8;
  }
  EXPECT_TRUE(decide_rounds(thin, 12).suspects.empty());
  // Stopped 6% of a long-compute round: 6% of 1.5 s over 12 calls is 7.5 ms a call, under 12% of the
  // peers' 100 ms compute: not material.
  auto small = clean();
  for (auto& r : small) {
    for (auto& x : r) x.compute_ms *= 5;
    r[3].stopped = 23;
  }
  EXPECT_TRUE(decide_rounds(small, 12).suspects.empty());
}

// Randomized, on the simulated job: the victim's stops fall inside its collectives (its timing is its peers'),
// stopped in 1 - 1/F of the samples, F in [1.3, 3]; clean peers never stopped. The victim is named by its
// samples alone, at about F; with no one stopped, no one is named.
TEST(StragglerStopped, OnASimulatedJobTheStoppedRankIsNamedAndACleanOneIsNot) {
  for (int i = 0; i < 10; ++i) {
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    sim::Spec s;
    s.mesh = *Mesh::parse(i % 2 ? "dp=4" : "dp=8");
    s.rounds = 4;
    s.baseline = true;
    s.seed = seed;
    auto ev = sim::run(s);
    const auto victim = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(s.mesh.world_size()));
    const double factor = std::uniform_real_distribution<double>(1.3, 3.0)(rng);
    const bool clean = i >= 8;
    for (std::size_t r = 1; r < ev.size(); ++r)
      for (auto& x : ev[r].ranks) {
        x.state_samples = 300 + static_cast<std::int64_t>(rng() % 100);
        const double share = !clean && x.rank == victim ? 1 - 1 / factor : 0.0;
        std::binomial_distribution<std::int64_t> b(x.state_samples, share);
        x.stopped_samples = share > 0 ? b(rng) : 0;
      }
    auto a = analyse(ev, s.mesh, DecideOptions{});
    if (clean) {
      EXPECT_TRUE(a.decision.suspects.empty()) << "seed " << seed;
      continue;
    }
    ASSERT_EQ(a.decision.suspects.size(), 1u) << "seed " << seed << " factor " << factor;
    EXPECT_EQ(a.decision.suspects[0].rank, victim) << "seed " << seed;
    EXPECT_EQ(a.decision.suspects[0].evidence["measure"], "stopped") << "seed " << seed;
    EXPECT_EQ(a.decision.suspects[0].evidence["cause"], "stopped") << "seed " << seed;
    // The ratio is 1 / (1 - the stopped share), and the share is a binomial draw of 300-400 samples a round
    // (standard deviation up to 0.029): compared in shares, 0.08 is about 3 of them. Compared in ratios, 15%
    // of a 2.76x factor was 2 (seed 5569098339575897814: 3.21x from a share of 0.69 drawn against 0.64).
    EXPECT_NEAR(1 - 1 / a.decision.suspects[0].ratio, 1 - 1 / factor, 0.08) << "seed " << seed << " factor " << factor;
  }
}

TEST(StragglerStopped, SamplesTravelInTheEvidenceAndAreValidated) {
  auto rounds = sim::two_reads_of_one_rank([](RankEvents& e, int i) {
    if (i == 1) {
      e.state_samples = 250;
      e.stopped_samples = 100;
    }
  });
  auto back = parse_evidence(evidence_json(rounds, "j").dump(), "j", "test");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ((*back)[0].ranks.at(0).state_samples, -1);  // not sampled: unknown, not zero
  EXPECT_EQ((*back)[1].ranks.at(0).state_samples, 250);
  EXPECT_EQ((*back)[1].ranks.at(0).stopped_samples, 100);
  auto wire = decode_round(encode_round(rounds[1], "j", 1), "j", 1);
  ASSERT_TRUE(wire) << wire.error().message();
  EXPECT_EQ(wire->ranks.at(0).stopped_samples, 100);
  auto w = stopped_per_round(*back);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(w[0].empty());
  ASSERT_EQ(w[1].count(0), 1u);
  EXPECT_EQ(w[1].at(0).calls, 5);
  EXPECT_EQ(w[1].at(0).window_ns, 1'000'000'000);
  EXPECT_DOUBLE_EQ(w[1].at(0).share(), 0.4);
  EXPECT_DOUBLE_EQ(w[1].at(0).ns_per_call(), 0.4 * 1e9 / 5);
  // More stopped samples than samples, negative counts, a wrong shape: rejected.
  for (const char* bad : {"[10, 11]", "[-1, 0]", "[5]", "[5, 1, 1]", "\"5\"", "[5.5, 1]"}) {
    auto j = evidence_json(rounds, "j");
    j["rounds"][1]["ranks"][0]["stopped"] = nlohmann::json::parse(bad);
    auto r = parse_evidence(j.dump(), "j", "test");
    EXPECT_FALSE(r) << bad;
    if (!r) EXPECT_EQ(r.error().code, ExitCode::bad_input) << bad;
  }
}

TEST(StragglerStopped, TheStateLetterFollowsTheLastParenthesis) {
  const std::string plain = "1234 (python3) S 1 1234 1234 0 -1";
  EXPECT_EQ(StopSampler::state_of(plain.data(), plain.size()), 'S');
  const std::string odd = "77 (a) b) T) T 1 77";
  EXPECT_EQ(StopSampler::state_of(odd.data(), odd.size()), 'T');
  const std::string traced = "9 (gdb) t 1";
  EXPECT_EQ(StopSampler::state_of(traced.data(), traced.size()), 't');
  for (const std::string bad : {"", "12 (x", "12 (x)", "12 (x)S"})
    EXPECT_EQ(StopSampler::state_of(bad.data(), bad.size()), '\0') << bad;
}

// A real process, stopped and continued: every sample taken while it is stopped (confirmed by waitpid) says
// so, none after SIGCONT. Eight processes sampled for a second: the sampler's own CPU is printed (the cost).
TEST(StragglerStopped, TheSamplerSeesARealProcessStoppedAndContinued) {
  auto child = [] {
    const pid_t pid = fork();
    if (pid == 0) {
      for (;;) pause();
    }
    return pid;
  };
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    const pid_t p = child();
    ASSERT_GT(p, 0);
    kids.push_back(p);
  }
  auto reap = [&] {
    for (auto p : kids) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
  };
  StopSampler::Options so;
  so.seed = fresh_seed();
  StopSampler sampler(so);
  for (std::size_t i = 0; i < kids.size(); ++i) ASSERT_TRUE(sampler.track(static_cast<std::int64_t>(i), kids[i]));
  EXPECT_FALSE(sampler.track(99, -1));
  // Waits (bounded) until rank 0 has `n` samples since the last take, and returns them all.
  auto gather = [&](std::int64_t n) {
    std::map<std::int64_t, StopSampler::Counts> sum;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sum[0].samples < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (const auto& [r, c] : sampler.take()) {
        sum[r].samples += c.samples;
        sum[r].stopped += c.stopped;
      }
    }
    return sum;
  };
  ASSERT_EQ(kill(kids[0], SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(waitpid(kids[0], &status, WUNTRACED), kids[0]);
  ASSERT_TRUE(WIFSTOPPED(status));
  (void)sampler.take();  // what was sampled before it stopped
  auto s = gather(30);
  ASSERT_GE(s[0].samples, 30);
  EXPECT_EQ(s[0].stopped, s[0].samples);
  for (std::int64_t r = 1; r < 8; ++r) EXPECT_EQ(s[r].stopped, 0) << "rank " << r;
  ASSERT_EQ(kill(kids[0], SIGCONT), 0);
  (void)sampler.take();  // a sweep under way may have seen it stopped
  s = gather(30);
  ASSERT_GE(s[0].samples, 30);
  EXPECT_EQ(s[0].stopped, 0);
  // The cost: a second of sampling 8 processes.
  (void)sampler.take();
  const auto before = sampler.cost();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto after = sampler.cost();
  std::printf("stop sampler: 8 processes, %lld sweeps in %.3f s, %.3f ms CPU (%.3f%% of one core)\n",
              static_cast<long long>(after.sweeps - before.sweeps), after.wall_s - before.wall_s,
              (after.cpu_s - before.cpu_s) * 1e3, 100 * (after.cpu_s - before.cpu_s) / (after.wall_s - before.wall_s));
  EXPECT_GT(after.sweeps, before.sweeps);
  // A process gone: its counts until then, then it is left out.
  kill(kids[1], SIGKILL);
  waitpid(kids[1], nullptr, 0);
  kids.erase(kids.begin() + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (void)sampler.take();
  EXPECT_EQ(sampler.take().count(1), 0u);
  sampler.stop();
  sampler.stop();
  reap();
}

}  // namespace
}  // namespace scout::straggler
