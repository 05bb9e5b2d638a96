// Stage 5, explain: the first-failure rule, when no position, history or wait
// named anyone. Reads: each rank's recorded failure (a failed call, phase
// comm_error), whether its record is final (writer gone), and how its process
// ended (exit code, signal). Rule: every victim of a death sees the dead peer's
// connection close and records it; the rank that died first saw nothing. So a
// lone death with no recorded failure is named (unless it is a SIGABRT, or of
// unknown form, among recorded failures: how a victim dies); several such
// deaths name only those by a signal no peer's failure sends, when every one's
// form is known; never more than a strict minority of the world. A lone death
// of unknown form is named after all when every rank was at one call (no
// wrong-sized message can have aborted a victim) and every other rank recorded
// a failure after it last showed life. The first failed node: when every rank
// of one node died unrecorded at that one call, before every rank of the other
// nodes recorded a failure, the node is named (which of its ranks failed first
// cannot be told: its launcher tears the rest down). Thresholds:
// k_cascade_signals, k_victim_abort_signal, strict_minority, k_max_group_values.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "lib/hang/decide/stages.hpp"
#include "lib/hang/thresholds.hpp"

namespace scout::hang::stages {
namespace {

// Every rank's record is at one call: the same group, sequence and arguments. No rank's calls
// differ from another's then, so no rank can have sent a peer a message of another size (what
// makes gloo's transport thread abort a victim before its call can fail).
bool one_call(const Positions& pos) {
  const RankPos* first = nullptr;
  for (const auto& p : pos.ranks) {
    if (!p.s || !p.call) return false;
    if (!first)
      first = &p;
    else if (p.pending.group != first->pending.group || p.pending.group_seq != first->pending.group_seq ||
             !same_call(p.pending, first->pending))
      return false;
  }
  return first != nullptr;
}

// The newest sign of life in a record: its last heartbeat, event or progress stamp.
std::int64_t last_sign_of_life(const records::RankSnapshot& s) {
  return std::max({s.heartbeat_ns, s.progress_ns, s.start_ns});
}

// Every rank of `dead` last showed life before every rank of `failed` did: none of them lived on
// after a failure was recorded (a rank still beating then was alive after it: not the first).
bool died_before(const Positions& pos, const std::vector<std::int64_t>& dead, const std::vector<std::int64_t>& failed) {
  if (dead.empty() || failed.empty()) return false;
  std::int64_t newest_dead = 0;
  for (auto r : dead) newest_dead = std::max(newest_dead, last_sign_of_life(*pos.ranks[r].s));
  for (auto r : failed)
    if (last_sign_of_life(*pos.ranks[r].s) <= newest_dead) return false;
  return true;
}

json first_failed(const std::vector<std::int64_t>& recorded) {
  json failed_after = json::array();
  for (auto f : recorded) {
    if (failed_after.size() >= k_max_group_values) break;
    failed_after.push_back(f);
  }
  return failed_after;
}

}  // namespace

// How a peer's failure kills a rank: its call fails (recorded), an uncaught
// communication exception aborts it (SIGABRT) or ends it with an error code,
// or a launcher tearing the job down terminates it (SIGTERM, SIGINT, SIGHUP).
// A death by any other signal (SIGKILL, SIGSEGV, SIGBUS, SIGILL, SIGFPE...)
// is never a peer's doing: it came from the rank's own process or from outside.
bool cascade_form_signal(int sig) {
  return std::find(std::begin(k_cascade_signals), std::end(k_cascade_signals), sig) != std::end(k_cascade_signals);
}

// The first failure, when neither a position nor a wait names anyone: a rank
// that died with no failure in its record (its call neither failed nor ended
// on a communication error), while every other death or failure in the job
// did record one. Each victim of a death sees the dead peer's connection close
// and records that; the rank that died first saw nothing. Where several ranks
// died unrecorded, only those whose signal no peer's failure sends are named,
// and only when every unrecorded death's form is known; a lone unrecorded
// SIGABRT among recorded communication errors is how a victim dies, so
// nothing is named then. Never more than a strict minority of the world.
void name_first_failures(const Positions& pos, const Views& views, std::map<std::int64_t, Finding>& suspects) {
  const auto& R = pos.ranks;
  const auto world = static_cast<std::int64_t>(R.size());
  std::vector<std::int64_t> unrecorded;  // dead without a recorded failure
  std::vector<std::int64_t> recorded;    // failed calls and communication errors
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& p = R[r];
    if (!p.s) continue;
    if (p.failed || p.comm_error) {
      recorded.push_back(r);
      continue;
    }
    if (!p.dead_final) continue;  // read while it lived: it may have recorded a failure since
    const auto& proc = views.ranks[r].evidence->process;
    if (proc.exit_code == 0 && proc.signal == 0) continue;  // it ended its program
    unrecorded.push_back(r);
  }
  if (unrecorded.empty()) return;
  std::vector<std::int64_t> named;
  if (unrecorded.size() == 1) {
    // Among recorded failures, a SIGABRT, or a death whose form is unknown (already reaped), may be a
    // victim's: gloo's transport thread aborts on a peer's bad message before the call can fail (CI:
    // world 4, two ranks skipping a call, the peer that received the wrong-sized message named).
    // Where every rank was at one call no message can have been of another size: a death of unknown
    // form before every other rank's recorded failure is their cause (a launcher reaps its workers).
    const auto& proc = views.ranks[unrecorded.front()].evidence->process;
    const bool unknown_form = proc.signal == 0 && proc.exit_code < 0;
    const bool cascade_from_it = unknown_form && static_cast<std::int64_t>(recorded.size()) + 1 == world &&
                                 one_call(pos) && died_before(pos, unrecorded, recorded);
    if (recorded.empty() || !(proc.signal == k_victim_abort_signal || unknown_form) || cascade_from_it)
      named = unrecorded;
  } else {
    for (auto r : unrecorded) {
      const auto& proc = views.ranks[r].evidence->process;
      if (proc.signal == 0 && proc.exit_code < 0) return;  // a death of unknown form: it may be the cascade's
      if (proc.signal != 0 && !cascade_form_signal(proc.signal)) named.push_back(r);
    }
  }
  if (named.empty() || !strict_minority(static_cast<std::int64_t>(named.size()), world)) return;
  for (auto r : named) {
    json failed_after = first_failed(recorded);
    const auto& s = *R[r].s;
    suspects.emplace(
        r, Finding{process_reason(views.ranks[r].evidence->process),
                   HangKind::dead_rank,
                   {{"first_failure",
                     {{"why", "died with no failure in its record, while every other failed rank recorded one"},
                      {"collective_state", records::collective_state_name(s.collective_state)},
                      {"failed_after", std::move(failed_after)}}}},
                   Measure::first_failure});
  }
}

namespace {

// No call or history of any rank departs from its group's: the comparison found no split and no
// candidate by a call's arguments or a history. Positions may differ (a rank killed between calls is
// a call behind its peers); another call, or other arguments, is a divergence whose victims gloo's
// transport may abort (the wrong-sized message), which a node rule must never name.
bool no_divergence(const Comparison& cmp) {
  if (!cmp.splits.empty()) return false;
  for (const auto& [r, c] : cmp.candidates) {
    const auto m = c.finding.measure;
    if (m == Measure::call_arguments || m == Measure::history || m == Measure::history_structure ||
        m == Measure::stage_arguments)
      return false;
  }
  return true;
}

json first_ranks(const std::vector<std::int64_t>& ranks) {
  json out = json::array();
  for (auto r : ranks)
    if (out.size() < k_max_group_values) out.push_back(r);
  return out;
}

}  // namespace

// The first failed node: every rank of one node died with no failure in its record, and every rank
// of the other nodes recorded a failure after the node's ranks last showed life or, alive, waits inside
// its call (gloo fails only the dead ranks' direct peers at once; the others wait out their timeout:
// 4x2 on etcd, seed 41707, node 3 killed, ranks 0 and 5 failed and 1-4 waited, and it was
// inconclusive); one recorded failure at least. A node's launcher (or the kernel, or an operator) took
// its processes down together; which of them died first cannot be told, so the node is named, never its
// ranks. Not when any of them died the way a victim dies (a known SIGABRT, SIGTERM, SIGINT, SIGHUP),
// ended its program, or was read alive; not where a rank of the node lives on; not where a call or a
// history departs from its group's; never half the world or more.
std::optional<NodeFinding> first_failed_node(const Positions& pos, const Comparison& cmp, const Views& views) {
  const auto& R = pos.ranks;
  const auto world = static_cast<std::int64_t>(R.size());
  if (world < 3 || !no_divergence(cmp)) return std::nullopt;
  std::vector<std::int64_t> unrecorded, recorded, waiting;
  const std::string* node = nullptr;
  std::string reason;
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& p = R[r];
    if (!p.s || !views.ranks[r].node || views.ranks[r].node->empty()) return std::nullopt;
    if (p.failed || p.comm_error) {
      recorded.push_back(r);
      continue;
    }
    if (!p.dead && p.entered) {
      waiting.push_back(r);  // alive inside its call
      continue;
    }
    if (!p.dead_final) return std::nullopt;  // alive outside a call, or read while it lived, with no failure
    const auto& proc = views.ranks[r].evidence->process;
    if (proc.exit_code == 0 && proc.signal == 0) return std::nullopt;  // it ended its program
    if (proc.signal != 0 && cascade_form_signal(proc.signal)) return std::nullopt;
    if (node && *node != *views.ranks[r].node) return std::nullopt;  // unrecorded deaths on two nodes
    node = views.ranks[r].node;
    const auto why = process_reason(proc);
    reason = reason.empty() || reason == why ? why : "process_died";
    unrecorded.push_back(r);
  }
  if (unrecorded.size() < 2 || !strict_minority(static_cast<std::int64_t>(unrecorded.size()), world) ||
      !died_before(pos, unrecorded, recorded))
    return std::nullopt;
  for (const auto* others : {&recorded, &waiting})
    for (auto r : *others)
      if (*views.ranks[r].node == *node) return std::nullopt;  // not the whole node
  NodeFinding out;
  out.node = *node;
  out.ranks = unrecorded;
  out.finding =
      Finding{reason,
              HangKind::dead_rank,
              {{"first_failed_node",
                {{"why",
                  "every rank of this node died with no failure in its record, before every rank of the "
                  "other nodes recorded a failure or while it waits inside its call"},
                 {"ranks", first_ranks(unrecorded)},
                 {"collective_state", records::collective_state_name(R[unrecorded.front()].s->collective_state)},
                 {"failed_after", first_failed(recorded)}}}},
              Measure::first_failed_node};
  return out;
}

namespace {

// Died with nothing in its record the way no victim dies: its writer gone, no failed call, no
// communication error or launcher's SIGTERM, not ended by its program, by no signal a peer's failure sends.
bool died_unrecorded(const Positions& pos, const Views& views, std::int64_t r) {
  const auto& p = pos.ranks[r];
  if (!p.s || !p.dead_final || p.failed || p.comm_error) return false;
  const auto& proc = views.ranks[r].evidence->process;
  if (proc.exit_code == 0 && proc.signal == 0) return false;
  return proc.signal == 0 || !cascade_form_signal(proc.signal);
}

}  // namespace

// The killed node: the rules above named a rank (a position singled it out: killed before it entered
// the call its peers wait in) and every other rank of its node died unrecorded too (campaign 4x2 on
// etcd, seed 41705: node 2 killed, rank 5 named as never having entered, rank 4 listed as a victim;
// 8x4 seed 41800: ranks 4 and 6 of node 1 named, 5 and 7 victims). A node's processes killed together
// (its machine, its launcher, the kernel, an operator) is that node's fault, whichever of its ranks
// lagged: the node is named with all its ranks. Not where a call or history departs from its group's
// (the rank's own calls are the fault), where a rank of the node lives, failed or was terminated,
// where a rank of another node died unrecorded too; never half the world or more.
std::optional<NodeFinding> killed_node(const Positions& pos, const Comparison& cmp, const Views& views,
                                       const std::map<std::int64_t, Finding>& named) {
  const auto world = static_cast<std::int64_t>(pos.ranks.size());
  if (world < 3 || named.empty() || !no_divergence(cmp)) return std::nullopt;
  const auto* node = views.ranks[named.begin()->first].node;
  if (!node || node->empty()) return std::nullopt;
  for (const auto& [r, f] : named)
    if (!views.ranks[r].node || *views.ranks[r].node != *node || !died_unrecorded(pos, views, r)) return std::nullopt;
  std::vector<std::int64_t> ranks;
  std::string reason;
  for (std::int64_t r = 0; r < world; ++r) {
    const bool on_node = views.ranks[r].node && *views.ranks[r].node == *node;
    if (died_unrecorded(pos, views, r) != on_node) return std::nullopt;  // a rank of it alive, or a death elsewhere
    if (!on_node) continue;
    ranks.push_back(r);
    const auto why = process_reason(views.ranks[r].evidence->process);
    reason = reason.empty() || reason == why ? why : "process_died";
  }
  if (ranks.size() < 2 || !strict_minority(static_cast<std::int64_t>(ranks.size()), world)) return std::nullopt;
  json first = json::array();
  for (const auto& [r, f] : named)
    if (first.size() < k_max_group_values)
      first.push_back({{"rank", r}, {"reason", f.reason}, {"measure", measure_name(f.measure)}});
  NodeFinding out;
  out.node = *node;
  out.ranks = ranks;
  out.finding = Finding{reason,
                        HangKind::dead_rank,
                        {{"killed_node",
                          {{"why",
                            "every rank of this node died with no failure in its record, one of them singled out "
                            "first; no rank of another node died so"},
                           {"ranks", first_ranks(ranks)},
                           {"singled_out", std::move(first)}}}},
                        Measure::killed_node};
  return out;
}

// The lost node: one observer never answered (its machine lost power, panicked, or dropped off the
// network with its processes), and every rank the others can see recorded a failure or waits inside a
// call, at least one of them a failure, with no call or history departing from its group's. What
// stopped the job is behind the silent observer: its node is named (by its observer's label, node<I>),
// with the ranks no observer could see. Never with two observers silent (which one failed first cannot
// be told) or one reached, never where the unseen ranks are half the world or more.
std::optional<NodeFinding> lost_node(const Positions& pos, const Comparison& cmp, const Views& views) {
  const auto& R = pos.ranks;
  const auto world = static_cast<std::int64_t>(R.size());
  // Two observers at least agree that the third is silent: one observer alone cannot tell a lost
  // node from a store it lost (its session failed, and every other observer looks silent).
  if (views.unreachable_obs.size() != 1 || views.reached_obs.size() < 2 || world < 2 || !no_divergence(cmp))
    return std::nullopt;
  std::vector<std::int64_t> unseen, recorded;
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& p = R[r];
    if (views.ranks[r].unreachable) {
      unseen.push_back(r);
      continue;
    }
    if (!p.s) return std::nullopt;  // a visible rank with no record (a torn or missing one)
    if (p.failed || p.comm_error) {
      recorded.push_back(r);
      continue;
    }
    if (p.dead || !p.entered) return std::nullopt;  // died unrecorded, or alive outside any call
  }
  if (unseen.empty() || recorded.empty() || !strict_minority(static_cast<std::int64_t>(unseen.size()), world))
    return std::nullopt;
  NodeFinding out;
  out.node = fmt::format("node{}", views.unreachable_obs.front());
  out.ranks = unseen;
  out.finding = Finding{"node_lost",
                        HangKind::node_unreachable,
                        {{"lost_node",
                          {{"why",
                            "its observer never answered and every rank the other observers see recorded a failure "
                            "or waits inside a call, with no call departing from its group's"},
                           {"observer", views.unreachable_obs.front()},
                           {"unseen_ranks", first_ranks(unseen)},
                           {"failed", first_failed(recorded)}}}},
                        Measure::lost_node};
  return out;
}

}  // namespace scout::hang::stages
