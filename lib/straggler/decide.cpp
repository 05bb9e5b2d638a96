// The straggler decision, stage by stage (decide.hpp; the stages and measures in measures/measures.hpp, every
// threshold in thresholds.hpp). Read in this order: analyse_round (one round: per peer group the statistics, the
// time measures, the material check, the direct measures, the round checks; per group kind the link measure), then
// decide (over the rounds: naming by majority, pooled pairs, the pairs' noise check, the notes, the diagnosis), then
// analyse (the rounds' tables from the evidence, and both).
#include "lib/straggler/decide.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "lib/straggler/measures/measures.hpp"

namespace scout::straggler {

RoundResult analyse_round(const TimingTable& t, const Mesh& mesh, const DecideOptions& o) {
  using namespace detail;
  RoundResult out;
  const RankIndex ix(t);
  std::set<CallKey> all_keys;  // over the ranks' distinct key sets
  for (std::uint32_t s = 0; s < ix.key_sets.size(); ++s)
    all_keys.insert(ix.key_sets.keys(s).begin(), ix.key_sets.keys(s).end());
  out.calls = static_cast<std::int64_t>(all_keys.size());

  // Compute: per peer group over the calls every present peer completed.
  PeerScratch scratch;
  for (auto& group : mesh.peer_groups()) {
    // 1. stats
    const auto stats = peer_stats(t, group, o, ix, scratch);
    if (!stats) continue;
    const PeerStats& s = *stats;
    PeerRound p;
    p.members = s.present;
    p.calls = static_cast<std::int64_t>(s.calls);
    p.cpu_wait_share = s.cpu_wait_share;
    p.contended = s.contended;
    p.c3 = s.c3;
    p.ranks.reserve(s.present.size());
    for (std::size_t i = 0; i < s.present.size(); ++i) {
      RankRound rr = rank_figures(s, i);
      // 2. the time measures: compute, or on a contended host cpu, off_cpu, cpu_wait
      if (s.contended)
        measure_contended(s, i, o, rr);
      else
        measure_compute(s, i, o, rr);
      // 3. material
      check_material(s, i, o, rr);
      // 4. the direct measures: stopped, throttled (after the figures cause_of reads)
      measure_stopped(s, i, o, rr);
      rr.off_cpu_ratio = s.off_ratio[i];
      explain_figures(s, i, rr);
      measure_throttled(s, i, o, rr);
      spdlog::debug(
          "straggler: rank {} calls {} compute {:.3f} ms (x{:.3f}) wait {:.3f} ms cpu x{:.3f} main x{:.3f} off x{:.3f} "
          "contended {} flagged {} by {} cpu {:.3f} ms main {:.3f} ms runq {:.3f} ms",
          rr.rank, s.calls, s.compute[i] / 1e6, s.relative[i], s.wait[i] / 1e6, s.cpu_ratio[i], s.main_ratio[i],
          s.off_ratio[i], s.contended, rr.flagged, rr.measure, rr.cpu_ns / 1e6,
          s.counted ? s.counters(i).main_cpu_ns / 1e6 : -1.0, rr.runq_ns / 1e6);
      p.ranks.push_back(std::move(rr));
    }
    // 5. round checks
    check_stopped_peer(p);
    check_absorbed_alone(p);
    out.has_data = true;
    out.peers.push_back(std::move(p));
  }
  // 6. link
  measure_link(t, o, out, ix);
  // 6b. a slow link's members block outside their calls too
  check_link_blocked(t, out);
  return out;
}

Decision decide(const std::vector<RoundResult>& rounds, const std::vector<TimingTable>& tables, const Mesh& mesh,
                const DecideOptions& o) {
  using namespace detail;
  (void)mesh;
  Decision d;
  d.rounds = static_cast<std::int64_t>(rounds.size());
  for (const auto& r : rounds) d.rounds_with_data += r.has_data ? 1 : 0;
  d.enough_data = d.rounds > 0 && 2 * d.rounds_with_data > d.rounds;
  if (!d.enough_data) {
    d.notes.push_back(fmt::format("{} of {} rounds had {} or more calls every peer completed", d.rounds_with_data,
                                  d.rounds, o.min_calls));
    return d;
  }
  const auto node_of = nodes_of(tables);
  // 7. naming: one measure in a strict majority of rounds
  const Flagged flagged = flagged_ranks(rounds);
  name_by_majority(d, flagged, node_of, o);
  // 8. pooled pairs, then the pairs' noise
  PairRatios pair_ratios;
  name_pooled(d, pooled_pairs(rounds, o, pair_ratios), node_of, o);
  // Persistence first: a rank it drops (heavy in some rounds only) is the noise of its pair, not a second straggler
  // to leave out of the other pairs' noise (seed 353869121, pair_noise_check).
  pair_persistence_check(d, rounds, o);
  pair_noise_check(d, rounds, pair_ratios, o);
  pair_partner_low_check(d, rounds, o);
  memory_causes(d, rounds);
  std::sort(d.suspects.begin(), d.suspects.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  // 9. notes
  noise_notes(d, rounds, flagged, o);
  absorbed_notes(d, o);
  // 10. diagnosis and confidence
  const double comm_conf = diagnose_communication(d, rounds, tables, o);
  decision_confidence(d, comm_conf);
  return d;
}

Analysis analyse(const std::vector<RoundEvidence>& evidence, const Mesh& mesh, const DecideOptions& o) {
  Analysis a;
  const auto known = mesh_groups(mesh);
  UsedCalls used;
  auto cpus = cpu_per_call(evidence);
  auto stops = stopped_per_round(evidence);
  for (std::size_t i = 0; i < evidence.size(); ++i) {
    TimingTable table = build_table(evidence[i], known, &used);
    used.add(table);
    if (evidence[i].baseline) continue;  // it opens the counters' window; its calls were before it
    table.cpu = std::move(cpus[i]);
    table.stopped = std::move(stops[i]);
    a.tables.push_back(std::move(table));
    a.rounds.push_back(analyse_round(a.tables.back(), mesh, o));
  }
  a.decision = decide(a.rounds, a.tables, mesh, o);
  return a;
}

MeasureFlags measure_flags(const Analysis& a, const DecideOptions& o) {
  MeasureFlags f;
  for (const auto& r : a.rounds) {
    std::map<std::string, std::set<std::int64_t>> flagged, raised;
    for (const auto& p : r.peers)
      for (const auto& rr : p.ranks) {
        for (const auto& [m, ratio] : rr.flagged_by) flagged[m].insert(rr.rank);
        for (const auto& [m, ratio] : rr.raised_by) raised[m].insert(rr.rank);
      }
    std::set<std::size_t> slow;
    for (const auto& g : r.groups)
      if (g.slow) slow.insert(g.group);
    f.flagged.push_back(std::move(flagged));
    f.raised.push_back(std::move(raised));
    f.slow_groups.push_back(std::move(slow));
  }
  detail::PairRatios pair_ratios;
  for (const auto& pp : detail::pooled_pairs(a.rounds, o, pair_ratios)) f.pooled_pair.insert(pp.rank);
  return f;
}

}  // namespace scout::straggler
