// Stage 6, conclude: the verdict's status, scope, action and summary, and the
// hang kind. Reads: the suspects (stage 5), whether the job is stalled, the
// ranks' states and positions, the comparison's groups and replica splits, the
// unreachable observers and the records set aside. Rules, in order: suspects
// are attributed (a divergence escalates, anything else restarts in place);
// not stalled is healthy; when every visible rank waits inside a collective,
// none is dead and they are a strict majority, the unreachable observers'
// nodes are the suspects (measure unreachable_observer); every rank alive and
// inside a call with replicas that made different calls is inconclusive;
// otherwise alive and inside is a group stall; every rank exited outside any
// collective with agreeing groups is a job that ended; anything else is
// inconclusive. Never healthy while another attempt's records were set aside
// and this one's are incomplete. Threshold: strict_majority.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "lib/common/hex.hpp"
#include "lib/hang/decide/stages.hpp"
#include "lib/hang/thresholds.hpp"
#include "lib/records/layout.hpp"

namespace scout::hang::stages {

HangKind conclude(const DecisionInput& in, const Views& views, const Positions& pos, const Comparison& cmp,
                  const Explanation& ex, bool stalled, Verdict& v) {
  const std::int64_t world = views.world;
  const auto attempts = other_attempts(views);
  json unreachable_names = json::array();
  for (auto o : views.unreachable_obs) unreachable_names.push_back(fmt::format("node{}", o));
  HangKind kind = ex.kind;
  std::int64_t known = 0, known_entered = 0, known_alive = 0, dead = 0, failed = 0, nonzero_exit = 0;
  std::int64_t waiting_known = 0;
  for (std::int64_t r = 0; r < world; ++r) {
    const auto& p = pos.ranks[r];
    if (p.torn_dead) ++dead;
    if (!p.s) continue;
    ++known;
    known_entered += p.entered;
    failed += p.failed;
    const auto& proc = views.ranks[r].evidence->process;
    known_alive += proc.state == ProcessState::alive || proc.state == ProcessState::unknown;
    dead += p.dead;
    nonzero_exit += p.dead && (proc.signal != 0 || proc.exit_code > 0);
    waiting_known += p.entered && !p.dead;
  }

  if (!v.suspects.empty()) {
    v.status = VerdictStatus::attributed;
    const bool divergence = kind == HangKind::control_flow_divergence || kind == HangKind::argument_divergence;
    v.action = divergence ? "escalate" : "restart_in_place";
    std::vector<std::string> names;
    for (const auto& s : v.suspects)
      if (s.rank >= 0) names.push_back(fmt::format("{} ({})", s.rank, s.reason));
    if (!names.empty()) {
      v.scope = Scope::rank;
      v.summary =
          fmt::format("{}: rank{} {}", hang_kind_name(kind), v.suspects.size() > 1 ? "s" : "", fmt::join(names, ", "));
    } else {
      // Whole nodes: every rank of one died together (first_failed_node), or its observer and ranks
      // went silent together (lost_node).
      v.scope = Scope::node;
      v.action = "replace_node";
      for (const auto& s : v.suspects) {
        std::vector<std::int64_t> ranks;
        for (const auto& r : s.evidence.value("ranks", json::array())) ranks.push_back(r.value("rank", -1));
        names.push_back(
            fmt::format("{} ({}: rank{} {})", s.node, s.reason, ranks.size() > 1 ? "s" : "", fmt::join(ranks, ", ")));
      }
      const bool lost = kind == HangKind::node_unreachable;
      v.summary = fmt::format("{}: node{} {}, {}", hang_kind_name(kind), v.suspects.size() > 1 ? "s" : "",
                              fmt::join(names, "; "),
                              lost ? "lost with its observer while every rank the other observers see failed or waits"
                                   : "whose ranks died first and together");
    }
    if (!ex.victim_ranks.empty())
      v.summary +=
          fmt::format("; victim{} {}", ex.victim_ranks.size() > 1 ? "s" : "", fmt::join(ex.victim_ranks, ", "));
  } else if (!stalled) {
    kind = HangKind::healthy;
    v.status = VerdictStatus::healthy;
    v.scope = Scope::job;
    v.action = "none";
    v.summary = pos.newest_progress == 0
                    ? std::string("no rank has published progress yet (starting up)")
                    : fmt::format("progress is not silent (last progress {:.1f} s ago, threshold {:.1f} s)",
                                  seconds(std::max<std::int64_t>(pos.silent_ns, 0)), seconds(in.threshold_ns));
  } else if (!views.unreachable_obs.empty() && known > 0 && known == known_entered && strict_majority(known, world) &&
             std::all_of(pos.ranks.begin(), pos.ranks.end(), [](const RankPos& p) { return !p.s || !p.dead; })) {
    // Every visible rank waits inside a collective and they are a strict
    // majority: the ranks no observer could see are where the fault is.
    kind = HangKind::node_unreachable;
    v.status = VerdictStatus::attributed;
    v.scope = Scope::node;
    v.action = "replace_node";
    for (auto o : views.unreachable_obs) {
      Suspect s;
      s.rank = -1;
      s.node = fmt::format("node{}", o);
      s.reason = "node_unreachable";
      std::vector<std::int64_t> ranks;
      for (std::int64_t r = 0; r < world; ++r)
        if (views.ranks[r].unreachable) ranks.push_back(r);
      s.evidence = {{"observer", o},
                    {"unseen_ranks", ranks},
                    {"waiting_ranks", known},
                    {"measure", measure_name(Measure::unreachable_observer)},
                    {"stage", measure_stage(Measure::unreachable_observer)}};
      json claims = json::array();
      for (const auto& r : in.rejected)
        if (r.observer == o) claims.push_back(r.reason);
      if (!claims.empty()) s.evidence["rejected_claims"] = claims;
      v.suspects.push_back(std::move(s));
    }
    v.summary = fmt::format("every visible rank waits inside a collective; unreachable: {}", unreachable_names.dump());
  } else if (known == world && known_entered == world && known_alive == world && failed == 0 && !cmp.splits.empty()) {
    // Every rank waits inside a call, but replicas made different calls: a software divergence that
    // two replicas cannot attribute (no strict majority), not a fabric stall.
    kind = HangKind::inconclusive;
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::group;
    v.action = "escalate";
    json splits = json::array();
    std::vector<std::string> pairs;
    for (const auto& sp : cmp.splits) {
      splits.push_back({{"ranks", {sp.a, sp.b}}, {"reason", sp.finding.reason}, {"evidence", sp.finding.evidence}});
      if (pairs.size() < 8) pairs.push_back(fmt::format("{} and {} ({})", sp.a, sp.b, sp.finding.reason));
    }
    v.details["replica_splits"] = std::move(splits);
    v.summary = fmt::format(
        "every rank waits inside a collective, but replicas made different calls: {}; a replica group of two "
        "cannot tell which is wrong (compare the two ranks' code paths and inputs; details.replica_splits)",
        fmt::join(pairs, ", "));
  } else if (known == world && known_entered == world && known_alive == world && failed == 0) {
    kind = HangKind::group_stall;
    v.status = VerdictStatus::group_stall;
    v.scope = Scope::group;
    v.action = "fabric_diagnostics";
    std::set<std::tuple<std::uint8_t, std::uint64_t, std::uint64_t>> distinct_colls;
    for (std::int64_t r = 0; r < world; ++r) {
      const auto& f = pos.ranks[r].s->pending;
      distinct_colls.emplace(static_cast<std::uint8_t>(f.type), f.group, f.group_seq);
    }
    std::set<std::string> colls;
    for (const auto& [type, group, seq] : distinct_colls)
      colls.insert(fmt::format("{} pg {} seq {}",
                               records::collective_type_name(static_cast<records::CollectiveType>(type)), hex64(group),
                               seq));
    v.summary = fmt::format("every rank is alive and waiting inside a collective ({}) for {:.1f} s: group-scoped stall",
                            fmt::join(colls, "; "), seconds(pos.silent_ns));
    v.details["waiting_in"] = std::vector<std::string>(colls.begin(), colls.end());
  } else if (known == world && dead == world && known_entered == 0 && nonzero_exit == 0 && !cmp.any_inconclusive &&
             std::all_of(v.groups.begin(), v.groups.end(),
                         [](const GroupRun& g) { return g.status == C3Status::agree; })) {
    kind = HangKind::healthy;
    v.status = VerdictStatus::healthy;
    v.scope = Scope::job;
    v.action = "none";
    v.summary = "every rank exited at the same point, outside any collective: the job ended";
  } else {
    kind = HangKind::inconclusive;
    v.status = VerdictStatus::inconclusive;
    v.scope = views.unreachable_obs.empty() ? Scope::job : Scope::node;
    v.action = "escalate";
    if (!ex.died_in_finished_call.empty()) {
      const auto& died = ex.died_in_finished_call;
      const auto& first = pos.ranks[died.front()].s->pending;
      const bool one_call = std::all_of(died.begin(), died.end(), [&](std::int64_t r) {
        const auto& c = pos.ranks[r].s->pending;
        return c.group == first.group && c.group_seq == first.group_seq;
      });
      v.summary = fmt::format(
          "rank{} {} died inside {}a call the other members finished: the records cannot tell which died first, "
          "nor whether one was aborted for another's failure (read {} logs; details.victims)",
          died.size() > 1 ? "s" : "", fmt::join(died, ", "),
          one_call ? fmt::format("{} pg {} seq {}, ", records::collective_type_name(first.type), hex64(first.group),
                                 first.group_seq)
                   : std::string(),
          died.size() > 1 ? "their" : "its");
    } else if (known == world && dead == world)
      v.summary = fmt::format(
          "every rank has exited and no position singles one out{}: the cause cannot be told from "
          "the records (read the ranks' logs)",
          ex.victim_ranks.empty() ? "" : " (details.victims lists how each died)");
    else if (!ex.victim_ranks.empty())
      v.summary = fmt::format(
          "rank{} {} died at {} peers' position or waiting for them (victims); no position or history "
          "singles out a cause",
          ex.victim_ranks.size() > 1 ? "s" : "", fmt::join(ex.victim_ranks, ", "),
          ex.victim_ranks.size() > 1 ? "their" : "its");
    else if (!views.unreachable_obs.empty())
      v.summary = fmt::format("no strict majority of visible ranks agrees; unreachable: {}", unreachable_names.dump());
    else if (!views.missing.empty() || !views.issues.empty())
      v.summary = "some ranks have no readable record and the rest do not single out a rank";
    else if (known_entered == 0)
      v.summary = "every rank is silent outside any collective (data loading, I/O or the host?)";
    else
      v.summary = "progress is silent and no strict majority singles out a rank";
  }
  if (!attempts.empty() && v.status == VerdictStatus::healthy) {
    // Never healthy while some records belong to another attempt and this one's are incomplete.
    if (known < world) {
      v.status = VerdictStatus::inconclusive;
      v.action = "escalate";
      kind = HangKind::inconclusive;
    }
    v.summary += fmt::format("; records of attempt{} {} were set aside (details.record_attempts)",
                             attempts.size() > 1 ? "s" : "", fmt::join(attempts, ", "));
  }
  return kind;
}

}  // namespace scout::hang::stages
