#include "lib/hang/decide.hpp"

#include "lib/hang/silence.hpp"
#include "lib/records/json.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "lib/consensus/c3.hpp"

namespace scout::hang {

using nlohmann::json;
using records::CollectiveState;
using records::RankSnapshot;

std::string_view hang_kind_name(HangKind kind) {
  switch (kind) {
    case HangKind::healthy: return "healthy";
    case HangKind::rank_local_divergence: return "rank_local_divergence";
    case HangKind::control_flow_divergence: return "control_flow_divergence";
    case HangKind::argument_divergence: return "argument_divergence";
    case HangKind::stopped_rank: return "stopped_rank";
    case HangKind::dead_rank: return "dead_rank";
    case HangKind::uninterruptible_rank: return "uninterruptible_rank";
    case HangKind::node_unreachable: return "node_unreachable";
    case HangKind::group_stall: return "group_stall";
    case HangKind::inconclusive: return "inconclusive";
    case HangKind::no_evidence: return "no_evidence";
  }
  return "inconclusive";
}

std::int64_t agreed_now(const std::vector<std::optional<NodeEvidence>>& nodes) {
  std::int64_t now = 0;
  for (const auto& n : nodes)
    if (n) now = std::max(now, n->collected_ns);
  return now;
}

namespace {

// One rank as the decision sees it.
struct RankView {
  const RankEvidence* evidence = nullptr;  // null: no snapshot
  const std::string* node = nullptr;        // its node's name (owned by the input); null: none
  const RecordIssue* issue = nullptr;       // a record problem naming this rank
  bool unreachable = false;                 // its observer may be one that never answered
};

bool entered(const RankSnapshot& s) {
  return s.collective_state == CollectiveState::entering || s.collective_state == CollectiveState::inside;
}

double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }


using records::fingerprint_json;  // the one JSON form (lib/records/json.hpp)

// The progress coordinate compared by C3: step, where in which group, and the call's arguments.
std::string position_key(const RankSnapshot& s) {
  const auto& f = s.pending;
  return fmt::format("step {} pg {:x} seq {} {} {} dt{} x{} r{}", s.step, f.group, f.group_seq,
                     entered(s) ? "in" : "out", records::collective_type_name(f.type), f.dtype, f.count, f.root_or_op);
}

// position_key() as a value: two snapshots have equal Positions exactly when
// their position_key() texts are equal, so ranks are interned without
// formatting a string per rank.
struct Position {
  std::uint64_t step = 0, group = 0, seq = 0, count = 0;
  std::int64_t root_or_op = 0;
  std::uint8_t type = 0, dtype = 0;
  bool in = false;
  bool operator==(const Position&) const = default;
};

Position position_of(const RankSnapshot& s) {
  const auto& f = s.pending;
  // Every type collective_type_name() does not know prints as "invalid".
  auto type = static_cast<std::uint8_t>(f.type);
  if (type > static_cast<std::uint8_t>(records::CollectiveType::other)) type = 0xff;
  return {s.step, f.group, f.group_seq, f.count, f.root_or_op, type, f.dtype, entered(s)};
}

struct PositionHash {
  std::size_t operator()(const Position& p) const {
    std::uint64_t h = 0x9e3779b97f4a7c15ull;
    auto mix = [&](std::uint64_t x) {
      h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    mix(p.step);
    mix(p.group);
    mix(p.seq);
    mix(p.count);
    mix(static_cast<std::uint64_t>(p.root_or_op));
    mix((std::uint64_t{p.type} << 16) | (std::uint64_t{p.dtype} << 8) | std::uint64_t{p.in});
    return static_cast<std::size_t>(h);
  }
};

// Beyond this many members a group's `values` lists each distinct value once
// (with its count, and the ranks holding it unless it is the majority's) instead
// of one value per member, and a finding names the group by index and size
// instead of listing its members: a 100k-rank verdict stays linear in size.
constexpr std::size_t k_max_group_values = 256;

// A suspect found by progress consensus, before it becomes a Suspect.
struct Finding {
  std::string reason;
  HangKind kind = HangKind::inconclusive;
  json evidence = json::object();
};

// The event of `s`'s ring for call `seq` of `group`, when the ring still holds it.
const records::CollectiveEvent* ring_event(const RankSnapshot& s, std::uint64_t group, std::uint64_t seq) {
  for (auto it = s.recent.rbegin(); it != s.recent.rend(); ++it)
    if (it->fingerprint.group == group && it->fingerprint.group_seq == seq) return &*it;
  return nullptr;
}

bool same_call(const records::Fingerprint& a, const records::Fingerprint& b) {
  return a.type == b.type && a.dtype == b.dtype && a.count == b.count && a.root_or_op == b.root_or_op;
}

// A finding for two ranks whose call number `seq` of one group had different arguments.
std::optional<Finding> call_mismatch(const records::Fingerprint& mine, const records::Fingerprint& theirs, json ev) {
  ev["mismatched_call"] = {{"rank_call", fingerprint_json(mine)}, {"majority_call", fingerprint_json(theirs)}};
  if (mine.type != theirs.type || mine.root_or_op != theirs.root_or_op)
    return Finding{"different_collective", HangKind::control_flow_divergence, std::move(ev)};
  return Finding{"collective_arguments_differ", HangKind::argument_divergence, std::move(ev)};
}

// Why outlier `o` differs from the majority `m`; nullopt when the difference is
// one a communication stall produces by itself (a rank that finished the
// collective the others still wait in, or one waiting inside an earlier call the
// others finished), which progress alone cannot pin on a rank.
std::optional<Finding> classify(const RankSnapshot& o, const RankSnapshot& m) {
  const auto& of = o.pending;
  const auto& mf = m.pending;
  const bool oe = entered(o), me = entered(m);
  if (!me && oe) return std::nullopt;  // the majority is outside any collective: o waits, it is not the cause
  json ev = {{"step", o.step}, {"majority_step", m.step}, {"pending", fingerprint_json(of)},
             {"majority_pending", fingerprint_json(mf)}, {"collective_state", records::collective_state_name(o.collective_state)},
             {"majority_collective_state", records::collective_state_name(m.collective_state)}};
  if (of.group != mf.group) {
    if (oe) return Finding{"different_collective", HangKind::control_flow_divergence, ev};
    return Finding{"never_entered_collective", HangKind::rank_local_divergence, ev};
  }
  if (of.group_seq == mf.group_seq) {
    if (oe && me) {
      if (of.type != mf.type || of.root_or_op != mf.root_or_op)
        return Finding{"different_collective", HangKind::control_flow_divergence, ev};
      if (of.count != mf.count || of.dtype != mf.dtype)
        return Finding{"collective_arguments_differ", HangKind::argument_divergence, ev};
      if (o.step != m.step) return Finding{"collective_at_different_step", HangKind::control_flow_divergence, ev};
      return std::nullopt;
    }
    if (!oe && !me) {
      if (o.step < m.step) return Finding{"behind_peers", HangKind::rank_local_divergence, ev};
      if (o.step > m.step) return Finding{"ahead_of_peers", HangKind::control_flow_divergence, ev};
      return std::nullopt;
    }
    // One side finished the call the other is inside: communication, not the
    // rank; unless what it finished under that number was a different call
    // (it skipped one, and its next call took the number).
    if (!same_call(of, mf)) return call_mismatch(of, mf, std::move(ev));
    return std::nullopt;
  }
  if (of.group_seq < mf.group_seq) {
    if (!oe) return Finding{"never_entered_collective", HangKind::rank_local_divergence, ev};
    // Inside an earlier call the others finished: a stall, unless they finished a different call.
    if (const auto* theirs = ring_event(m, of.group, of.group_seq); theirs && !same_call(of, theirs->fingerprint))
      return call_mismatch(of, theirs->fingerprint, std::move(ev));
    return std::nullopt;
  }
  // Ahead of the majority in the same group: it either finished the call the
  // others wait in (a stall), finished a different call under that number
  // (its arguments differed), or never made that call (skipped it).
  if (const auto* mine = ring_event(o, mf.group, mf.group_seq)) {
    if (same_call(mine->fingerprint, mf)) return std::nullopt;
    return call_mismatch(mine->fingerprint, mf, std::move(ev));
  }
  return Finding{"skipped_collective", HangKind::control_flow_divergence, ev};
}

std::string process_reason(const ProcessEvidence& p) {
  switch (p.state) {
    case ProcessState::stopped: return "process_stopped";
    case ProcessState::exited: return p.signal != 0 ? "process_killed_by_signal" : "process_exited";
    case ProcessState::gone: return "process_gone";
    case ProcessState::disk_sleep: return "process_in_uninterruptible_sleep";
    default: return "process_state";
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
// values per member; beyond, only what stands out (see decide()).
constexpr std::int64_t k_max_rank_rows = 4096;

// Infers the mesh from the records' coordinates when they are consistent with
// row-major placement; otherwise every rank is a data-parallel replica.
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
  if (any && product == world) {
    auto m = Mesh::make(sizes, {k_all_dims.begin(), k_all_dims.end()});
    if (m) {
      bool consistent = true;
      for (std::size_t r = 0; r < views.size() && consistent; ++r)
        if (views[r].evidence) {
          Coords c;
          for (int d = 0; d < k_dim_count; ++d) c[d] = views[r].evidence->snapshot.coords[d];
          consistent = m->rank(c) == static_cast<std::int64_t>(r);
        }
      if (consistent && product > 1 && !(sizes[0] == 1 && sizes[1] == 1 && sizes[2] == 1 && sizes[3] == 1 && sizes[4] == 1 && sizes[5] == 1)) {
        how = "records";
        return *m;
      }
    }
  }
  how = "default";
  return *Mesh::parse(fmt::format("dp={}", world));
}

}  // namespace

// Says in the summary that something was refused: an on-call engineer must
// not miss that a stray observer or a forged blob came near the probe.
static void append_rejected(Verdict& v, const std::vector<RejectedObserver>& rejected) {
  if (rejected.empty()) return;
  v.summary += fmt::format("; {} observer{} rejected (details.rejected): {}", rejected.size(), rejected.size() > 1 ? "s" : "",
                           rejected.front().reason);
}

Verdict decide(const DecisionInput& in) {
  Verdict v;
  v.command = in.command;
  v.job = in.job;
  json details = json::object();
  details["threshold_s"] = seconds(in.threshold_ns);

  // --- gather the views ---------------------------------------------------------------
  std::vector<std::int64_t> reached, unreachable_obs;
  // Each rank's evidence and node name, both owned by `in` (no copies).
  struct Seen {
    const RankEvidence* evidence = nullptr;
    const std::string* node = nullptr;
  };
  std::size_t rank_count = 0;
  for (const auto& n : in.nodes)
    if (n) rank_count += n->ranks.size();
  // Ranks in [0, dense_limit) in a vector (no allocation per rank); any other
  // rank a blob names in a map, so that odd input is still decided as before.
  const std::int64_t dense_limit = static_cast<std::int64_t>(16 * rank_count + 4096);
  std::vector<Seen> dense;
  std::unordered_map<std::int64_t, Seen> sparse;
  auto slot = [&](std::int64_t r) -> std::pair<Seen*, bool> {  // (slot, newly taken)
    if (r >= 0 && r < dense_limit) {
      if (static_cast<std::size_t>(r) >= dense.size()) dense.resize(std::max<std::size_t>(r + 1, dense.size() * 2), Seen{});
      Seen& e = dense[r];
      return {&e, e.evidence == nullptr};
    }
    auto [it, fresh] = sparse.try_emplace(r, Seen{});
    return {&it->second, fresh};
  };
  std::map<std::string, const RecordIssue*> issues;  // by segment
  std::vector<json> conflicts;
  for (std::size_t i = 0; i < in.nodes.size(); ++i) {
    const auto& n = in.nodes[i];
    if (!n) {
      unreachable_obs.push_back(static_cast<std::int64_t>(i));
      continue;
    }
    reached.push_back(static_cast<std::int64_t>(i));
    for (const auto& re : n->ranks) {
      const auto& s = re.snapshot;
      const std::string* node = s.host.empty() ? &n->node : &s.host;
      auto [seen, fresh] = slot(s.rank);
      if (!fresh) {
        conflicts.push_back({{"rank", s.rank}, {"nodes", {*seen->node, n->node}}});
        if (s.heartbeat_ns <= seen->evidence->snapshot.heartbeat_ns) continue;
      }
      *seen = Seen{&re, node};
    }
    for (const auto& issue : n->issues) issues.try_emplace(issue.segment, &issue);
  }

  std::int64_t world = 0;
  auto for_each_seen = [&](auto&& fn) {
    for (std::size_t r = 0; r < dense.size(); ++r)
      if (dense[r].evidence) fn(static_cast<std::int64_t>(r), dense[r]);
    for (const auto& [r, e] : sparse) fn(r, e);
  };
  for_each_seen([&](std::int64_t r, const Seen& e) { world = std::max({world, e.evidence->snapshot.world_size, r + 1}); });
  if (in.mesh) world = in.mesh->world_size();
  for (const auto& [seg, issue] : issues)
    if (!in.mesh && issue->rank >= world && issue->rank < k_max_world_size) world = issue->rank + 1;

  json issue_list = json::array();
  for (const auto& [seg, issue] : issues)
    issue_list.push_back({{"segment", seg}, {"problem", issue->problem},
                          {"message", issue->message}, {"rank", issue->rank >= 0 ? json(issue->rank) : json(nullptr)},
                          {"writer_alive", issue->writer_alive}});
  json unreachable_names = json::array();
  for (auto o : unreachable_obs) unreachable_names.push_back(fmt::format("node{}", o));
  json rejected = json::array();
  for (const auto& r : in.rejected) {
    json row = {{"observer", r.observer}, {"reason", r.reason},
                {"source", r.source == RejectedObserver::Source::presence ? "presence" : "evidence"}};
    if (r.source == RejectedObserver::Source::presence) {
      row["host"] = r.host;
      row["pid"] = r.pid;
      row["attempt"] = r.attempt;
    }
    rejected.push_back(std::move(row));
  }
  details["observers"] = {{"expected", in.nodes.size()}, {"reached", reached}, {"unreachable", unreachable_obs}};
  details["unreachable"] = unreachable_names;
  details["rejected"] = rejected;
  details["record_issues"] = issue_list;
  if (!conflicts.empty()) details["conflicts"] = conflicts;

  if (world <= 0) {
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::job;
    v.action = "escalate";
    v.summary = unreachable_obs.empty() ? "no readable progress record of this job was found"
                                        : "no readable progress record; some observers were unreachable";
    details["kind"] = hang_kind_name(HangKind::no_evidence);
    details["world_size"] = 0;
    details["stalled"] = false;
    details["ranks"] = json::array();
    v.details = std::move(details);
    append_rejected(v, in.rejected);
    return v;
  }

  std::vector<RankView> views(static_cast<std::size_t>(world));
  for_each_seen([&](std::int64_t r, const Seen& e) {
    if (r < 0 || r >= world) return;
    views[r].evidence = e.evidence;
    views[r].node = e.node;
  });
  for (const auto& [seg, issue] : issues)
    if (issue->rank >= 0 && issue->rank < world && !views[issue->rank].evidence) views[issue->rank].issue = issue;
  std::vector<std::int64_t> missing;
  for (std::int64_t r = 0; r < world; ++r)
    if (!views[r].evidence && !views[r].issue) {
      if (!unreachable_obs.empty()) views[r].unreachable = true;
      else missing.push_back(r);
    }

  std::string mesh_source = "flag";
  Mesh mesh = in.mesh ? *in.mesh : infer_mesh(world, views, mesh_source);
  details["world_size"] = world;
  details["mesh"] = mesh.spec().empty() ? fmt::format("dp={}", world) : mesh.spec();
  details["mesh_source"] = mesh_source;
  details["missing_ranks"] = missing;

  // --- silence and process evidence ---------------------------------------------------
  Silence silence;  // the one silence rule (silence.hpp), shared with `scout observe`
  for (const auto& view : views) {
    if (view.evidence) silence.add_rank(*view.evidence);
    else if (view.issue) silence.add_issue(*view.issue);
  }
  const std::int64_t silent_ns = silence.silent_ns(in.now_ns);
  const bool stalled = silence.stalled(in.now_ns, in.threshold_ns);
  details["silent_s"] = seconds(std::max<std::int64_t>(silent_ns, 0));
  details["stalled"] = stalled;


  auto node_for = [&](std::int64_t r) { return views[r].node ? *views[r].node : std::string(); };
  // Each rank's progress coordinate as an interned id (compared by C3). Its
  // text (shown in the groups) is formatted once per distinct id, on demand.
  // A rank without a snapshot has a value of its own (its text names the rank).
  std::vector<std::uint64_t> value_id(static_cast<std::size_t>(world));
  std::vector<std::int64_t> id_rank;  // a rank holding each id
  {
    std::unordered_map<Position, std::uint64_t, PositionHash> ids;
    for (std::int64_t r = 0; r < world; ++r) {
      if (views[r].evidence) {
        auto [it, fresh] = ids.try_emplace(position_of(views[r].evidence->snapshot), id_rank.size());
        if (fresh) id_rank.push_back(r);
        value_id[r] = it->second;
      } else {
        value_id[r] = id_rank.size();
        id_rank.push_back(r);
      }
    }
  }
  std::vector<std::optional<std::string>> id_text(id_rank.size());
  auto value_text = [&](std::uint64_t id) -> const std::string& {
    auto& t = id_text[id];
    if (!t) {
      const std::int64_t r = id_rank[id];
      const auto& view = views[r];
      if (view.evidence) t = position_key(view.evidence->snapshot);
      else if (view.issue) t = fmt::format("record {} (rank {})", view.issue->problem, r);
      else t = fmt::format("{} (rank {})", view.unreachable ? "unreachable" : "no record", r);
    }
    return *t;
  };

  // --- progress consensus per peer group and per process group -------------------------
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> compared;
  // Groups already added, by a digest of their members (equal digests are compared in full).
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
  const std::size_t peer_group_count = compared.size();  // compared[0, peer_group_count) are the peer groups
  for (Dim d : k_all_dims)
    if (mesh.size(d) > 1)
      for (auto& g : mesh.process_groups(d)) add_group(std::string(dim_name(d)), std::move(g));

  std::map<std::int64_t, Finding> findings;
  // Ranks every visible strict majority agrees are waiting inside a collective.
  std::vector<char> is_waiter(static_cast<std::size_t>(world), 0);
  std::int64_t waiter_count = 0;
  bool any_inconclusive = false;
  // With a big world, groups whose members all agree show their one value once.
  const bool big_world = world > k_max_rank_rows;
  if (stalled) {
    v.groups.reserve(compared.size());
    std::vector<std::uint64_t> keys;
    std::vector<std::pair<std::uint64_t, std::int64_t>> distinct;  // (id, member index), for compact values
    for (std::size_t gi = 0; gi < compared.size(); ++gi) {
      const auto& [kind, members] = compared[gi];
      keys.clear();
      keys.reserve(members.size());
      for (auto r : members) keys.push_back(value_id[r]);
      C3Result res = c3_exact(keys);
      json values = json::array();
      const bool compact = members.size() > k_max_group_values || (big_world && res.status == C3Status::agree);
      if (!compact) {
        values.get_ref<json::array_t&>().reserve(keys.size());
        for (auto k : keys) values.push_back(value_text(k));
      } else {
        // Each distinct value once, first-seen order; the ranks holding it
        // unless it is the majority's value (the outliers are always complete).
        distinct.clear();
        for (std::size_t i = 0; i < keys.size(); ++i) distinct.emplace_back(keys[i], static_cast<std::int64_t>(i));
        std::stable_sort(distinct.begin(), distinct.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        std::vector<std::pair<std::int64_t, json>> entries;  // (first member index, entry)
        const std::uint64_t majority_key = res.majority_peer >= 0 ? keys[res.majority_peer] : ~std::uint64_t{0};
        for (std::size_t i = 0; i < distinct.size();) {
          std::size_t j = i;
          while (j < distinct.size() && distinct[j].first == distinct[i].first) ++j;
          json entry = {{"value", value_text(distinct[i].first)}, {"count", j - i}};
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
      GroupRun run = make_group_run(kind, members, C3Mode::exact, res, std::move(values));
      if (compact) run.stats["values"] = "distinct";
      std::erase_if(run.outliers, [&](std::int64_t r) { return !views[r].evidence; });
      if (res.status == C3Status::inconclusive) any_inconclusive = true;
      if (res.majority_peer >= 0 && res.status != C3Status::inconclusive) {
        const auto& m = views[members[res.majority_peer]].evidence->snapshot;
        if (entered(m))
          for (std::size_t i = 0; i < members.size(); ++i)
            if (!res.outliers[i] && !is_waiter[members[i]]) {
              is_waiter[members[i]] = 1;
              ++waiter_count;
            }
        for (std::size_t i = 0; i < members.size(); ++i) {
          if (!res.outliers[i] || !views[members[i]].evidence || findings.count(members[i])) continue;
          auto f = classify(views[members[i]].evidence->snapshot, m);
          if (!f) continue;
          f->evidence["group"] = kind;
          if (members.size() <= k_max_group_values) {
            f->evidence["group_members"] = members;
          } else {
            f->evidence["group_index"] = v.groups.size();
            f->evidence["group_size"] = members.size();
          }
          findings.emplace(members[i], std::move(*f));
        }
      }
      v.groups.push_back(std::move(run));
    }
  }

  // --- assemble suspects ---------------------------------------------------------------
  HangKind kind = HangKind::healthy;
  auto add_suspect = [&](std::int64_t r, std::string reason, json evidence) {
    Suspect s;
    s.rank = r;
    s.node = node_for(r);
    s.reason = std::move(reason);
    if (views[r].evidence) {
      const auto& snap = views[r].evidence->snapshot;
      evidence["process"] = process_json(views[r].evidence->process, snap.pid);
      evidence["silent_s"] = seconds(std::max<std::int64_t>(in.now_ns - last_progress_ns(snap), 0));
      evidence["op_seq"] = snap.op_seq;
      evidence["phase"] = records::phase_name(snap.phase);
      if (!evidence.contains("step")) evidence["step"] = snap.step;
      if (!evidence.contains("pending")) evidence["pending"] = fingerprint_json(snap.pending);
    }
    s.evidence = std::move(evidence);
    v.suspects.push_back(std::move(s));
  };

  // Kind precedence when several apply: the first reason found on the lowest rank decides the summary.
  std::vector<std::int64_t> stopped, dead, dsleep;
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& view = views[r];
    if (view.evidence) {
      auto st = view.evidence->process.state;
      if (st == ProcessState::stopped) stopped.push_back(r);
      else if (is_dead(st)) dead.push_back(r);
      else if (st == ProcessState::disk_sleep) dsleep.push_back(r);
    } else if (view.issue && view.issue->problem == "torn" && !view.issue->writer_alive) {
      dead.push_back(r);
    }
  }

  for (auto& [r, f] : findings) {
    if (kind == HangKind::healthy) kind = f.kind;
    add_suspect(r, f.reason, std::move(f.evidence));
  }
  for (auto r : stopped) {
    if (findings.count(r)) continue;
    if (kind == HangKind::healthy) kind = HangKind::stopped_rank;
    add_suspect(r, "process_stopped", json::object());
  }
  const bool minority_dead = static_cast<std::int64_t>(dead.size()) * 2 < world;
  json victims = json::array();
  if (v.suspects.empty() && !dead.empty() && minority_dead) {
    kind = HangKind::dead_rank;
    for (auto r : dead) {
      if (views[r].evidence) add_suspect(r, process_reason(views[r].evidence->process), json::object());
      else add_suspect(r, "writer_died_mid_write", {{"record_problem", "torn"}});
    }
  } else {
    for (auto r : dead)
      if (!findings.count(r)) victims.push_back(r);
  }
  if (v.suspects.empty() && !dsleep.empty() && static_cast<std::int64_t>(dsleep.size()) * 2 < world && stalled) {
    kind = HangKind::uninterruptible_rank;
    for (auto r : dsleep) add_suspect(r, "process_in_uninterruptible_sleep", json::object());
  }
  details["victims"] = victims;

  std::int64_t known = 0, known_entered = 0, known_alive = 0;
  for (std::int64_t r = 0; r < world; ++r)
    if (views[r].evidence) {
      ++known;
      known_entered += entered(views[r].evidence->snapshot);
      auto st = views[r].evidence->process.state;
      known_alive += st == ProcessState::alive || st == ProcessState::unknown;
    }

  if (!v.suspects.empty()) {
    v.status = VerdictStatus::attributed;
    v.scope = Scope::rank;
    const bool divergence = kind == HangKind::control_flow_divergence || kind == HangKind::argument_divergence;
    v.action = divergence ? "escalate" : "restart_in_place";
    std::vector<std::string> names;
    for (const auto& s : v.suspects) names.push_back(fmt::format("{} ({})", s.rank, s.reason));
    v.summary = fmt::format("{}: rank{} {}", hang_kind_name(kind), v.suspects.size() > 1 ? "s" : "", fmt::join(names, ", "));
  } else if (!stalled) {
    kind = HangKind::healthy;
    v.status = VerdictStatus::healthy;
    v.scope = Scope::job;
    v.action = "none";
    v.summary = silence.newest_progress_ns() == 0
                    ? std::string("no rank has published progress yet (starting up)")
                    : fmt::format("progress is not silent (last progress {:.1f} s ago, threshold {:.1f} s)", seconds(silent_ns),
                                  seconds(in.threshold_ns));
  } else if (!unreachable_obs.empty() && known > 0 && known == known_entered && known * 2 > world &&
             waiter_count == known) {
    // Every visible rank waits in the same collective and they are a strict
    // majority: the ranks no observer could see are where the fault is.
    kind = HangKind::node_unreachable;
    v.status = VerdictStatus::attributed;
    v.scope = Scope::node;
    v.action = "replace_node";
    for (auto o : unreachable_obs) {
      Suspect s;
      s.rank = -1;
      s.node = fmt::format("node{}", o);
      s.reason = "node_unreachable";
      std::vector<std::int64_t> ranks;
      for (std::int64_t r = 0; r < world; ++r)
        if (views[r].unreachable) ranks.push_back(r);
      s.evidence = {{"observer", o}, {"unseen_ranks", ranks}, {"waiting_ranks", known}};
      // A process that claimed this node's observer slot with another token explains why it never answered.
      json claims = json::array();
      for (const auto& r : in.rejected)
        if (r.observer == o) claims.push_back(r.reason);
      if (!claims.empty()) s.evidence["rejected_claims"] = claims;
      v.suspects.push_back(std::move(s));
    }
    v.summary = fmt::format("every visible rank waits inside a collective; unreachable: {}", unreachable_names.dump());
  } else if (known == world && known_entered == world && known_alive == world) {
    kind = HangKind::group_stall;
    v.status = VerdictStatus::group_stall;
    v.scope = Scope::group;
    v.action = "fabric_diagnostics";
    // Distinct (type, group, seq) first: one string per collective, not per rank.
    std::set<std::tuple<std::uint8_t, std::uint64_t, std::uint64_t>> distinct_colls;
    for (std::int64_t r = 0; r < world; ++r) {
      const auto& f = views[r].evidence->snapshot.pending;
      distinct_colls.emplace(static_cast<std::uint8_t>(f.type), f.group, f.group_seq);
    }
    std::set<std::string> colls;
    for (const auto& [type, group, seq] : distinct_colls)
      colls.insert(fmt::format("{} pg {:x} seq {}", records::collective_type_name(static_cast<records::CollectiveType>(type)),
                               group, seq));
    v.summary = fmt::format("every rank is alive and waiting inside a collective ({}) for {:.1f} s: group-scoped stall",
                            fmt::join(colls, "; "), seconds(silent_ns));
    details["waiting_in"] = std::vector<std::string>(colls.begin(), colls.end());
  } else if (known == world && dead.size() == static_cast<std::size_t>(world) && known_entered == 0 && !any_inconclusive &&
             v.groups.size() == static_cast<std::size_t>(std::count_if(v.groups.begin(), v.groups.end(), [](const GroupRun& g) {
               return g.status == C3Status::agree;
             }))) {
    kind = HangKind::healthy;
    v.status = VerdictStatus::healthy;
    v.scope = Scope::job;
    v.action = "none";
    v.summary = "every rank exited at the same point, outside any collective: the job ended";
  } else {
    kind = HangKind::inconclusive;
    v.status = VerdictStatus::inconclusive;
    v.scope = unreachable_obs.empty() ? Scope::job : Scope::node;
    v.action = "escalate";
    if (known == world && static_cast<std::size_t>(world) == dead.size())
      v.summary = "every rank has exited and their records agree: no rank can be singled out";
    else if (!unreachable_obs.empty())
      v.summary = fmt::format("no strict majority of visible ranks agrees; unreachable: {}", unreachable_names.dump());
    else if (!missing.empty() || !issues.empty())
      v.summary = "some ranks have no readable record and the rest do not single out a rank";
    else if (known_entered == 0)
      v.summary = "every rank is silent outside any collective (data loading, I/O or the host?)";
    else
      v.summary = "progress is silent and no strict majority singles out a rank";
  }
  // Per-rank rows: every rank up to k_max_rank_rows; beyond, only the ranks
  // that stand out (suspects, victims, processes not alive, no record, or a
  // progress coordinate other than the most common one of its peer group: peer
  // groups may legitimately wait in different process groups), so a 100k-rank
  // verdict stays small and fast.
  std::vector<char> usual;  // per rank: holds the most common coordinate of its peer group
  if (big_world) {
    usual.assign(static_cast<std::size_t>(world), 0);
    std::vector<char> covered(static_cast<std::size_t>(world), 0);
    auto mark_common = [&](const std::vector<std::int64_t>& members) {
      std::vector<std::uint64_t> keys;
      keys.reserve(members.size());
      for (auto r : members) keys.push_back(value_id[r]);
      std::sort(keys.begin(), keys.end());
      std::uint64_t best = 0;
      std::size_t best_count = 0;
      for (std::size_t i = 0; i < keys.size();) {
        std::size_t j = i;
        while (j < keys.size() && keys[j] == keys[i]) ++j;
        if (j - i > best_count) best_count = j - i, best = keys[i];
        i = j;
      }
      for (auto r : members) {
        covered[r] = 1;
        usual[r] = value_id[r] == best;
      }
    };
    for (std::size_t g = 0; g < peer_group_count; ++g) mark_common(compared[g].second);
    std::vector<std::int64_t> rest;  // ranks in no peer group of two or more: compared with each other
    for (std::int64_t r = 0; r < world; ++r)
      if (!covered[r]) rest.push_back(r);
    if (!rest.empty()) mark_common(rest);
  }
  std::set<std::int64_t> notable;
  for (const auto& s : v.suspects)
    if (s.rank >= 0) notable.insert(s.rank);
  for (const auto& x : victims) notable.insert(x.get<std::int64_t>());
  json rank_rows = json::array();
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& view = views[r];
    if (big_world && !notable.count(r) && view.evidence && usual[r] && view.evidence->process.state == ProcessState::alive)
      continue;
    json row = {{"rank", r}};
    if (view.evidence) {
      const auto& s = view.evidence->snapshot;
      row["node"] = view.node ? *view.node : std::string();
      row["step"] = s.step;
      row["op_seq"] = s.op_seq;
      row["phase"] = records::phase_name(s.phase);
      row["pending"] = fingerprint_json(s.pending);
      row["collective_state"] = records::collective_state_name(s.collective_state);
      row["silent_s"] = seconds(std::max<std::int64_t>(in.now_ns - last_progress_ns(s), 0));
      row["writer_alive"] = view.evidence->writer_alive;
      row["process"] = process_json(view.evidence->process, s.pid);
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

}  // namespace scout::hang
