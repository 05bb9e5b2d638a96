#include "lib/straggler/probe.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <thread>

#include "lib/checkpoint/durable_file.hpp"
#include "lib/common/clock.hpp"
#include "lib/common/file.hpp"
#include "lib/common/hex.hpp"
#include "lib/consensus/c3.hpp"
#include "lib/session/join.hpp"
#include "lib/session/oneshot.hpp"
#include "lib/straggler/cgroup.hpp"
#include "lib/straggler/comm_bench.hpp"
#include "lib/transport/auth.hpp"

namespace scout::straggler {

namespace {

// The scheduler counters of process `pid` (RankEvents::cpu_ns, runq_ns, main_cpu_ns) from
// /proc/PID/task/*/schedstat: false when /proc does not have them (no schedstat in this kernel, the process gone).
bool read_schedstat(std::int64_t pid, RankEvents& e) {
  std::error_code ec;
  std::int64_t cpu = 0, runq = -1, main_cpu = -1;
  const std::string main_thread = std::to_string(pid);
  for (std::filesystem::directory_iterator it(fmt::format("/proc/{}/task", pid), ec), end; !ec && it != end;
       it.increment(ec)) {
    std::ifstream f(it->path() / "schedstat");
    std::int64_t on = -1, waited = -1;
    if (!(f >> on >> waited) || on < 0 || waited < 0) continue;  // a thread that just ended
    cpu += on;
    if (it->path().filename() == main_thread) {
      runq = waited;
      main_cpu = on;
    }
  }
  if (ec || runq < 0) return false;
  e.cpu_ns = cpu;
  e.runq_ns = runq;
  e.main_cpu_ns = main_cpu;
  return true;
}

}  // namespace

RoundEvidence local_evidence(const std::vector<records::RecordRead>& reads, const LiveOptions& o, std::int64_t now_ns,
                             std::vector<std::string>* notes,
                             const std::map<std::int64_t, StopSampler::Counts>* states) {
  RoundEvidence r;
  for (const auto& read : reads) {
    if (read.problem != records::RecordProblem::none || !read.snapshot || read.stale) {
      if (notes)
        notes->push_back(fmt::format("{}: {}", read.segment, read.stale ? "stale (earlier attempt)" : read.message));
      continue;
    }
    const auto& s = *read.snapshot;
    if (o.local_ranks && !o.local_ranks->count(s.rank)) continue;
    if (!o.attempt.empty() && s.attempt != o.attempt) {
      if (notes) notes->push_back(fmt::format("{}: attempt '{}', not '{}'", read.segment, s.attempt, o.attempt));
      continue;
    }
    RankEvents e;
    e.rank = s.rank;
    e.node = s.host;
    for (int d = 0; d < k_dim_count; ++d) e.coords[d] = s.coords[d];
    e.step = s.step;
    e.read_ns = now_ns;
    e.written = s.events;
    if (read.writer_alive && s.pid > 0 && !read_schedstat(s.pid, e)) e.cpu_ns = e.runq_ns = e.main_cpu_ns = -1;
    // The main thread's involuntary context switches (/proc/PID/status is the main thread's own, not summed).
    if (read.writer_alive && s.pid > 0 && e.main_cpu_ns >= 0)
      if (auto v = read_nivcsw(s.pid)) e.nivcsw = *v;
    if (read.writer_alive && s.pid > 0)
      if (auto cg = read_cgroup_cpu(s.pid)) {
        e.nr_periods = cg->stat.nr_periods;
        e.nr_throttled = cg->stat.nr_throttled;
        e.throttled_ns = cg->stat.throttled_ns;
        if (cg->quota) {
          e.quota_us = cg->quota->quota_us;
          e.period_us = cg->quota->period_us;
        }
      }
    if (read.writer_alive && s.pid > 0) {
      const MemoryCounters m = read_memory_counters(s.pid);
      e.majflt = m.majflt;
      e.read_bytes = m.read_bytes;
      e.mem_limit_hits = m.limit_hits;
      e.mem_stall_us = m.stall_us;
    }
    if (states)
      if (auto it = states->find(s.rank); it != states->end()) {
        e.state_samples = it->second.samples;
        e.stopped_samples = it->second.stopped;
      }
    e.events = s.recent;
    r.world = std::max(r.world, s.world_size);
    r.ranks.push_back(std::move(e));
  }
  std::sort(r.ranks.begin(), r.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return r;
}

namespace {

// The calls live local ranks completed since `before` (each rank's calls at the previous read): the fewest any
// rank did (as many as could be wanted without a rank to compare) and all of them together. Ranks the previous read
// did not see are not counted.
struct NewCalls {
  std::int64_t fewest = std::numeric_limits<std::int64_t>::max();
  std::int64_t total = 0;
};

NewCalls new_calls(const std::vector<records::RecordRead>& reads, const LiveOptions& o,
                   const std::map<std::int64_t, std::uint64_t>& before) {
  NewCalls out;
  for (const auto& read : reads) {
    if (read.problem != records::RecordProblem::none || !read.snapshot || read.stale || !read.writer_alive) continue;
    const auto& s = *read.snapshot;
    if (o.local_ranks && !o.local_ranks->count(s.rank)) continue;
    if (!o.attempt.empty() && s.attempt != o.attempt) continue;
    const auto it = before.find(s.rank);
    if (it == before.end()) continue;
    const auto n = s.events >= it->second ? static_cast<std::int64_t>(s.events - it->second) : 0;
    out.fewest = std::min(out.fewest, n);
    out.total += n;
  }
  return out;
}

// Whether a round's gather brought no other observer's evidence.
bool met_nobody(const session::OneShotResult& g, std::int64_t observer) {
  for (std::size_t i = 0; i < g.blobs.size(); ++i)
    if (static_cast<std::int64_t>(i) != observer && g.blobs[i]) return false;
  return true;
}

nlohmann::json bench_json(const std::vector<BenchResult>& results, const std::vector<std::int64_t>& outliers,
                          const C3Result& c3) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json x = {{"rank", r.rank}, {"placement", r.placement}};
    if (r.error.empty()) {
      x["gemm_ms"] = std::round(r.gemm_ns / 1e3) / 1e3;
      x["sweep_ms"] = std::round(r.sweep_ns / 1e3) / 1e3;
      x["total_ms"] = std::round(r.total_ns / 1e3) / 1e3;
    } else {
      x["error"] = r.error;
    }
    ranks.push_back(x);
  }
  return {{"ranks", ranks},
          {"outliers", outliers},
          {"median_ms", std::round(c3.median / 1e3) / 1e3},
          {"c3", std::string(c3_status_name(c3.status))},
          {"reason", std::string(c3_reason_name(c3.reason))}};
}

nlohmann::json comm_bench_json(const CommBenchResult& r, const CommBenchOptions& o) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : r.groups) {
    nlohmann::json x = {{"kind", g.group.kind}, {"id", hex64(g.group.id)}, {"members", g.group.members}};
    if (g.error.empty()) {
      nlohmann::json it = nlohmann::json::array();
      for (auto ns : g.iterations_ns) it.push_back(std::round(ns / 1e3) / 1e3);
      x["all_gather_ms"] = std::round(g.ns / 1e3) / 1e3;
      x["iterations_ms"] = it;
      x["ratio"] = std::round(g.ratio * 1000) / 1000;
      x["slow"] = g.slow;
    } else {
      x["error"] = g.error;
    }
    groups.push_back(x);
  }
  return {{"operation", "timed all_gather per process group over the observer session"},
          {"payload_bytes", o.payload_bytes},
          {"iterations", o.iterations},
          {"slow_ratio", o.slow_ratio},
          {"groups", groups},
          {"notes", r.notes}};
}

}  // namespace

Result<Verdict> run_straggler(const LiveOptions& o, const RecordSource& source,
                              std::vector<RoundEvidence>* rounds_out) {
  if (o.rounds < 1 || o.rounds > 1000) return usage_error("--rounds must be between 1 and 1000");
  const auto start = std::chrono::steady_clock::now();
  std::vector<RoundEvidence> evidence;
  std::vector<std::string> notes;
  std::vector<records::RecordRead> first_reads;
  nlohmann::json transport = {{"nodes", o.nodes}, {"store", nullptr}};

  // Multi-node: the store and the token, once for all rounds.
  std::optional<session::JoinedStore> joined;
  std::optional<transport::JobToken> token;
  std::int64_t observer = o.node_index.value_or(0);
  std::string listen_address = o.listen_address;
  if (o.nodes > 1) {
    auto t = transport::JobToken::load(o.job, o.attempt, o.token_file);
    if (!t) return t.error();
    token = std::move(*t);
    if (!o.node_index)
      return usage_error("--node-index is required with --nodes > 1", "", "pass --node-index I (0-based) on each node");
    auto j = session::join_store(o.job, o.store, o.host_store, observer, o.listen_address, o.round_timeout);
    transport["authenticated"] = token->authenticated();
    if (j) {
      transport["store"] = j->uri.text;
      transport["store_hosted_here"] = j->hosted_here;
      listen_address = j->listen_address;
      joined = std::move(*j);
    } else {
      // No store, no other observer (its host dead, frozen or cut off): as probe-hang does, one line saying so, and
      // the rounds are this node's evidence alone; the other nodes' ranks are missing from them, never named.
      const auto why =
          fmt::format("cannot reach the store: {}; the rounds are this node's evidence alone", j.error().message());
      spdlog::warn("{}", why);
      notes.push_back(why);
      transport["store"] = (o.store ? *o.store : transport::default_store_uri(o.job)).text;
      transport["store_hosted_here"] = false;
      transport["store_unreachable"] = true;
    }
  }
  transport["observer"] = observer;
  nlohmann::json gathers = nlohmann::json::array();
  bool rejoined = false;                // the store was joined again once (it went away)
  bool alone = o.nodes > 1 && !joined;  // and could not be: the rounds left are this node's alone

  if (!o.evidence_in.empty()) {
    if (o.bench) return usage_error("--bench needs the live job, not --evidence-in");
    auto text = read_small_file(o.evidence_in, std::size_t{256} << 20);
    if (!text) return text.error();
    auto rounds = parse_evidence(*text, o.job, o.evidence_in);
    if (!rounds) return rounds.error();
    evidence = std::move(*rounds);
    transport["evidence_in"] = o.evidence_in;
  }
  // Between reads a background thread samples each local rank's process state (stopped from outside?).
  StopSampler sampler;
  // Read 0 is the baseline that opens the scheduler counters' window; rounds 1..R are decided on, one
  // --interval apart counted from the baseline (with several observers, from the end of the baseline's gather,
  // which every observer leaves at about the same moment). Counted from the start instead, a slow join to the
  // store (6 s under load, measured) left the rounds 0.2 s apart: too few calls a round for the link measure.
  auto anchor = start;
  std::map<std::int64_t, std::uint64_t> written_before;  // single node: each rank's calls at the previous read
  nlohmann::json round_s = nlohmann::json::array();
  for (std::int64_t round = 0; o.evidence_in.empty() && round <= o.rounds; ++round) {
    auto due = anchor;
    if (round > 0) {
      due = o.nodes == 1 ? anchor + o.interval : anchor + o.interval * round;
      while (std::chrono::steady_clock::now() < due) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto reads = source();
    if (!reads) return reads.error();
    if (round > 0 && o.nodes == 1) {
      // A round whose slowest rank completed fewer calls than a round's median needs says nothing (steps of 0.5 s
      // and more on a loaded host left 1.5 s rounds with 2-4 calls, and the round without data made the verdict
      // inconclusive): it goes on, read again every 50 ms, until each rank has one call more than that, for at
      // most 4 x --interval, and only while calls complete: a job that completed none in an --interval (stalled,
      // or steps longer than the interval) is not waited for (`observe --straggler` probes between its hang checks).
      const auto limit = anchor + 4 * o.interval;
      auto calls = new_calls(*reads, o, written_before);
      auto progressed = calls.total > 0 ? std::chrono::steady_clock::now() : anchor;
      while (calls.fewest < o.decide.min_calls + 1 && std::chrono::steady_clock::now() < limit &&
             std::chrono::steady_clock::now() - progressed < o.interval) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        reads = source();
        if (!reads) return reads.error();
        const auto latest = new_calls(*reads, o, written_before);
        if (latest.total > calls.total) progressed = std::chrono::steady_clock::now();
        calls = latest;
      }
      round_s.push_back(
          std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - anchor).count() * 1000) / 1000);
    }
    if (round == 0) first_reads = *reads;
    const auto states = sampler.take();
    RoundEvidence local = local_evidence(*reads, o, realtime_ns(), round == 0 ? &notes : nullptr, &states);
    local.baseline = round == 0;
    if (round < o.rounds)
      for (const auto& read : *reads)
        if (read.snapshot && read.problem == records::RecordProblem::none && !read.stale && read.writer_alive &&
            read.snapshot->pid > 0 && std::any_of(local.ranks.begin(), local.ranks.end(), [&](const RankEvents& e) {
              return e.rank == read.snapshot->rank;
            }))
          sampler.track(read.snapshot->rank, read.snapshot->pid);
    if (round == 0 && o.nodes == 1 && local.ranks.empty())
      return unavailable_error(fmt::format("no readable progress record of job '{}'", o.job),
                               "the trainers did not publish on this host, or the job id differs",
                               "check `scout records list`, or the job id the publisher was given");
    if (o.nodes == 1) {
      anchor = std::chrono::steady_clock::now();
      written_before.clear();
      for (const auto& e : local.ranks) written_before[e.rank] = e.written;
      evidence.push_back(std::move(local));
      continue;
    }
    // One authenticated gather per round; observers that do not answer are left out of the round.
    session::OneShotOptions go;
    go.key_namespace = fmt::format("{}/straggler/r{}", token->key_namespace(), round);
    go.member = observer;
    go.members = o.nodes;
    go.timeout = o.round_timeout;
    go.listen_address = listen_address;
    const std::string context = fmt::format("{}/straggler/{}", token->key_namespace(), observer);
    const auto signed_round = token->sign(encode_round(local, o.job, observer), context);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> round_notes;
    auto g = alone ? Result<session::OneShotResult>(session::OneShotResult{})
                   : session::gather_once(*joined->store, go, signed_round);
    // At most one rejoin per run: a tcp:// store that went away after this observer joined it (torchrun's agent
    // exits with its store seconds after a node's loss; observer 0 then hosts it at the same address). The round is
    // gathered again on it, and the rounds left follow one --interval apart from then.
    if (!alone && !rejoined && (!g || met_nobody(*g, observer)) && session::store_went_away(*joined)) {
      rejoined = true;
      if (!g) round_notes.push_back(fmt::format("round {}: {}", round, g.error().message()));
      auto again = session::rejoin_store(o.job, *joined, o.host_store, observer, o.listen_address,
                                         std::max(session::k_least_rejoin_time, o.round_timeout * 4 / 3), round_notes);
      if (again) {
        joined = std::move(*again);
        transport["store_rejoined"] = true;
        transport["store_hosted_here"] = joined->hosted_here;
        listen_address = joined->listen_address;
        go.listen_address = listen_address;
        g = session::gather_once(*joined->store, go, signed_round);
        if (round > 0) anchor = std::chrono::steady_clock::now() - o.interval * round;
      } else {
        // No store, no other observer: the rounds left are this node's evidence alone (as probe-hang decides).
        transport["store_unreachable"] = true;
        alone = true;
        notes.push_back(
            fmt::format("the store went away and could not be reached again from round {}: the rounds "
                        "from then on are this node's evidence alone",
                        round));
        g = session::OneShotResult{};
      }
    }
    const double gather_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!g) return g.error();
    g->notes.insert(g->notes.begin(), round_notes.begin(), round_notes.end());
    if (g->blobs.empty()) g->blobs.resize(static_cast<std::size_t>(o.nodes));
    RoundEvidence merged = local;
    std::int64_t arrived = 1;
    for (std::int64_t i = 0; i < o.nodes; ++i) {
      if (i == observer || !g->blobs[static_cast<std::size_t>(i)]) continue;
      auto plain = token->verify(*g->blobs[static_cast<std::size_t>(i)],
                                 fmt::format("{}/straggler/{}", token->key_namespace(), i));
      if (!plain) {
        notes.push_back(fmt::format("round {}: observer {}'s evidence failed authentication", round, i));
        continue;
      }
      auto ev = decode_round(*plain, o.job, i);
      if (!ev) {
        notes.push_back(fmt::format("round {}: {}", round, ev.error().message()));
        continue;
      }
      ++arrived;
      merged.world = std::max(merged.world, ev->world);
      for (auto& r : ev->ranks) merged.ranks.push_back(std::move(r));
    }
    std::sort(merged.ranks.begin(), merged.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    merged.ranks.erase(std::unique(merged.ranks.begin(), merged.ranks.end(),
                                   [](const auto& a, const auto& b) { return a.rank == b.rank; }),
                       merged.ranks.end());
    gathers.push_back({{"round", round},
                       {"baseline", round == 0},
                       {"observers", arrived},
                       {"gather_ms", std::round(gather_ms * 1000) / 1000},
                       {"notes", g->notes}});
    evidence.push_back(std::move(merged));
    if (round == 0) anchor = std::chrono::steady_clock::now();
  }
  sampler.stop();
  const StopSampler::Cost sampling = sampler.cost();
  transport["gathers"] = gathers;
  if (!o.evidence_out.empty()) {
    auto w = atomic_write_file(o.evidence_out, evidence_json(evidence, o.job).dump() + "\n", 0644);
    if (!w) return w.error();
  }

  std::int64_t world = 0;
  std::size_t most = 0;
  for (const auto& e : evidence) {
    world = std::max(world, e.world);
    most = std::max(most, e.ranks.size());
  }
  if (most == 0)
    return unavailable_error(fmt::format("no readable progress record of job '{}'", o.job),
                             "the trainers did not publish on this host, or the job id differs",
                             "check `scout records list`, or the job id the publisher was given");
  for (auto& e : evidence) e.world = world;
  if (rounds_out) *rounds_out = evidence;
  std::string mesh_source = "--mesh";
  Mesh mesh = *Mesh::parse(fmt::format("dp={}", world));
  if (o.mesh) {
    if (o.mesh->world_size() != world)
      return input_error(fmt::format("--mesh {} has {} ranks, the records' world size is {}", o.mesh->spec(),
                                     o.mesh->world_size(), world),
                         "a mesh of another size would compare the wrong ranks",
                         "pass the job's mesh, or leave --mesh out");
    mesh = *o.mesh;
  } else {
    mesh = infer_mesh(evidence.front(), mesh_source);
  }
  if (static_cast<std::int64_t>(most) < world)
    notes.push_back(fmt::format(
        "{} of {} ranks' records were read; peer groups with fewer than 3 present are not compared", most, world));

  Analysis a = analyse(evidence, mesh, o.decide);
  for (auto& n : notes) a.decision.notes.push_back(n);
  Verdict v = make_verdict(o.command, o.job, a.decision, a.rounds, a.tables, mesh, mesh_source);
  v.details["transport"] = transport;
  v.details["straggler"]["interval_s"] = std::chrono::duration<double>(o.interval).count();
  if (!round_s.empty()) v.details["straggler"]["round_s"] = round_s;
  if (o.evidence_in.empty())
    v.details["straggler"]["state_sampling"] = {
        {"ranks", sampling.ranks},
        {"sweeps", sampling.sweeps},
        {"samples", sampling.samples},
        {"cpu_ms", std::round(sampling.cpu_s * 1e6) / 1e3},
        {"wall_s", std::round(sampling.wall_s * 1000) / 1000},
        {"cpu_share", sampling.wall_s > 0 ? std::round(sampling.cpu_s / sampling.wall_s * 1e5) / 1e5 : 0.0}};

  // The controlled probe: the same unit of work on every local rank, placed like the rank.
  if (o.bench) {
    std::vector<BenchTarget> targets;
    for (const auto& r : first_reads)
      if (r.snapshot && r.problem == records::RecordProblem::none && !r.stale && r.writer_alive &&
          (!o.local_ranks || o.local_ranks->count(r.snapshot->rank)))
        targets.push_back(BenchTarget{r.snapshot->rank, r.snapshot->pid});
    auto results = run_bench(targets, o.bench_options);
    std::vector<double> values;
    std::vector<std::int64_t> ranks;
    for (const auto& r : results)
      if (r.error.empty()) {
        values.push_back(r.total_ns);
        ranks.push_back(r.rank);
      }
    StatisticalOptions so;
    so.direction = Direction::high;
    so.min_relative = 0.15;
    C3Result c3 = c3_statistical(values, so);
    std::vector<std::int64_t> outliers;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (c3.status == C3Status::attributed && c3.outliers[i]) outliers.push_back(ranks[i]);
    v.details["bench"] = bench_json(results, outliers, c3);

    // Communication per process group: a timed all-gather in each, one session member per local rank.
    std::vector<std::int64_t> local;
    for (const auto& t : targets) local.push_back(t.rank);
    std::sort(local.begin(), local.end());
    local.erase(std::unique(local.begin(), local.end()), local.end());
    CommBenchOptions co;
    co.listen_address = listen_address;
    co.slow_ratio = o.decide.link_min_ratio;
    co.timeout = std::max(o.round_timeout, std::chrono::milliseconds(5000));
    StoreOpener opener;
    std::string scratch;  // single node: a private file:// store, removed afterwards
    if (o.nodes > 1) {
      co.key_namespace = fmt::format("{}/straggler/bench", token->key_namespace());
      const transport::StoreUri uri = o.store ? *o.store : transport::default_store_uri(o.job);
      opener = [uri, co]() { return transport::open_store(uri, false, co.timeout); };
    } else {
      char tmpl[] = "/tmp/scout-straggler-bench-XXXXXX";
      if (mkdtemp(tmpl) != nullptr) scratch = tmpl;
      co.key_namespace = fmt::format("{}/straggler/bench", o.job);
      co.expected = local;
      transport::StoreUri uri;  // file://
      uri.path = scratch + "/store";
      uri.text = "file://" + uri.path;
      opener = [uri, co]() { return transport::open_store(uri, false, co.timeout); };
    }
    if (o.nodes > 1 || !scratch.empty()) {
      auto comm = run_comm_bench(opener, mesh_groups(mesh), world, local, co);
      v.details["bench"]["collective"] = comm_bench_json(comm, co);
      for (const auto& g : comm.groups)
        for (auto& sg : v.details["straggler"]["slow_groups"])
          if (sg.value("id", "") == hex64(g.group.id) && g.error.empty()) {
            sg["bench_ratio"] = std::round(g.ratio * 1000) / 1000;
            sg["confirmed_by_bench"] = g.slow;
          }
    } else {
      v.details["bench"]["collective"] = {{"error", "no scratch directory for the bench's store under /tmp"}};
    }
    if (!scratch.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(scratch, ec);
    }
    for (auto& s : v.suspects) {
      if (s.reason != "compute" || s.rank < 0) continue;
      auto it = std::find(ranks.begin(), ranks.end(), s.rank);
      if (it == ranks.end()) continue;
      const double ratio = c3.median > 0 ? values[static_cast<std::size_t>(it - ranks.begin())] / c3.median : 1;
      s.evidence["bench_ratio"] = std::round(ratio * 1000) / 1000;
      s.evidence["confirmed_by_bench"] = std::find(outliers.begin(), outliers.end(), s.rank) != outliers.end();
    }
  }

  // The temporal baseline: only when asked for (a file per job).
  if (!o.history_path.empty()) {
    auto times = group_times(evidence, a.tables);
    auto t = update_history(o.history_path, o.job, times, o.drift, std::chrono::milliseconds(5000));
    if (!t) return t.error();
    nlohmann::json drifts = nlohmann::json::array();
    for (const auto& d : t->drifts)
      drifts.push_back({{"group", d.group},
                        {"measure", d.measure},
                        {"current_ms", std::round(d.current / 1e3) / 1e3},
                        {"baseline_ms", std::round(d.baseline / 1e3) / 1e3},
                        {"ratio", std::round(d.ratio * 1000) / 1000},
                        {"threshold_ms", std::round(d.threshold / 1e3) / 1e3}});
    const bool fleet = !t->drifts.empty();
    v.details["temporal"] = {{"status", fleet                  ? "fleet_slowdown"
                                        : t->with_baseline > 0 ? "steady"
                                                               : "building_baseline"},
                             {"history", t->path},
                             {"groups", t->groups},
                             {"with_baseline", t->with_baseline},
                             {"drifts", drifts},
                             {"min_relative", o.drift.min_relative},
                             {"min_entries", o.drift.min_entries}};
    if (fleet) {
      std::set<std::string> groups;
      double worst = 0;
      for (const auto& d : t->drifts) {
        groups.insert(d.group);
        worst = std::max(worst, d.ratio);
      }
      v.details["findings"].push_back(
          {{"kind", "fleet_slowdown"}, {"groups", groups.size()}, {"ratio", std::round(worst * 1000) / 1000}});
      v.summary += fmt::format("; fleet_slowdown: {} group(s) up to {:.2f}x slower than their own history",
                               groups.size(), worst);
      if (v.status == VerdictStatus::healthy) v.action = "investigate_fleet_slowdown";
    }
  }
  return v;
}

}  // namespace scout::straggler
