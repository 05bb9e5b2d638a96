// Stage 5, explain: the first-failure rule, when no position, history or wait
// named anyone. Reads: each rank's recorded failure (a failed call, phase
// comm_error), whether its record is final (writer gone), and how its process
// ended (exit code, signal). Rule: every victim of a death sees the dead peer's
// connection close and records it; the rank that died first saw nothing. So a
// lone death with no recorded failure is named (unless it is a SIGABRT, or of
// unknown form, among recorded failures: how a victim dies); several such
// deaths name only those by a signal no peer's failure sends, when every one's
// form is known; never more than a strict minority of the world. Thresholds:
// k_cascade_signals, k_victim_abort_signal, strict_minority, k_max_group_values.
#include <algorithm>
#include <iterator>

#include "lib/hang/decide/stages.hpp"
#include "lib/hang/thresholds.hpp"

namespace scout::hang::stages {

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
    const auto& proc = views.ranks[unrecorded.front()].evidence->process;
    const bool unknown_form = proc.signal == 0 && proc.exit_code < 0;
    if (recorded.empty() || !(proc.signal == k_victim_abort_signal || unknown_form)) named = unrecorded;
  } else {
    for (auto r : unrecorded) {
      const auto& proc = views.ranks[r].evidence->process;
      if (proc.signal == 0 && proc.exit_code < 0) return;  // a death of unknown form: it may be the cascade's
      if (proc.signal != 0 && !cascade_form_signal(proc.signal)) named.push_back(r);
    }
  }
  if (named.empty() || !strict_minority(static_cast<std::int64_t>(named.size()), world)) return;
  for (auto r : named) {
    json failed_after = json::array();
    for (auto f : recorded) {
      if (failed_after.size() >= k_max_group_values) break;
      failed_after.push_back(f);
    }
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

}  // namespace scout::hang::stages
