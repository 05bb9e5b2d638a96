// Timeline traces (lib/trace/README.md): the collective rings a
// command decided on, as a Chrome / Perfetto trace-event JSON document
// (schemas/trace.schema.json): {"traceEvents": [...], "displayTimeUnit": "ms",
// "otherData": {...}}. One process per node (pid 1, 2, ... in order of the
// lowest rank on it, named by its host, or "node K (host)" where the source
// knows its node index K), one thread track per rank (tid = rank, named
// "rank N (host)" or "rank N (node K: host)"), each collective call a complete event ("X")
// named by its op with args {group "0x...", seq, op, count, dtype, state}; a
// call still inside runs to the trace's end (the probe's time). Calls of one
// rank that overlap without nesting (asynchronous collectives) go to extra
// lanes of that rank (tid = k_lane_tid_base + rank * k_max_lanes + lane,
// named "rank N (host) lane L"), so that every track nests properly. A track
// whose ring is not known gets one "position" slice instead (its phase, step
// and state, from its last progress to the end): no track is empty.
// Times are microseconds from otherData.base_ns (the earliest time shown,
// CLOCK_REALTIME nanoseconds as a "0x..."-free decimal string). Pure: no I/O.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/records/snapshot.hpp"

namespace scout::trace {

inline constexpr std::string_view k_trace_schema = "scout.trace";
inline constexpr std::int64_t k_trace_version = 1;
inline constexpr std::int64_t k_lane_tid_base = 1000000;
inline constexpr std::int64_t k_max_lanes = 64;  // lanes per rank; calls beyond are dropped (counted)

// One rank's track.
struct Track {
  std::int64_t rank = -1;
  std::string host;
  std::int64_t node = -1;                        // the node (observer) index, -1: not known
  std::vector<records::CollectiveEvent> events;  // the ring, oldest first
  // The record's pending collective and its state: an open call (exit 0) whose fingerprint is the
  // pending one takes this state ("entering" / "inside"); other open calls are "inside".
  records::Fingerprint pending;
  records::CollectiveState state = records::CollectiveState::none;
  records::Phase phase = records::Phase::unknown;
  std::uint64_t step = 0;
  std::int64_t progress_ns = 0;  // last progress (0: unknown)
  bool ring_known = true;        // false: the ring was not gathered (compact evidence, a position): a "position" slice
  std::string position;          // that slice's name ("": "PHASE step S (STATE)")
  nlohmann::json args = nlohmann::json::object();  // extra facts (process state, ...): otherData.tracks[]
};

// A rank the verdict blames: its track gets an instant event "suspect: <reason>" and its stalled
// call (its open call, else a "stalled" slice from its last activity to the end) category
// "suspect", cname "terrible", args.suspect = true.
struct SuspectMark {
  std::int64_t rank = -1;  // -1: a node (`node`): every track of that host is marked
  std::string node;
  std::string reason;
  nlohmann::json args = nlohmann::json::object();
  bool stalled = true;  // a hang's suspect: mark its stalled call; false (a straggler): the instant event only
};

// A time window on one rank's track (a straggler's flagged round): its calls that end inside
// get args.flagged_round and category "straggler", cname "bad"; an instant event at the
// window's end carries `args`.
struct Window {
  std::int64_t rank = -1;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::string name;
  std::int64_t round = 0;
  nlohmann::json args = nlohmann::json::object();
};

// An instant event: on a rank's track (rank >= 0) or global (rank -1).
struct Mark {
  std::int64_t rank = -1;
  std::int64_t ts_ns = 0;
  std::string name;
  std::string category = "scout";
  nlohmann::json args = nlohmann::json::object();
};

struct TraceInput {
  std::string job;
  std::string command;      // "probe-hang", "records trace", ...
  std::int64_t end_ns = 0;  // the probe's / read's time: open calls end here (0: the latest time seen)
  std::vector<Track> tracks;
  std::vector<SuspectMark> suspects;
  std::vector<Window> windows;
  std::vector<Mark> marks;
  nlohmann::json other = nlohmann::json::object();  // merged into otherData (verdict status, summary, ...)
};

// What build() put in the document (for the command's verdict and the tests).
struct TraceStats {
  std::int64_t tracks = 0;
  std::int64_t slices = 0;
  std::int64_t open_slices = 0;
  std::int64_t lanes = 0;    // extra lanes opened for overlapping calls
  std::int64_t dropped = 0;  // calls left out (beyond k_max_lanes, or times that make no sense)
  std::int64_t marks = 0;
};

// The trace document of `input`.
nlohmann::ordered_json build(const TraceInput& input, TraceStats* stats = nullptr);

// A track from a record snapshot.
Track track_of(const records::RankSnapshot& snapshot);

}  // namespace scout::trace
