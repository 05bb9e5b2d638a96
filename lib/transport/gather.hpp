// All-gather of one variable-size blob per observer over a Gloo TCP group that
// the observers form through a store (docs/contracts.md "Rendezvous and transport").
//
// Protocol, all keys under "<namespace>/g<G>/", G the first probe generation
// no observer has closed yet (Gloo's FileStore never deletes keys, so each
// probe needs a fresh prefix every observer can find without talking first):
//   round R: set "rR/here/<i>"; wait for the others' keys (bounded); write the
//   set seen as "rR/view/<i>"; when every member seen wrote the same view, form
//   a Gloo context over it (prefix "rR/gloo", ranks renumbered) and all-gather
//   the sizes, then the blobs. Any Gloo error poisons the context: survivors go
//   to round R+1 with those they saw, so a missing observer is named, never
//   waited for. At the end each observer writes "closed/<i>" and removes the
//   other keys it wrote.
// Every step is bounded by the caller's deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/transport/store.hpp"

namespace scout::transport {

struct GatherOptions {
  std::string key_namespace;           // JobToken::key_namespace()
  std::int64_t observer = 0;           // this observer's index, 0 <= observer < observers
  std::int64_t observers = 1;          // how many observers the probe expects (nodes)
  std::chrono::milliseconds timeout{10000};  // the whole gather, rendezvous included
  std::string listen_address;          // address the Gloo device binds; "" = this host's name, else 127.0.0.1
};

struct GatherResult {
  std::vector<std::optional<std::vector<std::uint8_t>>> blobs;  // one per observer; nullopt = never arrived / lost
  std::int64_t generation = 0;
  std::int64_t rounds = 0;             // rounds it took (1 when nobody was lost)
  std::vector<std::string> notes;      // what went wrong on the way, for details.transport
};

// Gathers `mine` from every observer that shows up within the timeout.
// Fails only when the store itself is unusable (then no observer can be reached).
Result<GatherResult> gather_blobs(KeyValueStore& store, const GatherOptions& options, const std::vector<std::uint8_t>& mine);

}  // namespace scout::transport
