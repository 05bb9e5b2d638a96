#include "lib/hang/decide.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "lib/common/hex.hpp"
#include "lib/consensus/c3.hpp"
#include "lib/hang/position.hpp"
#include "lib/hang/silence.hpp"
#include "lib/records/json.hpp"
#include "lib/records/layout.hpp"
#include "lib/records/snapshot_codec.hpp"
#include "lib/report/c3_suspects.hpp"

namespace scout::hang {

using nlohmann::json;
using records::CollectiveState;
using records::RankSnapshot;

std::string_view hang_kind_name(HangKind kind) {
  switch (kind) {
    case HangKind::healthy:
      return "healthy";
    case HangKind::rank_local_divergence:
      return "rank_local_divergence";
    case HangKind::control_flow_divergence:
      return "control_flow_divergence";
    case HangKind::argument_divergence:
      return "argument_divergence";
    case HangKind::stopped_rank:
      return "stopped_rank";
    case HangKind::dead_rank:
      return "dead_rank";
    case HangKind::uninterruptible_rank:
      return "uninterruptible_rank";
    case HangKind::node_unreachable:
      return "node_unreachable";
    case HangKind::group_stall:
      return "group_stall";
    case HangKind::inconclusive:
      return "inconclusive";
    case HangKind::no_evidence:
      return "no_evidence";
  }
  return "inconclusive";
}

std::int64_t agreed_now(const std::vector<std::optional<NodeEvidence>>& nodes) {
  std::int64_t now = 0;
  for (const auto& n : nodes)
    if (n) now = std::max(now, n->collected_ns);
  return now;
}

Status check_decision_input(const DecisionInput& in, std::int64_t positions_world) {
  if (!in.mesh) return Ok{};
  std::int64_t records_world = positions_world;
  for (const auto& n : in.nodes) {
    if (!n) continue;
    for (const auto& r : n->ranks) records_world = std::max(records_world, r.snapshot.world_size);
    for (const auto& i : n->issues) records_world = std::max(records_world, i.world_size);
  }
  if (records_world > 0 && records_world != in.mesh->world_size())
    return usage_error(
        fmt::format("--mesh {} has {} ranks, but the records of job '{}' are from a world of {}",
                    in.mesh->spec().empty() ? std::string("dp=1") : in.mesh->spec(), in.mesh->world_size(), in.job,
                    records_world),
        "comparing a part of the job, or a wrong mesh, would compare ranks that are not peers",
        fmt::format("give the job's own mesh (the trainers' SCOUT_MESH) with sizes multiplying to {}, or "
                    "leave --mesh out to infer it from the records",
                    records_world));
  return Ok{};
}

namespace {

// ===================================================================================
// Helpers shared by the stages
// ===================================================================================

// One rank as the decision sees it.
struct RankView {
  const RankEvidence* evidence = nullptr;  // null: no snapshot
  const std::string* node = nullptr;       // its node's name (owned by the input); null: none
  const RecordIssue* issue = nullptr;      // a record problem naming this rank
  bool unreachable = false;                // its observer may be one that never answered
};

bool in_call(const RankSnapshot& s) {
  return s.collective_state == CollectiveState::entering || s.collective_state == CollectiveState::inside ||
         s.collective_state == CollectiveState::failed;
}

bool has_call(const RankSnapshot& s) {
  return s.collective_state != CollectiveState::none && s.pending.group_seq > 0;
}

double seconds(std::int64_t ns) {
  return static_cast<double>(ns) / 1e9;
}

// A 64-bit id as JSON: the one spelling (lib/common/hex.hpp).
std::string hex_id(std::uint64_t id) {
  return hex64(id);
}

std::int64_t last_progress(const RankSnapshot& s) {
  return last_progress_ns(s);
}

using records::fingerprint_json;

bool same_call(const records::Fingerprint& a, const records::Fingerprint& b) {
  return a.type == b.type && a.dtype == b.dtype && a.count == b.count && a.root_or_op == b.root_or_op;
}

std::string process_reason(const ProcessEvidence& p) {
  switch (p.state) {
    case ProcessState::stopped:
      return "process_stopped";
    case ProcessState::exited:
      return p.signal != 0 ? "process_killed_by_signal" : "process_exited";
    case ProcessState::gone:
      return "process_gone";
    case ProcessState::disk_sleep:
      return "process_in_uninterruptible_sleep";
    default:
      return "process_state";
  }
}

json process_json(const ProcessEvidence& p, std::int64_t pid) {
  json j = {{"state", process_state_name(p.state)}, {"pid", pid}};
  if (p.raw_state != '?') j["raw_state"] = std::string(1, p.raw_state);
  if (p.exit_code >= 0) j["exit_code"] = p.exit_code;
  if (p.signal != 0) j["signal"] = p.signal;
  if (p.pid_reused) j["pid_reused"] = true;
  if (!p.detail.empty()) j["detail"] = p.detail;
  return j;
}

// Up to this many ranks the verdict lists every rank's row and every group's
// values per member; beyond, only what stands out (see render()).
constexpr std::int64_t k_max_rank_rows = 4096;
// Beyond this many members a group's `values` lists each distinct value once
// (with its count, and the ranks holding it unless it is the majority's), and
// a finding names the group by index and size instead of listing its members.
constexpr std::size_t k_max_group_values = 256;
// At most this many waits are listed in details.waits.
constexpr std::size_t k_max_listed_waits = 256;

// Infers the mesh from the records' coordinates when they are consistent with
// row-major placement in some order of the dims in use (the canonical order
// first: SCOUT_MESH=dp=2,pp=2,tp=2 places tp fastest, dp=2,tp=2,pp=2 pp);
// otherwise every rank is a data-parallel replica.
Mesh infer_mesh(std::int64_t world, const std::vector<RankView>& views, std::string& how) {
  Coords sizes{1, 1, 1, 1, 1, 1};
  bool any = false;
  for (const auto& v : views) {
    if (!v.evidence) continue;
    any = true;
    for (int d = 0; d < k_dim_count; ++d) sizes[d] = std::max(sizes[d], v.evidence->snapshot.coords[d] + 1);
  }
  std::int64_t product = 1;
  for (auto s : sizes) product *= s;
  if (any && product == world && product > 1) {
    auto m = mesh_from_coordinates(sizes, [&](const Mesh& mesh) {
      for (std::size_t r = 0; r < views.size(); ++r)
        if (views[r].evidence) {
          Coords c;
          for (int d = 0; d < k_dim_count; ++d) c[d] = views[r].evidence->snapshot.coords[d];
          if (mesh.rank(c) != static_cast<std::int64_t>(r)) return false;
        }
      return true;
    });
    if (m) {
      how = "records";
      return *m;
    }
  }
  how = "default";
  return *Mesh::parse(fmt::format("dp={}", world));
}

// A suspect found by the stages, before it becomes a Suspect.
struct Finding {
  std::string reason;
  HangKind kind = HangKind::inconclusive;
  json evidence = json::object();
};

// ===================================================================================
// Stage 1: gather views
// ===================================================================================

struct Views {
  std::vector<RankView> ranks;
  std::int64_t world = 0;
  std::vector<std::int64_t> reached_obs, unreachable_obs, missing;
  std::map<std::string, const RecordIssue*> issues;  // by segment
  std::vector<json> conflicts;
};

// One view per rank of the job from every reachable observer's evidence (the
// record with the newest heartbeat wins when two observers report a rank),
// the record problems naming ranks without one, and the world size (--mesh's,
// else the largest the records name).
Views gather_views(const DecisionInput& in) {
  Views out;
  struct Seen {
    const RankEvidence* evidence = nullptr;
    const std::string* node = nullptr;
  };
  std::size_t rank_count = 0;
  for (const auto& n : in.nodes)
    if (n) rank_count += n->ranks.size();
  // Ranks in [0, dense_limit) in a vector; any other rank a blob names in a map.
  const std::int64_t dense_limit = static_cast<std::int64_t>(16 * rank_count + 4096);
  std::vector<Seen> dense;
  std::unordered_map<std::int64_t, Seen> sparse;
  auto slot = [&](std::int64_t r) -> std::pair<Seen*, bool> {
    if (r >= 0 && r < dense_limit) {
      if (static_cast<std::size_t>(r) >= dense.size())
        dense.resize(std::max<std::size_t>(r + 1, dense.size() * 2), Seen{});
      Seen& e = dense[r];
      return {&e, e.evidence == nullptr};
    }
    auto [it, fresh] = sparse.try_emplace(r, Seen{});
    return {&it->second, fresh};
  };
  for (std::size_t i = 0; i < in.nodes.size(); ++i) {
    const auto& n = in.nodes[i];
    if (!n) {
      out.unreachable_obs.push_back(static_cast<std::int64_t>(i));
      continue;
    }
    out.reached_obs.push_back(static_cast<std::int64_t>(i));
    for (const auto& re : n->ranks) {
      const auto& s = re.snapshot;
      const std::string* node = s.host.empty() ? &n->node : &s.host;
      auto [seen, fresh] = slot(s.rank);
      if (!fresh) {
        out.conflicts.push_back({{"rank", s.rank}, {"nodes", {*seen->node, n->node}}});
        if (s.heartbeat_ns <= seen->evidence->snapshot.heartbeat_ns) continue;
      }
      *seen = Seen{&re, node};
    }
    for (const auto& issue : n->issues) out.issues.try_emplace(issue.segment, &issue);
  }
  auto for_each_seen = [&](auto&& fn) {
    for (std::size_t r = 0; r < dense.size(); ++r)
      if (dense[r].evidence) fn(static_cast<std::int64_t>(r), dense[r]);
    for (const auto& [r, e] : sparse) fn(r, e);
  };
  std::int64_t world = 0;
  for_each_seen([&](std::int64_t r, const Seen& e) {
    world = std::max({world, e.evidence->snapshot.world_size, r + 1});
  });
  if (in.mesh) world = in.mesh->world_size();
  for (const auto& [seg, issue] : out.issues)
    if (!in.mesh && issue->rank >= world && issue->rank < k_max_world_size) world = issue->rank + 1;
  out.world = world;
  if (world <= 0) return out;
  out.ranks.resize(static_cast<std::size_t>(world));
  for_each_seen([&](std::int64_t r, const Seen& e) {
    if (r < 0 || r >= world) return;
    out.ranks[r].evidence = e.evidence;
    out.ranks[r].node = e.node;
  });
  for (const auto& [seg, issue] : out.issues)
    if (issue->rank >= 0 && issue->rank < world && !out.ranks[issue->rank].evidence)
      out.ranks[issue->rank].issue = issue;
  for (std::int64_t r = 0; r < world; ++r)
    if (!out.ranks[r].evidence && !out.ranks[r].issue) {
      if (!out.unreachable_obs.empty())
        out.ranks[r].unreachable = true;
      else
        out.missing.push_back(r);
    }
  return out;
}

// ===================================================================================
// Stage 2: find positions
// ===================================================================================

// What a process group is to the ranks in it: a mesh dimension (tp, dp, ...),
// the whole world, or a group the mesh does not know (by its id).
struct Roles {
  struct Group {
    std::uint64_t role = 0;             // role key: 1 + dim index, k_world, or unknown(group id)
    std::vector<std::int64_t> members;  // ascending; empty when unknown
  };
  static constexpr std::uint64_t k_world = 100;
  // The role of a point-to-point pair of pipeline stages (i, j) of a pp group, i < j: replicas'
  // pairs (their own ids, group_id([lo, hi, -2])) are one role, so their sends and receives align.
  static constexpr std::uint64_t k_stage_pair = 1000;
  static constexpr std::uint64_t k_max_stages = 1 << 16;
  static std::uint64_t stage_pair(std::uint64_t i, std::uint64_t j) { return k_stage_pair + i * k_max_stages + j; }
  // The role of a group the mesh does not know: its own id, kept apart from the known roles.
  static std::uint64_t unknown(std::uint64_t group) { return group | (std::uint64_t{1} << 63); }
  std::unordered_map<std::uint64_t, Group> by_id;

  std::uint64_t role(std::uint64_t group) const {
    auto it = by_id.find(group);
    return it == by_id.end() ? unknown(group) : it->second.role;
  }
  bool known(std::uint64_t group) const { return by_id.count(group) != 0; }
  static std::string name(std::uint64_t role, std::uint64_t group) {
    if (role >= 1 && role <= static_cast<std::uint64_t>(k_dim_count))
      return std::string(dim_name(k_all_dims[role - 1]));
    if (role == k_world) return "world";
    if (role >= k_stage_pair && role < (std::uint64_t{1} << 63)) {
      const auto pair = role - k_stage_pair;
      return fmt::format("pp pair {}-{}", pair / k_max_stages, pair % k_max_stages);
    }
    return "pg " + hex64(group);
  }
};

// The group ids a publisher computes (records::layout::group_id over the
// members in ascending order) for every process group of `mesh`, and the world.
Roles make_roles(const Mesh& mesh) {
  Roles roles;
  for (int d = 0; d < k_dim_count; ++d) {
    if (mesh.size(k_all_dims[d]) <= 1) continue;
    for (auto& g : mesh.process_groups(k_all_dims[d])) {
      auto id = records::layout::group_id(g.data(), g.size());
      roles.by_id.try_emplace(id, Roles::Group{static_cast<std::uint64_t>(d + 1), std::move(g)});
    }
  }
  // Pipeline stages talk point to point with their neighbours (and the last with the first, for
  // interleaved schedules): each such pair's id, the publisher's (records::layout::group_id over
  // [lo, hi, -2]), with its members and a role per pair of stage indices. O(world) entries.
  if (const auto stages = mesh.size(Dim::pp); stages > 1 && static_cast<std::uint64_t>(stages) <= Roles::k_max_stages)
    for (const auto& g : mesh.process_groups(Dim::pp))
      for (std::size_t i = 0; i < g.size(); ++i) {
        const std::size_t j = (i + 1) % g.size();
        if (j == i) continue;
        const std::int64_t pair[3] = {std::min(g[i], g[j]), std::max(g[i], g[j]), -2};
        roles.by_id.try_emplace(records::layout::group_id(pair, 3),
                                Roles::Group{Roles::stage_pair(std::min(i, j), std::max(i, j)), {pair[0], pair[1]}});
      }
  std::vector<std::int64_t> all(static_cast<std::size_t>(mesh.world_size()));
  for (std::int64_t r = 0; r < mesh.world_size(); ++r) all[r] = r;
  auto id = records::layout::group_id(all.data(), all.size());
  roles.by_id.try_emplace(id, Roles::Group{Roles::k_world, std::move(all)});
  return roles;
}

// A rooted call's root (broadcast, reduce, gather, scatter: recorded as a global rank; the peer of
// a send or receive) as its index among the group's members, so that replicas in different groups
// (the tp groups of a dp x tp mesh, the stage pairs of a dp x pp mesh) calling with the same
// group-local root make the same call. Other calls, and roots outside a known group, are kept as
// recorded.
records::Fingerprint group_local(const records::Fingerprint& f, const Roles& roles) {
  using T = records::CollectiveType;
  if (f.type != T::broadcast && f.type != T::reduce && f.type != T::gather && f.type != T::scatter &&
      f.type != T::send && f.type != T::recv)
    return f;
  auto it = roles.by_id.find(f.group);
  if (it == roles.by_id.end()) return f;
  const auto& m = it->second.members;
  auto at = std::lower_bound(m.begin(), m.end(), f.root_or_op);
  if (at == m.end() || *at != f.root_or_op) return f;
  auto out = f;
  out.root_or_op = at - m.begin();
  return out;
}

// One call of a rank's history, with its group's role.
struct Call {
  std::uint64_t group = 0, role = 0, seq = 0;
  records::Fingerprint fingerprint;
  bool failed = false;
};

// A rank's position and the facts about its process.
struct RankPos {
  const RankSnapshot* s = nullptr;  // null: no snapshot
  std::uint64_t role = 0;           // role of the pending call's group
  bool call = false;                // a pending/last call exists
  records::Fingerprint pending;     // the snapshot's pending call, a rooted call's root group-local
  bool entered = false;             // in its pending call (entering, inside, or failed)
  bool failed = false;              // its pending call failed
  bool comm_error = false;          // ending on a communication error (phase comm_error)
  bool dead = false;                // can never progress again
  bool dead_final = false;          // dead when its record was read: the snapshot is its last state
  bool stopped = false, dsleep = false;
  bool silent = false;        // no progress for the threshold
  bool torn_dead = false;     // no snapshot: a torn record whose writer is gone
  bool history_ok = false;    // the ring is a faithful history (no event dropped)
  bool complete = false;      // the ring never wrapped: a group absent from it was never called
  std::vector<Call> history;  // ring (and pending) calls, oldest first
  std::unordered_map<std::uint64_t, std::uint64_t> reached;       // group id -> highest seq entered
  std::unordered_map<std::uint64_t, std::uint64_t> reached_role;  // role -> highest seq entered
  std::uint64_t key = 0;                                          // interned position (role, seq, fingerprint)
};

// The position compared by C3: which call of which kind of group, with its
// arguments. The state (entering, inside, done, failed) and the step are not
// part of it: a rank that finished or failed the call the others are in is
// at the same position.
struct PosKey {
  std::uint64_t role = 0, seq = 0, count = 0;
  std::int64_t root_or_op = 0;
  std::uint8_t type = 0, dtype = 0;
  bool call = false;
  bool operator==(const PosKey&) const = default;
};
struct PosKeyHash {
  std::size_t operator()(const PosKey& p) const {
    std::uint64_t h = 0x9e3779b97f4a7c15ull;
    auto mix = [&](std::uint64_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(p.role);
    mix(p.seq);
    mix(p.count);
    mix(static_cast<std::uint64_t>(p.root_or_op));
    mix((std::uint64_t{p.type} << 16) | (std::uint64_t{p.dtype} << 8) | std::uint64_t{p.call});
    return static_cast<std::size_t>(h);
  }
};

struct Positions {
  Roles roles;
  std::vector<RankPos> ranks;
  std::vector<std::int64_t> key_rank;  // a rank holding each key
  bool stalled = false;
  std::int64_t newest_progress = 0, silent_ns = 0;
};

// Each rank's position (the call it is at, state-free), its call history
// (ring, role-normalized) and its process facts; and whether the job is
// stalled (silent for the threshold, or a process that can never progress).
Positions find_positions(const DecisionInput& in, const Views& views, const Mesh& mesh) {
  Positions out;
  out.roles = make_roles(mesh);
  const std::int64_t world = views.world;
  out.ranks.resize(static_cast<std::size_t>(world));
  bool any_failed = false;
  Silence silence;  // the one silence rule (silence.hpp), shared with `scout observe`
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& view = views.ranks[r];
    auto& p = out.ranks[r];
    if (!view.evidence) {
      p.torn_dead = view.issue && view.issue->problem == "torn" && !view.issue->writer_alive;
      if (view.issue) silence.add_issue(*view.issue);
      continue;
    }
    silence.add_rank(*view.evidence);
    const auto& s = view.evidence->snapshot;
    const auto& proc = view.evidence->process;
    p.s = &s;
    p.call = has_call(s);
    p.role = out.roles.role(s.pending.group);
    p.pending = group_local(s.pending, out.roles);
    p.entered = in_call(s);
    p.failed = s.collective_state == CollectiveState::failed;
    p.comm_error = s.phase == records::Phase::comm_error;
    p.stopped = proc.state == ProcessState::stopped;
    p.dsleep = proc.state == ProcessState::disk_sleep;
    p.dead = is_dead(proc.state);
    p.dead_final = p.dead && !view.evidence->writer_alive;
    p.silent = in.now_ns - last_progress(s) >= in.threshold_ns;
    // A ring the stall's gather could not rebuild (position.hpp) is a history not known.
    const bool ring_known = !view.evidence->ring_lost;
    p.history_ok = s.dropped == 0 && ring_known;
    p.complete = ring_known && s.events <= records::max_encoded_events() && s.events <= s.recent.size() + 1;
    for (const auto& e : s.recent) {
      if (e.fingerprint.group_seq == 0 || e.fingerprint.type == records::CollectiveType::none) continue;
      p.history.push_back({e.fingerprint.group, out.roles.role(e.fingerprint.group), e.fingerprint.group_seq,
                           group_local(e.fingerprint, out.roles), e.failed});
    }
    // The pending call belongs to the history even when the ring lost it.
    if (p.call) {
      bool present = false;
      for (const auto& c : p.history) present |= c.group == s.pending.group && c.seq == s.pending.group_seq;
      if (!present) p.history.push_back({s.pending.group, p.role, s.pending.group_seq, p.pending, p.failed});
    }
    for (const auto& c : p.history) {
      auto& g = p.reached[c.group];
      g = std::max(g, c.seq);
      auto& rr = p.reached_role[c.role];
      rr = std::max(rr, c.seq);
    }
    any_failed |= p.failed;
  }
  out.newest_progress = silence.newest_progress_ns();
  out.silent_ns = silence.silent_ns(in.now_ns);
  // A collective that completed with an error is a stall too: it can never be done.
  // So is a job whose every record is final (each writer gone) with a rank inside a
  // call: nothing can move again, however recent its last progress (post-mortem records; Flight
  // Recorder dumps, written on a failure or timeout: CI, test_torch2_fr exit, probed 0.9 s after the
  // newest entry, was called healthy).
  bool all_final = false, any_inside = false;
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& p = out.ranks[r];
    if (!p.s) continue;
    if (views.ranks[r].evidence->writer_alive) {
      all_final = false;
      break;
    }
    all_final = true;
    any_inside |= p.entered;
  }
  out.stalled = silence.stalled(in.now_ns, in.threshold_ns) || any_failed || (all_final && any_inside);

  std::unordered_map<PosKey, std::uint64_t, PosKeyHash> ids;
  for (std::int64_t r = 0; r < world; ++r) {
    auto& p = out.ranks[r];
    if (!p.s) {
      p.key = out.key_rank.size();
      out.key_rank.push_back(r);
      continue;
    }
    const auto& f = p.pending;
    auto type = static_cast<std::uint8_t>(f.type);
    if (type > static_cast<std::uint8_t>(records::CollectiveType::other)) type = 0xff;
    PosKey k{p.role, f.group_seq, f.count, f.root_or_op, type, f.dtype, p.call};
    auto [it, fresh] = ids.try_emplace(k, out.key_rank.size());
    if (fresh) out.key_rank.push_back(r);
    p.key = it->second;
  }
  return out;
}

// The text of a position, as shown in the groups' values.
std::string position_text(const Positions& pos, const Views& views, std::uint64_t key) {
  const std::int64_t r = pos.key_rank[key];
  const auto& p = pos.ranks[r];
  const auto& view = views.ranks[r];
  if (!p.s) {
    if (view.issue) return fmt::format("record {} (rank {})", view.issue->problem, r);
    return fmt::format("{} (rank {})", view.unreachable ? "unreachable" : "no record", r);
  }
  const auto& f = p.s->pending;
  if (!p.call) return "no collective yet";
  return fmt::format("{} seq {} {} dt{} x{} r{}", Roles::name(p.role, f.group), f.group_seq,
                     records::collective_type_name(f.type), f.dtype, f.count, f.root_or_op);
}

// ===================================================================================
// Stage 3: compare per group
// ===================================================================================

// Where rank `o`'s history first departs from `m`'s, the histories aligned by
// (group role, per-group sequence): a call `o` made that `m` skipped past
// (extra), a call of `m`'s that `o` went past without making (skipped), or
// the same call number with other arguments. nullopt when one history is a
// prefix of the other (a rank behind or ahead on the same path). With
// `structure_only` a call's arguments are not compared, only its type; with
// `ignore_root` its root (a global rank: replicas in different tp groups
// broadcast from different ranks) is not.
std::optional<Finding> history_divergence(const RankPos& o, const RankPos& m, bool structure_only = false,
                                          bool ignore_root = false) {
  const auto& R = o.history;
  const auto& M = m.history;
  auto key = [](const Call& c) { return std::pair{c.role, c.seq}; };
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t> in_m, in_r;
  for (std::size_t i = 0; i < M.size(); ++i) in_m.emplace(key(M[i]), i);
  for (std::size_t i = 0; i < R.size(); ++i) in_r.emplace(key(R[i]), i);
  std::size_t a = 0;
  while (a < R.size() && !in_m.count(key(R[a]))) ++a;
  if (a == R.size()) return std::nullopt;  // no call in common: nothing to align
  std::size_t b = in_m[key(R[a])];
  auto call_json = [](const Call& c) {
    json j = fingerprint_json(c.fingerprint);
    j["role"] = Roles::name(c.role, c.group);
    return j;
  };
  for (; a < R.size() && b < M.size(); ++a, ++b) {
    const Call& rc = R[a];
    const Call& mc = M[b];
    if (key(rc) == key(mc)) {
      auto rf = rc.fingerprint, mf = mc.fingerprint;
      if (ignore_root) rf.root_or_op = mf.root_or_op;
      if (structure_only ? rf.type == mf.type : same_call(rf, mf)) continue;
      json ev = {{"mismatched_call", {{"rank_call", call_json(rc)}, {"majority_call", call_json(mc)}}}};
      if (rf.type != mf.type || rf.root_or_op != mf.root_or_op)
        return Finding{"different_collective", HangKind::control_flow_divergence, ev};
      return Finding{"collective_arguments_differ", HangKind::argument_divergence, ev};
    }
    const bool r_in_m = in_m.count(key(rc)) != 0;
    const bool m_in_r = in_r.count(key(mc)) != 0;
    json ev = {{"rank_call", call_json(rc)}, {"majority_call", call_json(mc)}};
    if (!m_in_r && r_in_m) {
      ev["skipped_call"] = call_json(mc);
      return Finding{"skipped_collective", HangKind::control_flow_divergence, ev};
    }
    if (!r_in_m) {
      ev["extra_call"] = call_json(rc);
      return Finding{m_in_r ? "extra_collective" : "different_collective", HangKind::control_flow_divergence, ev};
    }
    // Both calls exist on the other side, in another order.
    return Finding{"collectives_out_of_order", HangKind::control_flow_divergence, ev};
  }
  return std::nullopt;
}

// The members of `members` whose call history is incompatible (history_divergence,
// either way) with more than half of the group: ranks of one program whose own
// history departs from everyone else's, wherever they now wait. Innocent ranks'
// histories are prefixes of each other (they are at different points of the same
// path), so a strict minority of diverged ranks is all this can name. Ranks with
// dropped events are neither judged nor used as references; beyond 64 members
// each is compared with an evenly spread sample of 32. `structure_only`: the
// members run one program with other arguments (the ranks of a pipeline stage
// at different tp coordinates hold shards of other sizes, and a broadcast
// within each tp group has its own root): the order and type of the calls is
// compared, not their arguments.
std::vector<std::pair<std::int64_t, Finding>> history_outliers(const Positions& pos,
                                                               const std::vector<std::int64_t>& members,
                                                               bool structure_only = false) {
  // Ranks with the same history are one class: compared once.
  struct Class {
    std::int64_t rep = -1;
    std::size_t count = 0;
    std::vector<std::int64_t> ranks;
  };
  std::unordered_map<std::uint64_t, std::size_t> by_hash;
  std::vector<Class> classes;
  std::size_t total = 0;
  for (auto r : members) {
    const auto& p = pos.ranks[r];
    if (!p.s || !p.history_ok || p.history.empty()) continue;
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const auto& c : p.history)
      for (std::uint64_t x : {c.role, c.seq, structure_only ? 0 : c.fingerprint.count,
                              structure_only ? 0 : static_cast<std::uint64_t>(c.fingerprint.root_or_op),
                              std::uint64_t{static_cast<std::uint8_t>(c.fingerprint.type)} << 8 |
                                  (structure_only ? 0 : c.fingerprint.dtype)})
        h = (h ^ x) * 0x100000001b3ull;
    auto [it, fresh] = by_hash.try_emplace(h, classes.size());
    if (fresh) classes.push_back({r, 0, {}});
    ++classes[it->second].count;
    classes[it->second].ranks.push_back(r);
    ++total;
  }
  std::vector<std::pair<std::int64_t, Finding>> out;
  if (total < 3 || classes.size() < 2) return out;
  // Beyond 64 classes each is compared with the 32 largest.
  std::vector<std::size_t> refs(classes.size());
  for (std::size_t i = 0; i < refs.size(); ++i) refs[i] = i;
  std::size_t ref_total = total;
  if (refs.size() > 64) {
    std::stable_sort(refs.begin(), refs.end(), [&](auto x, auto y) { return classes[x].count > classes[y].count; });
    refs.resize(32);
    ref_total = 0;
    for (auto i : refs) ref_total += classes[i].count;
  }
  // Pairwise incompatibility of each class with the reference classes.
  std::vector<std::size_t> against(classes.size(), 0);
  std::vector<std::optional<Finding>> first(classes.size());
  std::size_t best_compatible = 0;  // the most ranks one class is compatible with (itself included)
  for (std::size_t ci = 0; ci < classes.size(); ++ci) {
    const auto& c = classes[ci];
    std::size_t compatible = std::find(refs.begin(), refs.end(), ci) != refs.end() ? c.count : 0;
    for (auto di : refs) {
      if (di == ci) continue;
      const auto& d = classes[di];
      auto f = history_divergence(pos.ranks[c.rep], pos.ranks[d.rep], structure_only);
      const bool incompatible = f || history_divergence(pos.ranks[d.rep], pos.ranks[c.rep], structure_only);
      if (!incompatible) {
        compatible += d.count;
        continue;
      }
      against[ci] += d.count;
      if (!first[ci] && f) {
        first[ci] = std::move(f);
        first[ci]->evidence["compared_with"] = d.rep;
      }
    }
    best_compatible = std::max(best_compatible, compatible);
  }
  // Only where the histories of a strict majority agree with each other: then
  // a class more than half of the group disagrees with has diverged.
  if (best_compatible * 2 <= ref_total) return out;
  for (std::size_t ci = 0; ci < classes.size(); ++ci) {
    if (!first[ci] || against[ci] * 2 <= ref_total) continue;
    for (auto r : classes[ci].ranks) {
      Finding g = *first[ci];
      g.evidence["incompatible_with"] = against[ci];
      g.evidence["compared"] = ref_total;
      out.emplace_back(r, std::move(g));
    }
  }
  return out;
}

// A call's arguments as every member must give them: type, dtype, element count, root or op.
using CallArguments = std::tuple<std::uint8_t, std::uint8_t, std::uint64_t, std::int64_t>;
CallArguments call_arguments(const Call* c) {
  const auto& f = c->fingerprint;
  return {static_cast<std::uint8_t>(f.type), f.dtype, f.count, f.root_or_op};
}

// The arguments the ranks in `made` gave one call, counted once per rank: the
// call of a strict majority of `of` ranks (nullptr: none), how many gave it,
// and how many different argument sets there were.
struct ArgumentTally {
  const Call* majority = nullptr;
  std::size_t agreeing = 0;
  std::size_t kinds = 0;
};
ArgumentTally tally_arguments(const std::vector<std::pair<std::int64_t, const Call*>>& made, std::size_t of) {
  std::map<CallArguments, std::pair<std::size_t, const Call*>> tally;
  for (const auto& [r, c] : made) {
    auto& t = tally[call_arguments(c)];
    ++t.first;
    t.second = c;
  }
  ArgumentTally out;
  out.kinds = tally.size();
  for (const auto& [a, t] : tally)
    if (t.first * 2 > of) out.majority = t.second, out.agreeing = t.first;
  return out;
}

// A call made with other arguments where a pipeline stage's replica groups
// are too small for a majority (dp = 2): at one call (group role, per-group
// sequence), rank r's arguments differ from every replica's that made it, while
// a strict majority of the stage's ranks that made it agree on other ones. A
// value that depends on a coordinate (a shard size per tp coordinate, a
// broadcast root per tp group) is shared by the rank's replicas, so it never
// names anyone; one replica with other arguments than its partner is told
// apart by the rest of the stage. At most one finding per rank (its first).
std::vector<std::pair<std::int64_t, Finding>> stage_argument_outliers(const Positions& pos, const Mesh& mesh,
                                                                      const std::vector<std::int64_t>& members) {
  std::vector<std::pair<std::int64_t, Finding>> out;
  if (members.size() < 3) return out;
  // (role, seq) -> (rank, call) of every member that made it.
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<std::pair<std::int64_t, const Call*>>> calls;
  for (auto r : members) {
    const auto& p = pos.ranks[r];
    if (!p.s || !p.history_ok) continue;
    for (const auto& c : p.history) calls[{c.role, c.seq}].emplace_back(r, &c);
  }
  std::set<std::int64_t> named;
  for (const auto& [key, made] : calls) {
    if (made.size() < 3) continue;
    // The stage's majority arguments at this call, counted once (nullptr: no strict majority).
    const Call* majority = tally_arguments(made, made.size()).majority;
    if (!majority) continue;
    std::map<std::int64_t, const Call*> by_rank(made.begin(), made.end());
    for (const auto& [r, c] : made) {
      if (named.count(r) || same_call(majority->fingerprint, c->fingerprint)) continue;
      std::size_t replicas = 0, replicas_differ = 0;
      for (auto q : mesh.peer_group(r)) {
        if (q == r) continue;
        auto it = by_rank.find(q);
        if (it == by_rank.end()) continue;
        ++replicas;
        replicas_differ += !same_call(c->fingerprint, it->second->fingerprint);
      }
      if (replicas == 0 || replicas_differ != replicas) continue;
      json ev = {{"mismatched_call",
                  {{"rank_call", fingerprint_json(c->fingerprint)},
                   {"majority_call", fingerprint_json(majority->fingerprint)}}},
                 {"compared", made.size()}};
      const bool other_type = c->fingerprint.type != majority->fingerprint.type;
      out.emplace_back(r, other_type ? Finding{"different_collective", HangKind::control_flow_divergence, ev}
                                     : Finding{"collective_arguments_differ", HangKind::argument_divergence, ev});
      named.insert(r);
    }
  }
  // Never half the stage or more.
  if (named.size() * 2 >= members.size()) out.clear();
  return out;
}

// Whether every member of a call's group gives it the same arguments (element count, dtype, root or
// reduce op): the reductions, broadcast, barrier and the tensor forms of all-gather and
// reduce-scatter. A list all-gather, an all-to-all, gather, scatter and point-to-point calls may
// differ per member.
bool members_give_same_arguments(records::CollectiveType t) {
  using T = records::CollectiveType;
  return t == T::all_reduce || t == T::broadcast || t == T::reduce || t == T::barrier ||
         t == T::all_gather_into_tensor || t == T::reduce_scatter_tensor;
}

// A call made with other arguments than the rest of its process group, wherever the ranks now
// are: at one call (group, per-group sequence) that three or more members made (their histories,
// pending calls included), a strict majority of the group's members made it with the same
// arguments, a call every member must make alike, and a strict minority with others. Gloo may let
// the majority finish such a call and go on while the rank that differs waits inside it (a 2x2
// pipeline, torch 2.x: the three other ranks left the world all-reduce), so the positions alone
// do not show it. Only groups the mesh knows (their members are known); a group whose ranks count
// one sequence number twice is skipped (two process groups of the same ranks counted apart: publishers
// before twins shared one counter per group id, and gloo's Flight Recorder dumps). At
// most one finding per rank (its first). Only the calls some rank is in (its pending call) are
// compared: a rank that made a call with other arguments is kept there, and one hash lookup per
// event keeps the cost linear in the evidence.
std::vector<std::pair<std::int64_t, Finding>> call_argument_outliers(const Positions& pos) {
  std::vector<std::pair<std::int64_t, Finding>> out;
  auto key_of = [](std::uint64_t group, std::uint64_t seq) { return std::pair{group, seq}; };
  struct KeyHash {
    std::size_t operator()(const std::pair<std::uint64_t, std::uint64_t>& k) const {
      return static_cast<std::size_t>(k.first ^ (k.second * 0x9e3779b97f4a7c15ull));
    }
  };
  // (group, seq) of every pending call of a known group -> (rank, call) of every member that made it.
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>, std::vector<std::pair<std::int64_t, const Call*>>,
                     KeyHash>
      calls;
  for (const auto& p : pos.ranks)
    if (p.s && p.call && pos.roles.known(p.s->pending.group))
      calls.try_emplace(key_of(p.s->pending.group, p.s->pending.group_seq));
  std::set<std::uint64_t> counted_twice;
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(pos.ranks.size()); ++r) {
    const auto& p = pos.ranks[r];
    if (!p.s) continue;
    for (const auto& c : p.history) {
      auto it = calls.find(key_of(c.group, c.seq));
      if (it == calls.end()) continue;
      if (!it->second.empty() && it->second.back().first == r) counted_twice.insert(c.group);
      it->second.emplace_back(r, &c);
    }
  }
  // In a fixed order, so every observer names the same ranks first.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> order;
  for (const auto& [k, made] : calls)
    if (made.size() >= 3) order.push_back(k);
  std::sort(order.begin(), order.end());
  std::set<std::int64_t> named;
  for (const auto& key : order) {
    const auto& made = calls.at(key);
    if (counted_twice.count(key.first)) continue;
    const auto group_size = pos.roles.by_id.at(key.first).members.size();
    const auto tally = tally_arguments(made, group_size);
    const Call* majority = tally.majority;
    if (!majority || tally.kinds < 2 || !members_give_same_arguments(majority->fingerprint.type)) continue;
    for (const auto& [r, c] : made) {
      if (named.count(r) || call_arguments(c) == call_arguments(majority)) continue;
      json ev = {{"mismatched_call",
                  {{"rank_call", fingerprint_json(c->fingerprint)},
                   {"majority_call", fingerprint_json(majority->fingerprint)}}},
                 {"made_by", made.size()},
                 {"agreeing", tally.agreeing},
                 {"group_size", group_size},
                 {"role", Roles::name(c->role, c->group)}};
      const bool other_type = c->fingerprint.type != majority->fingerprint.type;
      out.emplace_back(r, other_type ? Finding{"different_collective", HangKind::control_flow_divergence, ev}
                                     : Finding{"collective_arguments_differ", HangKind::argument_divergence, ev});
      named.insert(r);
    }
  }
  return out;
}

// How the finding of an outlier may be used.
enum class Weight {
  definitive,  // the rank's own calls differ from its peers': named whatever its process does
  position,    // the rank is away from its peers outside any collective: named when it cannot be moving
};

struct Candidate {
  Finding finding;
  Weight weight = Weight::position;
};

// Why outlier `o` is away from the majority position `m` of its group, or
// nullopt when the difference is one a stall produces by itself (a rank
// inside another call, waiting for someone: stage 4 follows that wait).
// `peers`: o and m are peers (replicas), so their calls under one number of a
// role must agree; otherwise (ranks at other tp coordinates, in other groups
// of one role) only calls of one group, the same call, are compared: a shard's
// size or a call's root may depend on the coordinate (a 2x2x2 mesh's stage
// named an innocent tp1 rank against a tp0 rank's shard).
std::optional<Candidate> classify(const RankPos& o, const RankPos& m, bool peers) {
  const auto& os = *o.s;
  const auto& ms = *m.s;
  const auto& of = o.pending;  // roots group-local, as in the histories
  const auto& mf = m.pending;
  json ev = {{"step", os.step},
             {"majority_step", ms.step},
             {"pending", fingerprint_json(os.pending)},
             {"majority_pending", fingerprint_json(ms.pending)},
             {"collective_state", records::collective_state_name(os.collective_state)},
             {"majority_collective_state", records::collective_state_name(ms.collective_state)}};
  if (!m.call) return std::nullopt;
  // Has `o` gone past the majority's call (made it, or a later one of that group)?
  auto reached = o.reached_role.find(m.role);
  const bool passed = reached != o.reached_role.end() && reached->second >= mf.group_seq;
  // Whether o's call `a` and m's call `b` under one number may be compared.
  auto comparable = [&](std::uint64_t a, std::uint64_t b) { return peers || a == b; };
  if (o.role == m.role && of.group_seq == mf.group_seq && o.call) {
    if (!comparable(of.group, mf.group)) return std::nullopt;
    // The same call number with other arguments.
    if (of.type != mf.type || of.root_or_op != mf.root_or_op)
      return Candidate{{"different_collective", HangKind::control_flow_divergence, ev}, Weight::definitive};
    return Candidate{{"collective_arguments_differ", HangKind::argument_divergence, ev}, Weight::definitive};
  }
  if (passed) {
    // It made the majority's call number: with the same arguments it is ahead
    // (a stall, not a cause); with others it made a different call.
    for (const auto& c : o.history)
      if (c.role == m.role && c.seq == mf.group_seq && comparable(c.group, mf.group) && !same_call(c.fingerprint, mf)) {
        ev["mismatched_call"] = {{"rank_call", fingerprint_json(c.fingerprint)},
                                 {"majority_call", fingerprint_json(mf)}};
        if (c.fingerprint.type != mf.type || c.fingerprint.root_or_op != mf.root_or_op)
          return Candidate{{"different_collective", HangKind::control_flow_divergence, ev}, Weight::definitive};
        return Candidate{{"collective_arguments_differ", HangKind::argument_divergence, ev}, Weight::definitive};
      }
    // Ahead in the same group without ever making the majority's call number: skipped it.
    if (o.role == m.role && of.group_seq > mf.group_seq && o.history_ok) {
      bool made = false, older = false;
      for (const auto& c : o.history) {
        made |= c.role == m.role && c.seq == mf.group_seq;
        older |= c.role == m.role && c.seq < mf.group_seq;
      }
      if (!made && older)
        return Candidate{{"skipped_collective", HangKind::control_flow_divergence, ev}, Weight::definitive};
    }
    return std::nullopt;
  }
  if (o.role == m.role && o.call && of.group_seq > mf.group_seq && o.history_ok) {
    bool made = false, older = false;
    for (const auto& c : o.history) {
      made |= c.role == m.role && c.seq == mf.group_seq;
      older |= c.role == m.role && c.seq < mf.group_seq;
    }
    if (!made && older)
      return Candidate{{"skipped_collective", HangKind::control_flow_divergence, ev}, Weight::definitive};
    return std::nullopt;
  }
  // Behind the majority's call.
  if (o.entered) {
    // Inside an earlier call the others finished: a stall, unless they finished a different call under that number.
    for (const auto& c : m.history)
      if (c.role == o.role && c.seq == of.group_seq && comparable(of.group, c.group) && !same_call(c.fingerprint, of)) {
        ev["mismatched_call"] = {{"rank_call", fingerprint_json(of)},
                                 {"majority_call", fingerprint_json(c.fingerprint)}};
        if (c.fingerprint.type != of.type || c.fingerprint.root_or_op != of.root_or_op)
          return Candidate{{"different_collective", HangKind::control_flow_divergence, ev}, Weight::definitive};
        return Candidate{{"collective_arguments_differ", HangKind::argument_divergence, ev}, Weight::definitive};
      }
    return std::nullopt;  // waiting: stage 4
  }
  return Candidate{{"never_entered_collective", HangKind::rank_local_divergence, ev}, Weight::position};
}

struct Comparison {
  std::vector<GroupRun> groups;
  std::map<std::int64_t, Candidate> candidates;  // by rank
  std::vector<char> at_majority;                 // per rank: holds its peer group's majority position
  std::vector<char> outlier;                     // per rank: an outlier of its peer group's position
  bool any_inconclusive = false;
  // Replica groups of two whose call histories depart from each other (other arguments, or
  // another call, under one number): a software divergence neither history can be blamed for.
  struct Split {
    std::int64_t a = -1, b = -1;
    Finding finding;
  };
  std::vector<Split> splits;
};

// C3 over the positions of every peer group and every process group; the
// outliers' reasons (classify); and, among the peers of one replica group,
// the call histories (history_divergence against a peer whose history agrees
// with the majority's), so a skipped or extra call is seen wherever it was.
Comparison compare_groups(const Positions& pos, const Views& views, const Mesh& mesh, bool big_world) {
  Comparison out;
  const std::int64_t world = views.world;
  out.at_majority.assign(static_cast<std::size_t>(world), 0);
  out.outlier.assign(static_cast<std::size_t>(world), 0);
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> compared;
  std::unordered_multimap<std::uint64_t, std::size_t> seen_groups;
  auto add_group = [&](std::string kind, std::vector<std::int64_t> members) {
    if (members.size() < 2) return;
    std::uint64_t digest = members.size();
    for (auto r : members) digest = (digest ^ static_cast<std::uint64_t>(r)) * 0x100000001b3ull;
    auto [lo, hi] = seen_groups.equal_range(digest);
    for (auto it = lo; it != hi; ++it)
      if (compared[it->second].second == members) return;
    seen_groups.emplace(digest, compared.size());
    compared.emplace_back(std::move(kind), std::move(members));
  };
  for (auto& g : mesh.peer_groups()) add_group(std::string(peer_kind_name(mesh.peer_kind())), std::move(g));
  const std::size_t peer_group_count = compared.size();
  for (Dim d : k_all_dims)
    if (mesh.size(d) > 1)
      for (auto& g : mesh.process_groups(d)) add_group(std::string(dim_name(d)), std::move(g));
  // Stage groups: the ranks of one pipeline stage (every dim but pp varies) run the
  // same program of collectives, so their call histories must agree.
  std::vector<std::vector<std::int64_t>> stages(static_cast<std::size_t>(mesh.size(Dim::pp)));
  for (std::int64_t r = 0; r < world; ++r) stages[mesh.coords(r)[static_cast<int>(Dim::pp)]].push_back(r);
  if (stages.size() > 1)
    for (auto g : stages) add_group("stage", g);

  std::vector<std::optional<std::string>> key_text(pos.key_rank.size());
  auto text = [&](std::uint64_t key) -> const std::string& {
    if (!key_text[key]) key_text[key] = position_text(pos, views, key);
    return *key_text[key];
  };
  std::vector<std::uint64_t> keys;
  std::vector<std::pair<std::uint64_t, std::int64_t>> distinct;
  out.groups.reserve(compared.size());
  for (std::size_t gi = 0; gi < compared.size(); ++gi) {
    const auto& [kind, members] = compared[gi];
    const bool peer_group = gi < peer_group_count;
    keys.clear();
    for (auto r : members) keys.push_back(pos.ranks[r].key);
    C3Result res = c3_exact(keys);
    const bool compact = members.size() > k_max_group_values || (big_world && res.status == C3Status::agree);
    json values = json::array();
    if (!compact) {
      for (auto k : keys) values.push_back(text(k));
    } else {
      distinct.clear();
      for (std::size_t i = 0; i < keys.size(); ++i) distinct.emplace_back(keys[i], static_cast<std::int64_t>(i));
      std::stable_sort(distinct.begin(), distinct.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<std::pair<std::int64_t, json>> entries;
      const std::uint64_t majority_key = res.majority_peer >= 0 ? keys[res.majority_peer] : ~std::uint64_t{0};
      for (std::size_t i = 0; i < distinct.size();) {
        std::size_t j = i;
        while (j < distinct.size() && distinct[j].first == distinct[i].first) ++j;
        json entry = {{"value", text(distinct[i].first)}, {"count", j - i}};
        if (distinct[i].first != majority_key || res.status == C3Status::inconclusive) {
          json ranks = json::array();
          for (std::size_t k = i; k < j; ++k) ranks.push_back(members[distinct[k].second]);
          entry["ranks"] = std::move(ranks);
        }
        entries.emplace_back(distinct[i].second, std::move(entry));
        i = j;
      }
      std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (auto& e : entries) values.push_back(std::move(e.second));
    }
    C3Attribution att = attribute_c3(kind, members, C3Mode::exact, res, std::move(values));
    if (compact) att.run.stats["values"] = "distinct";
    std::erase_if(att.run.outliers, [&](std::int64_t r) { return !pos.ranks[r].s; });
    if (!att.decided()) out.any_inconclusive = true;
    auto place = [&](Finding& f) {
      f.evidence["group"] = kind;
      if (members.size() <= k_max_group_values) {
        f.evidence["group_members"] = members;
      } else {
        f.evidence["group_index"] = out.groups.size();
        f.evidence["group_size"] = members.size();
      }
    };
    if (att.majority && pos.ranks[members[*att.majority]].s) {
      const std::uint64_t majority_key = keys[*att.majority];
      if (peer_group)
        for (auto r : members) {
          out.at_majority[r] |= pos.ranks[r].key == majority_key;
          out.outlier[r] |= pos.ranks[r].key != majority_key;
        }
      // Outliers of the position.
      for (auto i : att.outliers) {
        const auto r = members[i];
        if (!pos.ranks[r].s || out.candidates.count(r)) continue;
        const auto m = members[*att.majority];
        const auto peers_of_r = peer_group || mesh.peer_group(r) == mesh.peer_group(m);
        auto c = classify(pos.ranks[r], pos.ranks[m], peers_of_r);
        if (!c) continue;
        place(c->finding);
        out.candidates.emplace(r, std::move(*c));
      }
      // Among the ranks at the majority position: the step of the call (entered ranks only:
      // a rank that finished the call may have begun its next step) ...
      std::vector<std::int64_t> same;
      for (auto r : members)
        if (pos.ranks[r].key == majority_key && pos.ranks[r].entered) same.push_back(r);
      if (same.size() >= 2) {
        std::vector<std::uint64_t> steps;
        for (auto r : same) steps.push_back(pos.ranks[r].s->step);
        C3Result sr = c3_exact(steps);
        if (sr.status == C3Status::attributed)
          for (std::size_t i = 0; i < same.size(); ++i)
            if (sr.outliers[i] && !out.candidates.count(same[i])) {
              const auto& o = *pos.ranks[same[i]].s;
              Finding f{"collective_at_different_step",
                        HangKind::control_flow_divergence,
                        {{"step", o.step},
                         {"majority_step", pos.ranks[same[sr.majority_peer]].s->step},
                         {"pending", fingerprint_json(o.pending)}}};
              place(f);
              out.candidates.emplace(same[i], Candidate{std::move(f), Weight::definitive});
            }
      }
    }
    out.groups.push_back(std::move(att.run));
  }
  // Replica pairs: their histories cannot name either rank, but a departure between them is a
  // software divergence, never a fabric stall (details.replica_splits).
  if (mesh.peer_kind() == PeerKind::replica)
    for (std::size_t gi = 0; gi < peer_group_count && out.splits.size() < k_max_group_values; ++gi) {
      const auto& m = compared[gi].second;
      if (m.size() != 2) continue;
      const auto& pa = pos.ranks[m[0]];
      const auto& pb = pos.ranks[m[1]];
      if (!pa.s || !pb.s || !pa.history_ok || !pb.history_ok) continue;
      auto f = history_divergence(pa, pb, false, true);
      if (!f) f = history_divergence(pb, pa, false, true);
      if (f) out.splits.push_back({m[0], m[1], std::move(*f)});
    }
  // Calls made with other arguments than a strict majority of their group's members.
  for (auto& [r, f] : call_argument_outliers(pos)) {
    if (out.candidates.count(r)) continue;
    f.evidence["group"] = f.evidence["role"];
    f.evidence.erase("role");
    out.candidates.emplace(r, Candidate{std::move(f), Weight::definitive});
  }
  // The call histories, whatever the positions: of every replica group of three
  // or more; of every pipeline stage where the replica groups are smaller (the
  // ranks of one stage run one program of collectives).
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> history_groups;
  const bool small_replicas = mesh.peer_kind() != PeerKind::replica || mesh.size(Dim::dp) < 3;
  if (!small_replicas)
    for (std::size_t gi = 0; gi < peer_group_count; ++gi) history_groups.push_back(compared[gi]);
  else
    for (const auto& g : stages) history_groups.emplace_back("stage", g);
  for (const auto& [hkind, hmembers_all] : history_groups) {
    // A rank already known to have made other calls is no reference for the others' histories.
    std::vector<std::int64_t> hmembers;
    for (auto r : hmembers_all) {
      auto it = out.candidates.find(r);
      if (it == out.candidates.end() || it->second.weight != Weight::definitive) hmembers.push_back(r);
    }
    // A stage's ranks at different tp (cp, ep) coordinates hold shards of other sizes: where
    // their whole calls leave no majority, the order and types of their calls still must agree.
    auto outliers = history_outliers(pos, hmembers);
    if (hkind == "stage" && mesh.peer_kind() == PeerKind::replica) {
      // By whole calls, a stage's majority may be one coordinate's (the tp1 ranks' shards, once a
      // diverged tp0 rank left the references): a rank apart from it is an outlier only when one of
      // its own replicas, which share its coordinates, parts from it too.
      std::set<std::int64_t> refs(hmembers.begin(), hmembers.end());
      std::erase_if(outliers, [&](const auto& o) {
        const auto& p = pos.ranks[o.first];
        for (auto q : mesh.peer_group(o.first)) {
          const auto& qp = pos.ranks[q];
          if (q == o.first || !refs.count(q) || !qp.s || !qp.history_ok || qp.history.empty()) continue;
          if (history_divergence(p, qp) || history_divergence(qp, p)) return false;
        }
        return true;
      });
    }
    if (outliers.empty() && hkind == "stage") outliers = history_outliers(pos, hmembers, true);
    if (outliers.empty() && hkind == "stage" && mesh.peer_kind() == PeerKind::replica)
      outliers = stage_argument_outliers(pos, mesh, hmembers);
    for (const auto& [r, f] : outliers) {
      if (out.candidates.count(r)) continue;
      Finding g = f;
      g.evidence["step"] = pos.ranks[r].s->step;
      g.evidence["pending"] = fingerprint_json(pos.ranks[r].s->pending);
      g.evidence["group"] = hkind;
      if (hmembers_all.size() <= k_max_group_values)
        g.evidence["group_members"] = hmembers_all;
      else
        g.evidence["group_size"] = hmembers_all.size();
      out.candidates.emplace(r, Candidate{std::move(g), Weight::definitive});
    }
  }
  return out;
}

// ===================================================================================
// Stage 4: follow waits
// ===================================================================================

struct Waits {
  struct CallWait {
    std::uint64_t group = 0, seq = 0;
    std::vector<std::int64_t> blockers;  // members that never entered the call
    std::int64_t unseen = 0;             // members without a record
  };
  std::vector<CallWait> calls;        // one per distinct (group, seq) some rank is in
  std::vector<std::int64_t> call_of;  // per rank: index into calls, -1 when in no call
  const std::vector<std::int64_t>& blockers(std::int64_t r) const {
    static const std::vector<std::int64_t> none;
    return call_of.empty() || call_of[r] < 0 ? none : calls[call_of[r]].blockers;
  }
  bool waiting(std::int64_t r) const { return !blockers(r).empty(); }
  // Where the waits of the ranks in `from` end: ranks in no call or in a call every member entered,
  // never going past a rank in `stop` (returned as an end). One pass over the graph.
  std::vector<std::int64_t> ends(const std::vector<std::int64_t>& from, std::int64_t world,
                                 const std::function<bool(std::int64_t)>& stop = {}) const {
    std::vector<char> seen(static_cast<std::size_t>(world), 0);
    std::vector<char> call_seen(calls.size(), 0);
    std::vector<std::int64_t> stack, out;
    for (auto w : from) {
      seen[w] = 1;
      if (call_of[w] >= 0 && !call_seen[call_of[w]]) {
        call_seen[call_of[w]] = 1;
        for (auto b : calls[call_of[w]].blockers) stack.push_back(b);
      }
    }
    while (!stack.empty()) {
      auto b = stack.back();
      stack.pop_back();
      if (seen[b]) continue;
      seen[b] = 1;
      if (!waiting(b) || (stop && stop(b))) {
        out.push_back(b);
        continue;
      }
      if (!call_seen[call_of[b]]) {
        call_seen[call_of[b]] = 1;
        for (auto c : calls[call_of[b]].blockers) stack.push_back(c);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

// For every rank inside (or failed in) a call: the members of that call's
// group that never entered it (their history ends before its number), once per
// distinct call. Following those waits from rank to rank (Waits::ends) ends at
// ranks in no call, or in a call every member entered; a cycle of waits ends nowhere.
Waits follow_waits(const Positions& pos, std::int64_t world) {
  Waits out;
  out.call_of.assign(static_cast<std::size_t>(world), -1);
  // Ranks that mention each group the mesh does not know: its members as far as anyone can tell.
  std::unordered_map<std::uint64_t, std::vector<std::int64_t>> mentioned;
  for (std::int64_t r = 0; r < world; ++r)
    for (const auto& [g, seq] : pos.ranks[r].reached)
      if (!pos.roles.known(g)) mentioned[g].push_back(r);
  for (auto& [g, m] : mentioned) std::sort(m.begin(), m.end());
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::int64_t> index;
  for (std::int64_t w = 0; w < world; ++w) {
    const auto& p = pos.ranks[w];
    if (!p.s || !p.entered || !p.call) continue;
    const auto g = p.s->pending.group;
    const auto q = p.s->pending.group_seq;
    const std::vector<std::int64_t>* members = nullptr;
    if (auto it = pos.roles.by_id.find(g); it != pos.roles.by_id.end())
      members = &it->second.members;
    else if (auto m = mentioned.find(g); m != mentioned.end())
      members = &m->second;
    if (!members || !std::binary_search(members->begin(), members->end(), w)) continue;
    auto [it, fresh] = index.try_emplace({g, q}, static_cast<std::int64_t>(out.calls.size()));
    if (fresh) {
      Waits::CallWait cw{g, q, {}, 0};
      for (auto b : *members) {
        if (b < 0 || b >= world) continue;
        const auto& bp = pos.ranks[b];
        if (!bp.s) {
          ++cw.unseen;
          continue;
        }
        auto rit = bp.reached.find(g);
        if (rit == bp.reached.end() && !bp.complete) continue;  // its history no longer tells
        if ((rit == bp.reached.end() ? 0 : rit->second) < q) cw.blockers.push_back(b);
      }
      out.calls.push_back(std::move(cw));
    }
    out.call_of[w] = it->second;
  }
  return out;
}

// ===================================================================================
// Stage 5: explain
// ===================================================================================

struct Explanation {
  std::map<std::int64_t, Finding> suspects;  // by rank
  json victims = json::array();
  std::vector<std::int64_t> victim_ranks;
  HangKind kind = HangKind::healthy;
};

// How a peer's failure kills a rank: its call fails (recorded), an uncaught
// communication exception aborts it (SIGABRT) or ends it with an error code,
// or a launcher tearing the job down terminates it (SIGTERM, SIGINT, SIGHUP).
// A death by any other signal (SIGKILL, SIGSEGV, SIGBUS, SIGILL, SIGFPE...)
// is never a peer's doing: it came from the rank's own process or from outside.
bool cascade_form_signal(int sig) {
  return sig == SIGABRT || sig == SIGTERM || sig == SIGINT || sig == SIGHUP;
}

// The first failure, when neither a position nor a wait names anyone: a rank
// that died with no failure in its record (its call neither failed nor ended
// on a communication error), while every other death or failure in the job
// did record one. Each victim of a death sees the dead peer's connection close
// and records that; the rank that died first saw nothing. Where several ranks
// died unrecorded, only those whose signal no peer's failure sends are named,
// and only when every unrecorded death's form is known; a lone unrecorded
// SIGABRT among recorded communication errors is how a victim dies, so
// nothing is named then. Never more than a strict minority of the world.
void name_first_failures(const Positions& pos, const Views& views, std::map<std::int64_t, Finding>& suspects) {
  const auto& R = pos.ranks;
  const auto world = static_cast<std::int64_t>(R.size());
  std::vector<std::int64_t> unrecorded;  // dead without a recorded failure
  std::vector<std::int64_t> recorded;    // failed calls and communication errors
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& p = R[r];
    if (!p.s) continue;
    if (p.failed || p.comm_error) {
      recorded.push_back(r);
      continue;
    }
    if (!p.dead_final) continue;  // read while it lived: it may have recorded a failure since
    const auto& proc = views.ranks[r].evidence->process;
    if (proc.exit_code == 0 && proc.signal == 0) continue;  // it ended its program
    unrecorded.push_back(r);
  }
  if (unrecorded.empty()) return;
  std::vector<std::int64_t> named;
  if (unrecorded.size() == 1) {
    // Among recorded failures, a SIGABRT, or a death whose form is unknown (already reaped), may be a
    // victim's: gloo's transport thread aborts on a peer's bad message before the call can fail (CI:
    // world 4, two ranks skipping a call, the peer that received the wrong-sized message named).
    const auto& proc = views.ranks[unrecorded.front()].evidence->process;
    const bool unknown_form = proc.signal == 0 && proc.exit_code < 0;
    if (recorded.empty() || !(proc.signal == SIGABRT || unknown_form)) named = unrecorded;
  } else {
    for (auto r : unrecorded) {
      const auto& proc = views.ranks[r].evidence->process;
      if (proc.signal == 0 && proc.exit_code < 0) return;  // a death of unknown form: it may be the cascade's
      if (proc.signal != 0 && !cascade_form_signal(proc.signal)) named.push_back(r);
    }
  }
  if (named.empty() || static_cast<std::int64_t>(named.size()) * 2 >= world) return;
  for (auto r : named) {
    json failed_after = json::array();
    for (auto f : recorded) {
      if (failed_after.size() >= k_max_group_values) break;
      failed_after.push_back(f);
    }
    const auto& s = *R[r].s;
    suspects.emplace(
        r, Finding{process_reason(views.ranks[r].evidence->process),
                   HangKind::dead_rank,
                   {{"first_failure",
                     {{"why", "died with no failure in its record, while every other failed rank recorded one"},
                      {"collective_state", records::collective_state_name(s.collective_state)},
                      {"failed_after", std::move(failed_after)}}}}});
  }
}

// Names the ranks the evidence singles out, never one whose state the others
// explain: a rank's own calls that differ from its peers' (definitive); a
// stopped process; a rank away from its peers outside any collective that
// cannot be moving (dead when read, stopped, or silent); the end of a chain
// of waits when that rank is such a rank. Every other dead or failed rank is
// a victim: it died at its peers' position, or waiting for a named rank.
Explanation explain(const Positions& pos, const Comparison& cmp, const Waits& waits, const Views& views, bool stalled) {
  Explanation out;
  const std::int64_t world = views.world;
  const auto& R = pos.ranks;
  auto cannot_move = [&](std::int64_t r) { return R[r].dead_final || R[r].stopped || (!R[r].dead && R[r].silent); };
  // A dead rank whose record still shows it inside a call that every other member finished with the
  // same arguments, without a failure, and left: the call did not keep it, so it died between that
  // call and the next, and a wait ending at it is explained by it (CI, HSDP 2x2 seed 1871708941: the
  // rank that exited after its replica all-reduce, before publishing the completion, was a victim).
  // A member's history may hold two calls at one (group, seq) where process groups with the same
  // members shared an id but counted calls apart (DeepSpeed's pipeline groups, under publishers before
  // twins shared one counter per id, and gloo's Flight Recorder dumps); the one with the same arguments
  // is that call. Not a SIGABRT: gloo aborts a victim from its transport thread.
  auto left_in_finished_call = [&](std::int64_t r) {
    const auto& p = R[r];
    if (!p.s || !p.entered || !p.dead_final || p.failed || p.comm_error) return false;
    if (views.ranks[r].evidence->process.signal == SIGABRT) return false;
    const auto g = p.s->pending.group;
    const auto q = p.s->pending.group_seq;
    auto it = pos.roles.by_id.find(g);
    if (it == pos.roles.by_id.end() || it->second.members.size() < 2) return false;
    for (auto m : it->second.members) {
      if (m == r) continue;
      if (m < 0 || m >= world || !R[m].s) return false;
      const auto& mp = R[m];
      if (mp.s->pending.group == g && mp.s->pending.group_seq == q) return false;  // still there
      bool done = false;
      for (const auto& c : mp.history)
        if (c.group == g && c.seq == q && same_call(c.fingerprint, p.pending)) {
          if (c.failed) return false;
          done = true;
        }
      if (!done) return false;
    }
    return true;
  };
  // A dead rank whose own record shows that its pending call completed: the ring's newest entry for
  // it carries an exit and no failure. Its state still reads "inside" while an earlier Work that
  // publishes no completion (a gloo send or recv) counts as in flight; and a call of a group of one
  // (Megatron's data-parallel group at dp=1) has no other member to have finished it
  // (test_torch2_frameworks: tp x pp, the rank that exited after that all-reduce). Not a SIGABRT.
  auto left_own_call = [&](std::int64_t r) {
    const auto& p = R[r];
    if (!p.s || !p.entered || !p.dead_final || p.failed || p.comm_error) return false;
    if (views.ranks[r].evidence->process.signal == SIGABRT) return false;
    const auto& s = *p.s;
    for (auto e = s.recent.rbegin(); e != s.recent.rend(); ++e)
      if (e->fingerprint.group == s.pending.group && e->fingerprint.group_seq == s.pending.group_seq &&
          same_call(e->fingerprint, s.pending))
        return e->exit_ns != 0 && !e->failed;
    return false;
  };
  // Why a dead rank inside a call is not kept there ("" when it may be).
  auto left_its_call = [&](std::int64_t r) -> std::string_view {
    if (left_own_call(r)) return "its own record shows it completed this call";
    if (left_in_finished_call(r)) return "every other member finished and left this call";
    return {};
  };
  // Definitive differences first, then ranks away from their peers.
  for (const auto& [r, c] : cmp.candidates) {
    if (c.weight == Weight::definitive) {
      out.suspects.emplace(r, c.finding);
      continue;
    }
    // A rank outside any collective: it explains the others' wait only if it
    // cannot be moving, and did not end on a communication error (a peer's
    // failure reached it in a call it does not record: a victim).
    if (!R[r].entered && cannot_move(r) && !R[r].comm_error) out.suspects.emplace(r, c.finding);
  }
  // The ends of wait chains, followed from ranks that are not suspects themselves
  // (a diverged rank's own wait says nothing of the ranks it waits for) and
  // stopping at suspects. A rank that exited cleanly (exit code 0) ended its
  // program: it is not where a chain of waits is explained.
  if (stalled) {
    std::vector<std::int64_t> from;
    for (std::int64_t w = 0; w < world; ++w)
      if (waits.waiting(w) && !out.suspects.count(w)) from.push_back(w);
    // Ranks waiting in each call, and the calls each rank blocks.
    std::vector<std::vector<std::int64_t>> in_call(waits.calls.size());
    for (std::int64_t w = 0; w < world; ++w)
      if (waits.call_of[w] >= 0 && in_call[waits.call_of[w]].size() < k_max_group_values)
        in_call[waits.call_of[w]].push_back(w);
    std::unordered_map<std::int64_t, std::vector<std::size_t>> blocks;
    for (std::size_t c = 0; c < waits.calls.size(); ++c)
      for (auto b : waits.calls[c].blockers) blocks[b].push_back(c);
    std::map<std::int64_t, std::vector<std::int64_t>> blocked_by;  // end of a chain -> ranks waiting for it directly
    for (auto b : waits.ends(from, world, [&](std::int64_t r) { return out.suspects.count(r) != 0; })) {
      if (out.suspects.count(b) || (R[b].entered && left_its_call(b).empty()) || !R[b].s || !cannot_move(b) ||
          R[b].comm_error)
        continue;
      auto& ws = blocked_by[b];
      for (auto c : blocks[b])
        for (auto w : in_call[c])
          if (ws.size() < k_max_group_values) ws.push_back(w);
    }
    for (const auto& [b, ws] : blocked_by) {
      if (out.suspects.count(b) || (R[b].entered && left_its_call(b).empty()) || !R[b].s || !cannot_move(b)) continue;
      const auto& proc = views.ranks[b].evidence->process;
      if (R[b].dead && proc.exit_code == 0 && proc.signal == 0) continue;
      const auto& s = *R[b].s;
      json ev = {{"step", s.step},
                 {"pending", fingerprint_json(s.pending)},
                 {"collective_state", records::collective_state_name(s.collective_state)}};
      json blocked = json::array();
      for (auto w : ws) {
        if (blocked.size() >= k_max_group_values) break;
        const auto& f = R[w].s->pending;
        blocked.push_back({{"rank", w},
                           {"group", Roles::name(R[w].role, f.group)},
                           {"group_id", hex_id(f.group)},
                           {"group_seq", f.group_seq}});
      }
      ev["blocks"] = std::move(blocked);
      if (R[b].entered) {
        // Its last call finished for every other member: it died before the calls it blocks.
        ev["died_after"] = {{"group", Roles::name(R[b].role, s.pending.group)},
                            {"group_id", hex_id(s.pending.group)},
                            {"group_seq", s.pending.group_seq},
                            {"why", std::string(left_its_call(b))}};
        out.suspects.emplace(b, Finding{process_reason(proc), HangKind::dead_rank, std::move(ev)});
        continue;
      }
      out.suspects.emplace(b, Finding{"never_entered_collective", HangKind::rank_local_divergence, std::move(ev)});
    }
  }
  // A rank that died inside a call nobody kept it in (every member entered it), away from
  // its peers' position, alone among that call's members to die there without the call
  // failing: its death is not explained by its position, so it is the cause.
  if (stalled) {
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<std::int64_t>> died_in;  // (group, seq) -> dead ranks
    for (std::int64_t r = 0; r < world; ++r)
      if (R[r].s && R[r].entered && R[r].dead) died_in[{R[r].s->pending.group, R[r].s->pending.group_seq}].push_back(r);
    for (const auto& [call, ranks] : died_in) {
      if (ranks.size() != 1) continue;
      const auto r = ranks.front();
      const auto& p = R[r];
      if (out.suspects.count(r) || !p.dead_final || p.failed || p.comm_error || waits.waiting(r) || !cmp.outlier[r] ||
          cmp.at_majority[r])
        continue;
      out.suspects.emplace(r, Finding{process_reason(views.ranks[r].evidence->process),
                                      HangKind::dead_rank,
                                      {{"died_inside",
                                        {{"group", Roles::name(p.role, call.first)},
                                         {"group_id", hex_id(call.first)},
                                         {"group_seq", call.second}}}}});
    }
  }
  // Stopped processes are facts: a stopped rank can never progress.
  for (std::int64_t r = 0; r < world; ++r)
    if (R[r].stopped && !out.suspects.count(r))
      out.suspects.emplace(r, Finding{"process_stopped", HangKind::stopped_rank, json::object()});
  // A torn record of a dead writer has no position at all: nothing else can explain it.
  std::vector<std::int64_t> torn;
  for (std::int64_t r = 0; r < world; ++r)
    if (R[r].torn_dead) torn.push_back(r);
  if (out.suspects.empty() && !torn.empty() && static_cast<std::int64_t>(torn.size()) * 2 < world)
    for (auto r : torn)
      out.suspects.emplace(r, Finding{"writer_died_mid_write", HangKind::dead_rank, {{"record_problem", "torn"}}});
  if (out.suspects.empty()) name_first_failures(pos, views, out.suspects);
  // Uninterruptible sleep: a minority stuck in the kernel, when nothing else explains the stall. A rank
  // whose record ends on a communication error is a victim on its way out (a process tearing down is in
  // D for a moment: CI, HSDP 2x2 seed 392301511, a peer of the rank that exited named).
  if (out.suspects.empty() && stalled) {
    std::vector<std::int64_t> ds;
    for (std::int64_t r = 0; r < world; ++r)
      if (R[r].dsleep && !R[r].comm_error && !R[r].failed) ds.push_back(r);
    if (!ds.empty() && static_cast<std::int64_t>(ds.size()) * 2 < world)
      for (auto r : ds)
        out.suspects.emplace(
            r, Finding{"process_in_uninterruptible_sleep", HangKind::uninterruptible_rank, json::object()});
  }
  for (const auto& [r, f] : out.suspects)
    if (out.kind == HangKind::healthy) out.kind = f.kind;

  // Victims: dead or failed ranks that are not suspects, with how they died and where.
  for (std::int64_t r = 0; r < world; ++r) {
    if (out.suspects.count(r)) continue;
    const auto& p = R[r];
    if (!(p.dead || p.failed || p.torn_dead)) continue;
    if (p.s && !p.failed && views.ranks[r].evidence->process.exit_code == 0 &&
        views.ranks[r].evidence->process.signal == 0)
      continue;  // it exited cleanly: it ended, it did not die
    json row = {{"rank", r}};
    if (p.s) {
      const auto& proc = views.ranks[r].evidence->process;
      json died = {{"state", process_state_name(proc.state)}};
      if (proc.exit_code >= 0) died["exit_code"] = proc.exit_code;
      if (proc.signal != 0) died["signal"] = proc.signal;
      if (!p.dead) died = {{"state", process_state_name(proc.state)}};
      row["process"] = std::move(died);
      row["position"] = {{"step", p.s->step},
                         {"group", Roles::name(p.role, p.s->pending.group)},
                         {"group_id", hex_id(p.s->pending.group)},
                         {"group_seq", p.s->pending.group_seq},
                         {"type", records::collective_type_name(p.s->pending.type)},
                         {"collective_state", records::collective_state_name(p.s->collective_state)}};
      std::string why;
      if (waits.waiting(r)) {
        json waited = json::array();
        for (auto b : waits.blockers(r)) {
          if (waited.size() >= k_max_group_values) break;
          waited.push_back(b);
        }
        row["waited_for"] = std::move(waited);
        why = "waited inside its call for ranks that never entered it";
      } else if (p.comm_error) {
        why = "ended on a communication error: a peer's failure reached it (often in a call it does not record)";
      } else if (cmp.at_majority[r]) {
        why = "died at its peers' position";
      } else if (p.entered) {
        why = "died inside a call every member had entered";
      } else {
        why = "died outside any collective where its peers' positions do not single it out";
      }
      row["why"] = why;
    } else {
      row["process"] = {{"state", "gone"}};
      row["record_problem"] = "torn";
      row["why"] = "its record is torn and its writer is gone";
    }
    out.victims.push_back(std::move(row));
    out.victim_ranks.push_back(r);
  }
  return out;
}

// Says in the summary that something was refused: an on-call engineer must
// not miss that a stray observer or a forged blob came near the probe.
void append_rejected(Verdict& v, const std::vector<RejectedObserver>& rejected) {
  if (rejected.empty()) return;
  v.summary += fmt::format("; {} observer{} rejected (details.rejected): {}", rejected.size(),
                           rejected.size() > 1 ? "s" : "", rejected.front().reason);
}

json rejected_json(const std::vector<RejectedObserver>& rejected) {
  json out = json::array();
  for (const auto& r : rejected) {
    json row = {{"observer", r.observer},
                {"reason", r.reason},
                {"source", r.source == RejectedObserver::Source::presence ? "presence" : "evidence"}};
    if (r.source == RejectedObserver::Source::presence) {
      row["host"] = r.host;
      row["pid"] = r.pid;
      row["attempt"] = r.attempt;
    }
    out.push_back(std::move(row));
  }
  return out;
}

// The attempts the records that were set aside as another attempt's belong to.
std::set<std::string> other_attempts(const Views& views) {
  std::set<std::string> out;
  for (const auto& [seg, issue] : views.issues)
    if (issue->problem == "stale") out.insert(issue->attempt.empty() ? std::string("(unknown)") : issue->attempt);
  return out;
}

}  // namespace

// ===================================================================================
// Stage 6: render (decide() itself: the stages in order, then the verdict)
// ===================================================================================

Verdict decide(const DecisionInput& in) {
  Verdict v;
  v.command = in.command;
  v.job = in.job;
  json details = json::object();
  details["threshold_s"] = seconds(in.threshold_ns);

  const Views views = gather_views(in);
  const std::int64_t world = views.world;

  json issue_list = json::array();
  for (const auto& [seg, issue] : views.issues) {
    json row = {{"segment", seg},
                {"problem", issue->problem},
                {"message", issue->message},
                {"rank", issue->rank >= 0 ? json(issue->rank) : json(nullptr)},
                {"writer_alive", issue->writer_alive}};
    if (!issue->attempt.empty()) row["attempt"] = issue->attempt;
    issue_list.push_back(std::move(row));
  }
  json unreachable_names = json::array();
  for (auto o : views.unreachable_obs) unreachable_names.push_back(fmt::format("node{}", o));
  json rejected = rejected_json(in.rejected);
  details["observers"] = {
      {"expected", in.nodes.size()}, {"reached", views.reached_obs}, {"unreachable", views.unreachable_obs}};
  details["unreachable"] = unreachable_names;
  details["rejected"] = rejected;
  details["record_issues"] = issue_list;
  if (!views.conflicts.empty()) details["conflicts"] = views.conflicts;

  bool any_snapshot = false;
  for (const auto& r : views.ranks) any_snapshot |= r.evidence != nullptr;
  const auto attempts = other_attempts(views);
  if (world <= 0 || (!any_snapshot && !attempts.empty())) {
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::job;
    v.action = "escalate";
    if (!attempts.empty()) {
      // Records of another attempt only: never healthy, and say whose they are.
      std::vector<std::string> names(attempts.begin(), attempts.end());
      v.summary = fmt::format(
          "the only records of job '{}' belong to attempt{} {}{}: nothing of the attempt probed; probe that attempt "
          "(--attempt {}), or, if the job restarted, wait until its new attempt publishes",
          in.job, names.size() > 1 ? "s" : "", fmt::join(names, ", "),
          in.nodes.empty() || !in.nodes[0] || in.nodes[0]->attempt.empty()
              ? std::string()
              : fmt::format(" (not '{}')", in.nodes[0]->attempt),
          names.front());
      details["record_attempts"] = names;
    } else {
      v.summary = views.unreachable_obs.empty() ? "no readable progress record of this job was found"
                                                : "no readable progress record; some observers were unreachable";
    }
    details["kind"] = hang_kind_name(HangKind::no_evidence);
    details["world_size"] = std::max<std::int64_t>(world, 0);
    details["stalled"] = false;
    details["victims"] = json::array();
    details["ranks"] = json::array();
    v.details = std::move(details);
    append_rejected(v, in.rejected);
    return v;
  }

  std::string mesh_source = "flag";
  const Mesh mesh = in.mesh ? *in.mesh : infer_mesh(world, views.ranks, mesh_source);
  details["world_size"] = world;
  details["mesh"] = mesh.spec().empty() ? fmt::format("dp={}", world) : mesh.spec();
  details["mesh_source"] = mesh_source;
  details["missing_ranks"] = views.missing;
  if (!attempts.empty()) details["record_attempts"] = std::vector<std::string>(attempts.begin(), attempts.end());

  const Positions pos = find_positions(in, views, mesh);
  const bool stalled = pos.stalled;
  details["silent_s"] = seconds(std::max<std::int64_t>(pos.silent_ns, 0));
  details["stalled"] = stalled;
  const bool big_world = world > k_max_rank_rows;

  Comparison cmp;
  cmp.at_majority.assign(static_cast<std::size_t>(world), 0);
  cmp.outlier.assign(static_cast<std::size_t>(world), 0);
  Waits waits;
  waits.call_of.assign(static_cast<std::size_t>(world), -1);
  if (stalled) {
    cmp = compare_groups(pos, views, mesh, big_world);
    v.groups = std::move(cmp.groups);
    waits = follow_waits(pos, world);
  }
  Explanation ex = explain(pos, cmp, waits, views, stalled);
  HangKind kind = ex.kind;

  auto node_for = [&](std::int64_t r) { return views.ranks[r].node ? *views.ranks[r].node : std::string(); };
  for (auto& [r, f] : ex.suspects) {
    Suspect s;
    s.rank = r;
    s.node = node_for(r);
    s.reason = f.reason;
    json evidence = std::move(f.evidence);
    if (const auto* e = views.ranks[r].evidence) {
      const auto& snap = e->snapshot;
      evidence["process"] = process_json(e->process, snap.pid);
      evidence["silent_s"] = seconds(std::max<std::int64_t>(in.now_ns - last_progress(snap), 0));
      evidence["op_seq"] = snap.op_seq;
      evidence["phase"] = records::phase_name(snap.phase);
      if (!evidence.contains("step")) evidence["step"] = snap.step;
      if (!evidence.contains("pending")) evidence["pending"] = fingerprint_json(snap.pending);
    }
    s.evidence = std::move(evidence);
    v.suspects.push_back(std::move(s));
  }
  details["victims"] = ex.victims;
  // The waits: who is inside which call, waiting for which members (small worlds: every one).
  json wait_rows = json::array();
  for (std::int64_t w = 0; w < world && wait_rows.size() < k_max_listed_waits; ++w)
    if (waits.waiting(w)) {
      const auto& f = pos.ranks[w].s->pending;
      const auto& bl = waits.blockers(w);
      std::vector<std::int64_t> listed(
          bl.begin(), bl.begin() + static_cast<std::ptrdiff_t>(std::min(bl.size(), k_max_group_values)));
      wait_rows.push_back({{"rank", w},
                           {"group", Roles::name(pos.ranks[w].role, f.group)},
                           {"group_id", hex_id(f.group)},
                           {"group_seq", f.group_seq},
                           {"waiting_for", listed},
                           {"chain_ends_at", waits.ends({w}, world)}});
    }
  details["waits"] = std::move(wait_rows);

  std::int64_t known = 0, known_entered = 0, known_alive = 0, dead = 0, failed = 0, nonzero_exit = 0;
  std::int64_t waiting_known = 0;
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& p = pos.ranks[r];
    if (p.torn_dead) ++dead;
    if (!p.s) continue;
    ++known;
    known_entered += p.entered;
    failed += p.failed;
    const auto& proc = views.ranks[r].evidence->process;
    known_alive += proc.state == ProcessState::alive || proc.state == ProcessState::unknown;
    dead += p.dead;
    nonzero_exit += p.dead && (proc.signal != 0 || proc.exit_code > 0);
    waiting_known += p.entered && !p.dead;
  }

  if (!v.suspects.empty()) {
    v.status = VerdictStatus::attributed;
    v.scope = Scope::rank;
    const bool divergence = kind == HangKind::control_flow_divergence || kind == HangKind::argument_divergence;
    v.action = divergence ? "escalate" : "restart_in_place";
    std::vector<std::string> names;
    for (const auto& s : v.suspects) names.push_back(fmt::format("{} ({})", s.rank, s.reason));
    v.summary =
        fmt::format("{}: rank{} {}", hang_kind_name(kind), v.suspects.size() > 1 ? "s" : "", fmt::join(names, ", "));
    if (!ex.victim_ranks.empty())
      v.summary +=
          fmt::format("; victim{} {}", ex.victim_ranks.size() > 1 ? "s" : "", fmt::join(ex.victim_ranks, ", "));
  } else if (!stalled) {
    kind = HangKind::healthy;
    v.status = VerdictStatus::healthy;
    v.scope = Scope::job;
    v.action = "none";
    v.summary = pos.newest_progress == 0
                    ? std::string("no rank has published progress yet (starting up)")
                    : fmt::format("progress is not silent (last progress {:.1f} s ago, threshold {:.1f} s)",
                                  seconds(std::max<std::int64_t>(pos.silent_ns, 0)), seconds(in.threshold_ns));
  } else if (!views.unreachable_obs.empty() && known > 0 && known == known_entered && known * 2 > world &&
             std::all_of(pos.ranks.begin(), pos.ranks.end(), [](const RankPos& p) { return !p.s || !p.dead; })) {
    // Every visible rank waits inside a collective and they are a strict
    // majority: the ranks no observer could see are where the fault is.
    kind = HangKind::node_unreachable;
    v.status = VerdictStatus::attributed;
    v.scope = Scope::node;
    v.action = "replace_node";
    for (auto o : views.unreachable_obs) {
      Suspect s;
      s.rank = -1;
      s.node = fmt::format("node{}", o);
      s.reason = "node_unreachable";
      std::vector<std::int64_t> ranks;
      for (std::int64_t r = 0; r < world; ++r)
        if (views.ranks[r].unreachable) ranks.push_back(r);
      s.evidence = {{"observer", o}, {"unseen_ranks", ranks}, {"waiting_ranks", known}};
      json claims = json::array();
      for (const auto& r : in.rejected)
        if (r.observer == o) claims.push_back(r.reason);
      if (!claims.empty()) s.evidence["rejected_claims"] = claims;
      v.suspects.push_back(std::move(s));
    }
    v.summary = fmt::format("every visible rank waits inside a collective; unreachable: {}", unreachable_names.dump());
  } else if (known == world && known_entered == world && known_alive == world && failed == 0 && !cmp.splits.empty()) {
    // Every rank waits inside a call, but replicas made different calls: a software divergence that
    // two replicas cannot attribute (no strict majority), not a fabric stall.
    kind = HangKind::inconclusive;
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::group;
    v.action = "escalate";
    json splits = json::array();
    std::vector<std::string> pairs;
    for (const auto& sp : cmp.splits) {
      splits.push_back({{"ranks", {sp.a, sp.b}}, {"reason", sp.finding.reason}, {"evidence", sp.finding.evidence}});
      if (pairs.size() < 8) pairs.push_back(fmt::format("{} and {} ({})", sp.a, sp.b, sp.finding.reason));
    }
    details["replica_splits"] = std::move(splits);
    v.summary = fmt::format(
        "every rank waits inside a collective, but replicas made different calls: {}; a replica group of two "
        "cannot tell which is wrong (compare the two ranks' code paths and inputs; details.replica_splits)",
        fmt::join(pairs, ", "));
  } else if (known == world && known_entered == world && known_alive == world && failed == 0) {
    kind = HangKind::group_stall;
    v.status = VerdictStatus::group_stall;
    v.scope = Scope::group;
    v.action = "fabric_diagnostics";
    std::set<std::tuple<std::uint8_t, std::uint64_t, std::uint64_t>> distinct_colls;
    for (std::int64_t r = 0; r < world; ++r) {
      const auto& f = pos.ranks[r].s->pending;
      distinct_colls.emplace(static_cast<std::uint8_t>(f.type), f.group, f.group_seq);
    }
    std::set<std::string> colls;
    for (const auto& [type, group, seq] : distinct_colls)
      colls.insert(fmt::format("{} pg {} seq {}",
                               records::collective_type_name(static_cast<records::CollectiveType>(type)), hex64(group),
                               seq));
    v.summary = fmt::format("every rank is alive and waiting inside a collective ({}) for {:.1f} s: group-scoped stall",
                            fmt::join(colls, "; "), seconds(pos.silent_ns));
    details["waiting_in"] = std::vector<std::string>(colls.begin(), colls.end());
  } else if (known == world && dead == world && known_entered == 0 && nonzero_exit == 0 && !cmp.any_inconclusive &&
             std::all_of(v.groups.begin(), v.groups.end(),
                         [](const GroupRun& g) { return g.status == C3Status::agree; })) {
    kind = HangKind::healthy;
    v.status = VerdictStatus::healthy;
    v.scope = Scope::job;
    v.action = "none";
    v.summary = "every rank exited at the same point, outside any collective: the job ended";
  } else {
    kind = HangKind::inconclusive;
    v.status = VerdictStatus::inconclusive;
    v.scope = views.unreachable_obs.empty() ? Scope::job : Scope::node;
    v.action = "escalate";
    if (known == world && dead == world)
      v.summary = fmt::format(
          "every rank has exited and no position singles one out{}: the cause cannot be told from "
          "the records (read the ranks' logs)",
          ex.victim_ranks.empty() ? "" : " (details.victims lists how each died)");
    else if (!ex.victim_ranks.empty())
      v.summary = fmt::format(
          "rank{} {} died at {} peers' position or waiting for them (victims); no position or history "
          "singles out a cause",
          ex.victim_ranks.size() > 1 ? "s" : "", fmt::join(ex.victim_ranks, ", "),
          ex.victim_ranks.size() > 1 ? "their" : "its");
    else if (!views.unreachable_obs.empty())
      v.summary = fmt::format("no strict majority of visible ranks agrees; unreachable: {}", unreachable_names.dump());
    else if (!views.missing.empty() || !views.issues.empty())
      v.summary = "some ranks have no readable record and the rest do not single out a rank";
    else if (known_entered == 0)
      v.summary = "every rank is silent outside any collective (data loading, I/O or the host?)";
    else
      v.summary = "progress is silent and no strict majority singles out a rank";
  }
  if (!attempts.empty() && v.status == VerdictStatus::healthy) {
    // Never healthy while some records belong to another attempt and this one's are incomplete.
    if (known < world) {
      v.status = VerdictStatus::inconclusive;
      v.action = "escalate";
      kind = HangKind::inconclusive;
    }
    v.summary += fmt::format("; records of attempt{} {} were set aside (details.record_attempts)",
                             attempts.size() > 1 ? "s" : "", fmt::join(attempts, ", "));
  }

  // Per-rank rows: every rank up to k_max_rank_rows; beyond, only the ranks that stand out.
  std::set<std::int64_t> notable;
  for (const auto& s : v.suspects)
    if (s.rank >= 0) notable.insert(s.rank);
  for (auto r : ex.victim_ranks) notable.insert(r);
  json rank_rows = json::array();
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& view = views.ranks[r];
    const auto& p = pos.ranks[r];
    if (big_world && !notable.count(r) && view.evidence && (cmp.at_majority[r] || !stalled) &&
        view.evidence->process.state == ProcessState::alive)
      continue;
    json row = {{"rank", r}};
    if (view.evidence) {
      const auto& s = view.evidence->snapshot;
      row["node"] = view.node ? *view.node : std::string();
      row["step"] = s.step;
      row["op_seq"] = s.op_seq;
      row["phase"] = records::phase_name(s.phase);
      row["pending"] = fingerprint_json(s.pending);
      row["group"] = Roles::name(p.role, s.pending.group);
      row["collective_state"] = records::collective_state_name(s.collective_state);
      row["silent_s"] = seconds(std::max<std::int64_t>(in.now_ns - last_progress(s), 0));
      row["writer_alive"] = view.evidence->writer_alive;
      row["process"] = process_json(view.evidence->process, s.pid);
      row["ring_events"] = s.recent.size();
      if (s.dropped > 0) row["dropped_events"] = s.dropped;
    } else if (view.issue) {
      row["record_problem"] = view.issue->problem;
      row["writer_alive"] = view.issue->writer_alive;
    } else {
      row["record_problem"] = view.unreachable ? "unreachable" : "missing";
    }
    rank_rows.push_back(std::move(row));
  }
  details["ranks_listed"] = big_world ? "notable" : "all";
  details["ranks"] = std::move(rank_rows);
  details["kind"] = hang_kind_name(kind);
  v.details = std::move(details);
  append_rejected(v, in.rejected);
  return v;
}

void add_rejected(Verdict& v, const std::vector<RejectedObserver>& rejected) {
  if (rejected.empty()) return;
  if (!v.details.contains("rejected") || !v.details["rejected"].is_array()) v.details["rejected"] = json::array();
  for (auto& row : rejected_json(rejected)) v.details["rejected"].push_back(std::move(row));
  append_rejected(v, rejected);
}

Verdict healthy_from_positions(const DecisionInput& in, const std::vector<NodePosition>& positions) {
  std::int64_t now = 0, newest = 0, world = 0;
  for (const auto& p : positions) {
    now = std::max(now, p.collected_ns);
    newest = std::max(newest, p.newest_progress_ns);
    world = std::max(world, p.world_size);
  }
  const std::int64_t silent = newest > 0 ? std::max<std::int64_t>(now - newest, 0) : 0;
  Verdict v;
  v.command = in.command;
  v.job = in.job;
  v.status = VerdictStatus::healthy;
  v.scope = Scope::job;
  v.action = "none";
  v.summary = newest == 0 ? std::string("no rank has published progress yet (starting up)")
                          : fmt::format("progress is not silent (last progress {:.1f} s ago, threshold {:.1f} s)",
                                        seconds(silent), seconds(in.threshold_ns));
  std::vector<std::int64_t> reached;
  for (const auto& p : positions) reached.push_back(p.observer);
  json details = json::object();
  details["threshold_s"] = seconds(in.threshold_ns);
  details["observers"] = {{"expected", positions.size()}, {"reached", reached}, {"unreachable", json::array()}};
  details["unreachable"] = json::array();
  details["rejected"] = rejected_json(in.rejected);
  details["record_issues"] = json::array();
  details["world_size"] = world;
  if (in.mesh) {
    details["mesh"] = in.mesh->spec().empty() ? fmt::format("dp={}", world) : in.mesh->spec();
    details["mesh_source"] = "flag";
  }
  details["missing_ranks"] = json::array();
  details["silent_s"] = seconds(silent);
  details["stalled"] = false;
  details["victims"] = json::array();
  details["waits"] = json::array();
  details["ranks_listed"] = "positions";
  details["ranks"] = json::array();
  details["kind"] = hang_kind_name(HangKind::healthy);
  v.details = std::move(details);
  append_rejected(v, in.rejected);
  return v;
}

}  // namespace scout::hang
