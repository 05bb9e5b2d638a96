// Presence: how an observer that was kept out is reported instead of missed.
//
// The job token namespaces every rendezvous key (auth.hpp), so an observer
// holding another token, or probing another attempt, never meets this job's
// observers. That keeps it out, but alone it would leave it invisible: the
// node it claims would look merely unreachable. So every observer also
// announces itself under keys that depend on the job name only:
//   "<prefix>/n"       a store counter; add(+1) hands out slot numbers
//   "<prefix>/<slot>"  a small JSON object (PresenceEntry); slot = counter
//                      mod k_presence_max_slots (a ring: the store holds at
//                      most that many entries per job)
// and reads the slots once its gather is over. An entry with another key id is
// an observer that was not admitted; the verdict lists it in details.rejected.
// At the end of its probe an observer rewrites its entry with ended_ns, and the
// entry stays: a finished observer is no stray of a later probe, but an
// observer that met nobody can still tell that the job's observers ran
// meanwhile with another token or attempt (find_contemporaries), and say so.
// Presence is only ever reported, never believed as evidence, and reading it is
// bounded (slots scanned, bytes per entry, time).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/transport/store.hpp"

namespace scout::transport {

// What an observer announces (no secret, no namespace, no job name).
struct PresenceEntry {
  std::string key_id;          // JobToken::key_id()
  std::string attempt;         // as the observer was told (may be "")
  std::int64_t observer = -1;  // the observer index it claims
  std::string host;
  std::int64_t pid = 0;
  bool authenticated = false;   // it holds a job token (not the unauthenticated default)
  std::int64_t written_ns = 0;  // CLOCK_REALTIME when announced
  std::int64_t ended_ns = 0;    // CLOCK_REALTIME when its probe ended (0: running, or it died)
};

// The largest entry accepted when reading (bytes) and the most slots scanned.
inline constexpr std::size_t k_presence_max_bytes = 4096;
inline constexpr std::int64_t k_presence_max_slots = 256;

std::string encode_presence(const PresenceEntry& entry);
// Validates every field; the error says what is wrong.
Result<PresenceEntry> decode_presence(std::string_view text);

// Claims a slot and writes `entry` there; returns the slot's key (store.cleanup() leaves it).
Result<std::string> announce_presence(KeyValueStore& store, const std::string& prefix, const PresenceEntry& entry,
                                      std::chrono::milliseconds timeout);

// Rewrites the entry at `key` (announce_presence's) with ended_ns = now.
Status end_presence(KeyValueStore& store, const std::string& key, PresenceEntry entry);

struct PresenceScan {
  std::vector<PresenceEntry> entries;
  std::vector<std::string> notes;  // malformed entries, unreadable slots
};
// Reads the newest k_presence_max_slots slots that still exist, within `timeout`.
Result<PresenceScan> read_presence(KeyValueStore& store, const std::string& prefix, std::chrono::milliseconds timeout);

// An announced observer that could not have joined `self`'s probe.
struct StrayObserver {
  PresenceEntry entry;
  std::string reason;  // why it was not admitted, in words (who, why, key id)
  std::string why;     // why alone: "it holds another job token", "it probes attempt 'A', this probe attempt 'B'", ...
};
// The entries of `scan` that are not of self's kind (another key id), written
// at most `max_age_ns` before `now_ns`, and not known dead (same host, pid
// gone); one per (host, pid, observer), ordered by (observer, host, pid) so
// that observers list them alike. `alive(pid)` answers for this host.
std::vector<StrayObserver> find_strays(const PresenceScan& scan, const PresenceEntry& self, std::int64_t now_ns,
                                       std::int64_t max_age_ns, bool (*alive)(std::int64_t pid));

// The entries of `scan` of another key id whose probe overlapped [since_ns,
// now_ns]: ended at or after since_ns, or still running (written at most
// `max_age_ns` before now_ns, and not known dead); ordered and deduplicated as
// find_strays. An observer that met no other observer of its job reads these
// to tell a wrong token or attempt from peers that are down.
std::vector<StrayObserver> find_contemporaries(const PresenceScan& scan, const PresenceEntry& self,
                                               std::int64_t since_ns, std::int64_t now_ns, std::int64_t max_age_ns,
                                               bool (*alive)(std::int64_t pid));

}  // namespace scout::transport
