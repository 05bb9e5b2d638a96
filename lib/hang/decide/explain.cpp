// Stage 5, explain. Reads: the comparison's candidates and majority marks, the
// waits, the positions and process facts. Rules, in order (a rank named by one
// is not judged again):
//   definitive candidates (a rank's own calls differ) are named;
//   position candidates are named when the rank cannot move (dead when read,
//     stopped, or silent past the threshold) and did not end on a communication error;
//   wait_chain_end: in a stall, the end of a chain of waits that cannot move
//     (a dead rank inside a call only when that call did not keep it);
//   died_inside: the one rank that died inside a call, away from its peers;
//   process_stopped; torn_record (a strict minority); with post-mortem dumps only, the ranks that left
//     none where every call the others wait in misses only them (wait_chain_end); first_failure, then
//     first_failed_node (a whole node, first_failures.cpp), lost_node (the one silent observer's
//     node); uninterruptible_sleep (a strict minority, in a stall). Ranks named by these rules whose
//     whole node died unrecorded name that node instead (killed_node).
// Every other dead or failed rank is a victim, with how it died and where.
// Thresholds: k_victim_abort_signal, strict_minority, k_max_group_values.
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "lib/hang/decide/stages.hpp"
#include "lib/hang/thresholds.hpp"

namespace scout::hang::stages {

// Names the ranks the evidence singles out, never one whose state the others
// explain: a rank's own calls that differ from its peers' (definitive); a
// stopped process; a rank away from its peers outside any collective that
// cannot be moving (dead when read, stopped, or silent); the end of a chain
// of waits when that rank is such a rank. Every other dead or failed rank is
Explanation explain(const Positions& pos, const Comparison& cmp, const Waits& waits, const Views& views, bool stalled) {
  Explanation out;
  const std::int64_t world = views.world;
  const auto& R = pos.ranks;
  auto cannot_move = [&](std::int64_t r) { return R[r].dead_final || R[r].stopped || (!R[r].dead && R[r].silent); };
  // A dead rank whose record still shows it inside a call that every other member finished with the
  // same arguments, without a failure, and left: the call did not keep it, so it died between that
  // call and the next, and a wait ending at it is explained by it (CI, HSDP 2x2 seed 1871708941: the
  // rank that exited after its replica all-reduce, before publishing the completion, was a victim).
  // A member's history may hold two calls at one (group, seq) where process groups with the same
  // members shared an id but counted calls apart (DeepSpeed's pipeline groups, under publishers before
  // twins shared one counter per id, and gloo's Flight Recorder dumps); the one with the same arguments
  // is that call. Not a SIGABRT: gloo aborts a victim from its transport thread.
  // Two or more ranks may die so at once (two faults a moment after one call): a member still there
  // does not keep it when it too died there of its own kind of death, and some member did finish the
  // call. Only deaths no peer's failure causes count there (an exit code, a signal outside
  // k_cascade_signals; never an unknown form): a rank that gloo aborted while it finished the call,
  // its peer's connection closing, reads the same as its cause (hang campaign, two aborts after one
  // DDP all-reduce), and neither is named.
  auto died_of_itself = [&](std::int64_t r) {
    const auto& p = R[r];
    const auto& proc = views.ranks[r].evidence->process;
    return p.dead_final && !p.failed && !p.comm_error && !p.terminated &&
           (proc.signal != 0 ? !cascade_form_signal(proc.signal) : proc.exit_code > 0);
  };
  // Whether dead rank r's pending call was finished by its group: 0: no; 1: every other member finished it
  // (without a failure) and left it; 2: some did, and every other one is still in it, dead as `beside` accepts.
  auto others_finished = [&](std::int64_t r, const std::function<bool(std::int64_t)>& beside) -> int {
    const auto& p = R[r];
    if (!p.s || !p.entered || !p.dead_final || p.failed) return 0;
    const auto g = p.s->pending.group;
    const auto q = p.s->pending.group_seq;
    auto it = pos.roles.by_id.find(g);
    if (it == pos.roles.by_id.end() || it->second.members.size() < 2) return 0;
    bool died_beside = false, finished = false;
    for (auto m : it->second.members) {
      if (m == r) continue;
      if (m < 0 || m >= world || !R[m].s) return 0;
      const auto& mp = R[m];
      if (mp.s->pending.group == g && mp.s->pending.group_seq == q) {  // still there
        if (!mp.entered || !same_call(mp.s->pending, p.pending) || !beside(m)) return 0;
        died_beside = true;
        continue;
      }
      bool done = false;
      for (const auto& c : mp.history)
        if (c.group == g && c.seq == q && same_call(c.fingerprint, p.pending)) {
          if (c.failed) return 0;
          done = true;
        }
      if (!done) return 0;
      finished = true;
    }
    if (!finished) return 0;
    return died_beside ? 2 : 1;
  };
  // 0: no; 1: every other member finished and left it; 2: the others finished it or died in it so.
  auto left_in_finished_call = [&](std::int64_t r) -> int {
    if (R[r].comm_error || (R[r].s && views.ranks[r].evidence->process.signal == k_victim_abort_signal)) return 0;
    return others_finished(r, [&](std::int64_t m) { return died_of_itself(m) && died_of_itself(r); });
  };
  // A dead rank whose own record shows that its pending call completed: the ring's newest entry for
  // it carries an exit and no failure. Its state still reads "inside" while an earlier Work that
  // publishes no completion (a gloo send or recv) counts as in flight; and a call of a group of one
  // (Megatron's data-parallel group at dp=1) has no other member to have finished it
  // (test_torch2_frameworks: tp x pp, the rank that exited after that all-reduce). Not a SIGABRT.
  auto left_own_call = [&](std::int64_t r) {
    const auto& p = R[r];
    if (!p.s || !p.entered || !p.dead_final || p.failed || p.comm_error) return false;
    if (views.ranks[r].evidence->process.signal == k_victim_abort_signal) return false;
    const auto& s = *p.s;
    for (auto e = s.recent.rbegin(); e != s.recent.rend(); ++e)
      if (e->fingerprint.group == s.pending.group && e->fingerprint.group_seq == s.pending.group_seq &&
          same_call(e->fingerprint, s.pending))
        return e->exit_ns != 0 && !e->failed;
    return false;
  };
  // Why a dead rank inside a call is not kept there ("" when it may be).
  auto left_its_call = [&](std::int64_t r) -> std::string_view {
    if (left_own_call(r)) return "its own record shows it completed this call";
    switch (left_in_finished_call(r)) {
      case 1:
        return "every other member finished and left this call";
      case 2:
        return "every other member finished and left this call, or died in it too, not of a peer's failure";
      default:
        break;
    }
    return {};
  };
  // A dead rank inside a call that some member finished, every other member having finished it or died in it
  // too, however each died: what the two-aborts case leaves unnamed (a cause and gloo's victim read alike),
  // said as such in the summary rather than as deaths at the peers' position.
  auto dead_in_finished_call = [&](std::int64_t r) {
    return others_finished(r, [&](std::int64_t m) { return R[m].dead_final && !R[m].failed; }) != 0;
  };
  // Definitive differences first, then ranks away from their peers.
  for (const auto& [r, c] : cmp.candidates) {
    if (c.weight == Weight::definitive) {
      out.suspects.emplace(r, c.finding);
      continue;
    }
    // A rank outside any collective: it explains the others' wait only if it
    // cannot be moving, and did not end on a communication error (a peer's
    // failure reached it in a call it does not record: a victim).
    if (!R[r].entered && cannot_move(r) && !R[r].comm_error) out.suspects.emplace(r, c.finding);
  }
  // The ends of wait chains, followed from ranks that are not suspects themselves
  // (a diverged rank's own wait says nothing of the ranks it waits for) and
  // stopping at suspects. A rank that exited cleanly (exit code 0) ended its
  // program: it is not where a chain of waits is explained.
  if (stalled) {
    std::vector<std::int64_t> from;
    for (std::int64_t w = 0; w < world; ++w)
      if (waits.waiting(w) && !out.suspects.count(w)) from.push_back(w);
    // Ranks waiting in each call, and the calls each rank blocks.
    std::vector<std::vector<std::int64_t>> in_call(waits.calls.size());
    for (std::int64_t w = 0; w < world; ++w)
      if (waits.call_of[w] >= 0 && in_call[waits.call_of[w]].size() < k_max_group_values)
        in_call[waits.call_of[w]].push_back(w);
    std::unordered_map<std::int64_t, std::vector<std::size_t>> blocks;
    for (std::size_t c = 0; c < waits.calls.size(); ++c)
      for (auto b : waits.calls[c].blockers) blocks[b].push_back(c);
    std::map<std::int64_t, std::vector<std::int64_t>> blocked_by;  // end of a chain -> ranks waiting for it directly
    for (auto b : waits.ends(from, world, [&](std::int64_t r) { return out.suspects.count(r) != 0; })) {
      if (out.suspects.count(b) || (R[b].entered && left_its_call(b).empty()) || !R[b].s || !cannot_move(b) ||
          R[b].comm_error)
        continue;
      auto& ws = blocked_by[b];
      for (auto c : blocks[b])
        for (auto w : in_call[c])
          if (ws.size() < k_max_group_values) ws.push_back(w);
    }
    for (const auto& [b, ws] : blocked_by) {
      if (out.suspects.count(b) || (R[b].entered && left_its_call(b).empty()) || !R[b].s || !cannot_move(b)) continue;
      const auto& proc = views.ranks[b].evidence->process;
      if (R[b].dead && proc.exit_code == 0 && proc.signal == 0) continue;
      const auto& s = *R[b].s;
      json ev = {{"step", s.step},
                 {"pending", fingerprint_json(s.pending)},
                 {"collective_state", records::collective_state_name(s.collective_state)}};
      json blocked = json::array();
      for (auto w : ws) {
        if (blocked.size() >= k_max_group_values) break;
        const auto& f = R[w].s->pending;
        blocked.push_back({{"rank", w},
                           {"group", Roles::name(R[w].role, f.group)},
                           {"group_id", hex_id(f.group)},
                           {"group_seq", f.group_seq}});
      }
      ev["blocks"] = std::move(blocked);
      if (R[b].entered) {
        // Its last call finished for every other member: it died before the calls it blocks.
        ev["died_after"] = {{"group", Roles::name(R[b].role, s.pending.group)},
                            {"group_id", hex_id(s.pending.group)},
                            {"group_seq", s.pending.group_seq},
                            {"why", std::string(left_its_call(b))}};
        out.suspects.emplace(
            b, Finding{process_reason(proc), HangKind::dead_rank, std::move(ev), Measure::wait_chain_end});
        continue;
      }
      out.suspects.emplace(b, Finding{"never_entered_collective", HangKind::rank_local_divergence, std::move(ev),
                                      Measure::wait_chain_end});
    }
  }
  // A rank that died inside a call nobody kept it in (every member entered it), away from
  // its peers' position, alone among that call's members to die there without the call
  // failing: its death is not explained by its position, so it is the cause.
  if (stalled) {
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<std::int64_t>> died_in;  // (group, seq) -> dead ranks
    for (std::int64_t r = 0; r < world; ++r)
      if (R[r].s && R[r].entered && R[r].dead) died_in[{R[r].s->pending.group, R[r].s->pending.group_seq}].push_back(r);
    for (const auto& [call, ranks] : died_in) {
      if (ranks.size() != 1) continue;
      const auto r = ranks.front();
      const auto& p = R[r];
      if (out.suspects.count(r) || !p.dead_final || p.failed || p.comm_error || waits.waiting(r) || !cmp.outlier[r] ||
          cmp.at_majority[r])
        continue;
      out.suspects.emplace(r, Finding{process_reason(views.ranks[r].evidence->process),
                                      HangKind::dead_rank,
                                      {{"died_inside",
                                        {{"group", Roles::name(p.role, call.first)},
                                         {"group_id", hex_id(call.first)},
                                         {"group_seq", call.second}}}},
                                      Measure::died_inside});
    }
  }
  // Stopped processes are facts: a stopped rank can never progress.
  for (std::int64_t r = 0; r < world; ++r)
    if (R[r].stopped && !out.suspects.count(r))
      out.suspects.emplace(
          r, Finding{"process_stopped", HangKind::stopped_rank, json::object(), Measure::process_stopped});
  // A torn record of a dead writer has no position at all: nothing else can explain it.
  std::vector<std::int64_t> torn;
  for (std::int64_t r = 0; r < world; ++r)
    if (R[r].torn_dead) torn.push_back(r);
  if (out.suspects.empty() && !torn.empty() && strict_minority(static_cast<std::int64_t>(torn.size()), world))
    for (auto r : torn)
      out.suspects.emplace(
          r, Finding{"writer_died_mid_write", HangKind::dead_rank, {{"record_problem", "torn"}}, Measure::torn_record});
  // Post-mortem dumps only (Flight Recorder: no pid, no process evidence) with ranks that left none: when
  // every rank that did is inside a call, each such call entered with one call by every member that left
  // a dump, the members without one are where the waits end (a rank that exited or stopped dumps nothing:
  // test_torch2_fr_mesh exit). Not when the members that dumped disagree (gloo aborts a peer that
  // received another size, and that peer leaves no dump), nor beyond a strict minority.
  if (out.suspects.empty() && stalled && !views.missing.empty() && !waits.calls.empty()) {
    bool ok = true;
    for (std::int64_t r = 0; r < world && ok; ++r) {
      if (!R[r].s) continue;
      ok = R[r].s->pid == 0 && views.ranks[r].evidence->process.state == ProcessState::unknown && R[r].entered &&
           waits.call_of[r] >= 0;
    }
    std::map<std::int64_t, std::vector<std::int64_t>> no_dump;  // rank -> ranks waiting for it
    for (std::size_t c = 0; c < waits.calls.size() && ok; ++c) {
      const auto& cw = waits.calls[c];
      auto it = pos.roles.by_id.find(cw.group);
      if (!cw.blockers.empty() || cw.unseen == 0 || it == pos.roles.by_id.end()) {
        ok = false;
        break;
      }
      std::vector<std::int64_t> in;
      for (std::int64_t r = 0; r < world; ++r)
        if (waits.call_of[r] == static_cast<std::int64_t>(c)) in.push_back(r);
      for (auto r : in) ok = ok && same_call(R[r].pending, R[in.front()].pending);
      for (auto m : it->second.members)
        if (m >= 0 && m < world && !R[m].s && !views.ranks[m].issue && !views.ranks[m].unreachable)
          for (auto r : in)
            if (no_dump[m].size() < k_max_group_values) no_dump[m].push_back(r);
    }
    if (ok && !no_dump.empty() && strict_minority(static_cast<std::int64_t>(no_dump.size()), world))
      for (const auto& [m, ws] : no_dump) {
        json blocked = json::array();
        for (auto w : ws)
          blocked.push_back({{"rank", w},
                             {"group", Roles::name(R[w].role, R[w].s->pending.group)},
                             {"group_id", hex_id(R[w].s->pending.group)},
                             {"group_seq", R[w].s->pending.group_seq}});
        out.suspects.emplace(m, Finding{"never_entered_collective",
                                        HangKind::rank_local_divergence,
                                        {{"record_problem", "missing"}, {"blocks", std::move(blocked)}},
                                        Measure::wait_chain_end});
      }
  }
  if (out.suspects.empty()) name_first_failures(pos, views, out.suspects);
  if (auto node = killed_node(pos, cmp, views, out.suspects)) {
    out.suspects.clear();  // they are its ranks
    out.nodes.push_back(std::move(*node));
  } else if (out.suspects.empty()) {
    if (auto first = first_failed_node(pos, cmp, views))
      out.nodes.push_back(std::move(*first));
    else if (auto lost = lost_node(pos, cmp, views))
      out.nodes.push_back(std::move(*lost));
  }
  std::set<std::int64_t> on_named_node;
  for (const auto& n : out.nodes) on_named_node.insert(n.ranks.begin(), n.ranks.end());
  // Uninterruptible sleep: a minority stuck in the kernel, when nothing else explains the stall. A rank
  // whose record ends on a communication error is a victim on its way out (a process tearing down is in
  // D for a moment: CI, HSDP 2x2 seed 392301511, a peer of the rank that exited named).
  if (out.suspects.empty() && out.nodes.empty() && stalled) {
    std::vector<std::int64_t> ds;
    for (std::int64_t r = 0; r < world; ++r)
      if (R[r].dsleep && !R[r].comm_error && !R[r].failed) ds.push_back(r);
    if (!ds.empty() && strict_minority(static_cast<std::int64_t>(ds.size()), world))
      for (auto r : ds)
        out.suspects.emplace(r, Finding{"process_in_uninterruptible_sleep", HangKind::uninterruptible_rank,
                                        json::object(), Measure::uninterruptible_sleep});
  }
  for (const auto& [r, f] : out.suspects)
    if (out.kind == HangKind::healthy) out.kind = f.kind;
  for (const auto& n : out.nodes)
    if (out.kind == HangKind::healthy) out.kind = n.finding.kind;

  // Victims: dead or failed ranks that are not suspects, with how they died and where.
  for (std::int64_t r = 0; r < world; ++r) {
    if (out.suspects.count(r) || on_named_node.count(r)) continue;
    const auto& p = R[r];
    if (!(p.dead || p.failed || p.torn_dead)) continue;
    if (p.s && !p.failed && views.ranks[r].evidence->process.exit_code == 0 &&
        views.ranks[r].evidence->process.signal == 0)
      continue;  // it exited cleanly: it ended, it did not die
    json row = {{"rank", r}};
    if (p.s) {
      const auto& proc = views.ranks[r].evidence->process;
      json died = {{"state", process_state_name(proc.state)}};
      if (proc.exit_code >= 0) died["exit_code"] = proc.exit_code;
      if (proc.signal != 0) died["signal"] = proc.signal;
      if (!p.dead) died = {{"state", process_state_name(proc.state)}};
      row["process"] = std::move(died);
      row["position"] = {{"step", p.s->step},
                         {"group", Roles::name(p.role, p.s->pending.group)},
                         {"group_id", hex_id(p.s->pending.group)},
                         {"group_seq", p.s->pending.group_seq},
                         {"type", records::collective_type_name(p.s->pending.type)},
                         {"collective_state", records::collective_state_name(p.s->collective_state)}};
      std::string why;
      if (waits.waiting(r)) {
        json waited = json::array();
        for (auto b : waits.blockers(r)) {
          if (waited.size() >= k_max_group_values) break;
          waited.push_back(b);
        }
        row["waited_for"] = std::move(waited);
        why = "waited inside its call for ranks that never entered it";
      } else if (p.terminated) {
        why = "ended on a termination signal (its launcher tearing it down after another worker failed)";
      } else if (p.comm_error) {
        why = "ended on a communication error: a peer's failure reached it (often in a call it does not record)";
      } else if (dead_in_finished_call(r)) {
        why = "died inside a call the other members finished (or died in)";
        out.died_in_finished_call.push_back(r);
      } else if (cmp.at_majority[r]) {
        why = "died at its peers' position";
      } else if (p.entered) {
        why = "died inside a call every member had entered";
      } else {
        why = "died outside any collective where its peers' positions do not single it out";
      }
      row["why"] = why;
    } else {
      row["process"] = {{"state", "gone"}};
      row["record_problem"] = "torn";
      row["why"] = "its record is torn and its writer is gone";
    }
    out.victims.push_back(std::move(row));
    out.victim_ranks.push_back(r);
  }
  return out;
}

}  // namespace scout::hang::stages
