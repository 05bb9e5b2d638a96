// The evidence each command decided on, turned into a timeline trace's input
// (trace.hpp), and the trace's checked, atomic write. Pure but for write().
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/hang/evidence.hpp"
#include "lib/hang/probe.hpp"
#include "lib/records/snapshot.hpp"
#include "lib/report/verdict.hpp"
#include "lib/straggler/timing.hpp"
#include "lib/trace/trace.hpp"

namespace scout::trace {

// `scout records trace`: every readable record (stale ones too, their args say so), up to `now_ns`.
TraceInput from_records(const std::vector<records::RecordRead>& reads, const std::string& job, std::int64_t now_ns);

// A hang probe's evidence (hang::ProbeEvidence: one slot per observer) and its verdict: every
// rank of every node that gave evidence, on a process per node ("node K (host)"); a rank whose
// ring was not gathered or was lost gets a "position" slice; a node that gave only its position
// (the positions proved the job healthy, a hierarchy's member) a position track per rank where its
// ranks are one run (hang::position_ranks), else a global mark; a node that gave nothing a global
// mark "node K: no evidence (observer silent)" and otherData.silent_nodes. An observer that decided
// alone (`local_only`) says so in otherData.decided_alone. The verdict's suspects marked, the probe's
// time as the end and a global "probe" mark.
TraceInput from_hang(const hang::ProbeEvidence& evidence, const Verdict& verdict);

// A straggler run's rounds (baseline first, as run_straggler read them) and its verdict: each
// rank's calls over all rounds, a global mark per read, and for every rank the verdict names,
// a window per round that flagged it (details.straggler.per_round[i].flagged).
TraceInput from_straggler(const std::vector<straggler::RoundEvidence>& rounds, const Verdict& verdict);

// Writes `doc` to `path` atomically (lib/common/file); unavailable error when it cannot.
Status write(const std::string& path, const nlohmann::ordered_json& doc);

// The trace's summary for a verdict's details.trace: {"path", "ranks", "slices", ...}.
nlohmann::json summary(const std::string& path, const TraceStats& stats);

// Builds the trace of `input`, writes it to `path` and records the outcome in
// verdict.details.trace ({"path", "written", counts, or "error"}). Returns the
// write's error, which the command reports (exit 5) after printing the verdict.
std::optional<Error> write_for_verdict(const TraceInput& input, const std::string& path, Verdict& verdict);

}  // namespace scout::trace
