// Who is in a session, who is not, and who was kept out: the reporting that
// every capability joining observers shares. Absent members are expected ids
// that never arrived or were lost on the way; rejections are contributions
// that failed authentication (or limits), and observers that announced
// themselves under the job's presence keys with another token or attempt
// (lib/transport/presence.hpp). A capability adapts these to its verdict
// (hang: details.unreachable and details.rejected).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/transport/auth.hpp"
#include "lib/transport/presence.hpp"
#include "lib/transport/store.hpp"

namespace scout::session {

// An expected member that is not in the session's group.
struct Absence {
  enum class Why { never_arrived, lost };
  std::int64_t member = -1;
  Why why = Why::never_arrived;
  std::string reason;  // in words, with the round it happened in
};

// A member or observer that was kept out, and why.
struct Rejection {
  enum class Source { contribution, presence };
  std::int64_t member = -1;  // the id its contribution came from, or the one the stray claims
  std::string reason;
  Source source = Source::contribution;
  std::string host;      // presence only: where it runs
  std::int64_t pid = 0;  // presence only
  std::string attempt;   // presence only: the attempt it probes
  std::string why;       // presence only: why it was kept out, short ("it holds another job token")
};

// How many strays a scan lists at most (a flood of announcements must not flood a verdict).
inline constexpr std::size_t k_max_listed_strays = 16;

// This member as it announces itself under the job's presence keys.
transport::PresenceEntry presence_of(const transport::JobToken& token, std::int64_t member, const std::string& host);

// Announces `self` where every observer of the job looks, whatever its token; returns the key
// of its entry, for end_announcement.
Result<std::string> announce(transport::KeyValueStore& store, const transport::JobToken& token,
                             const transport::PresenceEntry& self, std::chrono::milliseconds timeout);

// Marks `self`'s entry at `key` ended (it stays, for observers that met nobody: see scan_strays).
Status end_announcement(transport::KeyValueStore& store, const std::string& key, const transport::PresenceEntry& self);

struct StrayScan {
  std::vector<Rejection> rejections;  // at most k_max_listed_strays, ordered by (member, host, pid)
  std::vector<std::string> notes;     // unreadable entries, truncation
};
// Reads the presence keys once and lists the observers of another key id that
// could not have joined `self`'s session (see transport::find_strays): written
// within `max_age` of now and not known dead on this host. With `since_ns` >= 0 it lists
// instead every observer of another key id whose probe overlapped [since_ns, now], ended or
// not (transport::find_contemporaries): what an observer that met nobody reports.
Result<StrayScan> scan_strays(transport::KeyValueStore& store, const transport::JobToken& token,
                              const transport::PresenceEntry& self, std::chrono::milliseconds timeout,
                              std::chrono::nanoseconds max_age, std::int64_t since_ns = -1);

// Whether `pid` is a live process on this host.
bool pid_alive(std::int64_t pid);

}  // namespace scout::session
