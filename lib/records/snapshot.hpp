// The evidence a progress record yields (docs/contracts.md "Progress records"): what
// the record reader produces from one rank's shared-memory segment and what
// the hang observer gathers and compares. This header is the contract between
// lib/records (writer/reader) and lib/hang (decisions); it has no I/O.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scout::records {

// Where a rank is in its step. Numeric values are part of the record layout.
enum class Phase : std::uint8_t {
  unknown = 0,
  forward = 1,
  backward = 2,
  optimizer = 3,
  dataloader = 4,
  checkpoint = 5,
  collective = 6,
  idle = 7,
  // Set by the publisher as the process ends on an uncaught communication
  // error (a peer's failure reached it, often in a call it does not record).
  comm_error = 8,
  // Set by the publisher's SIGTERM handler as the process ends on the signal
  // (its launcher tearing it down after another worker failed): a victim that
  // says how it ended, where a rank killed outright (SIGKILL, power) cannot.
  terminated = 9,
};

// Collective kinds. Numeric values are part of the record layout: append only.
enum class CollectiveType : std::uint8_t {
  none = 0,
  all_reduce = 1,
  all_gather = 2,
  all_gather_into_tensor = 3,
  reduce_scatter = 4,
  reduce_scatter_tensor = 5,
  all_to_all = 6,
  all_to_all_single = 7,
  broadcast = 8,
  reduce = 9,
  gather = 10,
  scatter = 11,
  barrier = 12,
  send = 13,
  recv = 14,
  other = 15,
};

// Whether the rank is entering, inside or done with its pending collective,
// or the collective completed with an error (failed: layout version 2).
enum class CollectiveState : std::uint8_t { none = 0, entering = 1, inside = 2, done = 3, failed = 4 };

// What a ring event's exit time is (enum scout_exit_kind of the publisher's
// C header): unknown from a publisher that predates it; returned when the
// call returned; completed when the backend said the operation finished;
// waited when the Work was seen completed after the trainer's wait() (within
// ~2 ms); ordered when a later call of its group completed (an upper bound).
enum class ExitKind : std::uint8_t { unknown = 0, returned = 1, completed = 2, waited = 3, ordered = 4 };

std::string_view phase_name(Phase phase);
std::string_view exit_kind_name(ExitKind kind);
std::string_view collective_type_name(CollectiveType type);
std::string_view collective_state_name(CollectiveState state);

// What identifies one collective call across the ranks of its process group.
struct Fingerprint {
  std::uint64_t group = 0;  // id of the process group (stable digest of its member ranks / name)
  CollectiveType type = CollectiveType::none;
  std::uint8_t dtype = 0;        // scout::DType code, 0 when none
  std::uint64_t count = 0;       // element count of the rank's tensor argument
  std::int64_t root_or_op = -1;  // root rank for rooted ops, reduce op code otherwise, -1 when none
  std::uint64_t group_seq = 0;   // per-group sequence number of this call (1-based)

  bool operator==(const Fingerprint&) const = default;
};

// One completed or in-flight collective from the record's ring.
struct CollectiveEvent {
  Fingerprint fingerprint;
  std::uint64_t op_seq = 0;                // the rank's global operation sequence number
  std::int64_t enter_ns = 0;               // CLOCK_REALTIME nanoseconds
  std::int64_t exit_ns = 0;                // 0 while still inside
  bool failed = false;                     // the call completed with an error (layout version 2)
  ExitKind exit_kind = ExitKind::unknown;  // what exit_ns is (the ring slot's low byte of `small`)

  bool operator==(const CollectiveEvent&) const = default;
};

// A consistent snapshot of one rank's record.
struct RankSnapshot {
  std::string job;
  std::string attempt;  // launcher attempt / restart id ("" when unknown)
  std::int64_t rank = -1;
  std::int64_t world_size = 0;
  std::array<std::int64_t, 6> coords{};  // (d, s, t, p, c, e)
  std::string host;
  std::int64_t pid = 0;
  std::int64_t start_ns = 0;  // writer process start, CLOCK_REALTIME ns

  std::uint64_t step = 0;
  std::uint64_t op_seq = 0;  // global operation sequence (every published event)
  Phase phase = Phase::unknown;
  Fingerprint pending;  // the current/last collective
  CollectiveState collective_state = CollectiveState::none;
  std::int64_t heartbeat_ns = 0;  // last heartbeat or event, CLOCK_REALTIME ns
  std::int64_t progress_ns = 0;   // last time step or op_seq advanced
  std::uint64_t events = 0;       // collective events ever written to the ring (> ring size: it wrapped)
  std::uint64_t dropped = 0;      // events dropped because another thread of the writer held its lock

  std::vector<CollectiveEvent> recent;  // the whole ring, oldest first

  bool operator==(const RankSnapshot&) const = default;
};

// Why a segment could not be turned into a snapshot (or what is odd about it).
enum class RecordProblem {
  none,
  torn,             // sequence stayed odd past the read timeout: writer died mid-write
  bad_magic,        // not a scout record
  unknown_version,  // a layout version this reader does not know
  wrong_size,       // header size disagrees with the segment size
  other_owner,      // segment owned by another user: refused
  other_job,        // record of another job
  unreadable,       // could not be opened or mapped
  corrupt,          // valid header but impossible contents (rank >= world size, unknown enum values)
};
std::string_view record_problem_name(RecordProblem problem);

// Result of reading one segment.
struct RecordRead {
  std::string segment;  // e.g. "scout.<job>.<rank>"
  RecordProblem problem = RecordProblem::none;
  std::string message;                   // for people, when problem != none
  bool writer_alive = false;             // pid exists and its start time matches the record
  bool stale = false;                    // an earlier attempt's record: another record of the job is newer
                                         // and names a different attempt or world size (reader.hpp)
  std::optional<RankSnapshot> snapshot;  // present when problem == none
};

}  // namespace scout::records
