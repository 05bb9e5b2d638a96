#include "commands/consensus.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <set>

#include "lib/common/parse.hpp"
#include "lib/consensus/input.hpp"
#include "lib/report/c3_suspects.hpp"

namespace scout {

CommandRunner register_consensus(CLI::App& cmd, const GlobalOptions& globals) {
  auto o = std::make_shared<ConsensusOptions>();
  cmd.add_option("--mode", o->mode, "exact (values must be equal) or statistical (robust outliers)")
      ->check(CLI::IsMember({"exact", "statistical"}))
      ->default_str("exact");
  cmd.add_option("--values", o->values,
                 "Comma-separated values, one per peer; absent: read stdin (one per line or separated by blanks or "
                 "commas, or a JSON array)");
  cmd.add_option("--ranks", o->ranks,
                 "Rank ids of the values, same count (e.g. 0,2,4,6 or 8-15); default: positions 0..N-1");
  cmd.add_option("--kappa", o->statistical.kappa, "Statistical: robust z-score cutoff")->default_str("3.5");
  cmd.add_option("--min-rel", o->statistical.min_relative,
                 "Statistical: smallest deviation that counts, as a fraction of |median|")
      ->default_str("0.1");
  cmd.add_option("--min-abs", o->statistical.min_absolute, "Statistical: smallest deviation that counts, absolute")
      ->default_str("0");
  cmd.add_option("--direction", o->direction, "Statistical: which deviations count: both, high (slow) or low")
      ->check(CLI::IsMember({"both", "high", "low"}))
      ->default_str("both");
  cmd.add_option("--kind", o->kind, "Label of the compared group in the verdict")->default_str("input");
  cmd.add_option("--job", o->job, "Job id to record in the verdict");
  cmd.footer("Examples:\n  scout consensus --values 5,5,5,7\n  seq 1 9 | scout consensus --mode statistical");
  return make_runner(o, globals, run_consensus);
}

namespace {

using Token = InputValue;

// Integral numbers stay integers in the verdict (7, not 7.0).
nlohmann::json as_json(const Token& t) {
  if (!t.number) return t.text;
  double v = *t.number;
  if (std::fabs(v) < 9.0e15 && v == std::trunc(v)) return static_cast<std::int64_t>(v);
  return v;
}

std::vector<Token> parse_values(const ConsensusOptions& o) {
  if (o.values) return value_or_throw(parse_values_flag(*o.values));
  if (!o.stdin_text && isatty(STDIN_FILENO))
    throw FatalError(usage_error("no values were given", "--values is absent and stdin is a terminal",
                                 "pass --values v1,v2,... or pipe one value per line"));
  return value_or_throw(parse_values_text(o.stdin_text ? *o.stdin_text : read_stdin()));
}

std::vector<std::int64_t> parse_ranks(const std::string& text, std::size_t count) {
  std::vector<std::int64_t> ranks;
  if (text.empty()) {
    for (std::size_t i = 0; i < count; ++i) ranks.push_back(static_cast<std::int64_t>(i));
    return ranks;
  }
  auto parsed = parse_int_list(text, "--ranks");
  if (!parsed) throw FatalError(usage_error(parsed.error().what, parsed.error().why, parsed.error().hint));
  ranks = *parsed;
  if (ranks.size() != count)
    throw FatalError(usage_error(fmt::format("--ranks names {} ranks but {} values were given", ranks.size(), count),
                                 {}, "give exactly one rank id per value"));
  std::set<std::int64_t> seen;
  for (auto r : ranks)
    if (!seen.insert(r).second) throw FatalError(usage_error(fmt::format("--ranks names rank {} twice", r)));
  return ranks;
}

}  // namespace

int run_consensus(const ConsensusOptions& o) {
  if (o.statistical.kappa <= 0 || !std::isfinite(o.statistical.kappa))
    throw FatalError(
        usage_error("--kappa must be a positive number", {}, "the default 3.5 is the Iglewicz-Hoaglin cutoff"));
  if (o.statistical.min_relative < 0 || o.statistical.min_absolute < 0)
    throw FatalError(usage_error("--min-rel and --min-abs must not be negative"));
  std::vector<Token> tokens = parse_values(o);
  if (tokens.empty())
    throw FatalError(input_error("no values were given", {}, "pass --values v1,v2,... or pipe one value per line"));
  std::vector<std::int64_t> ranks = parse_ranks(o.ranks, tokens.size());

  std::size_t numeric = 0;
  for (const auto& t : tokens) numeric += t.number.has_value();
  const bool all_numbers = numeric == tokens.size();
  const C3Mode mode = o.mode == "statistical" ? C3Mode::statistical : C3Mode::exact;
  if (mode == C3Mode::statistical && !all_numbers) {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (!tokens[i].number)
        throw FatalError(input_error(fmt::format("value {} '{}' is not a number", i + 1, tokens[i].text),
                                     "statistical mode compares numbers", "use --mode exact for hashes or labels"));
  }
  if (mode == C3Mode::exact && numeric > 0 && !all_numbers) {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (!tokens[i].number)
        throw FatalError(input_error(fmt::format("value {} '{}' is not a number but others are", i + 1, tokens[i].text),
                                     "exact mode compares either all numbers or all text",
                                     "fix the typo, or quote every value as text"));
  }

  nlohmann::json values = nlohmann::json::array();
  for (const auto& t : tokens) values.push_back(as_json(t));

  C3Result result;
  if (mode == C3Mode::exact) {
    if (all_numbers) {
      std::vector<double> xs;
      for (const auto& t : tokens) xs.push_back(*t.number == 0 ? 0.0 : *t.number);  // -0 equals 0
      result = c3_exact_values<double>(xs);
    } else {
      std::vector<std::string> xs;
      for (const auto& t : tokens) xs.push_back(t.text);
      result = c3_exact_values<std::string>(xs);
    }
  } else {
    StatisticalOptions so = o.statistical;
    so.direction = o.direction == "high" ? Direction::high : o.direction == "low" ? Direction::low : Direction::both;
    std::vector<double> xs;
    for (const auto& t : tokens) xs.push_back(*t.number);
    result = c3_statistical(xs, so);
  }

  Verdict v;
  v.command = "consensus";
  v.job = o.job;
  C3Attribution att = attribute_c3(o.kind, ranks, mode, result, values);
  v.groups.push_back(att.run);
  const std::string who = o.ranks.empty() ? "position" : "rank";
  switch (result.status) {
    case C3Status::agree:
      v.status = VerdictStatus::healthy;
      v.scope = Scope::job;
      v.action = "none";
      v.summary = fmt::format("all {} peers agree", tokens.size());
      break;
    case C3Status::inconclusive:
      v.status = VerdictStatus::inconclusive;
      v.scope = Scope::group;
      v.action = "escalate";
      v.summary = tokens.size() == 2
                      ? "two peers disagree: a pair has no strict majority, so which one is wrong is unknown"
                      : fmt::format("no strict majority ({})", c3_reason_name(result.reason));
      break;
    case C3Status::attributed: {
      v.status = VerdictStatus::attributed;
      v.scope = Scope::rank;
      v.action = "investigate_suspects";
      v.suspects = suspects_from_c3(att, [&](std::size_t i, Suspect& s) {
        nlohmann::json ev = {{"position", i}, {"value", values[i]}};
        if (mode == C3Mode::exact) {
          s.reason = "value_differs_from_majority";
          ev["majority_value"] = att.majority ? values[*att.majority] : nlohmann::json(nullptr);
          ev["majority_count"] = result.majority_count;
        } else {
          s.reason = tokens[i].number.value() > result.median ? "value_above_peers" : "value_below_peers";
          ev["median"] = result.median;
          ev["score"] = result.scores[i];
        }
        s.evidence = std::move(ev);
      });
      v.summary = fmt::format("{} of {} peers disagree with the strict majority; suspects reported by {}",
                              v.suspects.size(), tokens.size(), who);
      break;
    }
  }
  v.details = {{"mode", c3_mode_name(mode)}, {"count", tokens.size()}, {"identified_by", who}};
  if (mode == C3Mode::statistical)
    v.details["thresholds"] = {{"kappa", o.statistical.kappa},
                               {"min_rel", o.statistical.min_relative},
                               {"min_abs", o.statistical.min_absolute},
                               {"direction", o.direction}};
  return emit_verdict(v, o.format);
}

}  // namespace scout
