// The shared-memory layout of a progress record (docs/contracts.md "Progress records").
// Header-only and free of scout_core: the publisher library (integrations/
// publisher) and the reader (lib/records/reader.cpp) both include it, so the
// two can never disagree about an offset.
//
// A record is one POSIX shared-memory segment per rank, /dev/shm/scout.<job>.<rank>,
// created 0600 by the trainer's user. Every field is a std::atomic<uint64_t>
// word (lock-free, so a plain load/store in another process), in this order:
//
//   Header    written once before `magic` is stored (release); constant after.
//   Progress  two copies behind a latch sequence (see below); what the rank does.
//   heartbeat one word, stored on every event and by scout_heartbeat.
//   Ring      the last k_ring_size collective events, each slot with its own
//             sequence word (odd while being written).
//
// Progress uses a "latch" (two-copy seqlock, like Linux's seqcount_latch):
// the writer bumps `latch` to odd, writes copy 0, bumps it to even, writes
// copy 1. A reader reads copy[latch & 1] and retries when `latch` moved. A
// writer that dies at any point leaves one copy complete, so a post-mortem
// reader still gets the last consistent state: a crashed trainer never leaves
// a record that can only be read torn. Writers of one record (threads of one
// process) exclude each other with `writer_lock` (a try-lock with a bounded
// spin: writers never block; a contended event is dropped and counted).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace scout::records::layout {

using Word = std::atomic<std::uint64_t>;
static_assert(Word::is_always_lock_free, "records need lock-free 64-bit atomics");

// "SCOUTREC" in little-endian byte order.
inline constexpr std::uint64_t k_magic = 0x43455254554f4353ULL;
// Bumped whenever a field moves or changes meaning; readers refuse others.
// Version 2 (same size and offsets as 1) adds collective state 4, "failed", in
// Progress::small and in a ring slot's small word (bits 8-15; 0 in version 1
// slots and in slots of calls that did not fail). A version 2 reader reads
// version 1 records too (k_min_layout_version); a version 1 reader refuses
// version 2 records as unknown_version rather than misreading "failed".
inline constexpr std::uint64_t k_layout_version = 2;
inline constexpr std::uint64_t k_min_layout_version = 1;
inline constexpr std::size_t k_ring_size = 64;
inline constexpr std::size_t k_job_words = 16;     // 128 bytes, NUL padded
inline constexpr std::size_t k_attempt_words = 8;  // 64 bytes
inline constexpr std::size_t k_host_words = 8;     // 64 bytes
inline constexpr std::size_t k_max_job_bytes = k_job_words * 8 - 1;
inline constexpr std::size_t k_max_attempt_bytes = k_attempt_words * 8 - 1;
inline constexpr std::size_t k_max_host_bytes = k_host_words * 8 - 1;
// Segment names start with this prefix: "scout.<sanitized job>.<rank>".
inline constexpr std::string_view k_segment_prefix = "scout.";
// Longest sanitized job component of a segment name (NAME_MAX is 255).
inline constexpr std::size_t k_max_job_name_bytes = 200;

// Constant identity of the writer, valid once `magic` reads k_magic.
struct Header {
  Word magic;
  Word version;
  Word size;  // sizeof(Record)
  Word rank;
  Word world_size;
  Word coords[6];  // (d, s, t, p, c, e)
  Word pid;
  Word start_ns;     // writer process start, CLOCK_REALTIME ns
  Word start_ticks;  // /proc/<pid>/stat field 22 (clock ticks since boot): detects pid reuse
  Word create_ns;    // when the record was created, CLOCK_REALTIME ns
  Word uid;          // the writer's effective uid (the segment's owner)
  Word job[k_job_words];
  Word attempt[k_attempt_words];
  Word host[k_host_words];
  Word reserved[8];
};

// Packing of the small fields of a fingerprint into one word.
// bits 0-7 phase, 8-15 collective state, 16-23 collective type, 24-31 dtype.
inline constexpr std::uint64_t pack_small(std::uint8_t phase, std::uint8_t state, std::uint8_t type,
                                          std::uint8_t dtype) {
  return std::uint64_t{phase} | std::uint64_t{state} << 8 | std::uint64_t{type} << 16 | std::uint64_t{dtype} << 24;
}
inline constexpr std::uint8_t small_phase(std::uint64_t w) {
  return static_cast<std::uint8_t>(w);
}
inline constexpr std::uint8_t small_state(std::uint64_t w) {
  return static_cast<std::uint8_t>(w >> 8);
}
inline constexpr std::uint8_t small_type(std::uint64_t w) {
  return static_cast<std::uint8_t>(w >> 16);
}
inline constexpr std::uint8_t small_dtype(std::uint64_t w) {
  return static_cast<std::uint8_t>(w >> 24);
}

// One copy of the progress block.
struct Progress {
  Word step;
  Word op_seq;          // every published event except heartbeats advances it
  Word small;           // pack_small(phase, collective state, pending type, pending dtype)
  Word group;           // pending collective: process-group id
  Word count;           // element count
  Word root_or_op;      // int64 stored as two's complement
  Word group_seq;       // per-group sequence number (1-based)
  Word pending_op_seq;  // op_seq of the pending collective's enter
  Word in_flight;       // collectives entered and not yet exited
  Word progress_ns;     // last time step or op_seq advanced
  Word events;          // collective events ever written to the ring
  Word dropped;         // events dropped because another thread held the writer lock
};

// One collective event of the ring.
struct RingSlot {
  Word seq;     // odd while the slot is being written
  Word op_seq;  // op_seq of the enter; 0: slot never used
  Word small;   // pack_small(0, state, type, dtype): state 4 (failed) once the call failed, else 0
  Word group;
  Word count;
  Word root_or_op;
  Word group_seq;
  Word enter_ns;
  Word exit_ns;  // 0 while inside
};

struct Record {
  Header header;
  Word writer_lock;  // 0 free, 1 held (threads of the writing process)
  Word latch;        // progress latch sequence
  Progress progress[2];
  Word heartbeat_ns;  // last heartbeat or event, CLOCK_REALTIME ns
  Word reserved[7];
  RingSlot ring[k_ring_size];
};

static_assert(sizeof(Header) == 56 * 8);
static_assert(offsetof(Header, job) == 16 * 8);
static_assert(offsetof(Header, host) == 40 * 8);
static_assert(sizeof(Progress) == 12 * 8);
static_assert(sizeof(RingSlot) == 9 * 8);
static_assert(offsetof(Record, writer_lock) == 56 * 8);
static_assert(offsetof(Record, latch) == 57 * 8);
static_assert(offsetof(Record, progress) == 58 * 8);
static_assert(offsetof(Record, heartbeat_ns) == 82 * 8);
static_assert(offsetof(Record, ring) == 90 * 8);
static_assert(sizeof(Record) == (90 + 9 * k_ring_size) * 8);
static_assert(sizeof(Record) == 5328);

// The job component of a segment name: [A-Za-z0-9_-] kept, every other byte
// replaced by '_', cut to k_max_job_name_bytes. Distinct jobs may map to one
// name; the reader compares the full job id stored in the record.
inline std::string sanitize_job(std::string_view job) {
  std::string out;
  for (char c : job.substr(0, k_max_job_name_bytes)) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    out.push_back(keep ? c : '_');
  }
  return out;
}

// The segment name of `rank` of `job`, without the leading '/'.
inline std::string segment_name(std::string_view job, std::int64_t rank) {
  return std::string(k_segment_prefix) + sanitize_job(job) + "." + std::to_string(rank);
}

// Stable id of a process group from its members' global ranks, in group
// order: FNV-1a 64 over each rank as 8 little-endian bytes, then the count.
// Every rank computes the same id for the same group with no communication.
inline std::uint64_t group_id(const std::int64_t* ranks, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xffU;
      h *= 0x100000001b3ULL;
    }
  };
  for (std::size_t i = 0; i < n; ++i) mix(static_cast<std::uint64_t>(ranks[i]));
  mix(n);
  return h;
}

// Stores `text` (cut to words*8-1 bytes) into `words` as NUL-padded bytes.
inline void store_string(Word* words, std::size_t n_words, std::string_view text) {
  std::size_t limit = n_words * 8 - 1;
  for (std::size_t w = 0; w < n_words; ++w) {
    std::uint64_t v = 0;
    for (std::size_t b = 0; b < 8; ++b) {
      std::size_t i = w * 8 + b;
      if (i < text.size() && i < limit) v |= std::uint64_t{static_cast<unsigned char>(text[i])} << (8 * b);
    }
    words[w].store(v, std::memory_order_relaxed);
  }
}

// Loads a string stored by store_string (stops at the first NUL).
inline std::string load_string(const Word* words, std::size_t n_words) {
  std::string out;
  for (std::size_t w = 0; w < n_words; ++w) {
    std::uint64_t v = words[w].load(std::memory_order_relaxed);
    for (std::size_t b = 0; b < 8; ++b) {
      char c = static_cast<char>((v >> (8 * b)) & 0xffU);
      if (c == '\0') return out;
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace scout::records::layout
