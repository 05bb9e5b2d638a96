// Stages 7 and 9 of the decision (measures.hpp): naming (a rank is named when one measure flags it in a strict
// majority of the rounds taken, a round counting for every measure that flagged it; "stopped", direct evidence,
// first where it has one) and the notes on what the verdict could not see.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "lib/straggler/measures/measures.hpp"

namespace scout::straggler::detail {

Flagged flagged_ranks(const std::vector<RoundResult>& rounds) {
  Flagged flagged;
  for (const auto& r : rounds)
    for (const auto& p : r.peers)
      for (const auto& rr : p.ranks)
        if (rr.flagged) flagged[rr.rank].push_back(&rr);
  return flagged;
}

const std::string* NodeOf::find(std::int64_t rank) const {
  // The latest table's name, else the newest earlier table's.
  for (auto t = m_tables->rbegin(); t != m_tables->rend(); ++t) {
    auto it = t->nodes.find(rank);
    if (it != t->nodes.end()) return &it->second;
  }
  return nullptr;
}

const std::string& NodeOf::at(std::int64_t rank) const {
  const std::string* node = find(rank);
  if (!node) throw std::out_of_range("NodeOf::at: no table names the rank");
  return *node;
}

NodeOf nodes_of(const std::vector<TimingTable>& tables) {
  return NodeOf(tables);
}

// A suspect named by `measure` in the rounds `hits` (ratio: the median of that measure's ratio over them, or
// `pooled_ratio` where >= 0), with its evidence and cause.
void add_compute_suspect(Decision& d, const NodeOf& node_of, std::int64_t rank,
                         const std::vector<const RankRound*>& hits, const std::string& measure, double pooled_ratio,
                         const DecideOptions& o) {
  Suspicion s;
  s.rank = rank;
  s.node = node_of.count(rank) ? node_of.at(rank) : "";
  s.reason = "compute";
  s.flagged_rounds = static_cast<std::int64_t>(hits.size());
  if (pooled_ratio >= 0) {  // the rounds pooled; flagged_rounds counts those that flagged it alone
    s.flagged_rounds = 0;
    for (const auto* h : hits) s.flagged_rounds += h->flagged ? 1 : 0;
  }
  std::vector<double> ratios, scores, c, w, cpu, runq, cpu_ratio, time_ratio;
  for (auto* h : hits) {
    if (pooled_ratio < 0) ratios.push_back(h->flagged_by.at(measure));
    scores.push_back(h->score);
    c.push_back(h->compute_ns);
    w.push_back(h->wait_ns);
    time_ratio.push_back(h->compute_ratio);
    if (h->cpu_ns >= 0) {
      cpu.push_back(h->cpu_ns);
      runq.push_back(h->runq_ns);
      cpu_ratio.push_back(h->cpu_ratio);
    }
  }
  s.ratio = pooled_ratio >= 0 ? pooled_ratio : median(ratios);
  s.confidence = static_cast<double>(hits.size()) / static_cast<double>(d.rounds);
  s.evidence = {{"compute_ratio", std::round(s.ratio * 1000) / 1000},
                {"score", std::round(median(scores) * 100) / 100},
                {"compute_ms_per_call", ms(median(c))},
                {"wait_ms_per_call", ms(median(w))},
                {"flagged_rounds", s.flagged_rounds},
                {"rounds", d.rounds},
                {"measure", measure},  // one measure named it
                {"time_ratio", std::round(median(time_ratio) * 1000) / 1000}};
  // Named by the cpu measure over its rounds pooled (pooled_pairs): how many.
  if (pooled_ratio >= 0) s.evidence["pooled_rounds"] = static_cast<std::int64_t>(hits.size());
  // Named by the cpu measure in rounds its peers did not wait for it (absorbed_spread_factor): how many.
  if (measure == "cpu") {
    std::int64_t absorbed = 0;
    for (const auto* h : hits) absorbed += h->flagged && h->absorbed ? 1 : 0;
    if (absorbed > 0) s.evidence["absorbed_rounds"] = absorbed;
  }
  if (!cpu.empty()) {
    s.evidence["cpu_ms_per_call"] = ms(median(cpu));
    s.evidence["cpu_ratio"] = std::round(median(cpu_ratio) * 1000) / 1000;
    s.evidence["runq_ms_per_call"] = ms(median(runq));
  }
  // Its process state samples over the rounds that flagged it (where every one was sampled).
  {
    std::int64_t samples = 0, stopped = 0;
    std::vector<double> per_call;
    bool sampled = true;
    for (auto* h : hits) {
      sampled &= h->stopped.samples > 0;
      samples += h->stopped.samples;
      stopped += h->stopped.stopped;
      per_call.push_back(h->stopped.ns_per_call());
    }
    if (sampled && samples > 0) {
      s.evidence["stopped_share"] =
          std::round(static_cast<double>(stopped) / static_cast<double>(samples) * 1000) / 1000;
      s.evidence["state_samples"] = samples;
      s.evidence["stopped_ms_per_call"] = ms(median(per_call));
    }
  }
  Cause cause = cause_of(hits, o);
  s.evidence["cause"] = cause.cause;
  s.evidence["cause_figures"] = cause.figures;
  d.suspects.push_back(std::move(s));
}

void name_by_majority(Decision& d, const Flagged& flagged, const NodeOf& node_of, const DecideOptions& o) {
  const auto majority = [&](std::int64_t n) { return 2 * n > d.rounds; };
  for (const auto& [rank, all_hits] : flagged) {
    // Named when one measure flags it in a strict majority of rounds: a clean rank flagged once by its
    // CPU and once by its time off a CPU (measured, --rounds 2) is two kinds of noise, not one straggler.
    // A round counts for every measure that flagged it: a rank starved by 10 pinned hogs was flagged by
    // cpu and cpu_wait in round 1 (cache-cold, 1.40x CPU per call, 5.1x compute time) and by cpu_wait in
    // round 2, and went unnamed when each round counted for one (test seed 30683001).
    std::map<std::string, std::vector<const RankRound*>> by_measure;
    for (const auto* h : all_hits)
      for (const auto& [m, ratio] : h->flagged_by) by_measure[m].push_back(h);
    const std::vector<const RankRound*>* most = nullptr;
    std::string measure;
    for (const auto& [m, v] : by_measure)
      if (m != "late" && (!most || v.size() > most->size())) {
        most = &v;
        measure = m;
      }
    // "late" names it only where no measure that tells why does (a stopped rank is also late, in more rounds).
    if (auto lt = by_measure.find("late");
        lt != by_measure.end() && (!most || !majority(static_cast<std::int64_t>(most->size())))) {
      most = &lt->second;
      measure = "late";
    }
    // Its process state samples are direct evidence: where they flag it in a strict majority, they name it.
    if (auto st = by_measure.find("stopped");
        st != by_measure.end() && majority(static_cast<std::int64_t>(st->second.size()))) {
      most = &st->second;
      measure = "stopped";
    }
    if (!most || !majority(static_cast<std::int64_t>(most->size()))) continue;
    add_compute_suspect(d, node_of, rank, *most, measure, -1, o);
  }
}

// What a verdict that names no one (or not every suspect) cannot see, in its notes: ranks flagged in some
// rounds but not named (unconfirmed; a note where they were flagged in less than a strict majority of the rounds:
// a rerun with more --rounds confirms or clears them; pair_noise_check notes those it overruled), and a host whose
// CPUs are oversubscribed, where compute times move by more than a mild straggler's slowdown from round to
// round (measured: a 1.42x trainer-slowed rank of a pair at load 5.9 on 2 CPUs computed 1.00x, 0.76x and
// 1.18x its partner's time in three rounds, and went unnamed with "no straggler" and nothing else said).
void noise_notes(Decision& d, const std::vector<RoundResult>& rounds, const Flagged& flagged, const DecideOptions& o) {
  std::set<std::int64_t> named;
  for (const auto& s : d.suspects) named.insert(s.rank);
  for (const auto& [rank, hits] : flagged) {
    if (named.count(rank)) continue;
    d.unconfirmed.push_back(rank);
    if (2 * static_cast<std::int64_t>(hits.size()) > d.rounds) continue;  // a majority a noise check overruled (noted)
    std::set<std::string> measures;
    for (const auto* h : hits)
      for (const auto& [m, ratio] : h->flagged_by) measures.insert(m);
    d.notes.push_back(
        fmt::format("rank {} was flagged in {} of {} rounds (by {}), not a strict majority: rerun "
                    "with more --rounds to confirm or clear it",
                    rank, hits.size(), d.rounds, fmt::join(measures, ", ")));
  }
  // Per round: the median CPU wait share, and the largest ratio of a rank no one named in the measure that decides
  // its group (CPU per call, process and main thread alike, where the group waits for CPUs; compute time elsewhere).
  std::vector<double> shares, spreads;
  std::int64_t contended = 0;
  for (const auto& r : rounds) {
    if (!r.has_data || r.peers.empty()) continue;
    std::vector<double> s;
    double spread = 1;
    bool any = false;
    for (const auto& p : r.peers) {
      s.push_back(p.cpu_wait_share);
      any |= p.contended;
      for (const auto& rr : p.ranks)
        if (!named.count(rr.rank))
          spread = std::max(spread, p.contended ? std::min(rr.cpu_ratio, rr.main_cpu_ratio) : rr.compute_ratio);
    }
    shares.push_back(median(s));
    spreads.push_back(spread);
    contended += any ? 1 : 0;
  }
  if (shares.empty()) return;
  d.noise_cpu_wait_share = median(shares);
  d.noise_ratio = *std::max_element(spreads.begin(), spreads.end());
  d.oversubscribed = 2 * contended > static_cast<std::int64_t>(shares.size()) &&
                     d.noise_cpu_wait_share >= o.oversubscribed_share && d.noise_ratio >= 1 + o.min_relative;
  if (!d.oversubscribed) return;
  d.notes.push_back(fmt::format(
      "the host's CPUs are oversubscribed: ranks waited for a CPU {:.0f}% as long as they computed (median over "
      "rounds), and a rank no one named was {:.2f}x its peers in a round (CPU per call where they waited for CPUs, "
      "compute time elsewhere): a straggler slowed by less than that may go unnamed; rerun with more --rounds, or "
      "when the host is less loaded",
      100 * d.noise_cpu_wait_share, d.noise_ratio));
}

// A rank named for its CPU whose time barely exceeds its peers': say why the job's steps hardly show it.
void absorbed_notes(Decision& d, const DecideOptions& o) {
  for (const auto& s : d.suspects) {
    const double time_ratio = s.evidence.value("time_ratio", 1.0);
    if (s.evidence.value("measure", "") == "cpu" && time_ratio < 1 + o.min_relative)
      d.notes.push_back(fmt::format(
          "rank {} used {:.2f}x its peers' CPU per call but took only {:.2f}x their time: the host's CPUs are "
          "oversubscribed and it took its extra CPU from time it would have waited for one; with a CPU of its "
          "own it would slow every step",
          s.rank, s.ratio, time_ratio));
  }
}

}  // namespace scout::straggler::detail
