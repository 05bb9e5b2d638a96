#include "lib/hang/probe.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <thread>

#include "lib/common/clock.hpp"
#include "lib/common/hex.hpp"
#include "lib/common/proc.hpp"
#include "lib/hang/position.hpp"
#include "lib/report/verdict.hpp"
#include "lib/session/hierarchy.hpp"
#include "lib/session/join.hpp"
#include "lib/session/membership.hpp"
#include "lib/session/session.hpp"
#include "lib/transport/auth.hpp"

namespace scout::hang {

namespace {

// The hang verdict's form of a session rejection.
RejectedObserver adapt(const session::Rejection& r) {
  RejectedObserver out;
  out.observer = r.member;
  out.reason = r.reason;
  out.source = r.source == session::Rejection::Source::presence ? RejectedObserver::Source::presence
                                                                : RejectedObserver::Source::evidence;
  out.host = r.host;
  out.pid = r.pid;
  out.attempt = r.attempt;
  return out;
}

}  // namespace

std::vector<std::int64_t> select_evidence(const session::PositionTable& table, std::int64_t threshold_ns) {
  std::vector<std::optional<NodePosition>> positions;
  for (const auto& b : table.positions) positions.push_back(b ? decode_node_position(*b) : std::nullopt);
  if (positions_prove_healthy(positions, threshold_ns)) return {};
  std::vector<std::int64_t> all(positions.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  return all;
}

NodeEvidence collect_evidence(const std::vector<records::RecordRead>& reads, const ProbeOptions& o,
                              std::int64_t observer, std::int64_t now_ns) {
  NodeEvidence e;
  e.observer = observer;
  e.node = session::host_name();
  e.job = o.job;
  e.attempt = o.attempt;
  e.collected_ns = now_ns;
  for (const auto& read : reads) {
    std::int64_t rank = read.snapshot ? read.snapshot->rank : rank_from_segment(read.segment);
    if (o.local_ranks && rank >= 0 && !o.local_ranks->count(rank)) continue;
    const bool other_attempt = read.snapshot && !o.attempt.empty() && read.snapshot->attempt != o.attempt;
    if (read.problem != records::RecordProblem::none || !read.snapshot || read.stale || other_attempt) {
      RecordIssue issue;
      issue.segment = read.segment;
      issue.problem = read.problem != records::RecordProblem::none
                          ? std::string(records::record_problem_name(read.problem))
                      : read.stale || other_attempt ? "stale"
                                                    : "unreadable";
      issue.message = read.message.empty() && issue.problem == "stale" ? "record of an earlier attempt" : read.message;
      issue.rank = rank;
      issue.writer_alive = read.writer_alive;
      if (read.snapshot) issue.attempt = read.snapshot->attempt, issue.world_size = read.snapshot->world_size;
      e.issues.push_back(std::move(issue));
      continue;
    }
    RankEvidence re;
    re.snapshot = *read.snapshot;
    re.writer_alive = read.writer_alive;
    re.process = probe_process(re.snapshot.pid, re.snapshot.start_ns);
    // The reader's own check compares the exact start time; trust "not alive" from it.
    if (!read.writer_alive && re.process.state == ProcessState::alive) {
      re.process.state = ProcessState::gone;
      re.process.pid_reused = true;
      re.process.detail =
          fmt::format("pid {} is alive but is not the record's writer (start time differs)", re.snapshot.pid);
    }
    if (e.attempt.empty()) e.attempt = re.snapshot.attempt;
    e.ranks.push_back(std::move(re));
  }
  return e;
}

Result<std::int64_t> resolve_node_index(const ProbeOptions& o, const NodeEvidence& local) {
  if (o.node_index) {
    if (*o.node_index < 0 || *o.node_index >= o.nodes)
      return usage_error(fmt::format("--node-index {} is out of range for --nodes {}", *o.node_index, o.nodes));
    return *o.node_index;
  }
  if (o.nodes == 1) return std::int64_t{0};
  std::int64_t lowest = -1, world = 0;
  for (const auto& r : local.ranks) {
    if (lowest < 0 || r.snapshot.rank < lowest) lowest = r.snapshot.rank;
    world = std::max(world, r.snapshot.world_size);
  }
  if (lowest < 0 || world <= 0)
    return usage_error("cannot tell this node's index", "no readable local record names a rank",
                       "pass --node-index I (0-based) on each node");
  std::int64_t index = lowest * o.nodes / world;
  if (index >= o.nodes) index = o.nodes - 1;
  return index;
}

// Every node's position in a gather's table (nullopt where none came or it does not decode).
std::vector<std::optional<NodePosition>> positions_of(const session::TwoPhaseResult& g) {
  std::vector<std::optional<NodePosition>> out;
  if (g.table)
    for (const auto& b : g.table->positions) out.push_back(b ? decode_node_position(*b) : std::nullopt);
  return out;
}

// Fills in.nodes from a gather's details (each blob decoded and checked: same job, the observer it
// claims), replacing what a node gave before; refused blobs join in.rejected. `self` (-1: none) is
// this observer's own node, which it already holds.
void absorb_details(DecisionInput& in, session::TwoPhaseResult& g, std::int64_t self, std::int64_t nodes) {
  auto reject_blob = [&](std::int64_t i, std::string reason) {
    session::Rejection r;
    r.member = i;
    r.reason = std::move(reason);
    in.rejected.push_back(adapt(r));
  };
  for (std::int64_t i = 0; i < nodes; ++i) {
    const auto slot = static_cast<std::size_t>(i);
    // A member left out of the details was refused, absent or lost already among the positions.
    const bool asked = std::binary_search(g.selected.begin(), g.selected.end(), i);
    session::Contribution kept;
    kept.state = g.details.count(i) ? session::Contribution::State::ok : session::Contribution::State::absent;
    const auto& c = asked && slot < g.details_from.size() ? g.details_from[slot]
                    : slot < g.positions_from.size()      ? g.positions_from[slot]
                                                          : kept;
    if (i == self) continue;
    if (c.state == session::Contribution::State::rejected) {
      const bool auth = c.reason.empty() || c.reason.find("authentication") != std::string::npos;
      reject_blob(i, auth ? "evidence blob failed authentication (wrong job token or forged)" : c.reason);
      continue;
    }
    if (c.state == session::Contribution::State::over_limit) {
      reject_blob(i, c.reason);
      continue;
    }
    if (c.state != session::Contribution::State::ok || !asked || !g.details.count(i))
      continue;  // absent or lost: unreachable
    auto ev = deserialize(g.details[i]);
    if (!ev) {
      reject_blob(i, ev.error().message());
      continue;
    }
    if (ev->job != in.job || ev->observer != i) {
      reject_blob(i, fmt::format("blob names job '{}' observer {}", ev->job, ev->observer));
      continue;
    }
    in.nodes[slot] = std::move(*ev);
  }
}

// The decision over a two-phase gather's table and evidence (every observer of a flat
// session, every leader of a hierarchy). `in` holds this observer's own node at `self`
// (-1: none; a leader takes its own from the details) and the rejected strays; the
// contributions' states, where the session kept them, name refused blobs. In a stall `g`'s
// details are the compact evidence of every node and `rings` the full evidence of the
// nodes select_ring_holders() named (position.hpp); the other rings are rebuilt from theirs.
Result<Verdict> decide_gathered(DecisionInput in, session::TwoPhaseResult& g, std::int64_t self, std::int64_t nodes,
                                session::TwoPhaseResult* rings, RingRestore* restored, ProbeEvidence* seen = nullptr) {
  if (g.selected.empty() && g.table) {
    // The positions proved the job healthy: no rank's record was gathered.
    std::vector<NodePosition> positions;
    std::int64_t world = 0;
    for (const auto& b : g.table->positions) {
      auto p = b ? decode_node_position(*b) : std::nullopt;
      if (!p) return internal_error("a position that proved the job healthy does not decode");
      world = std::max(world, p->world_size);
      positions.push_back(*p);
    }
    if (auto checked = check_decision_input(in, world); !checked) return checked.error();
    if (seen) {
      seen->nodes = in.nodes;  // this observer's own node, where it holds it
      seen->positions.assign(positions.begin(), positions.end());
      seen->now_ns = 0;
      for (const auto& p : positions) seen->now_ns = std::max(seen->now_ns, p.collected_ns);
      seen->local_only = false;
    }
    return healthy_from_positions(in, positions);
  }
  absorb_details(in, g, self, nodes);
  if (rings) absorb_details(in, *rings, self, nodes);
  const RingRestore r = restore_rings(in.nodes);
  if (restored) *restored = r;
  in.now_ns = agreed_now(in.nodes);
  if (seen) *seen = ProbeEvidence{in.nodes, positions_of(g), in.now_ns, false};
  if (auto checked = check_decision_input(in); !checked) return checked.error();
  return decide(in);
}

// What a stall's second gather needs from its first, where the first's details are held.
std::vector<std::int64_t> ring_holders(const DecisionInput& base, session::TwoPhaseResult& first, std::int64_t nodes) {
  DecisionInput in = base;
  in.nodes.assign(static_cast<std::size_t>(nodes), std::nullopt);
  absorb_details(in, first, -1, nodes);
  return select_ring_holders(in.nodes);
}

std::int64_t observer_group_size(std::int64_t nodes, std::int64_t requested) {
  if (requested > 0) return requested;
  if (nodes <= k_max_flat_observers) return std::max<std::int64_t>(nodes, 1);
  const auto g = static_cast<std::int64_t>(std::llround(std::sqrt(2.0 * static_cast<double>(nodes) / 3.0)));
  return std::clamp<std::int64_t>(g, 8, 256);
}

// A hierarchy's decision as it travels from the leaders: {"verdict": ...} or {"error": ...}, and
// "positions": every node's position in the leaders' table (null where none came), so that every
// member's trace shows every node (a few dozen bytes a node).
session::Bytes encode_decision(const Result<Verdict>& v, const session::TwoPhaseResult& gathered) {
  nlohmann::json j;
  nlohmann::json positions = nlohmann::json::array();
  for (const auto& p : positions_of(gathered)) {
    if (!p) {
      positions.push_back(nullptr);
      continue;
    }
    positions.push_back({{"observer", p->observer},
                         {"collected_ns", p->collected_ns},
                         {"newest_progress_ns", p->newest_progress_ns},
                         {"world_size", p->world_size},
                         {"ranks", p->ranks},
                         {"rank_sum", p->rank_sum},
                         {"rank_mix_sum", hex64(static_cast<std::uint64_t>(p->rank_mix_sum))},
                         {"clean", p->clean}});
  }
  j["positions"] = std::move(positions);
  if (v)
    j["verdict"] = to_json(*v);
  else
    j["error"] = {{"code", static_cast<int>(v.error().code)},
                  {"what", v.error().what},
                  {"why", v.error().why},
                  {"hint", v.error().hint}};
  const auto text = j.dump();
  return session::Bytes(text.begin(), text.end());
}

// The leaders' first decision in a stall: not a verdict yet, the rings' gather follows.
session::Bytes encode_next_gather() {
  const std::string text = R"({"next":"rings"})";
  return session::Bytes(text.begin(), text.end());
}

bool is_next_gather(const session::Bytes& bytes) {
  return bytes == encode_next_gather();
}

// The positions a leaders' decision carries (encode_decision); empty where it carries none.
std::vector<std::optional<NodePosition>> decode_decision_positions(const session::Bytes& bytes) {
  std::vector<std::optional<NodePosition>> out;
  auto j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("positions") || !j["positions"].is_array()) return out;
  for (const auto& e : j["positions"]) {
    auto mix = e.is_object() && e.value("rank_mix_sum", nlohmann::json()).is_string()
                   ? parse_hex64(e["rank_mix_sum"].get<std::string>())
                   : std::nullopt;
    if (!mix) {
      out.push_back(std::nullopt);
      continue;
    }
    NodePosition p;
    p.observer = e.value("observer", std::int64_t{-1});
    p.collected_ns = e.value("collected_ns", std::int64_t{0});
    p.newest_progress_ns = e.value("newest_progress_ns", std::int64_t{0});
    p.world_size = e.value("world_size", std::int64_t{0});
    p.ranks = e.value("ranks", std::int64_t{0});
    p.rank_sum = e.value("rank_sum", std::int64_t{0});
    p.rank_mix_sum = static_cast<std::int64_t>(*mix);
    p.clean = e.value("clean", false);
    out.push_back(p);
  }
  return out;
}

Result<Verdict> decode_decision(const session::Bytes& bytes) {
  auto j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return input_error("the leaders' decision is not JSON");
  if (j.contains("verdict")) return verdict_from_json(j["verdict"]);
  const nlohmann::json e = j.contains("error") ? j["error"] : nlohmann::json();
  if (!e.is_object() || !e.contains("code") || !e["code"].is_number_integer())
    return input_error("the leaders' decision holds neither a verdict nor an error");
  Error err;
  err.code = e["code"] == static_cast<int>(ExitCode::usage) ? ExitCode::usage : ExitCode::internal;
  auto text = [&e](const char* key) {
    auto it = e.find(key);
    return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  err.what = text("what").empty() ? std::string("the leaders could not decide") : text("what");
  err.why = text("why");
  err.hint = text("hint");
  return err;
}

namespace {

// The error of an observer that met no other observer while the job's observers of another
// key id (`others`, from the presence keys) ran: a wrong token or attempt, not peers down.
Error met_nobody_error(const ProbeOptions& o, std::int64_t index, const std::vector<session::Rejection>& others) {
  std::string who;
  for (std::size_t i = 0; i < others.size() && i < 3; ++i)
    who += fmt::format("{}observer {} on {} (pid {})", i ? ", " : "", others[i].member, others[i].host, others[i].pid);
  if (others.size() > 3) who += fmt::format(" and {} more", others.size() - 3);
  const bool attempt = others.front().why.find("attempt") != std::string::npos;
  return input_error(
      fmt::format("observer {} of job '{}' met no other observer", index, o.job),
      fmt::format("the job's observers that ran meanwhile ({}) could not admit it: {}", who, others.front().why),
      attempt ? "give every observer the same --attempt (the launcher's restart id)"
              : "give every observer of the job the same $SCOUT_JOB_TOKEN or --token-file");
}

// What one meeting of the observers on a joined store produced: a flat session's gathers (each observer then
// decides, on the same table and evidence), or a hierarchy's decision (its leaders decided).
struct Meeting {
  std::unique_ptr<session::Session> observers;
  std::unique_ptr<session::Hierarchy> hierarchy;
  std::optional<session::TwoPhaseResult> gathered;              // a flat session's gather
  std::optional<session::TwoPhaseResult> rings_gathered;        // and in a stall its rings' gather
  std::optional<Result<Verdict>> leaders_verdict;               // a hierarchy's decision
  std::vector<std::optional<NodePosition>> decision_positions;  // and the positions it carried

  // Whether an observer other than `self` took part.
  bool met_another(std::int64_t self) const {
    if (observers && gathered)
      for (std::size_t i = 0; i < gathered->positions_from.size(); ++i)
        if (static_cast<std::int64_t>(i) != self &&
            gathered->positions_from[i].state == session::Contribution::State::ok)
          return true;
    return hierarchy && (hierarchy->group().members().size() > 1 ||
                         (hierarchy->leaders() && hierarchy->leaders()->members().size() > 1));
  }
  // Appends the sessions' own notes to `notes`.
  void add_notes(std::vector<std::string>& notes) const {
    if (observers)
      for (const auto& n : observers->notes()) notes.push_back(n);
    if (hierarchy)
      for (const auto& n : hierarchy->notes()) notes.push_back(n);
  }
};

// What a meeting asks for: the session's options, the evidence gather's request and the rings' (their
// details and the evidence's selection set by run_probe), the decision's input before any node's evidence,
// the number of observers and of a group, and the deadline the gathers' steps share.
struct MeetingPlan {
  session::SessionOptions so;
  session::TwoPhaseRequest* evidence = nullptr;
  session::TwoPhaseRequest* rings = nullptr;
  DecisionInput base;
  std::int64_t nodes = 0;
  std::int64_t group_size = 0;
  std::chrono::steady_clock::time_point deadline;
};

// Meets the other observers on `store`: one flat session where a group holds them all (a stall's rings in a
// second gather), else two levels whose leaders decide and send the verdict down. Whatever fails becomes a
// line of `notes`; where a hierarchy's decision came from goes into `transport_details`; `seen` (may be null)
// receives what the leaders decided on.
Meeting meet(transport::KeyValueStore& store, const MeetingPlan& plan, std::vector<std::string>& notes,
             nlohmann::json& transport_details, ProbeEvidence* seen) {
  // Each step may take a share of what is left: the first gather's steps more than the rings' (a late or
  // loaded observer is waited for there; by the rings' gather every member is known to be up), yet not all of
  // it, so that a stall's rings still have time.
  auto step_timeout = [&plan](int steps) {
    return std::max(std::chrono::milliseconds(100), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        plan.deadline - std::chrono::steady_clock::now()) /
                                                        steps);
  };
  auto& rq = *plan.evidence;
  auto& rings_rq = *plan.rings;
  const DecisionInput& base = plan.base;
  const std::int64_t nodes = plan.nodes;
  Meeting m;
  if (plan.group_size >= nodes) {
    auto joined = session::Session::open(store, plan.so);
    if (!joined) {
      notes.push_back(joined.error().message());
      store.cleanup();  // a closed session cleans up itself, and then writes the "closed" marker that must stay
      return m;
    }
    m.observers = std::move(*joined);
    rq.op.timeout = step_timeout(3);
    auto g = m.observers->two_phase(rq);
    if (!g) {
      notes.push_back(g.error().message());
      return m;
    }
    m.gathered = std::move(*g);
    if (m.gathered->selected.empty()) return m;
    // A stall: every observer holds every node's compact evidence and selects alike.
    rings_rq.select = [&](const session::PositionTable&) { return ring_holders(base, *m.gathered, nodes); };
    rings_rq.decide = [](const session::PositionTable&, const std::map<std::int64_t, session::Bytes>&) {
      return session::Bytes{};
    };
    rings_rq.op.timeout = step_timeout(2);
    auto r = m.observers->two_phase(rings_rq);
    if (!r)
      notes.push_back(fmt::format("rings: {}", r.error().message()));
    else
      m.rings_gathered = std::move(*r);
    return m;
  }
  // Two levels: groups of about group_size observers, and their leaders. The leaders decide (on the same
  // table and evidence) and each sends the verdict down its group; in a stall the first decision is "send
  // the rings", and the leaders decide after the second.
  session::HierarchyOptions ho;
  ho.member = plan.so;
  ho.member.timeout = plan.so.timeout / 3;  // the leaders' level waits twice as long for late groups
  ho.group_size = plan.group_size;
  auto opened = session::Hierarchy::open(store, ho);
  if (!opened) {
    notes.push_back(opened.error().message());
    store.cleanup();
    return m;
  }
  m.hierarchy = std::move(*opened);
  session::TwoPhaseResult first;  // a leader's view of the first gather
  rq.decide = [&](const session::PositionTable& t, const std::map<std::int64_t, session::Bytes>& det) {
    first.selected = select_evidence(t, base.threshold_ns);
    first.table = t;
    first.details = det;
    if (!first.selected.empty()) return encode_next_gather();
    return encode_decision(decide_gathered(base, first, -1, nodes, nullptr, nullptr, seen), first);
  };
  rq.op.timeout = step_timeout(7);
  auto g = m.hierarchy->two_phase(rq);
  if (!g) {
    notes.push_back(g.error().message());
    return m;
  }
  if (!is_next_gather(g->decision)) {
    transport_details["evidence_from"] = g->selected;
    m.leaders_verdict = decode_decision(g->decision);
    m.decision_positions = decode_decision_positions(g->decision);
    return m;
  }
  rings_rq.select = [&](const session::PositionTable&) { return ring_holders(base, first, nodes); };
  rings_rq.decide = [&](const session::PositionTable&, const std::map<std::int64_t, session::Bytes>& det) {
    session::TwoPhaseResult second;
    second.selected = ring_holders(base, first, nodes);
    second.details = det;
    return encode_decision(decide_gathered(base, first, -1, nodes, &second, nullptr, seen), first);
  };
  rings_rq.op.timeout = step_timeout(5);
  auto r = m.hierarchy->two_phase(rings_rq);
  if (!r) {
    notes.push_back(fmt::format("rings: {}", r.error().message()));
    return m;
  }
  transport_details["evidence_from"] = g->selected;
  transport_details["rings_from"] = r->selected;
  m.leaders_verdict = decode_decision(r->decision);
  m.decision_positions = decode_decision_positions(r->decision);
  return m;
}

}  // namespace

Result<Verdict> run_probe(const ProbeOptions& o, const RecordSource& source, ProbeEvidence* seen) {
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t started_ns = realtime_ns();
  auto reads = source();
  if (!reads) return reads.error();
  NodeEvidence local = collect_evidence(*reads, o, -1, realtime_ns());
  auto index = resolve_node_index(o, local);
  if (!index) return index.error();
  local.observer = *index;

  // The token (and so the namespace) must not depend on what this node's records say, or nodes would miss each other.
  auto token = transport::JobToken::load(o.job, o.attempt, o.token_file);
  if (!token) return token.error();
  const std::string ns = token->key_namespace();
  // Every observer decides on exactly what the others receive: the blob, not the richer local copy.
  auto own_blob = serialize(local);
  {
    auto round_trip = deserialize(own_blob);
    if (!round_trip) return internal_error("own evidence does not round-trip", round_trip.error().message());
    local = std::move(*round_trip);
  }
  if (seen) {
    *seen = ProbeEvidence{};
    seen->nodes.assign(static_cast<std::size_t>(o.nodes), std::nullopt);
    seen->nodes[static_cast<std::size_t>(*index)] = local;
    seen->now_ns = local.collected_ns;
  }

  DecisionInput in;
  in.job = o.job;
  in.command = o.command;
  in.mesh = o.mesh;
  in.threshold_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(o.threshold).count();
  in.nodes.assign(static_cast<std::size_t>(o.nodes), std::nullopt);
  nlohmann::json transport_details = {
      {"observer", *index}, {"nodes", o.nodes}, {"authenticated", token->authenticated()}};

  if (o.nodes == 1) {
    in.nodes[0] = local;
    transport_details["store"] = nullptr;
  } else {
    transport_details["store"] = (o.store ? *o.store : transport::default_store_uri(o.job)).text;
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    auto budget = std::max(std::chrono::milliseconds(500), o.timeout - elapsed - std::chrono::milliseconds(100));
    const auto join_began = std::chrono::steady_clock::now();
    auto store = session::join_store(o.job, o.store, o.host_store, *index, o.listen_address, budget * 3 / 4);
    // The store's host waits for the others from when its store is up: the time it took to start it (loading
    // the LibTorch module, seconds on a loaded host) is no time another observer could have joined in. Measured,
    // two observe daemons beside a CI run (load 8-12 on 2 CPUs): observer 0's store came up 3 s into its 10 s
    // probe, its gather closed 3.6 s later, and observer 1, whose own module load took 7 s, reached the store
    // 0.7 s after that: each decided alone.
    const auto hosting_took = store.ok() && store->hosted_here ? std::chrono::steady_clock::now() - join_began
                                                               : std::chrono::steady_clock::duration::zero();
    transport_details["store_hosted_here"] = store.ok() && store->hosted_here;
    std::vector<std::string> notes;
    Meeting meeting;
    if (!store) {
      // No store, no other observer (the store's host dead, frozen or cut off, and no replicated
      // store): it says so in one line and decides on what its own node shows. The other nodes'
      // ranks are missing, never unreachable: a lost store looks like every other node lost, so no
      // other node is named.
      const auto why = fmt::format("cannot reach the store: {}; this verdict is this node's evidence alone",
                                   store.error().message());
      spdlog::warn("{}", why);
      notes.push_back(why);
      transport_details["store_unreachable"] = true;
      transport_details["notes"] = notes;
      in.nodes.assign(1, local);
      in.now_ns = agreed_now(in.nodes);
      if (auto checked = check_decision_input(in); !checked) return checked.error();
      if (seen) *seen = ProbeEvidence{in.nodes, {}, in.now_ns, true};
      Verdict v = decide(in);
      v.details["transport"] = transport_details;
      return v;
    } else {
      elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start -
                                                                      hosting_took);
      // The store's host waits a whole --timeout from when its store is up: the others spent the time before
      // the join too, and after it still load the LibTorch module that speaks its store (seconds under load).
      // Measured, 5 namespace nodes x 1 rank, torchrun's store gone with node 0's agent (load 11-14): observer 0
      // hosted it at the same address and closed its gather 4.4 s later, alone; observers 1-4 had found it up,
      // loaded the module, and then tried for 7 s to reach a store no longer there (campaign seed 47301).
      auto gather_timeout = store->hosted_here ? o.timeout - std::chrono::milliseconds(150)
                                               : std::max(std::chrono::milliseconds(300),
                                                          o.timeout - elapsed - std::chrono::milliseconds(150));
      MeetingPlan plan;
      plan.deadline = std::chrono::steady_clock::now() + gather_timeout;
      plan.so.key_namespace = ns;
      plan.so.member = *index;
      plan.so.id_space = o.nodes;
      plan.so.timeout = gather_timeout;
      plan.so.listen_address = store->listen_address;
      plan.so.signer = &*token;
      plan.base = in;  // no node's evidence yet, no strays
      plan.nodes = o.nodes;
      plan.group_size = observer_group_size(o.nodes, o.observer_group_size);
      transport_details["observer_group_size"] = std::min(plan.group_size, o.nodes);
      // Announce this observer where any observer of the job looks, whatever its token: one
      // that was kept out of the session by its token is still seen, and reported.
      const auto self = session::presence_of(*token, *index, session::host_name());
      std::string presence_key;
      // Every node's compact position first; where the positions do not prove the job healthy
      // (a stall), every node's compact evidence (rings by digest), then the full evidence of one
      // node per distinct ring (position.hpp).
      const auto compact_blob = serialize(compact_evidence(local));
      session::TwoPhaseRequest rq;
      rq.name = "evidence";
      rq.position = encode_node_position(local);
      rq.position_bytes = k_node_position_bytes;
      rq.details = [&compact_blob] { return compact_blob; };
      rq.select = [&in](const session::PositionTable& t) { return select_evidence(t, in.threshold_ns); };
      rq.decide = [](const session::PositionTable&, const std::map<std::int64_t, session::Bytes>&) {
        return session::Bytes{};  // a flat session's observers each decide, on the same table and evidence
      };
      rq.op.limits = o.evidence_limits;
      // The rings' gather: no position of its own; its selection comes from the first gather's details.
      session::TwoPhaseRequest rings_rq;
      rings_rq.name = "rings";
      rings_rq.position = session::Bytes{0};
      rings_rq.position_bytes = 1;
      rings_rq.details = [&own_blob] { return own_blob; };
      rings_rq.op.limits = o.evidence_limits;
      plan.evidence = &rq;
      plan.rings = &rings_rq;
      // At most one rejoin: a tcp:// store that went away after this observer joined it (torchrun's agent exits
      // with its store seconds after a node's loss; observer 0 then hosts it at the same address).
      for (int attempt = 0;; ++attempt) {
        if (auto a = session::announce(*store->store, *token, self,
                                       std::min(gather_timeout / 4, std::chrono::milliseconds(2000)));
            !a)
          notes.push_back(fmt::format("presence: {}", a.error().message()));
        else
          presence_key = *a;
        meeting = meet(*store->store, plan, notes, transport_details, seen);
        if (attempt > 0 || meeting.met_another(*index)) break;
        auto rejoin_budget = std::chrono::duration_cast<std::chrono::milliseconds>(
            start + o.timeout - std::chrono::steady_clock::now() - std::chrono::milliseconds(150));
        if (rejoin_budget < session::k_least_rejoin_time || !session::store_went_away(*store)) break;
        meeting.add_notes(notes);
        meeting = Meeting{};  // each session holds the store it formed on
        presence_key.clear();
        auto again = session::rejoin_store(o.job, *store, o.host_store, *index, o.listen_address, rejoin_budget, notes);
        if (!again) {
          transport_details["store_unreachable"] = true;
          break;
        }
        store = std::move(again);
        transport_details["store_rejoined"] = true;
        transport_details["store_hosted_here"] = store->hosted_here;
        // What is left of the probe's timeout, yet time enough to meet: a rejoin may end a little past --timeout.
        gather_timeout =
            std::max(session::k_least_rejoin_time * 2,
                     std::chrono::duration_cast<std::chrono::milliseconds>(
                         start + o.timeout - std::chrono::steady_clock::now() - std::chrono::milliseconds(150)));
        plan.deadline = std::chrono::steady_clock::now() + gather_timeout;
        plan.so.timeout = gather_timeout;
      }
      // Who else announced itself, read once the gather is over (strays wait out their own
      // timeout) and before the session closes: closing waits for every member's "closed"
      // marker, so an observer hosting a tcp:// store keeps it up until the others have read.
      elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      const auto max_age =
          std::max(std::chrono::nanoseconds(std::chrono::seconds(60)), 3 * std::chrono::nanoseconds(o.timeout));
      auto scan = session::scan_strays(
          *store->store, *token, self,
          std::max(std::chrono::milliseconds(100), o.timeout - elapsed - std::chrono::milliseconds(50)), max_age);
      if (!scan) {
        notes.push_back(fmt::format("presence: {}", scan.error().message()));
      } else {
        for (auto& n : scan->notes) notes.push_back(n);
        for (const auto& r : scan->rejections) in.rejected.push_back(adapt(r));
      }
      // Met nobody: peers that are down, or peers that hold another token or probe another
      // attempt? The latter announced themselves meanwhile (their entries stay, marked ended).
      std::optional<Error> kept_out;
      const bool met = meeting.met_another(*index);
      // Read until the probe's own deadline: such an observer may start a little after this one.
      const auto look_until = start + o.timeout - std::chrono::milliseconds(100);
      while (!met && !kept_out) {
        auto others =
            session::scan_strays(*store->store, *token, self, std::chrono::milliseconds(1000), max_age, started_ns);
        if (others && !others->rejections.empty()) kept_out = met_nobody_error(o, *index, others->rejections);
        if (std::chrono::steady_clock::now() + std::chrono::milliseconds(300) >= look_until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      if (const auto& observers = meeting.observers) {
        observers->close();
        transport_details["generation"] = observers->generation();
        transport_details["rounds"] = observers->rounds();
        transport_details["connections"] = observers->traffic().connections;
        transport_details["bytes_in"] = observers->traffic().bytes_in;
        transport_details["bytes_out"] = observers->traffic().bytes_out;
      }
      if (const auto& hierarchy = meeting.hierarchy) {
        hierarchy->close();
        transport_details["generation"] = hierarchy->group().generation();
        transport_details["rounds"] = hierarchy->group().rounds();
        transport_details["group"] = hierarchy->group_index();
        transport_details["leads"] = hierarchy->leads();
        transport_details["connections"] = hierarchy->traffic().connections;
        transport_details["bytes_in"] = hierarchy->traffic().bytes_in;
        transport_details["bytes_out"] = hierarchy->traffic().bytes_out;
      }
      meeting.add_notes(notes);
      if (!presence_key.empty())
        if (auto e = session::end_announcement(*store->store, presence_key, self); !e)
          notes.push_back(fmt::format("presence: {}", e.error().message()));
      if (kept_out) return *kept_out;
    }
    if (meeting.leaders_verdict && !*meeting.leaders_verdict &&
        meeting.leaders_verdict->error().code != ExitCode::usage) {
      // A decision that does not decode: this observer decides on what it has.
      notes.push_back(fmt::format("the leaders' decision: {}", meeting.leaders_verdict->error().message()));
      meeting.leaders_verdict.reset();
    }
    transport_details["notes"] = notes;
    if (meeting.leaders_verdict) {
      if (!*meeting.leaders_verdict) return meeting.leaders_verdict->error();
      if (seen && meeting.hierarchy && !meeting.hierarchy->leads()) {
        // A member holds its own node's evidence and, from the leaders' decision, every node's position.
        seen->positions = std::move(meeting.decision_positions);
        for (const auto& p : seen->positions)
          if (p) seen->now_ns = std::max(seen->now_ns, p->collected_ns);
      }
      if (seen && !seen->nodes[static_cast<std::size_t>(*index)]) seen->nodes[static_cast<std::size_t>(*index)] = local;
      Verdict v = std::move(meeting.leaders_verdict->value());
      add_rejected(v, in.rejected);  // the strays this observer saw
      v.details["transport"] = transport_details;
      return v;
    }
    if (meeting.gathered) {
      transport_details["evidence_from"] = meeting.gathered->selected;  // positions alone decided where this is empty
      // Every observer decides on what the others hold: its own node in the form it sent.
      // (Where the rings' gather failed it keeps its own rings: they are all it can still use.)
      const bool own_rings =
          !meeting.rings_gathered ||
          std::binary_search(meeting.rings_gathered->selected.begin(), meeting.rings_gathered->selected.end(), *index);
      in.nodes[*index] = meeting.gathered->selected.empty() || own_rings ? local : compact_evidence(local);
      if (meeting.rings_gathered) transport_details["rings_from"] = meeting.rings_gathered->selected;
      RingRestore restored;
      auto v = decide_gathered(std::move(in), *meeting.gathered, *index, o.nodes,
                               meeting.rings_gathered ? &*meeting.rings_gathered : nullptr, &restored, seen);
      if (v) {
        if (!meeting.gathered->selected.empty())
          transport_details["rings_restored"] = {{"ranks", restored.restored}, {"lost", restored.lost}};
        v->details["transport"] = transport_details;
      }
      return v;
    }
    in.nodes[*index] = local;
  }
  in.now_ns = agreed_now(in.nodes);
  if (auto checked = check_decision_input(in); !checked) return checked.error();
  if (seen) *seen = ProbeEvidence{in.nodes, {}, in.now_ns, false};
  Verdict v = decide(in);
  v.details["transport"] = transport_details;
  return v;
}

}  // namespace scout::hang
