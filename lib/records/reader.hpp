// Reads the progress records of the ranks on this host (lib/records/layout.hpp)
// into RecordReads (snapshot.hpp), and removes dead writers' records.
//
// Policy, in the order checks are made for one segment:
//  - owner: a segment owned by another uid, or accessible to other users
//    (mode not 0600), is refused (other_owner) without being mapped, also for
//    root: a record is evidence a verdict rests on, and anyone could plant a
//    segment with a job's name. OwnerPolicy::any_user (--allow-other-owner)
//    reads them anyway, for an operator who knows whose job it is.
//  - magic, then layout version, then the size written in the header against
//    the segment's size and sizeof(layout::Record): bad_magic, unknown_version,
//    wrong_size. Nothing past the first three words is read before they pass.
//  - job: the full job id stored in the record must equal the requested one
//    (sanitized names of distinct jobs can collide): other_job.
//  - progress: read through the latch with retries up to a deadline; a writer
//    that moves on faster than the reader can copy for the whole deadline gives
//    torn (a dead writer never does: the latch keeps one copy complete).
//  - contents: rank < world size, enum values known: otherwise corrupt.
//  - writer liveness: the record's pid exists, is not a zombie, and its start
//    time in /proc/<pid>/stat equals the one stored (pid reuse is detected).
//    Only meaningful in the writer's pid namespace.
//  - stale: within one job, the record created last defines the current
//    attempt; records naming another attempt or world size are stale.
// Hazard: segments are read through a read-only shared mapping; a process of
// the same user that truncates a segment while it is being read would make
// the reader fault (SIGBUS). scout's publisher never truncates a record in
// place: it writes a new one under a temporary name and renames it.
// Not thread-safe to mutate ReaderOptions while reading; reads themselves
// share nothing and may run in parallel.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/records/snapshot.hpp"

namespace scout::records {

// Whether segments of other users are read.
enum class OwnerPolicy { same_user, any_user };

struct ReaderOptions {
  std::string job;                              // this job only; "" = every scout segment
  std::string shm_dir = "/dev/shm";             // where segments live (tests use a temporary dir)
  std::chrono::milliseconds read_timeout{100};  // per-segment budget for a consistent read
  OwnerPolicy owner = OwnerPolicy::same_user;
};

// One segment name split into its parts.
struct SegmentName {
  std::string job;  // the sanitized job component
  std::int64_t rank = -1;
};

// Parses "scout.<job>.<rank>" (job: [A-Za-z0-9_-]+, rank: decimal); nullopt
// for any other name (temporary names of records being created included).
std::optional<SegmentName> parse_segment_name(std::string_view name);

// Names of the scout segments in options.shm_dir (of options.job when given),
// sorted by job, then rank. Fails (unavailable) when the directory cannot be read.
Result<std::vector<std::string>> list_segments(const ReaderOptions& options);

// Reads segment `name` of options.shm_dir with the checks above.
RecordRead read_segment(std::string_view name, const ReaderOptions& options);

// Reads every segment list_segments returns and marks stale ones.
Result<std::vector<RecordRead>> read_records(const ReaderOptions& options);

// Marks the reads whose attempt or world size differ from the newest record
// of the same job (by creation time) as stale. Exposed for tests.
void mark_stale(std::vector<RecordRead>& reads);

// True when process `pid` exists, is not a zombie, and started at
// `start_ticks` (clock ticks since boot, /proc/<pid>/stat field 22).
bool writer_alive(std::int64_t pid, std::uint64_t start_ticks);

enum class GcMode { remove, dry_run };

// What gc did (or would do) with one segment.
struct GcEntry {
  std::string segment;
  bool removed = false;  // removed (or would be, in a dry run)
  std::string reason;    // why removed or kept
};

// Removes the records (and leftover temporary files of records being created)
// of options.job (or every job) whose writer is gone. A live writer's record,
// and any segment that is refused (other owner, unknown version, bad magic,
// wrong size), is kept. A segment is renamed aside and checked to be the very
// file that was judged before it is unlinked, so a record a new writer put in
// place meanwhile is restored rather than lost.
Result<std::vector<GcEntry>> gc_records(const ReaderOptions& options, GcMode mode);

}  // namespace scout::records
