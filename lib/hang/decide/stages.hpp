// The stages of the hang decision (decide() in lib/hang/decide.cpp runs them in
// this order), what each passes to the next, and the named measures that name
// suspects. Internal to lib/hang: every threshold a stage uses is in
// lib/hang/thresholds.hpp.
//
//   1 gather views    (gather_views.cpp)   one view per rank from every observer's evidence
//   2 find positions  (find_positions.cpp, roles.cpp)  each rank's call, history and process; stalled?
//   3 compare per group (compare_groups.cpp, histories.cpp, call_arguments.cpp)  C3 and the measures
//   4 follow waits    (follow_waits.cpp)   who each rank inside a call waits for
//   5 explain         (explain.cpp, first_failures.cpp)  suspects and victims
//   6 conclude        (conclude.cpp)       status, scope, action, summary
//   7 render          (render.cpp)         details and the per-rank rows
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/hang/decide.hpp"
#include "lib/hang/silence.hpp"
#include "lib/records/json.hpp"
#include "lib/records/snapshot.hpp"
#include "lib/report/verdict.hpp"
#include "lib/topology/mesh.hpp"

namespace scout::hang::stages {

using nlohmann::json;
using records::fingerprint_json;

// ---------------------------------------------------------------------------
// Helpers shared by the stages
// ---------------------------------------------------------------------------

inline double seconds(std::int64_t ns) {
  return static_cast<double>(ns) / 1e9;
}
// A 64-bit id as JSON: the one spelling (lib/common/hex.hpp).
std::string hex_id(std::uint64_t id);
inline std::int64_t last_progress(const records::RankSnapshot& s) {
  return last_progress_ns(s);
}
// The same call: type, dtype, element count, root or op (not the group or its sequence).
inline bool same_call(const records::Fingerprint& a, const records::Fingerprint& b) {
  return a.type == b.type && a.dtype == b.dtype && a.count == b.count && a.root_or_op == b.root_or_op;
}
// A suspect's reason from its process state (process_stopped, process_exited, ...).
std::string process_reason(const ProcessEvidence& p);
json process_json(const ProcessEvidence& p, std::int64_t pid);

// The named measures and rules that name a suspect (evidence.measure), each
// with the stage it belongs to (evidence.stage).
enum class Measure {
  position,               // 3: C3 exact over positions; the outlier's departure classified
  step,                   // 3: C3 exact over the steps of the ranks at the majority's call
  call_arguments,         // 3: a call's arguments against a strict majority of its group's members
  history,                // 3: call histories against a strict majority's (whole calls)
  history_structure,      // 3: a pipeline stage's histories, order and types of the calls only
  stage_arguments,        // 3: a stage's calls where replica groups are too small for a majority
  wait_chain_end,         // 5: the end of a chain of waits, a rank that cannot move
  died_inside,            // 5: the one rank that died inside a call every member entered
  process_stopped,        // 5: a stopped process
  torn_record,            // 5: a torn record whose writer died
  first_failure,          // 5: the one death no failure was recorded for
  first_failed_node,      // 5: a node whose every rank died unrecorded, before every other rank's failure
  killed_node,            // 5: a node whose every rank died unrecorded, one of them singled out by the rules above
  lost_node,              // 5: the one silent observer's node, every visible rank failed or waiting
  uninterruptible_sleep,  // 5: a minority stuck in the kernel
  unreachable_observer,   // 6: the ranks no observer could see, the visible ones all waiting
};
std::string_view measure_name(Measure m);
std::string_view measure_stage(Measure m);

// A suspect found by the stages, before it becomes a Suspect.
struct Finding {
  std::string reason;
  HangKind kind = HangKind::inconclusive;
  json evidence = json::object();
  Measure measure = Measure::position;
};

// ---------------------------------------------------------------------------
// Stage 1: gather views
// ---------------------------------------------------------------------------

// One rank as the decision sees it.
struct RankView {
  const RankEvidence* evidence = nullptr;  // null: no snapshot
  const std::string* node = nullptr;       // its node's name (owned by the input); null: none
  const RecordIssue* issue = nullptr;      // a record problem naming this rank
  bool unreachable = false;                // its observer may be one that never answered
};

struct Views {
  std::vector<RankView> ranks;
  std::int64_t world = 0;
  std::vector<std::int64_t> reached_obs, unreachable_obs, missing;
  std::map<std::string, const RecordIssue*> issues;  // by segment
  std::vector<json> conflicts;
};

// Reads every reachable observer's ranks and record problems. One view per rank
// of the job (the record with the newest heartbeat wins when two observers
// report a rank), the record problems naming ranks without one, and the world
// size (--mesh's, else the largest the records name).
Views gather_views(const DecisionInput& in);

// The mesh from the records' coordinates when they are consistent with
// row-major placement in some order of the dims in use (the canonical order
// first); otherwise every rank is a data-parallel replica. `how`: "records" or "default".
Mesh infer_mesh(std::int64_t world, const std::vector<RankView>& views, std::string& how);

// ---------------------------------------------------------------------------
// Stage 2: find positions
// ---------------------------------------------------------------------------

// What a process group is to the ranks in it: a mesh dimension (tp, dp, ...),
// the whole world, a pair of pipeline stages, or a group the mesh does not know (by its id).
struct Roles {
  struct Group {
    std::uint64_t role = 0;             // role key: 1 + dim index, k_world, stage_pair(i, j) or unknown(group id)
    std::vector<std::int64_t> members;  // ascending; empty when unknown
  };
  static constexpr std::uint64_t k_world = 100;
  // The role of a point-to-point pair of pipeline stages (i, j) of a pp group, i < j: replicas'
  // pairs (their own ids, group_id([lo, hi, -2])) are one role, so their sends and receives align.
  static constexpr std::uint64_t k_stage_pair = 1000;
  static std::uint64_t stage_pair(std::uint64_t i, std::uint64_t j);
  // The role of a group the mesh does not know: its own id, kept apart from the known roles.
  static std::uint64_t unknown(std::uint64_t group) { return group | (std::uint64_t{1} << 63); }
  std::unordered_map<std::uint64_t, Group> by_id;

  std::uint64_t role(std::uint64_t group) const {
    auto it = by_id.find(group);
    return it == by_id.end() ? unknown(group) : it->second.role;
  }
  bool known(std::uint64_t group) const { return by_id.count(group) != 0; }
  static std::string name(std::uint64_t role, std::uint64_t group);
};

// The group ids a publisher computes (records::layout::group_id over the
// members in ascending order) for every process group of `mesh`, its pipeline
// stage pairs, and the world.
Roles make_roles(const Mesh& mesh);

// A rooted call's root (a global rank; the peer of a send or receive) as its
// index among its known group's members; other calls as recorded.
records::Fingerprint group_local(const records::Fingerprint& f, const Roles& roles);

// One call of a rank's history, with its group's role.
struct Call {
  std::uint64_t group = 0, role = 0, seq = 0;
  records::Fingerprint fingerprint;
  bool failed = false;
};

// A rank's position and the facts about its process.
struct RankPos {
  const records::RankSnapshot* s = nullptr;  // null: no snapshot
  std::uint64_t role = 0;                    // role of the pending call's group
  bool call = false;                         // a pending/last call exists
  records::Fingerprint pending;              // the snapshot's pending call, a rooted call's root group-local
  bool entered = false;                      // in its pending call (entering, inside, or failed)
  bool failed = false;                       // its pending call failed
  bool comm_error = false;                   // ending on a communication error (phase comm_error) or terminated
  bool terminated = false;                   // ended on its launcher's SIGTERM (phase terminated)
  bool dead = false;                         // can never progress again
  bool dead_final = false;                   // dead when its record was read: the snapshot is its last state
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

struct Positions {
  Roles roles;
  std::vector<RankPos> ranks;
  std::vector<std::int64_t> key_rank;  // a rank holding each key
  bool stalled = false;
  std::int64_t newest_progress = 0, silent_ns = 0;
};

// Reads the views' snapshots, process states and rings. Each rank's position
// (the call it is at, state-free, interned as a key), its call history (ring,
// role-normalized) and its process facts; and whether the job is stalled: the
// silence rule (input.threshold_ns), a failed call, or every record final with
// a rank inside a call.
Positions find_positions(const DecisionInput& in, const Views& views, const Mesh& mesh);

// The text of a position, as shown in the groups' values.
std::string position_text(const Positions& pos, const Views& views, std::uint64_t key);

// ---------------------------------------------------------------------------
// Stage 3: compare per group (and its measures over histories and arguments)
// ---------------------------------------------------------------------------

using RankFindings = std::vector<std::pair<std::int64_t, Finding>>;

// Where rank `o`'s history first departs from `m`'s, aligned by (role, per-group
// sequence); nullopt when one is a prefix of the other (histories.cpp).
std::optional<Finding> history_divergence(const RankPos& o, const RankPos& m, bool structure_only = false,
                                          bool ignore_root = false);
// The history measure: members whose history is incompatible with more than half of the group.
RankFindings history_outliers(const Positions& pos, const std::vector<std::int64_t>& members,
                              bool structure_only = false);
// The stage-arguments measure (call_arguments.cpp).
RankFindings stage_argument_outliers(const Positions& pos, const Mesh& mesh, const std::vector<std::int64_t>& members);
// The call-arguments measure (call_arguments.cpp).
RankFindings call_argument_outliers(const Positions& pos);

// How the finding of an outlier may be used.
enum class Weight {
  definitive,  // the rank's own calls differ from its peers': named whatever its process does
  position,    // the rank is away from its peers outside any collective: named when it cannot be moving
};

struct Candidate {
  Finding finding;
  Weight weight = Weight::position;
};

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
  static Comparison none(std::int64_t world);  // before any comparison: no rank at or away from a majority
};

// Reads the positions and histories. C3 over the positions of every peer group,
// process group and pipeline stage (the position and step measures), then the
// call-arguments measure and the history measures; replica pairs' splits.
Comparison compare_groups(const Positions& pos, const Views& views, const Mesh& mesh, bool big_world);

// ---------------------------------------------------------------------------
// Stage 4: follow waits
// ---------------------------------------------------------------------------

struct Waits {
  struct CallWait {
    std::uint64_t group = 0, seq = 0;
    std::vector<std::int64_t> blockers;  // members that never entered the call
    std::int64_t unseen = 0;             // members without a record
  };
  std::vector<CallWait> calls;        // one per distinct (group, seq) some rank is in
  std::vector<std::int64_t> call_of;  // per rank: index into calls, -1 when in no call
  const std::vector<std::int64_t>& blockers(std::int64_t r) const;
  bool waiting(std::int64_t r) const { return !blockers(r).empty(); }
  // Where the waits of the ranks in `from` end: ranks in no call or in a call every member entered,
  // never going past a rank for which `stop` holds (returned as an end). One pass over the graph.
  std::vector<std::int64_t> ends(const std::vector<std::int64_t>& from, std::int64_t world,
                                 const std::function<bool(std::int64_t)>& stop = {}) const;
  static Waits none(std::int64_t world);  // no rank in a followed call
};

// Reads the positions and histories. For every rank inside (or failed in) a
// call: the members of that call's group that never entered it.
Waits follow_waits(const Positions& pos, std::int64_t world);

// ---------------------------------------------------------------------------
// Stage 5: explain
// ---------------------------------------------------------------------------

// A whole node named (its ranks died together: which of them failed first cannot be told).
struct NodeFinding {
  std::string node;                 // its host name, as its records give it
  std::vector<std::int64_t> ranks;  // ascending
  Finding finding;
};

struct Explanation {
  std::map<std::int64_t, Finding> suspects;  // by rank
  std::vector<NodeFinding> nodes;            // whole nodes (first_failed_node), when no rank is named
  json victims = json::array();
  std::vector<std::int64_t> victim_ranks;
  std::vector<std::int64_t> died_in_finished_call;  // victims dead inside a call the others finished (ascending)
  HangKind kind = HangKind::healthy;
};

// Names the ranks the evidence singles out, never one whose state the others
// explain; every other dead or failed rank is a victim (explain.cpp).
Explanation explain(const Positions& pos, const Comparison& cmp, const Waits& waits, const Views& views, bool stalled);

// The first-failure rule (first_failures.cpp), when nothing else named anyone.
void name_first_failures(const Positions& pos, const Views& views, std::map<std::int64_t, Finding>& suspects);
// The first-failed-node rule (first_failures.cpp), when nothing named anyone, not even a first failure.
std::optional<NodeFinding> first_failed_node(const Positions& pos, const Comparison& cmp, const Views& views);
// The lost-node rule (first_failures.cpp): one observer silent, every visible rank failed or waiting.
std::optional<NodeFinding> lost_node(const Positions& pos, const Comparison& cmp, const Views& views);
// The node of the ranks named so far, when those ranks and every other rank of their node died
// unrecorded, and no rank elsewhere did (first_failures.cpp).
std::optional<NodeFinding> killed_node(const Positions& pos, const Comparison& cmp, const Views& views,
                                       const std::map<std::int64_t, Finding>& named);
// A death by a signal a peer's failure kills with (k_cascade_signals).
bool cascade_form_signal(int sig);

// ---------------------------------------------------------------------------
// Stages 6 and 7: conclude and render (conclude.cpp, render.cpp)
// ---------------------------------------------------------------------------

// The verdict's envelope and the details every verdict has (observers,
// unreachable, rejected, record issues, conflicts, threshold).
Verdict render_header(const DecisionInput& in, const Views& views);
// The attempts the records set aside as another attempt's belong to.
std::set<std::string> other_attempts(const Views& views);
// When there is nothing to decide (no world, or only another attempt's records),
// completes `v` as that verdict and returns true.
bool render_no_evidence(const DecisionInput& in, const Views& views, Verdict& v);
// The world, the mesh (and where it came from), missing ranks, silence and stall.
void render_world(const Views& views, const Mesh& mesh, const std::string& mesh_source, const Positions& pos,
                  Verdict& v);
// The suspects (with their measure and stage) and details.victims, details.waits.
void render_findings(const DecisionInput& in, const Views& views, const Positions& pos, const Waits& waits,
                     Explanation& ex, Verdict& v);
// Status, scope, action and summary from the suspects and the ranks' states; the hang kind.
HangKind conclude(const DecisionInput& in, const Views& views, const Positions& pos, const Comparison& cmp,
                  const Explanation& ex, bool stalled, Verdict& v);
// details.ranks, ranks_listed and kind; the rejected observers in the summary.
void render_rows(const DecisionInput& in, const Views& views, const Positions& pos, const Comparison& cmp,
                 const Explanation& ex, bool stalled, bool big_world, HangKind kind, Verdict& v);

// Says in the summary that something was refused.
void append_rejected(Verdict& v, const std::vector<RejectedObserver>& rejected);
json rejected_json(const std::vector<RejectedObserver>& rejected);

}  // namespace scout::hang::stages
