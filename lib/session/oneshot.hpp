// One all-gather of one blob per member over a session formed for it and
// closed after it: for commands that exchange a few messages per run (replay's
// broadcast, barrier and timed gather; straggler's one gather per round) and
// want today's simple call. Keys live under `key_namespace`; members that
// never arrive come back as nullopt, never as a hang (the session's timeout).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/transport/store.hpp"

namespace scout::session {

struct OneShotOptions {
  std::string key_namespace;                 // e.g. JobToken::key_namespace() + "/straggler"
  std::int64_t member = 0;                   // this member's id, 0 <= member < members
  std::int64_t members = 1;                  // how many take part
  std::chrono::milliseconds timeout{10000};  // forming and the gather together
  std::string listen_address;                // Gloo device address; "" = this host's name, else 127.0.0.1
};

struct OneShotResult {
  std::vector<std::optional<std::vector<std::uint8_t>>> blobs;  // one per member; nullopt = never arrived / lost
  std::vector<std::string> notes;                               // what went wrong on the way
};

// Forms a session of `options.members`, all-gathers `mine`, closes the session.
Result<OneShotResult> gather_once(transport::KeyValueStore& store, const OneShotOptions& options,
                                  const std::vector<std::uint8_t>& mine);

}  // namespace scout::session
