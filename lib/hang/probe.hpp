// One hang probe, end to end: turn this node's record reads into evidence,
// gather every node's evidence through the store and Gloo (authenticated with
// the job token), and decide. Shared by `scout probe-hang` (once) and
// `scout observe` (on every distinct stall).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/hang/decide.hpp"
#include "lib/hang/position.hpp"
#include "lib/hang/thresholds.hpp"
#include "lib/records/snapshot.hpp"
#include "lib/session/join.hpp"
#include "lib/session/session.hpp"
#include "lib/transport/store.hpp"

namespace scout::hang {

// Where the local records come from (the record reader, or a test double).
using RecordSource = std::function<Result<std::vector<records::RecordRead>>()>;

struct ProbeOptions {
  std::string job;
  std::string attempt;                       // "" = whatever the records say
  std::optional<transport::StoreUri> store;  // absent: the per-job default (only used with nodes > 1)
  // tcp://: host the TCPStore here (always), never, or when this is observer 0 and no store answers yet (auto).
  using HostStore = session::HostStore;
  HostStore host_store = HostStore::auto_observer0;
  std::int64_t nodes = 1;                    // observers expected
  std::optional<std::int64_t> node_index;    // absent: derived from the lowest local rank
  std::chrono::milliseconds timeout{10000};  // whole probe: read, gather, decide
  std::optional<Mesh> mesh;
  std::chrono::milliseconds threshold{k_default_silence_threshold};  // silence threshold (thresholds.hpp)
  std::optional<std::set<std::int64_t>> local_ranks;                 // only these ranks' records are this node's
  std::string token_file;
  std::string listen_address;  // Gloo device address ("" = automatic)
  std::string command = "probe-hang";
  session::Limits evidence_limits;       // bounds on the evidence blobs the observers exchange
  std::int64_t observer_group_size = 0;  // observers per group of a two-level gather (0: automatic)
};

// Observers meet in one flat session up to this many; beyond, in two levels.
inline constexpr std::int64_t k_max_flat_observers = 64;

// The group size of the gather for `nodes` observers: `requested` when it is
// positive (>= nodes means one flat session), else flat up to
// k_max_flat_observers and about sqrt(2 nodes / 3) beyond (the size that
// minimizes the latency steps; lib/session/README.md "Observer session: cost model").
std::int64_t observer_group_size(std::int64_t nodes, std::int64_t requested);

// This node's evidence from its record reads at `now_ns`.
NodeEvidence collect_evidence(const std::vector<records::RecordRead>& reads, const ProbeOptions& options,
                              std::int64_t observer, std::int64_t now_ns);

// The node index of this observer: options.node_index, or
// floor(lowest local rank * nodes / world size). Usage error when neither is known.
Result<std::int64_t> resolve_node_index(const ProbeOptions& options, const NodeEvidence& local);

// The two-phase gather's selection: no node when the table's positions
// (position.hpp) prove the job healthy, else every node (decide() compares
// every replica group's histories and follows every wait, so a stall needs
// all of the evidence).
std::vector<std::int64_t> select_evidence(const session::PositionTable& table, std::int64_t threshold_ns);

// What a probe decided on, for its timeline trace (lib/trace): one slot per observer (node index).
// A stall: every reachable node's evidence as the decision held it (a flat session's observers and
// a hierarchy's leaders: every node's, rings restored from their representatives'; a hierarchy's
// other members: their own node's, and every node's position from the leaders' decision).
// Healthy by positions: this node's evidence and every node's position. A node with neither
// was silent. `local_only`: the store was unreachable and this observer decided alone, on its
// own node's evidence (`nodes` holds that node only).
struct ProbeEvidence {
  std::vector<std::optional<NodeEvidence>> nodes;
  std::vector<std::optional<NodePosition>> positions;  // empty, or one slot per observer
  std::int64_t now_ns = 0;                             // the decision's time
  bool local_only = false;
};

// Runs one probe and returns the verdict every observer agrees on.
// Errors only when nothing can be decided at all (bad options, no store).
// `evidence`, when given, receives what the decision was made on.
Result<Verdict> run_probe(const ProbeOptions& options, const RecordSource& source, ProbeEvidence* evidence = nullptr);

}  // namespace scout::hang
