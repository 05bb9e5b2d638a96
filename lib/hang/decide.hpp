// The hang decision: a pure function of the evidence every observer gathered.
// Every observer runs it on the same gathered evidence and prints the same
// verdict, with no coordinator. It rests on progress consensus (C3 exact per
// peer group and per process group over progress coordinates and pending
// collective fingerprints) and on process evidence from the OS, never on which
// rank died or complained first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/hang/evidence.hpp"
#include "lib/report/verdict.hpp"
#include "lib/topology/mesh.hpp"

namespace scout::hang {

// What the transport refused: an evidence blob (bad HMAC, another job,
// malformed) or an observer that announced itself with another key id (another
// job token or attempt) and so was never admitted to the probe.
struct RejectedObserver {
  enum class Source { evidence, presence };
  std::int64_t observer = -1;  // the observer index the blob came from, or the one the stray claims
  std::string reason;
  Source source = Source::evidence;
  std::string host;      // presence only: where it runs
  std::int64_t pid = 0;  // presence only
  std::string attempt;   // presence only: the attempt it probes
};

// Everything the decision needs.
struct DecisionInput {
  std::string job;
  std::string command = "probe-hang";
  std::optional<Mesh> mesh;                        // from --mesh; absent: inferred from the records
  std::vector<std::optional<NodeEvidence>> nodes;  // one slot per expected observer; nullopt: unreachable
  std::vector<RejectedObserver> rejected;
  std::int64_t now_ns = 0;        // CLOCK_REALTIME of the decision (agreed: max collected_ns)
  std::int64_t threshold_ns = 0;  // silence threshold
};

// Which kind of hang the verdict describes (details.kind).
enum class HangKind {
  healthy,
  rank_local_divergence,
  control_flow_divergence,
  argument_divergence,
  stopped_rank,
  dead_rank,
  uninterruptible_rank,
  node_unreachable,
  group_stall,
  inconclusive,
  no_evidence,
};
std::string_view hang_kind_name(HangKind kind);

// Usage error when the input cannot be decided as given: a --mesh whose world
// size differs from the one the records name (a part of the job, or another
// mesh, would be compared as if its ranks were peers). Call before decide().
// `positions_world`: the world size the nodes' positions name, where the
// decision is made from positions alone (a hierarchy's leaders hold no records).
Status check_decision_input(const DecisionInput& input, std::int64_t positions_world = 0);

// Decides. `input.nodes` must be in observer order; the result does not depend
// on which observer runs it. Pure: no I/O, no clock. Stages (decide.cpp, each a
// unit in lib/hang/decide/): gather views, find positions, compare per group,
// follow waits, explain, conclude, render; every threshold is in thresholds.hpp.
Verdict decide(const DecisionInput& input);

// Adds observers rejected outside a decision (strays one observer saw after a
// hierarchy's leaders decided) to a verdict: details.rejected and the summary.
void add_rejected(Verdict& verdict, const std::vector<RejectedObserver>& rejected);

// The decision time all observers agree on: the latest collected_ns among the
// reachable nodes (0 when none).
std::int64_t agreed_now(const std::vector<std::optional<NodeEvidence>>& nodes);

}  // namespace scout::hang
