#include "lib/session/membership.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "lib/common/clock.hpp"
#include "lib/common/proc.hpp"

namespace scout::session {

namespace {

bool alive_for_scan(std::int64_t pid) {
  return proc::pid_alive(pid);
}

}  // namespace

bool pid_alive(std::int64_t pid) {
  return proc::pid_alive(pid);
}

transport::PresenceEntry presence_of(const transport::JobToken& token, std::int64_t member, const std::string& host) {
  return {.key_id = token.key_id(),
          .attempt = token.attempt(),
          .observer = member,
          .host = host,
          .pid = static_cast<std::int64_t>(getpid()),
          .authenticated = token.authenticated(),
          .written_ns = realtime_ns()};
}

Result<std::string> announce(transport::KeyValueStore& store, const transport::JobToken& token,
                             const transport::PresenceEntry& self, std::chrono::milliseconds timeout) {
  return transport::announce_presence(store, token.presence_prefix(), self, timeout);
}

Status end_announcement(transport::KeyValueStore& store, const std::string& key, const transport::PresenceEntry& self) {
  return transport::end_presence(store, key, self);
}

Result<StrayScan> scan_strays(transport::KeyValueStore& store, const transport::JobToken& token,
                              const transport::PresenceEntry& self, std::chrono::milliseconds timeout,
                              std::chrono::nanoseconds max_age, std::int64_t since_ns) {
  auto scan = transport::read_presence(store, token.presence_prefix(), timeout);
  if (!scan) return scan.error();
  StrayScan out;
  out.notes = scan->notes;
  auto strays = since_ns >= 0 ? transport::find_contemporaries(*scan, self, since_ns, realtime_ns(), max_age.count(),
                                                               alive_for_scan)
                              : transport::find_strays(*scan, self, realtime_ns(), max_age.count(), alive_for_scan);
  if (strays.size() > k_max_listed_strays)
    out.notes.push_back(fmt::format("presence: {} observers of another key id; the first {} are listed", strays.size(),
                                    k_max_listed_strays));
  for (std::size_t i = 0; i < std::min(strays.size(), k_max_listed_strays); ++i) {
    Rejection r;
    r.member = strays[i].entry.observer;
    r.reason = strays[i].reason;
    r.source = Rejection::Source::presence;
    r.host = strays[i].entry.host;
    r.pid = strays[i].entry.pid;
    r.attempt = strays[i].entry.attempt;
    r.why = strays[i].why;
    out.rejections.push_back(std::move(r));
  }
  return out;
}

}  // namespace scout::session
