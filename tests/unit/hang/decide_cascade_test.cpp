// The hang decision over simulated jobs: every rank runs a program of
// collectives (per step a tp, a dp and a world all-reduce on a dp x tp mesh,
// or DDP-like world calls), a call completes once every member of its group
// entered it, and faults (stop/exit before a call, skipped or extra calls,
// deaths inside a call, gloo's failure cascade) leave the records a real job
// would. Ranks, steps and faults are drawn at random (seed printed): the
// verdict names the faulty rank(s), never a victim.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "lib/hang/decide.hpp"
#include "lib/hang/position.hpp"
#include "lib/records/layout.hpp"
#include "lib/report/verdict.hpp"

namespace scout::hang {
namespace {

using records::CollectiveState;
using records::CollectiveType;

constexpr std::int64_t k_s = 1'000'000'000;
constexpr std::int64_t k_now = 1'800'000'000 * k_s;

struct Op {
  std::string dim;  // "tp", "dp", "pp", "world"; "p2p": a pipeline send (even stage) / recv (odd stage)
  std::uint64_t step = 0;
  std::uint64_t count = 1;
  bool bad = false;    // made with other arguments than its members': it never completes
  bool bcast = false;  // a broadcast from the group's first member (its global rank, as recorded)
};

// What happens to one rank.
struct Fault {
  enum Kind { none, stop_before, exit_before, skip, extra, die_inside, wrong_count } kind = none;
  std::size_t at = 0;  // index into the rank's program
};

struct Sim {
  Mesh mesh;
  std::int64_t world;
  std::vector<std::vector<Op>> programs;
  std::vector<Fault> faults;
  // A call made with other arguments (wrong_count): true, nobody completes it; false, the other
  // members complete it and the rank that made it waits inside forever (gloo on a 2x2 pipeline:
  // the three other ranks finished the world all-reduce).
  bool bad_blocks_all = true;

  Sim(const std::string& spec, std::uint64_t steps, std::vector<std::string> dims)
      : mesh(*Mesh::parse(spec)), world(mesh.world_size()), programs(world), faults(world) {
    for (std::int64_t r = 0; r < world; ++r)
      for (std::uint64_t s = 1; s <= steps; ++s)
        for (const auto& d : dims) programs[r].push_back({d, s, d == "dp" ? 40u : 1u});
  }
  // Shards of other sizes per tp coordinate, and broadcasts rooted in each tp group (DTensor TP,
  // HSDP): the ranks of one stage run one program with other arguments.
  void shard_by_tp() {
    for (std::int64_t r = 0; r < world; ++r)
      for (auto& op : programs[r])
        if (op.dim == "tp") op.count = 64 + 16 * static_cast<std::uint64_t>(mesh.coords(r)[static_cast<int>(Dim::tp)]);
  }
  // Every tp call a broadcast from the tp group's first member: replicas in different tp groups
  // record different global roots for the same group-local root.
  void broadcast_in_tp() {
    for (std::int64_t r = 0; r < world; ++r)
      for (auto& op : programs[r])
        if (op.dim == "tp") op.bcast = true;
  }
  // The partner of a point-to-point call: the rank at the other stage of its pair of stages.
  std::int64_t p2p_partner(std::int64_t r) const {
    auto c = mesh.coords(r);
    c[static_cast<int>(Dim::pp)] ^= 1;
    return mesh.rank(c);
  }
  std::vector<std::int64_t> members(const std::string& dim, std::int64_t r) const {
    if (dim == "p2p") {
      auto q = p2p_partner(r);
      return {std::min(r, q), std::max(r, q)};
    }
    if (dim == "world") {
      std::vector<std::int64_t> all(world);
      for (std::int64_t i = 0; i < world; ++i) all[i] = i;
      return all;
    }
    return mesh.process_group(*parse_dim(dim), r);
  }
  std::uint64_t gid(const std::string& dim, std::int64_t r) const {
    auto m = members(dim, r);
    if (dim == "p2p") m.push_back(-2);  // the pair's own id, as the publisher gives it
    return records::layout::group_id(m.data(), m.size());
  }
  // The index of the first call of `dim` at `step` in rank r's program.
  std::size_t index_of(std::int64_t r, const std::string& dim, std::uint64_t step) const {
    for (std::size_t i = 0; i < programs[r].size(); ++i)
      if (programs[r][i].dim == dim && programs[r][i].step == step) return i;
    return programs[r].size();
  }

  // Runs every program until nothing moves; `cascade`: then every rank waiting
  // in a call with a dead member fails it and dies (gloo), repeatedly.
  std::vector<RankEvidence> run(bool cascade, bool all_dead_gone = false) {
    // Apply skip / extra to the programs.
    auto progs = programs;
    for (std::int64_t r = 0; r < world; ++r) {
      auto& f = faults[r];
      if (f.kind == Fault::skip) progs[r].erase(progs[r].begin() + static_cast<std::ptrdiff_t>(f.at));
      if (f.kind == Fault::extra) progs[r].insert(progs[r].begin() + static_cast<std::ptrdiff_t>(f.at), progs[r][f.at]);
      if (f.kind == Fault::wrong_count) {
        progs[r][f.at].count += 7;
        progs[r][f.at].bad = true;
      }
    }
    struct St {
      std::size_t pc = 0;
      bool waiting = false;
      bool halted = false, dead = false, stopped = false, failed = false;
      std::map<std::uint64_t, std::uint64_t> seq;  // gid -> calls entered
      std::vector<records::CollectiveEvent> ring;
      std::uint64_t step = 0;
    };
    std::vector<St> st(world);
    std::int64_t clock = k_now - 100 * k_s;
    auto halt_here = [&](std::int64_t r) {
      const auto& f = faults[r];
      if ((f.kind == Fault::stop_before || f.kind == Fault::exit_before) && st[r].pc == f.at) {
        st[r].halted = true;
        st[r].stopped = f.kind == Fault::stop_before;
        st[r].dead = f.kind == Fault::exit_before;
        return true;
      }
      return false;
    };
    for (bool moved = true; moved;) {
      moved = false;
      for (std::int64_t r = 0; r < world; ++r) {
        auto& s = st[r];
        if (s.halted || s.waiting || s.pc >= progs[r].size()) continue;
        if (halt_here(r)) continue;
        const Op& op = progs[r][s.pc];
        auto g = gid(op.dim, r);
        std::uint64_t q = ++s.seq[g];
        records::CollectiveEvent e;
        e.fingerprint = {g,
                         op.bcast ? CollectiveType::broadcast : CollectiveType::all_reduce,
                         2,
                         op.count,
                         op.bcast ? members(op.dim, r).front() : 0,
                         q};
        if (op.dim == "p2p") {
          const bool sends = mesh.coords(r)[static_cast<int>(Dim::pp)] % 2 == 0;
          e.fingerprint.type = sends ? CollectiveType::send : CollectiveType::recv;
          e.fingerprint.root_or_op = p2p_partner(r);
        }
        e.op_seq = s.ring.size() + 1;
        e.enter_ns = ++clock;
        s.ring.push_back(e);
        s.step = op.step;
        s.waiting = true;
        moved = true;
        if (faults[r].kind == Fault::die_inside && s.pc == faults[r].at) {
          s.halted = true;
          s.dead = true;
        }
      }
      // Complete calls every member entered.
      for (std::int64_t r = 0; r < world; ++r) {
        auto& s = st[r];
        if (!s.waiting || s.dead) continue;
        const auto& e = s.ring.back();
        bool all = true, any_bad = false;
        for (auto m : members(progs[r][s.pc].dim, r)) {
          const auto& t = st[m];
          all &= t.waiting && !t.dead && !t.ring.empty() && t.ring.back().fingerprint.group == e.fingerprint.group &&
                 t.ring.back().fingerprint.group_seq == e.fingerprint.group_seq;
          any_bad |= t.pc < progs[m].size() && progs[m][t.pc].bad;
        }
        if (!all || (any_bad && bad_blocks_all) || progs[r][s.pc].bad) continue;
        for (auto m : members(progs[r][s.pc].dim, r)) {
          if (progs[m][st[m].pc].bad) continue;  // made with other arguments: it stays inside
          st[m].ring.back().exit_ns = ++clock;
          st[m].waiting = false;
          ++st[m].pc;
        }
        moved = true;
      }
    }
    if (cascade) {
      for (bool moved = true; moved;) {
        moved = false;
        for (std::int64_t r = 0; r < world; ++r) {
          auto& s = st[r];
          if (!s.waiting || s.dead) continue;
          bool peer_dead = false;
          for (auto m : members(progs[r][s.pc].dim, r)) peer_dead |= m != r && st[m].dead;
          if (!peer_dead) continue;
          s.failed = true;
          s.ring.back().exit_ns = ++clock;
          s.ring.back().failed = true;
          s.dead = true;
          moved = true;
        }
      }
    }
    std::vector<RankEvidence> out(world);
    for (std::int64_t r = 0; r < world; ++r) {
      auto& s = st[r];
      auto& e = out[r];
      auto& snap = e.snapshot;
      snap.job = "j";
      snap.rank = r;
      snap.world_size = world;
      auto c = mesh.coords(r);
      for (int d = 0; d < k_dim_count; ++d) snap.coords[d] = c[d];
      snap.host = "h";
      snap.pid = 1000 + r;
      snap.start_ns = k_now - 200 * k_s;
      snap.step = s.step;
      snap.op_seq = s.ring.size() * 2;
      snap.events = s.ring.size();
      if (s.ring.size() > records::layout::k_ring_size)
        s.ring.erase(s.ring.begin(), s.ring.end() - static_cast<std::ptrdiff_t>(records::layout::k_ring_size));
      snap.recent = s.ring;
      if (!s.ring.empty()) snap.pending = s.ring.back().fingerprint;
      snap.collective_state = s.failed    ? CollectiveState::failed
                              : s.waiting ? CollectiveState::inside
                                          : (s.ring.empty() ? CollectiveState::none : CollectiveState::done);
      snap.phase = s.waiting ? records::Phase::collective : records::Phase::forward;
      snap.progress_ns = k_now - 10 * k_s;
      snap.heartbeat_ns = k_now - 10 * k_s;
      e.writer_alive = !s.dead;
      if (s.dead) {
        e.process = all_dead_gone ? ProcessEvidence{ProcessState::gone, '?', -1, 0, false, "gone"}
                    : s.failed    ? ProcessEvidence{ProcessState::exited, 'Z', 1, 0, false, "exited 1"}
                                  : ProcessEvidence{ProcessState::exited, 'Z', -1, 9, false, "killed"};
      } else if (s.stopped) {
        e.process = {ProcessState::stopped, 'T', -1, 0, false, "stopped"};
      } else {
        e.process = {ProcessState::alive, 'S', -1, 0, false, ""};
      }
    }
    return out;
  }
};

DecisionInput input_of(std::vector<RankEvidence> ranks, std::optional<Mesh> mesh = std::nullopt) {
  DecisionInput in;
  in.job = "j";
  in.now_ns = k_now;
  in.threshold_ns = 5 * k_s;
  in.mesh = mesh;
  NodeEvidence n;
  n.observer = 0;
  n.node = "node0";
  n.job = "j";
  n.collected_ns = k_now;
  n.ranks = std::move(ranks);
  in.nodes.push_back(std::move(n));
  return in;
}

std::set<std::int64_t> suspects(const Verdict& v) {
  std::set<std::int64_t> out;
  for (const auto& s : v.suspects) out.insert(s.rank);
  return out;
}
std::set<std::int64_t> victims(const Verdict& v) {
  std::set<std::int64_t> out;
  for (const auto& x : v.details["victims"]) out.insert(x["rank"].get<std::int64_t>());
  return out;
}

bool v_has_died_after(const Verdict& v) {
  for (const auto& s : v.suspects)
    if (s.evidence.contains("died_after")) return true;
  return false;
}

class CascadeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    seed = (static_cast<std::uint64_t>(rd()) << 32) | rd();
    if (const char* env = std::getenv("SCOUT_TEST_SEED")) seed = std::strtoull(env, nullptr, 10);
    rng.seed(seed);
    std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  }
  std::int64_t pick(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  }
  // The last signs of life of node `bad`'s ranks (`per` a node) before any other rank's; its ranks.
  std::set<std::int64_t> node_died_first(std::vector<RankEvidence>& ev, std::int64_t per, std::int64_t bad) {
    std::set<std::int64_t> node_ranks;
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(ev.size()); ++r) {
      const bool on_node = r / per == bad;
      ev[r].snapshot.heartbeat_ns = ev[r].snapshot.progress_ns = k_now - (on_node ? 12 : 10) * k_s + pick(0, k_s);
      if (on_node) node_ranks.insert(r);
    }
    return node_ranks;
  }
  std::uint64_t seed = 0;
  std::mt19937_64 rng;
};

const std::vector<std::string> k_hybrid = {"tp", "dp", "world"};

TEST_F(CascadeTest, StopBeforeTpNamesTheRankNotItsTpPartner) {
  for (std::string spec : {"dp=4,tp=2", "dp=3,tp=2"}) {
    Sim sim(spec, 6, k_hybrid);
    std::int64_t bad = pick(0, sim.world - 1);
    std::uint64_t step = static_cast<std::uint64_t>(pick(2, 5));
    SCOPED_TRACE(testing::Message() << spec << " rank " << bad << " step " << step << " seed " << seed);
    sim.faults[bad] = {Fault::stop_before, sim.index_of(bad, "tp", step)};
    Verdict v = decide(input_of(sim.run(false)));
    EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
    EXPECT_EQ(v.status, VerdictStatus::attributed);
  }
}

TEST_F(CascadeTest, ExitBeforeTpWithTheCascadeNamesOnlyTheRank) {
  for (std::string spec : {"dp=4,tp=2", "dp=3,tp=2"}) {
    for (bool cascade : {false, true}) {
      Sim sim(spec, 6, k_hybrid);
      std::int64_t bad = pick(0, sim.world - 1);
      std::uint64_t step = static_cast<std::uint64_t>(pick(2, 5));
      SCOPED_TRACE(testing::Message() << spec << " rank " << bad << " step " << step << " cascade " << cascade
                                      << " seed " << seed);
      sim.faults[bad] = {Fault::exit_before, sim.index_of(bad, "tp", step)};
      Verdict v = decide(input_of(sim.run(cascade)));
      EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
      if (cascade) {
        EXPECT_FALSE(victims(v).empty()) << v.details["victims"].dump();
        EXPECT_FALSE(victims(v).count(bad));
      }
    }
  }
}

TEST_F(CascadeTest, SkippedTpCallIsSeenInTheHistoryAndThePartnerIsAVictim) {
  for (std::string spec : {"dp=4,tp=2", "dp=3,tp=2"}) {
    for (bool cascade : {false, true}) {
      Sim sim(spec, 6, k_hybrid);
      std::int64_t bad = pick(0, sim.world - 1);
      std::uint64_t step = static_cast<std::uint64_t>(pick(2, 5));
      SCOPED_TRACE(testing::Message() << spec << " rank " << bad << " step " << step << " seed " << seed);
      sim.faults[bad] = {Fault::skip, sim.index_of(bad, "tp", step)};
      auto ranks = sim.run(false);
      // The skipper's pending call matches its replicas'; its tp partner waits inside the tp call.
      if (cascade) {
        // Kill the partner: it died waiting (a victim), the skipper stays the cause.
        auto partner = sim.members("tp", bad)[0] == bad ? sim.members("tp", bad)[1] : sim.members("tp", bad)[0];
        ranks[partner].process = {ProcessState::exited, 'Z', -1, 6, false, "aborted"};
        ranks[partner].writer_alive = false;
        ranks[partner].snapshot.collective_state = CollectiveState::failed;
      }
      Verdict v = decide(input_of(ranks));
      EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
      ASSERT_FALSE(v.suspects.empty());
      EXPECT_EQ(v.suspects[0].reason, "skipped_collective");
      EXPECT_EQ(v.details["kind"], "control_flow_divergence");
    }
  }
}

TEST_F(CascadeTest, ExtraCallIsSeenInTheHistory) {
  for (std::string spec : {"dp=4,tp=2", "dp=3,tp=2"}) {
    for (std::string dim : {"tp", "dp"}) {
      Sim sim(spec, 6, k_hybrid);
      std::int64_t bad = pick(0, sim.world - 1);
      std::uint64_t step = static_cast<std::uint64_t>(pick(2, 5));
      SCOPED_TRACE(testing::Message() << spec << " " << dim << " rank " << bad << " step " << step << " seed " << seed);
      sim.faults[bad] = {Fault::extra, sim.index_of(bad, dim, step)};
      Verdict v = decide(input_of(sim.run(false)));
      EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary << "\n" << v.details["waits"].dump();
    }
  }
}

TEST_F(CascadeTest, FaultsInTheDpGroupAndTwoFaults) {
  for (std::string spec : {"dp=4,tp=2", "dp=3,tp=2"}) {
    Sim sim(spec, 6, k_hybrid);
    std::int64_t a = pick(0, sim.world - 1);
    std::int64_t b = (a + pick(1, sim.world - 1)) % sim.world;
    std::uint64_t step = static_cast<std::uint64_t>(pick(2, 5));
    SCOPED_TRACE(testing::Message() << spec << " ranks " << a << "," << b << " step " << step << " seed " << seed);
    sim.faults[a] = {Fault::exit_before, sim.index_of(a, "dp", step)};
    sim.faults[b] = {Fault::stop_before, sim.index_of(b, pick(0, 1) ? "dp" : "tp", step)};
    Verdict v = decide(input_of(sim.run(true)));
    auto named = suspects(v);
    EXPECT_TRUE(std::includes(std::set<std::int64_t>{a, b}.begin(), std::set<std::int64_t>{a, b}.end(), named.begin(),
                              named.end()))
        << v.summary;
    EXPECT_FALSE(named.empty()) << v.summary;
  }
}

TEST_F(CascadeTest, DataParallelCascadeNamesTheDeadRankAndListsVictims) {
  for (std::int64_t world : {4, 6, 8}) {
    Sim sim(fmt::format("dp={}", world), 8, {"world", "world"});  // DDP's bucket all-reduce, then the step's
    std::int64_t bad = pick(0, world - 1);
    std::size_t at = static_cast<std::size_t>(pick(3, 12));
    for (bool gone : {false, true}) {
      SCOPED_TRACE(testing::Message() << "world " << world << " rank " << bad << " at " << at << " gone " << gone
                                      << " seed " << seed);
      sim.faults[bad] = {Fault::exit_before, at};
      Verdict v = decide(input_of(sim.run(true, gone)));
      EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
      auto vic = victims(v);
      EXPECT_FALSE(vic.count(bad));
      EXPECT_GE(vic.size(), 1u);
      for (const auto& x : v.details["victims"]) {
        EXPECT_TRUE(x.contains("process"));
        EXPECT_TRUE(x.contains("position"));
      }
    }
  }
}

TEST_F(CascadeTest, RanksEndingOnACommunicationErrorOutsideRecordedCallsAreVictims) {
  // CI seed 14660408 (hang_campaign, world 8): rank 6 SIGKILLed at step 1; ranks 0 and 2 were in
  // DDP's bucket-rebuild broadcast, which the hooks do not record, and died of "Connection closed
  // by peer" there, so their records say they never entered the step's all-reduce, like rank 6.
  // The publisher marks such a death (phase comm_error): they are victims, rank 6 the suspect.
  for (std::int64_t world : {6, 8}) {
    Sim sim(fmt::format("dp={}", world), 8, {"world", "world"});
    std::vector<std::int64_t> ranks(static_cast<std::size_t>(world));
    for (std::int64_t r = 0; r < world; ++r) ranks[r] = r;
    std::shuffle(ranks.begin(), ranks.end(), rng);
    const std::int64_t bad = ranks[0];
    const std::size_t at = static_cast<std::size_t>(pick(2, 12));
    const auto caught = static_cast<std::size_t>(pick(1, (world - 1) / 2 - 1));  // behind with bad: still a minority
    SCOPED_TRACE(testing::Message() << "world " << world << " rank " << bad << " at " << at << " caught " << caught
                                    << " seed " << seed);
    sim.faults[bad] = {Fault::exit_before, at};
    for (std::size_t i = 1; i <= caught; ++i) sim.faults[ranks[i]] = {Fault::exit_before, at};
    for (bool gone : {false, true}) {
      auto ev = sim.run(true, gone);
      for (std::size_t i = 1; i <= caught; ++i) {
        ev[ranks[i]].snapshot.phase = records::Phase::comm_error;
        if (!gone) ev[ranks[i]].process = {ProcessState::exited, 'Z', 1, 0, false, "exited 1"};
      }
      Verdict v = decide(input_of(ev));
      EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
      auto vic = victims(v);
      for (std::size_t i = 1; i <= caught; ++i) EXPECT_TRUE(vic.count(ranks[i])) << ranks[i];
      for (const auto& x : v.details["victims"])
        if (ev[x["rank"].get<std::int64_t>()].snapshot.phase == records::Phase::comm_error)
          EXPECT_NE(x["why"].get<std::string>().find("communication error"), std::string::npos) << x.dump();
      // Without the mark the same records name the caught ranks too: the mark is what tells them apart.
      for (std::size_t i = 1; i <= caught; ++i) ev[ranks[i]].snapshot.phase = records::Phase::forward;
      EXPECT_GT(suspects(decide(input_of(ev))).size(), 1u);
    }
  }
}

TEST_F(CascadeTest, DeathAtTheMajoritysPositionWithNoFailureRecordedIsTheFirstFailure) {
  // A rank SIGKILLed inside the call everyone is in: its ring neighbours record the failed call
  // and die, the rest wait (or fail later). Its position is the majority's, but it alone died
  // with no failure in its record: the first failure (campaign seeds 1836021708, 624795184).
  for (std::int64_t world : {4, 6, 8}) {
    Sim sim(fmt::format("dp={}", world), 8, {"world"});
    std::int64_t bad = pick(0, world - 1);
    std::size_t at = static_cast<std::size_t>(pick(2, 6));
    SCOPED_TRACE(testing::Message() << "world " << world << " rank " << bad << " seed " << seed);
    sim.faults[bad] = {Fault::die_inside, at};
    for (bool cascade : {false, true})
      for (bool gone : {false, true}) {
        if (gone && !cascade) continue;
        auto ev = sim.run(cascade, gone);
        Verdict v = decide(input_of(ev));
        if (gone) {
          // Every process reaped: its death's form is unknown, and among recorded failures an abrupt
          // victim (gloo's transport thread aborting) dies the same unrecorded way: nobody is named.
          EXPECT_TRUE(v.suspects.empty()) << v.summary;
          EXPECT_EQ(v.status, VerdictStatus::inconclusive);
          EXPECT_TRUE(victims(v).count(bad));
          continue;
        }
        EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
        EXPECT_EQ(v.details["kind"], "dead_rank");
        ASSERT_EQ(v.suspects.size(), 1u);
        EXPECT_TRUE(v.suspects[0].evidence.contains("first_failure")) << v.suspects[0].evidence.dump();
        auto vic = victims(v);
        EXPECT_FALSE(vic.count(bad));
        for (std::int64_t r = 0; r < world; ++r)
          if (ev[r].snapshot.collective_state == CollectiveState::failed) EXPECT_TRUE(vic.count(r)) << r;
        if (cascade) {
          // Died the way a victim dies (an uncaught communication exception: SIGABRT) among
          // recorded failures: nothing tells it from a victim, so nobody is named.
          if (!gone) {
            auto abrt = ev;
            abrt[bad].process = {ProcessState::exited, 'Z', -1, SIGABRT, false, "aborted"};
            Verdict a = decide(input_of(abrt));
            EXPECT_TRUE(a.suspects.empty()) << a.summary;
            EXPECT_EQ(a.status, VerdictStatus::inconclusive);
            EXPECT_TRUE(victims(a).count(bad));
          }
          // Its record read while it still lived: it may have recorded a failure since.
          auto stale = ev;
          stale[bad].writer_alive = true;
          Verdict st = decide(input_of(stale));
          EXPECT_FALSE(suspects(st).count(bad)) << st.summary;
        }
      }
  }
}

// The evidence of `ranks` as `per_node` ranks per node (node0, node1, ...), each node's observer
// its own: a multi-node job.
DecisionInput input_by_node(std::vector<RankEvidence> ranks, std::int64_t per_node) {
  DecisionInput in = input_of({});
  in.nodes.clear();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto k = static_cast<std::int64_t>(r) / per_node;
    if (static_cast<std::int64_t>(in.nodes.size()) <= k) {
      NodeEvidence n;
      n.observer = k;
      n.node = fmt::format("node{}", k);
      n.job = "j";
      n.collected_ns = k_now;
      in.nodes.push_back(std::move(n));
    }
    ranks[r].snapshot.host = in.nodes[k]->node;
    in.nodes[k]->ranks.push_back(std::move(ranks[r]));
  }
  return in;
}

// A node's processes killed together (its launcher tore them down, the kernel, an operator) inside
// the call every rank was at: every rank elsewhere recorded the failed call after they last showed
// life; every process reaped (its form unknown). Which of the node's ranks failed first cannot be
// told: the node is named, never one of its ranks, and every other rank is a victim (campaign
// 3x2 seed 31000, kill: node 1's ranks 2, 3 killed; it was inconclusive).
TEST_F(CascadeTest, ANodeWhoseRanksAllDiedUnrecordedBeforeEveryOtherFailureIsNamed) {
  for (int trial = 0; trial < 8; ++trial) {
    const std::int64_t nodes = pick(3, 6), per = pick(1, 4) == 1 ? 1 : pick(2, 4);
    const std::int64_t world = nodes * per, bad = pick(0, nodes - 1);
    const auto at = static_cast<std::size_t>(pick(2, 6));
    SCOPED_TRACE(testing::Message() << nodes << "x" << per << " node " << bad << " at " << at << " seed " << seed);
    Sim sim(fmt::format("dp={}", world), 8, {"world"});
    for (std::int64_t r = bad * per; r < (bad + 1) * per; ++r) sim.faults[r] = {Fault::die_inside, at};
    auto ev = sim.run(true, true);
    const auto node_ranks = node_died_first(ev, per, bad);
    Verdict v = decide(input_by_node(ev, per));
    if (per == 1) {
      // One rank per node: its lone death of unknown form at the one call is the first failure.
      EXPECT_EQ(suspects(v), node_ranks) << v.summary;
      ASSERT_EQ(v.suspects.size(), 1u);
      EXPECT_EQ(v.suspects[0].evidence.value("measure", ""), "first_failure");
    } else {
      ASSERT_EQ(v.suspects.size(), 1u) << v.summary;
      const auto& s = v.suspects[0];
      EXPECT_EQ(s.rank, -1);
      EXPECT_EQ(s.node, fmt::format("node{}", bad));
      EXPECT_EQ(v.scope, Scope::node);
      EXPECT_EQ(s.evidence.value("measure", ""), "first_failed_node");
      std::set<std::int64_t> listed;
      for (const auto& x : s.evidence["ranks"]) listed.insert(x["rank"].get<std::int64_t>());
      EXPECT_EQ(listed, node_ranks);
      EXPECT_NE(v.summary.find(s.node), std::string::npos) << v.summary;
    }
    EXPECT_EQ(v.status, VerdictStatus::attributed);
    EXPECT_EQ(v.details["kind"], "dead_rank");
    auto vic = victims(v);
    for (std::int64_t r = 0; r < world; ++r) EXPECT_EQ(vic.count(r), node_ranks.count(r) ? 0u : 1u) << r;

    // Still named when some ranks elsewhere, alive, wait inside the call (gloo fails only the dead
    // ranks' direct peers at once), as long as one failure elsewhere was recorded after the node died;
    // not when a rank of the node itself lives on, waiting.
    if (world - per >= 2) {
      auto waits = ev;
      std::vector<std::int64_t> others;
      for (std::int64_t r = 0; r < world; ++r)
        if (r / per != bad) others.push_back(r);
      const auto kept = others[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(others.size()) - 1))];
      for (auto r : others) {
        if (r == kept || pick(0, 1) == 0) continue;
        waits[r].snapshot.collective_state = CollectiveState::inside;
        waits[r].snapshot.recent.back().failed = false;
        waits[r].snapshot.recent.back().exit_ns = 0;
        waits[r].snapshot.phase = records::Phase::collective;
        waits[r].writer_alive = true;
        waits[r].process = {ProcessState::alive, 'S', -1, 0, false, ""};
      }
      Verdict w = decide(input_by_node(waits, per));
      if (per > 1) {
        ASSERT_EQ(w.suspects.size(), 1u) << w.summary;
        EXPECT_EQ(w.suspects[0].node, fmt::format("node{}", bad)) << w.summary;
        EXPECT_EQ(w.suspects[0].evidence.value("measure", ""), "first_failed_node");
        // A rank of the node alive inside the call: the node did not die whole.
        auto half = waits;
        const auto r = bad * per + pick(0, per - 1);
        half[r].writer_alive = true;
        half[r].process = {ProcessState::alive, 'S', -1, 0, false, ""};
        Verdict h = decide(input_by_node(half, per));
        for (const auto& x : h.suspects) EXPECT_NE(x.rank, -1) << h.summary;
        for (auto x : suspects(h)) EXPECT_TRUE(node_ranks.count(x)) << x << " " << h.summary;
        // No failure recorded anywhere: nothing says the node died first.
        auto none = waits;
        none[kept].snapshot.collective_state = CollectiveState::inside;
        none[kept].snapshot.recent.back().failed = false;
        none[kept].snapshot.recent.back().exit_ns = 0;
        none[kept].snapshot.phase = records::Phase::collective;
        none[kept].writer_alive = true;
        none[kept].process = {ProcessState::alive, 'S', -1, 0, false, ""};
        bool all_wait = true;
        for (auto x : others) all_wait = all_wait && none[x].process.state == ProcessState::alive;
        if (all_wait) {
          Verdict n = decide(input_by_node(none, per));
          for (const auto& x : n.suspects) EXPECT_NE(x.rank, -1) << n.summary;
        }
      }
    }
    // Not when a rank of the node lived on after a failure elsewhere was recorded.
    {
      auto late = ev;
      late[bad * per + pick(0, per - 1)].snapshot.heartbeat_ns = k_now - 5 * k_s;
      Verdict l = decide(input_by_node(late, per));
      EXPECT_TRUE(l.suspects.empty()) << l.summary;
    }
    // Not when a rank elsewhere died unrecorded too (two nodes' deaths), nor when a rank of the node
    // died the way a victim dies (an uncaught communication exception: SIGABRT).
    for (int variant = 0; variant < 2; ++variant) {
      auto other = ev;
      if (variant == 0) {
        std::int64_t r = pick(0, world - 1);
        while (r / per == bad) r = pick(0, world - 1);
        other[r].snapshot.collective_state = CollectiveState::inside;
        other[r].snapshot.recent.back().failed = false;
        other[r].snapshot.recent.back().exit_ns = 0;
        other[r].process = {ProcessState::gone, '?', -1, 0, false, "gone"};
      } else {
        other[bad * per + pick(0, per - 1)].process = {ProcessState::exited, 'Z', -1, SIGABRT, false, "aborted"};
      }
      Verdict o = decide(input_by_node(other, per));
      for (const auto& s : o.suspects) EXPECT_NE(s.rank, -1) << variant << " " << o.summary;
      auto named = suspects(o);
      for (auto r : named) EXPECT_TRUE(node_ranks.count(r) || other[r].process.state == ProcessState::gone) << r;
    }
    // Not when the ranks were at different calls (a wrong-sized message may have aborted a victim).
    {
      auto differ = ev;
      std::int64_t r = pick(0, world - 1);
      while (r / per == bad) r = pick(0, world - 1);
      differ[r].snapshot.pending.count += 3;
      differ[r].snapshot.recent.back().fingerprint.count += 3;
      Verdict d = decide(input_by_node(differ, per));
      for (const auto& s : d.suspects) EXPECT_NE(s.rank, -1) << d.summary;
      for (auto x : suspects(d)) EXPECT_TRUE(x == r || node_ranks.count(x)) << x << " " << d.summary;
    }
  }
  // Never half the world: two nodes, one of them dead, is one against one.
  Sim sim("dp=4", 8, {"world"});
  sim.faults[2] = sim.faults[3] = {Fault::die_inside, 3};
  auto ev = sim.run(true, true);
  for (std::int64_t r = 0; r < 4; ++r) ev[r].snapshot.heartbeat_ns = k_now - (r >= 2 ? 12 : 10) * k_s;
  Verdict v = decide(input_by_node(ev, 2));
  EXPECT_TRUE(v.suspects.empty()) << v.summary;
  EXPECT_EQ(v.status, VerdictStatus::inconclusive);
}

// A node's processes killed together while one of them lagged: that rank had not entered the call the
// others wait in, so its position singles it out; its node-mates died inside the call, unrecorded too
// (campaign 4x2 on etcd, seed 41705: rank 5 named, rank 4 of the same node listed as a victim). The node
// is named, with all its ranks. Not when a rank of the node was terminated by its launcher (a lone crash
// whose node-mates were torn down), not when a rank of another node died unrecorded too, and not when
// the lagging rank's own calls differ (its history departs: the rank is the fault).
TEST_F(CascadeTest, ANodeKilledWhileOneOfItsRanksLaggedIsNamedWithAllItsRanks) {
  for (int trial = 0; trial < 8; ++trial) {
    const std::int64_t nodes = pick(3, 6), per = pick(2, 4);
    const std::int64_t world = nodes * per, bad = pick(0, nodes - 1);
    const auto at = static_cast<std::size_t>(pick(2, 6));
    const std::int64_t lag = bad * per + pick(0, per - 1);
    SCOPED_TRACE(testing::Message() << nodes << "x" << per << " node " << bad << " lagging " << lag << " at " << at
                                    << " seed " << seed);
    Sim sim(fmt::format("dp={}", world), 8, {"world"});
    for (std::int64_t r = bad * per; r < (bad + 1) * per; ++r)
      sim.faults[r] = {r == lag ? Fault::exit_before : Fault::die_inside, at};
    auto ev = sim.run(true, true);
    const auto node_ranks = node_died_first(ev, per, bad);
    Verdict v = decide(input_by_node(ev, per));
    ASSERT_EQ(v.suspects.size(), 1u) << v.summary;
    const auto& s = v.suspects[0];
    EXPECT_EQ(s.rank, -1) << v.summary;
    EXPECT_EQ(s.node, fmt::format("node{}", bad));
    EXPECT_EQ(v.scope, Scope::node);
    EXPECT_EQ(s.evidence.value("measure", ""), "killed_node");
    std::set<std::int64_t> listed;
    for (const auto& x : s.evidence["ranks"]) listed.insert(x["rank"].get<std::int64_t>());
    EXPECT_EQ(listed, node_ranks);
    auto vic = victims(v);
    for (std::int64_t r = 0; r < world; ++r) EXPECT_EQ(vic.count(r), node_ranks.count(r) ? 0u : 1u) << r;

    // A lone crash whose node-mates its launcher tore down (SIGTERM, recorded): the rank, not its node.
    {
      auto torn = ev;
      for (auto r : node_ranks)
        if (r != lag) {
          torn[r].snapshot.phase = records::Phase::terminated;
          torn[r].process = {ProcessState::exited, 'Z', -1, SIGTERM, false, "terminated"};
        }
      Verdict t = decide(input_by_node(torn, per));
      for (const auto& x : t.suspects) EXPECT_NE(x.rank, -1) << t.summary;
      EXPECT_EQ(suspects(t), std::set<std::int64_t>{lag}) << t.summary;
    }
    // A rank of another node dead unrecorded too: no node is named.
    {
      auto two = ev;
      std::int64_t r = pick(0, world - 1);
      while (r / per == bad) r = pick(0, world - 1);
      two[r].snapshot.collective_state = CollectiveState::inside;
      two[r].snapshot.recent.back().failed = false;
      two[r].snapshot.recent.back().exit_ns = 0;
      two[r].snapshot.phase = records::Phase::collective;
      two[r].process = {ProcessState::gone, '?', -1, 0, false, "gone"};
      Verdict o = decide(input_by_node(two, per));
      for (const auto& x : o.suspects) EXPECT_NE(x.rank, -1) << o.summary;
    }
  }
  // The lagging rank's calls differ (it skipped one): the rank is named, not its node.
  Sim sim("dp=6", 8, {"world"});
  sim.faults[2] = {Fault::skip, 3};
  auto ev = sim.run(true, true);
  ev[3].process = {ProcessState::gone, '?', -1, 0, false, "gone"};
  ev[3].writer_alive = false;
  Verdict v = decide(input_by_node(ev, 2));
  for (const auto& x : v.suspects) EXPECT_NE(x.rank, -1) << v.summary;
}

// A node lost with its observer (power gone: its processes and its observer at once): the other
// observers see every rank of theirs fail its call, and nothing of that node. Its node is named by its
// observer's label, with the ranks no observer saw; never with two observers silent, never where a
// visible rank died with nothing in its record (it may be the first failure), never with one observer
// reached alone (a store it lost looks the same).
TEST_F(CascadeTest, ANodeLostWithItsObserverIsNamedWhereEveryVisibleRankFailed) {
  for (int trial = 0; trial < 8; ++trial) {
    const std::int64_t nodes = pick(3, 6), per = pick(1, 3);
    const std::int64_t world = nodes * per, bad = pick(0, nodes - 1);
    const auto at = static_cast<std::size_t>(pick(2, 6));
    SCOPED_TRACE(testing::Message() << nodes << "x" << per << " node " << bad << " at " << at << " seed " << seed);
    Sim sim(fmt::format("dp={}", world), 8, {"world"});
    for (std::int64_t r = bad * per; r < (bad + 1) * per; ++r) sim.faults[r] = {Fault::die_inside, at};
    auto ev = sim.run(true, true);
    std::set<std::int64_t> node_ranks;
    for (std::int64_t r = bad * per; r < (bad + 1) * per; ++r) node_ranks.insert(r);
    auto lost = [&](const std::vector<RankEvidence>& e, std::vector<std::int64_t> silent) {
      auto in = input_by_node(e, per);
      for (auto k : silent) in.nodes[k] = std::nullopt;
      return decide(in);
    };
    Verdict v = lost(ev, {bad});
    ASSERT_EQ(v.suspects.size(), 1u) << v.summary;
    const auto& s = v.suspects[0];
    EXPECT_EQ(s.rank, -1);
    EXPECT_EQ(s.node, fmt::format("node{}", bad));
    EXPECT_EQ(s.reason, "node_lost");
    EXPECT_EQ(s.evidence.value("measure", ""), "lost_node");
    std::set<std::int64_t> listed;
    for (const auto& x : s.evidence["ranks"]) listed.insert(x["rank"].get<std::int64_t>());
    EXPECT_EQ(listed, node_ranks);
    EXPECT_EQ(v.scope, Scope::node);
    EXPECT_EQ(v.action, "replace_node");
    auto vic = victims(v);
    for (std::int64_t r = 0; r < world; ++r) EXPECT_EQ(vic.count(r), node_ranks.count(r) ? 0u : 1u) << r;
    // Two observers silent: which node failed first cannot be told.
    std::int64_t other_node = pick(0, nodes - 1);
    while (other_node == bad) other_node = pick(0, nodes - 1);
    for (const auto& x : lost(ev, {bad, other_node}).suspects) EXPECT_NE(x.reason, "node_lost");
    // A visible rank that died with nothing in its record.
    auto quiet = ev;
    std::int64_t r = pick(0, world - 1);
    while (r / per == bad) r = pick(0, world - 1);
    quiet[r].snapshot.collective_state = CollectiveState::inside;
    quiet[r].snapshot.recent.back().failed = false;
    quiet[r].snapshot.recent.back().exit_ns = 0;
    quiet[r].process = {ProcessState::gone, '?', -1, 0, false, "gone"};
    for (const auto& x : lost(quiet, {bad}).suspects) EXPECT_NE(x.reason, "node_lost") << r;
  }
  // One observer reached alone (two nodes, the other silent): its store may be what it lost.
  Sim sim("dp=4", 8, {"world"});
  sim.faults[2] = sim.faults[3] = {Fault::die_inside, 3};
  auto in = input_by_node(sim.run(true, true), 2);
  in.nodes[1] = std::nullopt;
  Verdict v = decide(in);
  for (const auto& x : v.suspects) EXPECT_NE(x.reason, "node_lost") << v.summary;
}

TEST_F(CascadeTest, DeathAfterACallEveryPeerFinishedIsNamedThoughItsRecordShowsItInside) {
  // HSDP: a rank exits right after its replica all-reduce, before its completion is published;
  // its dp peer finished that call and waits with everyone else in the next world call. Its
  // record shows it inside a call that kept nobody: the wait ends at it (CI, seed 1871708941).
  for (std::string spec : {"dp=2,tp=2", "dp=2,tp=3", "dp=4,tp=2"}) {
    Sim sim(spec, 5, k_hybrid);
    std::int64_t bad = pick(0, sim.world - 1);
    std::uint64_t step = static_cast<std::uint64_t>(pick(2, 4));
    SCOPED_TRACE(testing::Message() << spec << " rank " << bad << " step " << step << " seed " << seed);
    sim.faults[bad] = {Fault::exit_before, sim.index_of(bad, "world", step)};
    auto ev = sim.run(false);
    auto& b = ev[bad];
    ASSERT_EQ(b.snapshot.collective_state, CollectiveState::done);
    b.snapshot.collective_state = CollectiveState::inside;  // the completion never published
    b.snapshot.recent.back().exit_ns = 0;
    b.snapshot.phase = records::Phase::collective;
    for (bool gone : {false, true}) {
      auto e = ev;
      e[bad].process = gone ? ProcessEvidence{ProcessState::gone, '?', -1, 0, false, "gone"}
                            : ProcessEvidence{ProcessState::exited, 'Z', 1, 0, false, "exited 1"};
      Verdict v = decide(input_of(e));
      EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
      ASSERT_EQ(v.suspects.size(), 1u);
      EXPECT_TRUE(v.suspects[0].evidence.contains("died_after")) << v.suspects[0].evidence.dump();
    }
    // Aborted (how gloo's transport thread ends a victim): not named by this rule (with no
    // failure recorded anywhere, the first-failure rule may still name it).
    auto abrt = ev;
    abrt[bad].process = {ProcessState::exited, 'Z', -1, SIGABRT, false, "aborted"};
    EXPECT_FALSE(v_has_died_after(decide(input_of(abrt))));
    // A peer in the same call that recorded other arguments there: the call did not finish cleanly.
    auto dp = sim.members("dp", bad);
    std::int64_t peer = dp[0] == bad ? dp[1] : dp[0];
    auto other = ev;
    other[bad].process = {ProcessState::exited, 'Z', 1, 0, false, "exited 1"};
    for (auto& c : other[peer].snapshot.recent)
      if (c.fingerprint.group == b.snapshot.pending.group && c.fingerprint.group_seq == b.snapshot.pending.group_seq)
        c.fingerprint.count += 3;
    EXPECT_FALSE(v_has_died_after(decide(input_of(other))));
    // A peer still in that call: it kept the rank there.
    auto still = ev;
    still[bad].process = {ProcessState::exited, 'Z', 1, 0, false, "exited 1"};
    still[peer].snapshot.recent.resize(still[bad].snapshot.recent.size());
    still[peer].snapshot.pending = still[peer].snapshot.recent.back().fingerprint;
    still[peer].snapshot.collective_state = CollectiveState::inside;
    EXPECT_FALSE(v_has_died_after(decide(input_of(still))));
  }
}

// The record of a rank whose last call completed while an earlier Work that publishes no completion
// (a gloo send or recv) still counts as in flight: its ring shows the exit, its state reads inside.
void read_inside(RankEvidence& e) {
  e.snapshot.collective_state = CollectiveState::inside;
  e.snapshot.phase = records::Phase::collective;
}

// A second process group over the members of group `gid` that counts its calls apart (DeepSpeed's
// pipeline groups): before each call of `gid` in `e`'s ring, an all-reduce with the same number.
void twin_group_calls(RankEvidence& e, std::uint64_t gid) {
  std::vector<records::CollectiveEvent> ring;
  for (const auto& c : e.snapshot.recent) {
    if (c.fingerprint.group == gid) {
      auto t = c;
      t.fingerprint.type = CollectiveType::all_reduce;
      t.fingerprint.count = 1;
      t.fingerprint.root_or_op = 0;
      t.exit_ns = t.enter_ns;
      t.failed = false;
      ring.push_back(t);
    }
    ring.push_back(c);
  }
  e.snapshot.recent = std::move(ring);
  e.snapshot.events = e.snapshot.recent.size();
}

// A victim of the cascade whose call completed with the connection's error before it died of
// it (phase comm_error), its state still inside: test_torch2_frameworks' Megatron tp x pp ranks.
void comm_error_victim(RankEvidence& e) {
  e.snapshot.phase = records::Phase::comm_error;
  e.snapshot.collective_state = CollectiveState::inside;
  if (!e.snapshot.recent.empty()) e.snapshot.recent.back().failed = false;
}

// Why the rule that named the first suspect of `v` says it left its call ("" when that rule did not).
std::string died_after_why(const Verdict& v) {
  if (v.suspects.empty() || !v.suspects[0].evidence.contains("died_after")) return "";
  return v.suspects[0].evidence.at("died_after").value("why", "");
}

constexpr const char* k_own_record = "its own record shows it completed this call";
constexpr const char* k_peers_left = "every other member finished and left this call";

TEST_F(CascadeTest, ExitAfterItsGroupOfOnesCallIsNamedThoughItsStateReadsInside) {
  // Megatron-Core tp=2 x pp=2 (test_torch2_frameworks, seeds 1915891719, 1564985097): a rank exits
  // right after its data-parallel all-reduce, in a group of one member at dp=1. Its ring shows that
  // call completed, its state still reads inside (its pipeline sends publish no completion), and
  // there is no other member to have finished it: its own record is the evidence.
  Sim sim("pp=2,tp=2", 5, {"tp", "pp", "dp", "world"});
  const std::int64_t bad = pick(0, sim.world - 1);
  const auto step = static_cast<std::uint64_t>(pick(2, 4));
  SCOPED_TRACE(testing::Message() << "rank " << bad << " step " << step << " seed " << seed);
  sim.faults[bad] = {Fault::exit_before, sim.index_of(bad, "world", step)};
  for (int form = 0; form < 3; ++form) {  // no cascade; the victims' calls fail; they end on a comm error
    SCOPED_TRACE(testing::Message() << "form " << form);
    auto ev = sim.run(form != 0, form == 2);
    ASSERT_EQ(ev[bad].snapshot.collective_state, CollectiveState::done);
    read_inside(ev[bad]);
    if (form == 2)
      for (std::int64_t r = 0; r < sim.world; ++r)
        if (r != bad && !ev[r].writer_alive) comm_error_victim(ev[r]);
    for (bool gone : {false, true}) {
      auto e = ev;
      e[bad].process = gone ? ProcessEvidence{ProcessState::gone, '?', -1, 0, false, "gone"}
                            : ProcessEvidence{ProcessState::exited, 'Z', 3, 0, false, "exited 3"};
      Verdict v = decide(input_of(e));
      EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
      ASSERT_EQ(v.suspects.size(), 1u);
      EXPECT_EQ(died_after_why(v), k_own_record) << v.suspects[0].evidence.dump();
      for (std::int64_t r = 0; r < sim.world; ++r)
        if (r != bad && !e[r].writer_alive) EXPECT_TRUE(victims(v).count(r)) << r;
    }
  }
  auto ev = sim.run(true, true);
  read_inside(ev[bad]);
  // Its ring still inside the call: nothing says it left it.
  auto still = ev;
  still[bad].snapshot.recent.back().exit_ns = 0;
  EXPECT_FALSE(v_has_died_after(decide(input_of(still))));
  // The call failed: it did not leave it cleanly.
  auto failed = ev;
  failed[bad].snapshot.recent.back().failed = true;
  EXPECT_FALSE(v_has_died_after(decide(input_of(failed))));
  // Aborted (how gloo's transport thread ends a victim), or ending on a communication error.
  auto abrt = ev;
  abrt[bad].process = {ProcessState::exited, 'Z', -1, SIGABRT, false, "aborted"};
  EXPECT_FALSE(v_has_died_after(decide(input_of(abrt))));
  auto comm = ev;
  comm[bad].snapshot.phase = records::Phase::comm_error;
  EXPECT_FALSE(v_has_died_after(decide(input_of(comm))));
}

TEST_F(CascadeTest, TwoRanksDeadRightAfterOneCallAreNamedUnlessGlooMayHaveAbortedEither) {
  // Two faults at once a moment after one DDP all-reduce (hang campaign, run seed 1084267783): each rank's exit
  // outran the write of that call's completion, so both read inside it while every other member finished it and
  // waits in the next call. Both are named where both died of themselves (an exit code, a segfault); where either
  // was aborted (gloo's way of ending a rank still finishing the call when its peer's connection closes) the two
  // read alike and neither a victim nor an innocent is named.
  constexpr const char* k_died_beside =
      "every other member finished and left this call, or died in it too, not of a peer's failure";
  const std::vector<ProcessEvidence> own = {{ProcessState::exited, 'Z', 3, 0, false, "exited 3"},
                                            {ProcessState::exited, 'Z', -1, SIGSEGV, false, "segfault"},
                                            {ProcessState::exited, 'Z', -1, SIGKILL, false, "killed"}};
  const ProcessEvidence aborted{ProcessState::exited, 'Z', -1, SIGABRT, false, "aborted"};
  const ProcessEvidence unknown{ProcessState::gone, '?', -1, 0, false, "gone"};
  for (int i = 0; i < 12; ++i) {
    const std::int64_t world = pick(4, 8);
    Sim sim(fmt::format("dp={}", world), 6, {"dp", "world"});
    const std::int64_t a = pick(0, world - 1);
    std::int64_t b = pick(0, world - 2);
    if (b >= a) ++b;
    const auto step = static_cast<std::uint64_t>(pick(2, 5));
    const bool cascade = pick(0, 1) == 1;
    SCOPED_TRACE(testing::Message() << "world " << world << " ranks " << a << ", " << b << " step " << step
                                    << " cascade " << cascade << " seed " << seed);
    for (auto r : {a, b}) sim.faults[r] = {Fault::exit_before, sim.index_of(r, "world", step)};
    auto ev = sim.run(cascade);
    for (auto r : {a, b}) {
      ASSERT_EQ(ev[r].snapshot.collective_state, CollectiveState::done);
      read_inside(ev[r]);
      ev[r].snapshot.recent.back().exit_ns = 0;  // the exit never written
    }
    const auto form_a = own[static_cast<std::size_t>(pick(0, 2))];
    const auto form_b = own[static_cast<std::size_t>(pick(0, 2))];
    auto e = ev;
    e[a].process = form_a;
    e[b].process = form_b;
    Verdict v = decide(input_of(e));
    EXPECT_EQ(suspects(v), (std::set<std::int64_t>{a, b})) << v.summary;
    for (const auto& s : v.suspects)
      EXPECT_EQ(s.evidence.contains("died_after") ? s.evidence.at("died_after").value("why", "") : "", k_died_beside);
    // Either aborted, or of a form nobody knows: no rank named but these two, and no victim at all.
    for (const auto& odd : {aborted, unknown}) {
      auto f = ev;
      f[a].process = odd;
      f[b].process = pick(0, 1) == 1 ? form_b : odd;
      Verdict w = decide(input_of(f));
      for (auto r : suspects(w)) EXPECT_TRUE(r == a || r == b) << r << " " << w.summary;
      EXPECT_FALSE(suspects(w).count(a)) << w.summary;
      // Unnamed, the summary says where they died and that the records cannot tell them apart; never that
      // they died at their peers' position.
      if (suspects(w).empty()) {
        const auto pair = fmt::format("ranks {}, {} died inside ", std::min(a, b), std::max(a, b));
        EXPECT_NE(w.summary.find(pair), std::string::npos) << w.summary;
        EXPECT_NE(w.summary.find("a call the other members finished"), std::string::npos) << w.summary;
      }
    }
    // A third member still inside the call, alive: the call kept them all, or may have.
    auto g = e;
    const std::int64_t c = [&] {
      for (std::int64_t r = 0; r < world; ++r)
        if (r != a && r != b) return r;
      return std::int64_t{-1};
    }();
    g[c].snapshot = e[a].snapshot;
    g[c].snapshot.rank = c;
    g[c].snapshot.coords = e[c].snapshot.coords;
    g[c].snapshot.pid = e[c].snapshot.pid;
    g[c].process = {ProcessState::alive, 'S', -1, 0, false, ""};
    g[c].writer_alive = true;
    Verdict x = decide(input_of(g));
    for (const auto& s : x.suspects) EXPECT_FALSE(s.evidence.contains("died_after")) << x.summary;
  }
}

TEST_F(CascadeTest, ExitAfterAPipelineBroadcastIsNamedWhenTwoGroupsShareItsMembers) {
  // DeepSpeed's pipeline engine, pp=2 x dp=2 and pp=2 x mp=2 (test_torch2_frameworks, seeds
  // 1202082537, 1999970570): a stage exits right after its pipeline broadcast. DeepSpeed makes
  // several process groups over one pair of stages: they share the group id and count their calls
  // apart, so a member's history holds two calls at one (group, seq).
  for (std::string spec : {"pp=2,dp=2", "pp=2,tp=2"}) {
    const std::string other = spec == "pp=2,dp=2" ? "dp" : "tp";
    Sim sim(spec, 5, {other, "pp", "world"});
    for (auto& prog : sim.programs)
      for (auto& op : prog)
        if (op.dim == "pp") op.bcast = true;
    const std::int64_t bad = pick(0, sim.world - 1);
    const auto step = static_cast<std::uint64_t>(pick(2, 4));
    SCOPED_TRACE(testing::Message() << spec << " rank " << bad << " step " << step << " seed " << seed);
    sim.faults[bad] = {Fault::exit_before, sim.index_of(bad, "world", step)};
    auto ev = sim.run(false);
    for (std::int64_t r = 0; r < sim.world; ++r) twin_group_calls(ev[r], sim.gid("pp", r));
    read_inside(ev[bad]);
    ASSERT_EQ(ev[bad].snapshot.recent.back().fingerprint.type, CollectiveType::broadcast);
    // Its ring shows the exit; or the completion never reached it (stop 18's shape) and its peer's
    // history is the evidence, the broadcast beside the twin group's all-reduce at that number.
    for (bool own : {true, false}) {
      auto e = ev;
      if (!own) e[bad].snapshot.recent.back().exit_ns = 0;
      for (bool gone : {false, true}) {
        e[bad].process = gone ? ProcessEvidence{ProcessState::gone, '?', -1, 0, false, "gone"}
                              : ProcessEvidence{ProcessState::exited, 'Z', 3, 0, false, "exited 3"};
        Verdict v = decide(input_of(e));
        EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << own << gone << " " << v.summary;
        ASSERT_EQ(v.suspects.size(), 1u);
        EXPECT_EQ(died_after_why(v), own ? k_own_record : k_peers_left) << v.suspects[0].evidence.dump();
      }
    }
    // The peer's call at that number with other arguments, the twin's beside it: not finished.
    auto e = ev;
    e[bad].snapshot.recent.back().exit_ns = 0;
    const auto pending = e[bad].snapshot.pending;
    for (auto m : sim.members("pp", bad))
      if (m != bad)
        for (auto& c : e[m].snapshot.recent)
          if (c.fingerprint.group == pending.group && c.fingerprint.group_seq == pending.group_seq &&
              c.fingerprint.type == CollectiveType::broadcast)
            c.fingerprint.count += 3;
    EXPECT_FALSE(v_has_died_after(decide(input_of(e))));
  }
}

TEST_F(CascadeTest, RandomExitsAreNamedAndTheCascadesVictimsNeverAre) {
  // A rank exits before a random call; its state reads inside its completed last call or done;
  // the victims die the ways the cascade kills (the call fails; a communication error ends the
  // process, its call completed with the error; gloo aborts it) with their state inside. Named:
  // the exited rank alone, whenever the same records with its state done name it; never a victim.
  const std::vector<std::string> specs = {"pp=2,tp=2", "pp=2,dp=2", "dp=2,tp=2", "dp=4,tp=2", "dp=2,pp=2,tp=2"};
  int named = 0, runs = 0;
  for (int i = 0; i < 40; ++i) {
    const auto& spec = specs[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(specs.size()) - 1))];
    Sim sim(spec, 5, {"tp", "pp", "dp", "world"});
    const bool bcast = pick(0, 1) == 1;  // the stages' calls broadcasts (DeepSpeed) or all-reduces
    for (auto& prog : sim.programs)
      for (auto& op : prog)
        if (op.dim == "pp") op.bcast = bcast;
    const std::int64_t bad = pick(0, sim.world - 1);
    const auto at = static_cast<std::size_t>(pick(4, static_cast<std::int64_t>(sim.programs[bad].size()) - 1));
    const bool cascade = pick(0, 1) == 1, gone = pick(0, 1) == 1;
    SCOPED_TRACE(testing::Message() << spec << " rank " << bad << " at " << at << " cascade " << cascade << " gone "
                                    << gone << " seed " << seed);
    sim.faults[bad] = {Fault::exit_before, at};
    auto done = sim.run(cascade, gone);
    if (!gone) done[bad].process = {ProcessState::exited, 'Z', 3, 0, false, "exited 3"};
    for (std::int64_t r = 0; r < sim.world; ++r) {
      if (r == bad || done[r].writer_alive) continue;
      switch (pick(0, 2)) {
        case 0:
          break;  // its call failed (the Sim's cascade)
        case 1:
          comm_error_victim(done[r]);
          break;
        default:
          done[r].snapshot.recent.back().failed = false;
          done[r].snapshot.collective_state = CollectiveState::inside;
          done[r].process = {ProcessState::exited, 'Z', -1, SIGABRT, false, "aborted"};
      }
    }
    auto inside = done;
    read_inside(inside[bad]);
    const auto by_done = suspects(decide(input_of(done)));
    Verdict v = decide(input_of(inside));
    const auto by_inside = suspects(v);
    ++runs;
    for (auto r : by_inside) EXPECT_EQ(r, bad) << v.summary;
    for (auto r : by_done) EXPECT_EQ(r, bad);
    if (by_done == std::set<std::int64_t>{bad}) EXPECT_EQ(by_inside, by_done) << v.summary;
    named += by_inside == std::set<std::int64_t>{bad};
  }
  std::printf("named %d of %d exits, seed %llu\n", named, runs, static_cast<unsigned long long>(seed));
}

TEST_F(CascadeTest, SeveralDeathsWithNoFailureRecordedNameOnlyThoseNoPeerCauses) {
  Sim sim("dp=8", 8, {"world"});
  std::vector<std::int64_t> ranks(8);
  for (std::int64_t r = 0; r < 8; ++r) ranks[r] = r;
  std::shuffle(ranks.begin(), ranks.end(), rng);
  const std::int64_t a = ranks[0], b = ranks[1];
  SCOPED_TRACE(testing::Message() << "ranks " << a << " " << b << " seed " << seed);
  const std::size_t at = static_cast<std::size_t>(pick(2, 6));
  sim.faults[a] = {Fault::die_inside, at};
  sim.faults[b] = {Fault::die_inside, at};
  auto ev = sim.run(true);
  // Two SIGKILLs (the Sim's form): both named.
  EXPECT_EQ(suspects(decide(input_of(ev))), (std::set<std::int64_t>{a, b}));
  // A SIGKILL and a SIGABRT (the form a victim's death takes): only the SIGKILL.
  auto mixed = ev;
  mixed[b].process = {ProcessState::exited, 'Z', -1, SIGABRT, false, "aborted"};
  Verdict m = decide(input_of(mixed));
  EXPECT_EQ(suspects(m), std::set<std::int64_t>{a}) << m.summary;
  EXPECT_TRUE(victims(m).count(b));
  // A SIGSEGV and a SIGTERM (a launcher tearing the job down): only the SIGSEGV.
  auto torn = ev;
  torn[a].process = {ProcessState::exited, 'Z', -1, SIGSEGV, false, "segv"};
  torn[b].process = {ProcessState::exited, 'Z', -1, SIGTERM, false, "terminated"};
  EXPECT_EQ(suspects(decide(input_of(torn))), std::set<std::int64_t>{a});
  // Reaped by a launcher (form unknown): either may have been the cascade's, so nobody.
  auto reaped = ev;
  reaped[a].process = reaped[b].process = {ProcessState::gone, '?', -1, 0, false, "gone"};
  Verdict r = decide(input_of(reaped));
  EXPECT_TRUE(r.suspects.empty()) << r.summary;
  EXPECT_EQ(r.status, VerdictStatus::inconclusive);
  // Every unrecorded death killed by SIGKILL, half the world or more: never a majority named.
  Sim half("dp=4", 8, {"world"});
  half.faults[0] = {Fault::die_inside, at};
  half.faults[1] = {Fault::die_inside, at};
  EXPECT_TRUE(decide(input_of(half.run(true))).suspects.empty());
}

TEST_F(CascadeTest, EnteredDoneAndFailedAtOneCallAreOnePosition) {
  Sim sim("dp=8", 6, {"world"});
  std::int64_t bad = pick(0, 7);
  sim.faults[bad] = {Fault::exit_before, static_cast<std::size_t>(pick(2, 4))};
  auto ranks = sim.run(false);
  // Split the waiting ranks over entering, inside and failed: still one position.
  for (std::int64_t r = 0, i = 0; r < 8; ++r)
    if (r != bad) {
      ranks[r].snapshot.collective_state = std::array{CollectiveState::entering, CollectiveState::inside,
                                                      CollectiveState::failed}[static_cast<std::size_t>(i++ % 3)];
    }
  Verdict v = decide(input_of(ranks));
  EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
  ASSERT_FALSE(v.groups.empty());
  EXPECT_EQ(v.groups[0].status, C3Status::attributed);
}

TEST_F(CascadeTest, RankThatDiedDuringTheProbeIsNotNamedByItsOlderPosition) {
  // Its record was read while it lived (writer_alive) and still moving, then it died: the
  // position may predate its death, so the death alone names nobody.
  Sim sim("dp=4", 6, {"world"});
  auto ranks = sim.run(false);
  std::int64_t r = pick(0, 3);
  ranks[r].snapshot.pending.group_seq -= 1;
  ranks[r].snapshot.recent.pop_back();
  ranks[r].snapshot.collective_state = CollectiveState::done;
  ranks[r].snapshot.progress_ns = k_now - k_s / 10;
  ranks[r].process = {ProcessState::gone, '?', -1, 0, false, "gone"};
  ranks[r].writer_alive = true;
  Verdict v = decide(input_of(ranks));
  EXPECT_TRUE(v.suspects.empty()) << v.summary;
}

TEST_F(CascadeTest, BroadcastsRootedInEachTpGroupCompareByTheirGroupLocalRoot) {
  // The root of a rooted call is recorded as a global rank: replicas in different tp groups
  // broadcasting from their group's first member make the same call.
  for (const std::string spec : {"dp=4,tp=2", "dp=3,tp=2", "dp=2,tp=2"}) {
    for (auto kind : {Fault::skip, Fault::wrong_count, Fault::exit_before, Fault::stop_before}) {
      Sim sim(spec, 5, k_hybrid);
      sim.broadcast_in_tp();
      std::int64_t bad = pick(0, sim.world - 1);
      std::uint64_t step = static_cast<std::uint64_t>(pick(2, 4));
      SCOPED_TRACE(testing::Message() << spec << " kind " << kind << " rank " << bad << " step " << step << " seed "
                                      << seed);
      sim.faults[bad] = {kind, sim.index_of(bad, "tp", step)};
      Verdict v = decide(input_of(sim.run(false)));
      EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
      if (kind == Fault::wrong_count && spec != "dp=2,tp=2") {
        ASSERT_EQ(v.suspects.size(), 1u);
        EXPECT_EQ(v.suspects[0].reason, "collective_arguments_differ") << v.suspects[0].evidence.dump();
      }
    }
  }
  // A job that ran to the end with such broadcasts: nobody named.
  Sim sim("dp=4,tp=2", 5, k_hybrid);
  sim.broadcast_in_tp();
  auto ev = sim.run(false);
  for (auto& e : ev) e.snapshot.progress_ns = e.snapshot.heartbeat_ns = k_now;  // finished and healthy so far
  Verdict clean = decide(input_of(ev));
  EXPECT_TRUE(clean.suspects.empty()) << clean.summary;
}

TEST_F(CascadeTest, RecordsThatAreAllFinalWithARankInsideACallAreAStallHoweverRecent) {
  // Flight Recorder dumps (written on a failure or timeout) and post-mortem records: no writer is
  // left, so nothing can move, even when the newest entry is younger than the threshold (CI,
  // test_torch2_fr exit: probed 0.9 s after it, called healthy).
  for (std::string spec : {"dp=4", "dp=6", "dp=4,tp=2"}) {
    Sim sim(spec, 6, spec == "dp=4,tp=2" ? k_hybrid : std::vector<std::string>{"world"});
    std::int64_t bad = pick(0, sim.world - 1);
    SCOPED_TRACE(testing::Message() << spec << " rank " << bad << " seed " << seed);
    sim.faults[bad] = {Fault::exit_before, sim.index_of(bad, "world", static_cast<std::uint64_t>(pick(2, 5)))};
    auto ev = sim.run(false);
    for (std::int64_t r = 0; r < sim.world; ++r) {
      auto& e = ev[r];
      e.snapshot.progress_ns = e.snapshot.heartbeat_ns = k_now - k_s / 10;
      e.writer_alive = false;
      if (r != bad) e.process = ProcessEvidence{};  // a dump names no process; the rank that exited is dead
    }
    Verdict v = decide(input_of(ev));
    EXPECT_NE(v.status, VerdictStatus::healthy) << v.summary;
    EXPECT_TRUE(v.details["stalled"].get<bool>());
    EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
    // No process known dead and a writer still alive: recent progress is progress.
    auto live = ev;
    for (auto& e : live) e.process = ProcessEvidence{};
    live[(bad + 1) % sim.world].writer_alive = true;
    EXPECT_EQ(decide(input_of(live)).status, VerdictStatus::healthy);
    // Every writer gone: the same records are a stall.
    for (auto& e : live) e.writer_alive = false;
    EXPECT_TRUE(decide(input_of(live)).details["stalled"].get<bool>());
  }
}

TEST_F(CascadeTest, TwoByTwoMeshWithShardsOfOtherSizesStillComparesTheStagesCalls) {
  // DTensor TP / HSDP on dp=2,tp=2 (torch 2.x, seeds 1000-1011): the tp coordinates hold shards of
  // other sizes, so no two ranks of the stage but replicas make identical calls, and the replica
  // groups have two members. A skipped call is still seen in the order of the stage's calls; a call
  // with other arguments, against the replica and the rest of the stage.
  for (auto kind : {Fault::skip, Fault::wrong_count}) {
    for (const std::string spec : {"dp=2,tp=2", "dp=2,tp=4"}) {
      for (bool sharded : {true, false}) {
        Sim sim(spec, 5, {"tp", "dp", "world"});
        if (sharded) sim.shard_by_tp();
        std::int64_t bad = pick(0, sim.world - 1);
        const std::string dim = pick(0, 1) ? "tp" : "dp";
        sim.faults[bad] = {kind, sim.index_of(bad, dim, static_cast<std::uint64_t>(pick(2, 4)))};
        SCOPED_TRACE(testing::Message() << spec << " kind " << kind << " in " << dim << " rank " << bad << " sharded "
                                        << sharded << " seed " << seed);
        Verdict v = decide(input_of(sim.run(false)));
        if (kind == Fault::wrong_count && sharded && dim == "tp") {
          // The other size of a shard whose size depends on the coordinate: the stage has no
          // majority at that call (its value is the coordinate's), so nobody is named for it; but
          // the replicas' histories part there: a software divergence, never a fabric stall.
          EXPECT_TRUE(v.suspects.empty()) << v.summary;
          EXPECT_EQ(v.status, VerdictStatus::inconclusive) << v.summary;
          EXPECT_EQ(v.action, "escalate");
          bool listed = false;
          for (const auto& sp : v.details["replica_splits"]) listed |= sp["ranks"][0] == bad || sp["ranks"][1] == bad;
          EXPECT_TRUE(listed) << v.details["replica_splits"].dump();
          continue;
        }
        EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
        ASSERT_EQ(v.suspects.size(), 1u);
        const auto& why = v.suspects[0].reason;
        if (kind == Fault::skip)
          EXPECT_TRUE(why == "skipped_collective" || why == "different_collective") << why;
        else
          EXPECT_EQ(why, "collective_arguments_differ") << v.suspects[0].evidence.dump();
      }
    }
  }
}

TEST_F(CascadeTest, TheMeshIsFoundFromTheRecordsWhateverTheOrderOfItsDims) {
  // SCOUT_MESH=dp=2,pp=2,tp=2 places tp fastest; the canonical order places pp fastest. Inferred in
  // the canonical order alone, the records' coordinates did not fit and the mesh fell back to dp=8
  // (campaign seed 120202, run 981941481: an extra tp call read as a group stall).
  for (const std::string spec : {"dp=2,pp=2,tp=2", "dp=2,tp=2,pp=2", "pp=2,dp=2,tp=2", "tp=2,dp=4"}) {
    Sim sim(spec, 5, {"tp", "dp", "world"});
    std::int64_t bad = pick(0, sim.world - 1);
    sim.faults[bad] = {Fault::extra, sim.index_of(bad, "tp", static_cast<std::uint64_t>(pick(2, 4)))};
    SCOPED_TRACE(testing::Message() << spec << " rank " << bad << " seed " << seed);
    Verdict v = decide(input_of(sim.run(false)));  // no --mesh: from the records
    EXPECT_EQ(v.details["mesh_source"], "records");
    EXPECT_EQ(Mesh::parse(v.details["mesh"].get<std::string>())->world_size(), sim.world);
    for (Dim d : {Dim::dp, Dim::tp, Dim::pp})
      EXPECT_EQ(Mesh::parse(v.details["mesh"].get<std::string>())->size(d), sim.mesh.size(d)) << v.details["mesh"];
    EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
  }
}

TEST_F(CascadeTest, ACycleOfWaitsIsBrokenByTheRankWhoseHistoryDiffers) {
  // The skipper waits in the world call for its tp partner; the partner waits in the tp call for the skipper.
  Sim sim("dp=4,tp=2", 5, k_hybrid);
  std::int64_t bad = pick(0, 7);
  sim.faults[bad] = {Fault::skip, sim.index_of(bad, "tp", 3)};
  Verdict v = decide(input_of(sim.run(false)));
  EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
  bool cycle = false;
  for (const auto& w : v.details["waits"]) cycle |= w["rank"] == bad;
  EXPECT_TRUE(cycle) << v.details["waits"].dump();
}

TEST_F(CascadeTest, RecordsOfAnotherAttemptOnlyAreNeverHealthy) {
  DecisionInput in;
  in.job = "j";
  in.now_ns = k_now;
  in.threshold_ns = 5 * k_s;
  NodeEvidence n;
  n.observer = 0;
  n.job = "j";
  n.attempt = "7";
  for (std::int64_t r = 0; r < 4; ++r) {
    RecordIssue i;
    i.segment = fmt::format("scout.j.{}", r);
    i.problem = "stale";
    i.rank = r;
    i.attempt = "3";
    i.world_size = 4;
    n.issues.push_back(i);
  }
  in.nodes.push_back(n);
  Verdict v = decide(in);
  EXPECT_NE(v.status, VerdictStatus::healthy);
  EXPECT_NE(v.summary.find("attempt 3"), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find("--attempt 3"), std::string::npos) << v.summary;
  EXPECT_EQ(exit_code_for(v), ExitCode::inconclusive);
}

TEST_F(CascadeTest, MeshOfAnotherSizeThanTheRecordsIsAUsageError) {
  Sim sim("dp=4,tp=2", 3, k_hybrid);
  auto in = input_of(sim.run(false), *Mesh::parse("dp=4"));
  auto checked = check_decision_input(in);
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.error().message().find("world of 8"), std::string::npos) << checked.error().message();
  in.mesh = *Mesh::parse("dp=4,tp=2");
  EXPECT_TRUE(check_decision_input(in).ok());
}

TEST_F(CascadeTest, RandomizedHybridFaultsNeverNameAnInnocent) {
  // Many random single and double faults, every group kind: no innocent, ever; the faulty rank whenever its
  // position or history differs (a stop, exit, skip or extra before or at a call always does).
  const std::vector<std::string> specs = {"dp=4,tp=2", "dp=3,tp=2", "dp=2,tp=2,pp=2", "dp=4,pp=2", "dp=6"};
  int named = 0, runs = 0;
  for (int i = 0; i < 300; ++i) {
    const auto& spec = specs[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(specs.size()) - 1))];
    auto mesh = *Mesh::parse(spec);
    std::vector<std::string> dims;
    if (mesh.size(Dim::tp) > 1) dims.push_back("tp");
    if (mesh.size(Dim::pp) > 1) dims.push_back(pick(0, 1) ? "pp" : "p2p");  // pp-group calls, or pipeline sends
    dims.push_back("dp");
    dims.push_back("world");
    Sim sim(spec, 6, dims);
    const bool sharded = pick(0, 1) == 1;
    if (sharded) sim.shard_by_tp();
    std::set<std::int64_t> bad;
    int nfaults = pick(0, 3) == 0 ? 2 : 1;
    for (int f = 0; f < nfaults; ++f) {
      std::int64_t r = pick(0, sim.world - 1);
      bad.insert(r);
      auto kind = static_cast<Fault::Kind>(pick(1, 6));
      const auto& dim = dims[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(dims.size()) - 1))];
      sim.faults[r] = {kind, sim.index_of(r, dim, static_cast<std::uint64_t>(pick(2, 5)))};
    }
    const bool cascade = pick(0, 1) == 1;
    Verdict v = decide(
        input_of(sim.run(cascade, cascade && pick(0, 1) == 1), pick(0, 1) ? std::optional<Mesh>(mesh) : std::nullopt));
    auto got = suspects(v);
    ++runs;
    // Consensus rests on the faulty ranks being a strict minority of every peer group:
    // two faults in one replica group of three are beyond it (the innocent one is the minority).
    bool minority = true;
    for (auto r : bad) {
      auto peers = sim.mesh.peer_group(r);
      std::size_t n = 0;
      for (auto q : peers) n += bad.count(q);
      minority &= n * 2 < peers.size();
    }
    if (!minority) continue;
    for (auto r : got)
      ASSERT_TRUE(bad.count(r)) << "innocent rank " << r << " named; " << spec << " sharded " << sharded << " faults "
                                << fmt::format("{}", fmt::join(bad, ",")) << " seed " << seed << " run " << i << "\n"
                                << v.summary << "\n"
                                << v.details["waits"].dump() << "\n"
                                << v.details["ranks"].dump();
    bool needs = false;
    for (auto r : bad) needs |= sim.faults[r].kind != Fault::die_inside;
    if (!got.empty())
      ++named;
    else if (needs && nfaults == 1)
      ADD_FAILURE() << "faulty rank not named; " << spec << " rank " << *bad.begin() << " kind "
                    << sim.faults[*bad.begin()].kind << " at " << sim.faults[*bad.begin()].at << " cascade " << cascade
                    << " sharded " << sharded << " seed " << seed << " run " << i << "\n"
                    << v.summary << "\n"
                    << v.details["waits"].dump() << "\n"
                    << v.details["ranks"].dump();
  }
  std::printf("named a faulty rank in %d of %d runs\n", named, runs);
}

TEST_F(CascadeTest, AStallDecidesAlikeFromOneRingPerDigestAndFromEveryRing) {
  // A stall's gather (position.hpp): every node's compact evidence (rings by digest), the full
  // evidence of one node per distinct ring, the other rings rebuilt. Over random meshes, faults,
  // cascades and ranks per node, the verdict is exactly the one every ring gives, and far fewer
  // nodes than all send their rings.
  const std::vector<std::string> specs = {"dp=8", "dp=4,tp=2", "dp=3,tp=2", "dp=2,tp=2,pp=2", "dp=4,pp=2", "dp=6"};
  std::size_t nodes_in_all = 0, holders_in_all = 0;
  for (int i = 0; i < 150; ++i) {
    const auto& spec = specs[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(specs.size()) - 1))];
    auto mesh = *Mesh::parse(spec);
    std::vector<std::string> dims;
    if (mesh.size(Dim::tp) > 1) dims.push_back("tp");
    if (mesh.size(Dim::pp) > 1) dims.push_back(pick(0, 1) ? "pp" : "p2p");
    dims.push_back("dp");
    dims.push_back("world");
    Sim sim(spec, static_cast<std::uint64_t>(pick(3, 12)), dims);
    if (pick(0, 1)) sim.shard_by_tp();
    if (pick(0, 2) == 0) sim.broadcast_in_tp();
    const int nfaults = static_cast<int>(pick(0, 2));
    for (int f = 0; f < nfaults; ++f) {
      const std::int64_t r = pick(0, sim.world - 1);
      const auto& dim = dims[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(dims.size()) - 1))];
      sim.faults[r] = {static_cast<Fault::Kind>(pick(1, 6)),
                       sim.index_of(r, dim, static_cast<std::uint64_t>(pick(2, 3)))};
    }
    const bool cascade = pick(0, 1) == 1;
    auto ranks = sim.run(cascade, cascade && pick(0, 1) == 1);
    // Ranks in node order, 1 to 4 a node.
    const auto per_node = static_cast<std::size_t>(pick(1, 4));
    DecisionInput full = input_of({}, pick(0, 1) ? std::optional<Mesh>(mesh) : std::nullopt);
    full.nodes.clear();
    for (std::size_t at = 0; at < ranks.size(); at += per_node) {
      NodeEvidence n;
      n.observer = static_cast<std::int64_t>(full.nodes.size());
      n.node = fmt::format("node{}", n.observer);
      n.job = "j";
      n.collected_ns = k_now;
      for (std::size_t k = at; k < std::min(ranks.size(), at + per_node); ++k) n.ranks.push_back(ranks[k]);
      full.nodes.push_back(std::move(n));
    }
    // What travels: compact blobs, then the holders' full blobs.
    std::vector<std::optional<NodeEvidence>> compact;
    for (const auto& n : full.nodes) {
      auto back = deserialize(serialize(compact_evidence(*n)));
      ASSERT_TRUE(back.ok()) << back.error().message();
      compact.push_back(std::move(*back));
    }
    const auto holders = select_ring_holders(compact);
    DecisionInput selected = full;
    selected.nodes = compact;
    for (auto h : holders) selected.nodes[static_cast<std::size_t>(h)] = full.nodes[static_cast<std::size_t>(h)];
    const auto restored = restore_rings(selected.nodes);
    EXPECT_EQ(restored.lost, 0) << "seed " << seed << " run " << i;
    auto a_json = to_json(decide(full)), b_json = to_json(decide(selected));
    a_json.erase("created_at");
    b_json.erase("created_at");
    const auto a = a_json.dump(), b = b_json.dump();
    ASSERT_EQ(a, b) << spec << " faults " << nfaults << " cascade " << cascade << " per node " << per_node << " seed "
                    << seed << " run " << i;
    nodes_in_all += full.nodes.size();
    holders_in_all += holders.size();
  }
  std::printf("rings sent by %zu of %zu nodes\n", holders_in_all, nodes_in_all);
}

TEST_F(CascadeTest, AStallOfALargeJobAsksForTheRingsOfAFewNodes) {
  // The distinct rings of a stalled job are the replicas' few histories (the majority's, the culprit's,
  // the victims' of a cascade, one per tp and pp coordinate), not one per node: world 128, a rank per node.
  for (const std::string spec : {"dp=128", "dp=32,tp=4", "dp=16,tp=2,pp=4"}) {
    auto mesh = *Mesh::parse(spec);
    std::vector<std::string> dims;
    if (mesh.size(Dim::tp) > 1) dims.push_back("tp");
    if (mesh.size(Dim::pp) > 1) dims.push_back("pp");
    dims.push_back("dp");
    dims.push_back("world");
    Sim sim(spec, 24, dims);  // rings of 64 events: full
    const std::int64_t r = pick(0, sim.world - 1);
    const auto& dim = dims[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(dims.size()) - 1))];
    const auto kind = static_cast<Fault::Kind>(pick(1, 5));
    sim.faults[r] = {kind, sim.index_of(r, dim, static_cast<std::uint64_t>(pick(2, 6)))};
    const bool cascade = pick(0, 1) == 1;
    auto ranks = sim.run(cascade);
    std::vector<std::optional<NodeEvidence>> compact;
    std::size_t full_bytes = 0, compact_bytes = 0;
    for (auto& e : ranks) {
      NodeEvidence n;
      n.observer = static_cast<std::int64_t>(compact.size());
      n.job = "j";
      n.ranks.push_back(e);
      compact.push_back(compact_evidence(n));
      full_bytes += serialize(n).size();
      compact_bytes += serialize(*compact.back()).size();
    }
    const auto holders = select_ring_holders(compact);
    std::printf(
        "%s, rank %lld fault %d in %s, cascade %d: rings from %zu of %zu nodes; %zu bytes a rank full, %zu "
        "compact\n",
        spec.c_str(), static_cast<long long>(r), static_cast<int>(kind), dim.c_str(), cascade, holders.size(),
        compact.size(), full_bytes / compact.size(), compact_bytes / compact.size());
    EXPECT_LE(holders.size(), 4 * static_cast<std::size_t>(mesh.size(Dim::tp) * mesh.size(Dim::pp)) + 4)
        << spec << " seed " << seed;
  }
}

TEST_F(CascadeTest, ARingIsRebuiltOnlyWhereItsDigestMatchesExactly) {
  Sim sim("dp=2,tp=2", 3, k_hybrid);
  auto ranks = sim.run(false);
  // Ranks 0 and 2 are replicas (tp coordinate 0) in other tp and dp groups: one digest, other names.
  const auto d0 = ring_digest(ranks[0].snapshot.recent), d2 = ring_digest(ranks[2].snapshot.recent);
  ASSERT_TRUE(d0.same_shape(d2));
  EXPECT_NE(d0.groups, d2.groups);
  auto rebuilt = rebuild_ring(ranks[0].snapshot.recent, d0, d2);
  ASSERT_TRUE(rebuilt.has_value());
  // Every field but the times and op_seq (the representative's) is rank 2's own.
  ASSERT_EQ(rebuilt->size(), ranks[2].snapshot.recent.size());
  for (std::size_t k = 0; k < rebuilt->size(); ++k) {
    EXPECT_EQ((*rebuilt)[k].fingerprint, ranks[2].snapshot.recent[k].fingerprint);
    EXPECT_EQ((*rebuilt)[k].failed, ranks[2].snapshot.recent[k].failed);
    EXPECT_EQ((*rebuilt)[k].exit_ns != 0, ranks[2].snapshot.recent[k].exit_ns != 0);
  }
  // One call's count changed: another digest, nothing rebuilt.
  auto other = ranks[2].snapshot.recent;
  other[1].fingerprint.count += 1;
  const auto d_other = ring_digest(other);
  EXPECT_FALSE(d0.same_shape(d_other));
  EXPECT_FALSE(rebuild_ring(ranks[0].snapshot.recent, d0, d_other).has_value());
  // A forged digest claiming d0's shape with names of another count is refused.
  auto forged = d2;
  forged.groups.push_back(12345);
  EXPECT_FALSE(rebuild_ring(ranks[0].snapshot.recent, d0, forged).has_value());
}

TEST_F(CascadeTest, WrongShapeInATwoByTwoPipelineIsNamedWhereTheOthersFinishedTheCall) {
  // torch 2.x, dp x pp 2x2 (test_torch2_faults pp, seeds 5 and 9): a rank all-reduces the step's
  // metric over the world with another count; gloo lets the three other ranks finish the call and
  // go on to the next step's sends, while it waits inside with its count. Its replica group has two
  // members, its position no majority; the world call's own members name it.
  for (const std::string spec : {"dp=2,pp=2", "dp=2,pp=2,tp=2"}) {
    Sim sim(spec, 5,
            spec == "dp=2,pp=2" ? std::vector<std::string>{"p2p", "dp", "world"}
                                : std::vector<std::string>{"p2p", "tp", "dp", "world"});
    sim.bad_blocks_all = false;
    const std::int64_t bad = pick(0, sim.world - 1);
    const auto step = static_cast<std::uint64_t>(pick(2, 4));
    SCOPED_TRACE(testing::Message() << spec << " rank " << bad << " step " << step << " seed " << seed);
    sim.faults[bad] = {Fault::wrong_count, sim.index_of(bad, "world", step)};
    auto ev = sim.run(false);
    ASSERT_EQ(ev[bad].snapshot.collective_state, CollectiveState::inside);
    Verdict v = decide(input_of(ev));
    EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
    ASSERT_EQ(v.suspects.size(), 1u);
    EXPECT_EQ(v.suspects[0].reason, "collective_arguments_differ");
    EXPECT_EQ(v.details["kind"], "argument_divergence");
    EXPECT_EQ(v.suspects[0].evidence["agreeing"], sim.world - 1) << v.suspects[0].evidence.dump();
    // Two ranks with the same other count: half the call, no majority, nobody named.
    auto other = (bad + 1) % sim.world;
    sim.faults[other] = {Fault::wrong_count, sim.index_of(other, "world", step)};
    if (sim.world == 4) EXPECT_TRUE(decide(input_of(sim.run(false))).suspects.empty());
  }
}

TEST_F(CascadeTest, PipelinePairsOfReplicasAreOneRoleSoTheirHistoriesAlign) {
  // Each pipeline's pair of stages has its own id (group_id([lo, hi, -2])): replicas' sends and
  // receives are made in other groups of one role. Aligned by that role, a 2x2 pipeline whose rank
  // skipped the world all-reduce (it waits in its next send for a partner inside that all-reduce)
  // splits only that rank from its replica (test_torch2_faults pp seed 6 listed "1 and 3" too); with
  // three or more replicas the skipper's history names it.
  for (const std::string spec : {"dp=2,pp=2", "dp=4,pp=2", "dp=3,pp=2"}) {
    Sim sim(spec, 5, {"p2p", "dp", "world"});
    const std::int64_t bad = pick(0, sim.world - 1);
    const auto step = static_cast<std::uint64_t>(pick(2, 4));
    SCOPED_TRACE(testing::Message() << spec << " rank " << bad << " step " << step << " seed " << seed);
    sim.faults[bad] = {Fault::skip, sim.index_of(bad, "world", step)};
    Verdict v = decide(input_of(sim.run(false)));
    if (sim.mesh.size(Dim::dp) == 2) {
      EXPECT_TRUE(v.suspects.empty()) << v.summary;
      EXPECT_EQ(v.status, VerdictStatus::inconclusive) << v.summary;
      ASSERT_EQ(v.details["replica_splits"].size(), 1u) << v.details["replica_splits"].dump();
      auto pair = v.details["replica_splits"][0]["ranks"].get<std::vector<std::int64_t>>();
      EXPECT_TRUE(pair[0] == bad || pair[1] == bad) << v.details["replica_splits"].dump();
      continue;
    }
    EXPECT_EQ(suspects(v), std::set<std::int64_t>{bad}) << v.summary;
  }
  // A clean pipeline: sends and receives of every replica agree, nothing stands out.
  Sim sim("dp=2,pp=2", 4, {"p2p", "dp", "world"});
  auto ev = sim.run(false);
  for (auto& e : ev) e.snapshot.progress_ns = e.snapshot.heartbeat_ns = k_now;
  Verdict clean = decide(input_of(ev));
  EXPECT_EQ(clean.status, VerdictStatus::healthy) << clean.summary;
}

TEST_F(CascadeTest, RandomizedFaultsOnMeshesWithTwoReplicasNeverNameAnInnocent) {
  // dp = 2: every replica group has two members, so no replica group has a strict minority, and the
  // randomized test above skips these meshes. Pipelines (point-to-point pairs or pp-group calls),
  // tp (sharded or not, broadcasts rooted in each tp group), one or two faults of every kind, bad
  // calls that block everyone or that the other members complete (gloo). Never an innocent; a
  // single fault named whenever the evidence singles it out (see `singled_out`).
  const std::vector<std::string> specs = {"dp=2,pp=2", "dp=2,pp=2,tp=2", "dp=2,tp=2",
                                          "dp=2,tp=4", "dp=2,pp=4",      "dp=2,tp=2,pp=2"};
  const int runs = std::getenv("SCOUT_DECIDE_RUNS") ? std::atoi(std::getenv("SCOUT_DECIDE_RUNS")) : 300;
  std::map<std::string, std::pair<int, int>> by_kind;  // "kind dim" -> (named, single-fault runs)
  int named = 0;
  for (int i = 0; i < runs; ++i) {
    const auto& spec = specs[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(specs.size()) - 1))];
    auto mesh = *Mesh::parse(spec);
    std::vector<std::string> dims;
    if (mesh.size(Dim::pp) > 1) dims.push_back(pick(0, 3) == 0 ? "pp" : "p2p");
    if (mesh.size(Dim::tp) > 1) dims.push_back("tp");
    dims.push_back("dp");
    dims.push_back("world");
    Sim sim(spec, 6, dims);
    const bool sharded = pick(0, 1) == 1;
    if (sharded) sim.shard_by_tp();
    const bool bcast = !sharded && pick(0, 2) == 0;
    if (bcast) sim.broadcast_in_tp();
    sim.bad_blocks_all = pick(0, 1) == 1;
    std::set<std::int64_t> bad;
    const int nfaults = pick(0, 3) == 0 ? 2 : 1;
    std::string fault_text;
    for (int f = 0; f < nfaults; ++f) {
      std::int64_t r = pick(0, sim.world - 1);
      bad.insert(r);
      auto kind = static_cast<Fault::Kind>(pick(1, 6));
      const auto& dim = dims[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(dims.size()) - 1))];
      sim.faults[r] = {kind, sim.index_of(r, dim, static_cast<std::uint64_t>(pick(2, 5)))};
      fault_text += fmt::format(" rank {} kind {} in {} at {};", r, static_cast<int>(kind), dim, sim.faults[r].at);
    }
    const bool cascade = pick(0, 1) == 1;
    const bool gone = cascade && pick(0, 1) == 1;
    Verdict v = decide(input_of(sim.run(cascade, gone), pick(0, 1) ? std::optional<Mesh>(mesh) : std::nullopt));
    auto got = suspects(v);
    const std::string where =
        fmt::format("{} dims {} sharded {} bcast {} blocks_all {} cascade {} gone {};{} seed {} run {}", spec,
                    fmt::join(dims, ","), sharded, bcast, sim.bad_blocks_all, cascade, gone, fault_text, seed, i);
    for (auto r : got)
      ASSERT_TRUE(bad.count(r)) << "innocent rank " << r << " named; " << where << "\n"
                                << v.summary << "\n"
                                << v.suspects.front().evidence.dump() << "\n"
                                << v.details["waits"].dump() << "\n"
                                << v.details["ranks"].dump();
    if (!got.empty()) ++named;
    if (nfaults != 1) continue;
    const auto r = *bad.begin();
    const auto& f = sim.faults[r];
    const std::string dim = sim.programs[r][f.at].dim;
    auto& k = by_kind[fmt::format("kind {} in {}", static_cast<int>(f.kind), dim)];
    ++k.second;
    k.first += !got.empty();
    // Singled out: a stopped process (a fact); a rank that exited before a call of a group its
    // peers wait in (the end of their waits) when no cascade hides where it stood; a call made
    // with other arguments in a group of three or more where nobody completes it (a strict
    // minority at the group's position).
    const bool wide = sim.members(dim, r).size() >= 3 && !(sharded && dim == "tp");  // sharded: no majority
    const bool singled_out = f.kind == Fault::stop_before || (f.kind == Fault::exit_before && !cascade) ||
                             (f.kind == Fault::wrong_count && wide && sim.bad_blocks_all && !cascade);
    if (singled_out) {
      EXPECT_EQ(got, std::set<std::int64_t>{r}) << "faulty rank not named; " << where << "\n"
                                                << v.summary << "\n"
                                                << v.details["waits"].dump() << "\n"
                                                << v.details["ranks"].dump();
    }
  }
  for (const auto& [k, c] : by_kind) std::printf("  %s: named %d of %d\n", k.c_str(), c.first, c.second);
  std::printf("named a faulty rank in %d of %d runs\n", named, runs);
}

}  // namespace
}  // namespace scout::hang
