// The observers' session: agreed, authenticated members that meet through a
// rendezvous store (file:// or tcp://) and talk over Gloo TCP, offering
// all-gather, broadcast, barrier and timed operations with limits and
// timeouts given per operation. Every capability that joins observers
// (probe-hang, observe, replay, straggler) builds on it; it sits below all of
// them and knows nothing of hangs, records or verdicts: contributions are
// opaque bytes.
//
// Forming (keys under "<namespace>[/<name>]/g<G>/", G the first generation no
// expected member has closed yet: Gloo's FileStore never deletes keys, so each
// session needs a fresh prefix every member can find without talking first):
//   round R: set "rR/here/<id>" (its value: the operation the member is at);
//   wait for the others' keys (round 0 waits longest: that is where members
//   started at different times meet) until the first member to stop waiting
//   marks the round's arrival over ("rR/arrival_closed"), so that members
//   whose waits end apart still write the same view; write the set seen as
//   "rR/view/<id>";
//   when every member seen wrote the same view, connect a Gloo group over it
//   (prefix "rR/gloo/", ranks renumbered in id order).
// Re-forming: a Gloo group is unusable after any error. When an operation
// fails, the survivors form round R+1 among those at the same operation and
// run it again, so a member that is gone is named (lost in round R), never
// waited for; a member that never arrives is named absent. Each step is
// bounded by the operation's deadline; running out of time leaves a member
// alone with its own contribution, never hanging.
// Authentication: with a signer (the job token), every contribution carries
// HMAC(key, "<namespace>[/<name>]/<op name>/<sender id>" || bytes); one that does not
// verify is reported as a rejection, never passed on.
// Closing: each member writes "closed/<id>", removes the other keys it wrote,
// and waits (bounded) for the others' closed markers, so a member that hosts a
// tcp:// store does not take it down under a peer still cleaning up.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/session/membership.hpp"
#include "lib/transport/auth.hpp"
#include "lib/transport/gloo_group.hpp"
#include "lib/transport/store.hpp"

namespace scout::session {

using Bytes = std::vector<std::uint8_t>;

// Bounds on what one operation moves; every member checks the same bounds
// (the smallest any member asks for wins), so all agree on what is dropped.
struct Limits {
  std::uint64_t max_bytes_per_member = std::uint64_t{64} << 20;  // one contribution, signature included
  std::uint64_t max_total_bytes = std::uint64_t{1} << 30;        // everything one member receives in one operation
};

struct SessionOptions {
  std::string key_namespace;                    // e.g. JobToken::key_namespace(); every member of one session shares it
  std::string name;                             // "" = the job's world session; else a sub-area ("straggler", "rack3")
  std::int64_t member = 0;                      // this member's id
  std::int64_t id_space = 1;                    // ids are 0 <= id < id_space (the number of observers a job has)
  std::vector<std::int64_t> expected;           // ids expected in this session; empty = every id in the id space
  std::chrono::milliseconds timeout{10000};     // forming: arrival, agreement and connecting
  std::string listen_address;                   // Gloo device address; "" = this host's name, else 127.0.0.1
  const transport::JobToken* signer = nullptr;  // signs and verifies contributions; null = unauthenticated
  int max_rounds = 4;                           // formation rounds an operation may use in all
  // Shared by the sessions of one process (a hierarchy's levels); null: the session makes its own.
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<transport::TrafficCounters> traffic;
};

// One operation's name (it is part of what is signed), deadline and limits.
struct OpOptions {
  std::string name = "op";
  std::chrono::milliseconds timeout{10000};
  Limits limits;
};

// What one member contributed to an operation, as this member received it.
struct Contribution {
  enum class State { ok, absent, lost, rejected, over_limit };
  State state = State::absent;
  Bytes data;          // state == ok only
  std::string reason;  // why not ok, in words
};
std::string_view contribution_state_name(Contribution::State state);

struct GatherResult {
  std::vector<Contribution> from;  // indexed by member id (id_space entries); ids not expected stay absent
  std::int64_t rounds = 0;         // formation rounds the operation needed (0: it ran on the group formed before)
};

// A timed operation: its result, this member's duration, and every member's
// (a second, fixed-size all-gather of 8 bytes a member; -1 where unknown).
template <typename T>
struct Timed {
  T value;
  std::chrono::nanoseconds duration{0};
  std::vector<std::int64_t> durations_ns;  // indexed by member id
};

// The table of compact positions a two-phase gather builds: one fixed-size
// position per member id (nullopt: absent, lost, rejected or malformed).
struct PositionTable {
  std::size_t position_bytes = 0;
  std::vector<std::optional<Bytes>> positions;  // indexed by member id
};

// A two-phase gather: compact, fixed-size positions from every member first;
// then `select`, run alike wherever the whole table is (every member of a flat
// session, every leader of a hierarchy), names the few members that stand
// out, and only they send `details` (rings, histories); `decide` turns table
// and details into the bytes every member receives (a verdict).
struct TwoPhaseRequest {
  std::string name = "two-phase";  // operation names derive from it ("<name>/positions", "<name>/details", ...)
  Bytes position;                  // exactly position_bytes
  std::size_t position_bytes = 32;
  std::function<Bytes()> details;  // called only when this member is selected
  std::function<std::vector<std::int64_t>(const PositionTable&)> select;
  std::function<Bytes(const PositionTable&, const std::map<std::int64_t, Bytes>&)> decide;
  OpOptions op;  // timeout and limits of each step
};

struct TwoPhaseResult {
  Bytes decision;                         // the same on every member
  std::vector<std::int64_t> selected;     // sorted ids whose details were asked for
  std::optional<PositionTable> table;     // where the table was assembled
  std::map<std::int64_t, Bytes> details;  // where the table was assembled
  // Each member's contribution to either phase (indexed by member id; the bytes are moved into
  // table and details): who was absent, lost, rejected or over a limit. A flat session's members
  // all hold it; in a hierarchy, the leaders (each group's leader carries its members' states up).
  std::vector<Contribution> positions_from, details_from;
};

class Session {
 public:
  // Forms the session (see above). Fails only when the store itself is
  // unusable or the options are wrong; members that do not come are reported.
  static Result<std::unique_ptr<Session>> open(transport::KeyValueStore& store, const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  std::int64_t member() const { return m_options.member; }
  // The members in the current group (sorted ids), this member included.
  const std::vector<std::int64_t>& members() const { return m_members; }
  // Expected ids not in the current group, and why (never arrived, lost).
  std::vector<Absence> absent() const;
  std::int64_t generation() const { return m_generation; }
  std::int64_t rounds() const { return m_rounds; }  // formation rounds so far
  // What went wrong on the way, for a verdict's transport details.
  const std::vector<std::string>& notes() const { return m_notes; }
  const transport::TrafficCounters& traffic() const { return *m_traffic; }

  // Every member's `mine` (signed and verified when the session has a signer).
  Result<GatherResult> all_gather(const Bytes& mine, const OpOptions& op);
  // `root`'s `data` to every member (others pass anything). Fails when the
  // root is not in the group or leaves during the operation.
  Result<Bytes> broadcast(std::int64_t root, const Bytes& data, const OpOptions& op);
  // Returns once every member of the group has entered it (or re-forms without those gone).
  Status barrier(const OpOptions& op);
  Result<Timed<GatherResult>> timed_all_gather(const Bytes& mine, const OpOptions& op);
  Result<Timed<Bytes>> timed_broadcast(std::int64_t root, const Bytes& data, const OpOptions& op);

  // The two-phase gather (see TwoPhaseRequest) over this flat group: every
  // member gets the whole position table, computes the same selection, and
  // the selected members' details reach every member; every member decides.
  Result<TwoPhaseResult> two_phase(const TwoPhaseRequest& request);

  // A session over `subset` of the current members (a peer group, a rack),
  // under "<this prefix>/sub/<name>/"; members outside it must not call it.
  // It shares this session's store, device and counters; close it first.
  Result<std::unique_ptr<Session>> subgroup(const std::string& name, const std::vector<std::int64_t>& subset,
                                            std::chrono::milliseconds timeout);

  // Ends the session (see above). Idempotent; the destructor calls it.
  void close();

 private:
  Session(transport::KeyValueStore& store, SessionOptions options);
  Status form(std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds arrival, std::int64_t op_index);
  Result<GatherResult> gather_once(const Bytes& mine, const Bytes& signed_mine, const OpOptions& op,
                                   std::chrono::milliseconds timeout);
  template <typename T, typename F>
  Result<T> with_reform(const OpOptions& op, F&& attempt);
  void drop_to_alone(const std::string& why);
  std::string context_for(const std::string& op, std::int64_t id) const;

  transport::KeyValueStore& m_store;
  SessionOptions m_options;
  std::string m_base;  // "<namespace>[/<name>]/g<G>"
  std::int64_t m_generation = 0;
  std::int64_t m_rounds = 0;
  std::int64_t m_next_round = 0;
  std::int64_t m_op_index = 0;
  std::vector<std::int64_t> m_members;
  std::vector<std::string> m_notes;
  std::shared_ptr<gloo::transport::Device> m_device;
  std::unique_ptr<transport::GlooGroup> m_group;
  std::shared_ptr<transport::TrafficCounters> m_traffic;
  std::map<std::string, std::int64_t> m_subgroups;     // how often each subgroup name was formed
  std::map<std::int64_t, Absence> m_gone;              // expected ids that are not in the group
  std::set<std::int64_t> m_seen;                       // ids that ever registered
  std::chrono::steady_clock::time_point m_close_by{};  // how long close() may wait for the others
  bool m_closed = false;
  bool m_is_sub = false;
};

}  // namespace scout::session

namespace scout::session {

// Member ids as little-endian 64-bit words (selections, blocks of a hierarchy).
Bytes encode_ids(const std::vector<std::int64_t>& ids);
Result<std::vector<std::int64_t>> decode_ids(const Bytes& bytes, std::int64_t id_space);
// `ids` sorted, without duplicates or ids outside the id space.
std::vector<std::int64_t> normalized_selection(std::vector<std::int64_t> ids, std::int64_t id_space);

}  // namespace scout::session
