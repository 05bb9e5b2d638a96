/* scout trainer-side publisher: a C ABI over scout's shared-memory progress
 * records (lib/records/layout.hpp, docs/contracts.md "Progress records").
 *
 * A trainer creates one record per rank and publishes what it does: step
 * begin, phase, collective enter/exit with a fingerprint, heartbeats. The
 * record is /dev/shm/scout.<job>.<rank>, mode 0600, and it is NOT removed
 * when the trainer exits (or crashes): `scout probe-hang` reads it post
 * mortem, and `scout records gc` removes records whose writer is gone.
 *
 * Contract: every function returns a status code (0 or a negative SCOUT_E*
 * value) and never throws. The publish functions never block, never
 * allocate, never make a system call other than clock_gettime, and are safe
 * to call from several threads of the writing process (a contended event is
 * dropped, counted in the record, and reported as SCOUT_EBUSY). Only
 * scout_record_create and scout_record_close do I/O.
 */
#ifndef SCOUT_PUBLISHER_H
#define SCOUT_PUBLISHER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SCOUT_PUBLISHER_API __attribute__((visibility("default")))
#else
#define SCOUT_PUBLISHER_API
#endif

#define SCOUT_OK 0
#define SCOUT_EINVAL (-1) /* bad argument (NULL, out of range, too long) */
#define SCOUT_EEXIST (-2) /* a live process already publishes this job and rank */
#define SCOUT_EPERM (-3)  /* an existing segment of that name belongs to another user */
#define SCOUT_ESYS (-4)   /* a system call failed (errno is kept) */
#define SCOUT_EBUSY (-5)  /* another thread was writing: this event was dropped */

/* Phases and collective kinds: the numeric values are scout's
 * (lib/records/snapshot.hpp Phase, CollectiveType). */
enum scout_phase {
  SCOUT_PHASE_UNKNOWN = 0,
  SCOUT_PHASE_FORWARD = 1,
  SCOUT_PHASE_BACKWARD = 2,
  SCOUT_PHASE_OPTIMIZER = 3,
  SCOUT_PHASE_DATALOADER = 4,
  SCOUT_PHASE_CHECKPOINT = 5,
  SCOUT_PHASE_COLLECTIVE = 6,
  SCOUT_PHASE_IDLE = 7,
  /* The process is ending on an uncaught communication error (the Python
   * publisher sets it from sys.excepthook): hang verdicts count the rank as a
   * victim of a peer's failure, not as where the hang began. */
  SCOUT_PHASE_COMM_ERROR = 8,
  /* The process is ending on SIGTERM (set by the handler of
   * scout_record_watch_termination): its launcher tore it down, often after
   * another worker failed; a victim, like SCOUT_PHASE_COMM_ERROR. */
  SCOUT_PHASE_TERMINATED = 9
};
enum scout_collective {
  SCOUT_COLL_NONE = 0,
  SCOUT_COLL_ALL_REDUCE = 1,
  SCOUT_COLL_ALL_GATHER = 2,
  SCOUT_COLL_ALL_GATHER_INTO_TENSOR = 3,
  SCOUT_COLL_REDUCE_SCATTER = 4,
  SCOUT_COLL_REDUCE_SCATTER_TENSOR = 5,
  SCOUT_COLL_ALL_TO_ALL = 6,
  SCOUT_COLL_ALL_TO_ALL_SINGLE = 7,
  SCOUT_COLL_BROADCAST = 8,
  SCOUT_COLL_REDUCE = 9,
  SCOUT_COLL_GATHER = 10,
  SCOUT_COLL_SCATTER = 11,
  SCOUT_COLL_BARRIER = 12,
  SCOUT_COLL_SEND = 13,
  SCOUT_COLL_RECV = 14,
  SCOUT_COLL_OTHER = 15
};

typedef struct scout_record scout_record;

/* What identifies the record. job: the job id (1..127 bytes); attempt: the
 * launcher's restart id or NULL; rank in [0, world_size); coords: (d, s, t,
 * p, c, e) or NULL for all zero; host: NULL for gethostname(). */
typedef struct scout_record_options {
  const char* job;
  const char* attempt;
  int64_t rank;
  int64_t world_size;
  const int64_t* coords;
  const char* host;
} scout_record_options;

/* Creates (or replaces a dead writer's) record for options->job and
 * options->rank and stores the handle in *out. Fails with SCOUT_EEXIST when a
 * live process other than this one owns that record, SCOUT_EPERM when the
 * existing segment belongs to another user. The new segment appears
 * atomically (written under a temporary name, then renamed). */
SCOUT_PUBLISHER_API int scout_record_create(const scout_record_options* options, scout_record** out);

/* Unmaps and frees `record`; removes the segment too when `unlink_segment` is
 * non-zero (normally 0: records outlive their writers for post-mortem probes).
 * No other call on `record` may run concurrently with or after it. */
SCOUT_PUBLISHER_API int scout_record_close(scout_record* record, int unlink_segment);

/* A new training step `step` begins (phase becomes unknown until the next
 * scout_phase). */
SCOUT_PUBLISHER_API int scout_step_begin(scout_record* record, uint64_t step);

/* The rank enters `phase` (an enum scout_phase value). */
SCOUT_PUBLISHER_API int scout_phase(scout_record* record, uint8_t phase);

/* Watches SIGTERM for `record`: the process's handler sets the record's phase
 * to SCOUT_PHASE_TERMINATED (when no other thread is writing it at that
 * moment), then does what was done before (the previous handler, or the
 * default action: the process ends). One record per process is watched (the
 * last one given); scout_record_close stops watching it. A launcher's SIGTERM
 * then reads as a victim's end, not as a rank killed outright. */
SCOUT_PUBLISHER_API int scout_record_watch_termination(scout_record* record);

/* The rank enters a collective with this fingerprint: `group` the process
 * group id (scout_group_id), `type` an enum scout_collective value, `dtype`
 * scout's DType code (0 none), `count` the element count, `root_or_op` the
 * root rank of rooted collectives or the reduce op code (-1 none), `group_seq`
 * the per-group sequence number (1-based). Stores a token for
 * scout_collective_exit in *token (may be NULL). */
SCOUT_PUBLISHER_API int scout_collective_enter(scout_record* record, uint64_t group, uint8_t type, uint8_t dtype,
                                               uint64_t count, int64_t root_or_op, uint64_t group_seq, uint64_t* token);

/* The collective entered with `token` completed (its exit time is when the
 * call returned: SCOUT_EXIT_RETURNED). */
SCOUT_PUBLISHER_API int scout_collective_exit(scout_record* record, uint64_t token);

/* What an exit time is, kept in the call's ring slot (the low byte of the
 * slot's `small` word; zero from publishers that predate it). */
enum scout_exit_kind {
  SCOUT_EXIT_UNKNOWN = 0,   /* not said (an older publisher) */
  SCOUT_EXIT_RETURNED = 1,  /* the call returned (a synchronous call: its completion) */
  SCOUT_EXIT_COMPLETED = 2, /* the backend said the operation finished (a Work's future, completion hooks) */
  SCOUT_EXIT_WAITED = 3,    /* the Work was seen completed after the trainer's wait() (within ~2 ms) */
  SCOUT_EXIT_ORDERED = 4    /* a later call of its group completed: an upper bound */
};

/* scout_collective_exit with the kind of its time (an enum scout_exit_kind
 * value; SCOUT_EINVAL for another). */
SCOUT_PUBLISHER_API int scout_collective_exit_kind(scout_record* record, uint64_t token, uint8_t kind);

/* The collective entered with `token` completed with an error (its Work's
 * wait() raised, the call raised, a peer closed the connection): published as
 * state "failed" in the progress block (once no other collective is in
 * flight) and in the call's ring slot, distinct from done. Layout version 2. */
SCOUT_PUBLISHER_API int scout_collective_fail(scout_record* record, uint64_t token);

/* Replaces the record's coordinates (d, s, t, p, c, e), e.g. once the job's
 * device mesh is known (the Python package finds it from a DeviceMesh when
 * SCOUT_MESH is not set). Not atomic across the six words: call it before the
 * first collective of that mesh. SCOUT_EINVAL for a negative coordinate. */
SCOUT_PUBLISHER_API int scout_record_set_coords(scout_record* record, const int64_t* coords);

/* The rank is alive (stores the time only; does not advance op_seq). */
SCOUT_PUBLISHER_API int scout_heartbeat(scout_record* record);

/* Stable process-group id of a group given by its members' global ranks in
 * group order (the same function as scout's reader). */
SCOUT_PUBLISHER_API uint64_t scout_group_id(const int64_t* ranks, size_t count);

/* Writes the segment name of (job, rank) into buf (capacity `size`). */
SCOUT_PUBLISHER_API int scout_segment_name(const char* job, int64_t rank, char* buf, size_t size);

/* Text for a status code. */
SCOUT_PUBLISHER_API const char* scout_strerror(int status);

/* The record layout version this library writes. */
SCOUT_PUBLISHER_API uint32_t scout_layout_version(void);

#ifdef __cplusplus
}
#endif

#endif /* SCOUT_PUBLISHER_H */
