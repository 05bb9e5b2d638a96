// Stage 2, find positions. Reads: each view's snapshot (pending call and its
// state, phase, step, last progress), its ring of calls (and whether events
// were dropped or the ring was lost in the gather), its process state.
// Rules: a rank's position is (role of the pending call's group, per-group
// sequence, type, dtype, count, root made group-local), never its state or
// step, so a rank that finished or failed the call the others are in is at the
// same position. The job is stalled when the silence rule holds (silence.hpp:
// no progress for input.threshold_ns, k_default_silence_threshold, or a process
// stopped or dead), when a call failed, or when every record is final (each
// writer gone) with a rank inside a call. A rank is silent when its own last
// progress is at least the threshold old.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "lib/hang/decide/stages.hpp"
#include "lib/records/snapshot_codec.hpp"

namespace scout::hang::stages {

using records::CollectiveState;
using records::RankSnapshot;

namespace {

bool in_call(const RankSnapshot& s) {
  return s.collective_state == CollectiveState::entering || s.collective_state == CollectiveState::inside ||
         s.collective_state == CollectiveState::failed;
}

bool has_call(const RankSnapshot& s) {
  return s.collective_state != CollectiveState::none && s.pending.group_seq > 0;
}

// The position compared by C3: which call of which kind of group, with its
// arguments. The state (entering, inside, done, failed) and the step are not
// part of it: a rank that finished or failed the call the others are in is
// at the same position.
struct PosKey {
  std::uint64_t role = 0, seq = 0, count = 0;
  std::int64_t root_or_op = 0;
  std::uint8_t type = 0, dtype = 0;
  bool call = false;
  bool operator==(const PosKey&) const = default;
};
struct PosKeyHash {
  std::size_t operator()(const PosKey& p) const {
    std::uint64_t h = 0x9e3779b97f4a7c15ull;
    auto mix = [&](std::uint64_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(p.role);
    mix(p.seq);
    mix(p.count);
    mix(static_cast<std::uint64_t>(p.root_or_op));
    mix((std::uint64_t{p.type} << 16) | (std::uint64_t{p.dtype} << 8) | std::uint64_t{p.call});
    return static_cast<std::size_t>(h);
  }
};

}  // namespace

// Each rank's position (the call it is at, state-free), its call history
// (ring, role-normalized) and its process facts; and whether the job is
// stalled (silent for the threshold, or a process that can never progress).
Positions find_positions(const DecisionInput& in, const Views& views, const Mesh& mesh) {
  Positions out;
  out.roles = make_roles(mesh);
  const std::int64_t world = views.world;
  out.ranks.resize(static_cast<std::size_t>(world));
  bool any_failed = false;
  Silence silence;  // the one silence rule (silence.hpp), shared with `scout observe`
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& view = views.ranks[r];
    auto& p = out.ranks[r];
    if (!view.evidence) {
      p.torn_dead = view.issue && view.issue->problem == "torn" && !view.issue->writer_alive;
      if (view.issue) silence.add_issue(*view.issue);
      continue;
    }
    silence.add_rank(*view.evidence);
    const auto& s = view.evidence->snapshot;
    const auto& proc = view.evidence->process;
    p.s = &s;
    p.call = has_call(s);
    p.role = out.roles.role(s.pending.group);
    p.pending = group_local(s.pending, out.roles);
    p.entered = in_call(s);
    p.failed = s.collective_state == CollectiveState::failed;
    // A victim that said how it ended: a communication error, or its launcher's SIGTERM.
    p.terminated = s.phase == records::Phase::terminated;
    p.comm_error = s.phase == records::Phase::comm_error || p.terminated;
    p.stopped = proc.state == ProcessState::stopped;
    p.dsleep = proc.state == ProcessState::disk_sleep;
    p.dead = is_dead(proc.state);
    p.dead_final = p.dead && !view.evidence->writer_alive;
    p.silent = in.now_ns - last_progress(s) >= in.threshold_ns;
    // A ring the stall's gather could not rebuild (position.hpp) is a history not known.
    const bool ring_known = !view.evidence->ring_lost;
    p.history_ok = s.dropped == 0 && ring_known;
    p.complete = ring_known && s.events <= records::max_encoded_events() && s.events <= s.recent.size() + 1;
    for (const auto& e : s.recent) {
      if (e.fingerprint.group_seq == 0 || e.fingerprint.type == records::CollectiveType::none) continue;
      p.history.push_back({e.fingerprint.group, out.roles.role(e.fingerprint.group), e.fingerprint.group_seq,
                           group_local(e.fingerprint, out.roles), e.failed});
    }
    // The pending call belongs to the history even when the ring lost it.
    if (p.call) {
      bool present = false;
      for (const auto& c : p.history) present |= c.group == s.pending.group && c.seq == s.pending.group_seq;
      if (!present) p.history.push_back({s.pending.group, p.role, s.pending.group_seq, p.pending, p.failed});
    }
    for (const auto& c : p.history) {
      auto& g = p.reached[c.group];
      g = std::max(g, c.seq);
      auto& rr = p.reached_role[c.role];
      rr = std::max(rr, c.seq);
    }
    any_failed |= p.failed;
  }
  out.newest_progress = silence.newest_progress_ns();
  out.silent_ns = silence.silent_ns(in.now_ns);
  // A collective that completed with an error is a stall too: it can never be done.
  // So is a job whose every record is final (each writer gone) with a rank inside a
  // call: nothing can move again, however recent its last progress (post-mortem records; Flight
  // Recorder dumps, written on a failure or timeout: CI, test_torch2_fr exit, probed 0.9 s after the
  // newest entry, was called healthy).
  bool all_final = false, any_inside = false;
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& p = out.ranks[r];
    if (!p.s) continue;
    if (views.ranks[r].evidence->writer_alive) {
      all_final = false;
      break;
    }
    all_final = true;
    any_inside |= p.entered;
  }
  // A job that ended is not stalled, however long ago its last progress: every rank of the world has a
  // final record and either exited with code 0 (the publisher may still show it inside its last call, a
  // barrier whose completion it never published: CI, HSDP 2x2, every rank exit 0, read inconclusive) or
  // left a post-mortem record (a Flight Recorder dump: no pid) in no call (every call it made, its
  // group's members all made and finished: flight_recorder.cpp).
  bool ended = all_final && !any_failed && views.missing.empty();
  for (std::int64_t r = 0; r < world && ended; ++r) {
    const auto& p = out.ranks[r];
    if (!p.s) {
      ended = false;
      break;
    }
    const auto& proc = views.ranks[r].evidence->process;
    const bool exited_ok = proc.state == ProcessState::exited && proc.exit_code == 0 && proc.signal == 0;
    const bool dump_done =
        proc.state == ProcessState::unknown && views.ranks[r].evidence->snapshot.pid == 0 && !p.entered;
    ended = exited_ok || dump_done;
  }
  out.stalled = !ended && (silence.stalled(in.now_ns, in.threshold_ns) || any_failed || (all_final && any_inside));

  std::unordered_map<PosKey, std::uint64_t, PosKeyHash> ids;
  for (std::int64_t r = 0; r < world; ++r) {
    auto& p = out.ranks[r];
    if (!p.s) {
      p.key = out.key_rank.size();
      out.key_rank.push_back(r);
      continue;
    }
    const auto& f = p.pending;
    auto type = static_cast<std::uint8_t>(f.type);
    if (type > static_cast<std::uint8_t>(records::CollectiveType::other)) type = 0xff;
    PosKey k{p.role, f.group_seq, f.count, f.root_or_op, type, f.dtype, p.call};
    auto [it, fresh] = ids.try_emplace(k, out.key_rank.size());
    if (fresh) out.key_rank.push_back(r);
    p.key = it->second;
  }
  return out;
}

// The text of a position, as shown in the groups' values.
std::string position_text(const Positions& pos, const Views& views, std::uint64_t key) {
  const std::int64_t r = pos.key_rank[key];
  const auto& p = pos.ranks[r];
  const auto& view = views.ranks[r];
  if (!p.s) {
    if (view.issue) return fmt::format("record {} (rank {})", view.issue->problem, r);
    return fmt::format("{} (rank {})", view.unreachable ? "unreachable" : "no record", r);
  }
  const auto& f = p.s->pending;
  if (!p.call) return "no collective yet";
  return fmt::format("{} seq {} {} dt{} x{} r{}", Roles::name(p.role, f.group), f.group_seq,
                     records::collective_type_name(f.type), f.dtype, f.count, f.root_or_op);
}

}  // namespace scout::hang::stages
