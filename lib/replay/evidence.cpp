#include "lib/replay/evidence.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "lib/common/hex.hpp"
#include "lib/consensus/c3.hpp"

namespace scout::replay {

std::string hash_hex(std::uint64_t h) {
  return hex64(h);
}

namespace {

Result<std::uint64_t> parse_hex(const nlohmann::json& j, const char* what) {
  if (!j.is_string()) return input_error(fmt::format("replay evidence: {} is not a string", what));
  const std::string s = j.get<std::string>();
  const auto v = parse_hex64(s);
  if (!v) return input_error(fmt::format("replay evidence: {} '{}' is not 0x + 16 hex digits", what, s));
  return *v;
}

bool finite_nonneg(const nlohmann::json& j) {
  return j.is_number() && std::isfinite(j.get<double>()) && j.get<double>() >= 0;
}

}  // namespace

nlohmann::json to_json(const PeerEvidence& e) {
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& r : e.recipes) {
    nlohmann::json hs = nlohmann::json::object();
    for (const auto& [q, h] : r.hashes) hs[std::string(quantity_name(q))] = hash_hex(h);
    rs.push_back({{"recipe", r.recipe},
                  {"contract", r.contract},
                  {"input_hash", hash_hex(r.input_hash)},
                  {"hashes", hs},
                  {"gather_s", r.gather_s},
                  {"forward_s", r.forward_s},
                  {"backward_s", r.backward_s},
                  {"error", r.error},
                  {"injected", r.injected}});
  }
  return {{"schema", k_evidence_schema},
          {"schema_version", k_evidence_version},
          {"peer", e.peer},
          {"rank", e.rank},
          {"node", e.node},
          {"recipes", rs}};
}

Result<PeerEvidence> peer_evidence_from_json(const nlohmann::json& j) {
  auto bad = [](const std::string& what) {
    return input_error(fmt::format("replay evidence: {}", what), "a peer sent evidence scout cannot read",
                       "run the same scout version on every peer");
  };
  if (!j.is_object() || j.value("schema", "") != k_evidence_schema) return bad("not scout.replay.evidence");
  if (!j.contains("schema_version") || !j["schema_version"].is_string() ||
      j["schema_version"].get<std::string>().rfind("1.", 0) != 0)
    return bad("schema_version is not 1.x");
  PeerEvidence e;
  if (!j.contains("peer") || !j["peer"].is_number_integer() || !j.contains("rank") || !j["rank"].is_number_integer())
    return bad("peer or rank missing");
  e.peer = j["peer"].get<std::int64_t>();
  e.rank = j["rank"].get<std::int64_t>();
  if (j.contains("node") && j["node"].is_string()) e.node = j["node"].get<std::string>();
  if (!j.contains("recipes") || !j["recipes"].is_array()) return bad("recipes missing");
  for (const auto& r : j["recipes"]) {
    RecipeEvidence x;
    if (!r.is_object() || !r.contains("recipe") || !r["recipe"].is_string()) return bad("a recipe has no id");
    x.recipe = r["recipe"].get<std::string>();
    if (!r.contains("contract") || !r["contract"].is_object()) return bad(x.recipe + ": contract missing");
    x.contract = r["contract"];
    auto ih = parse_hex(r.value("input_hash", nlohmann::json()), "input_hash");
    if (!ih) return ih.error();
    x.input_hash = *ih;
    if (!r.contains("hashes") || !r["hashes"].is_object()) return bad(x.recipe + ": hashes missing");
    for (const auto& [k, v] : r["hashes"].items()) {
      auto q = parse_quantity(k);
      if (!q) return bad(fmt::format("{}: unknown quantity {}", x.recipe, k));
      auto h = parse_hex(v, "hash");
      if (!h) return h.error();
      x.hashes[*q] = *h;
    }
    for (const char* k : {"gather_s", "forward_s", "backward_s"})
      if (!r.contains(k) || !finite_nonneg(r[k]))
        return bad(fmt::format("{}: {} is not a non-negative number", x.recipe, k));
    x.gather_s = r["gather_s"].get<double>();
    x.forward_s = r["forward_s"].get<double>();
    x.backward_s = r["backward_s"].get<double>();
    if (r.contains("error") && r["error"].is_string()) x.error = r["error"].get<std::string>();
    if (r.contains("injected")) x.injected = r["injected"];
    e.recipes.push_back(std::move(x));
  }
  return e;
}

namespace {

struct Finding {
  std::int64_t peer;
  std::string reason;
  nlohmann::json evidence;
};

// Keys whose values differ between two contracts (for the report).
nlohmann::json contract_differences(const nlohmann::json& majority, const nlohmann::json& mine) {
  nlohmann::json out = nlohmann::json::array();
  std::set<std::string> keys;
  for (const auto& [k, v] : majority.items()) keys.insert(k);
  for (const auto& [k, v] : mine.items()) keys.insert(k);
  for (const auto& k : keys) {
    const auto a = majority.contains(k) ? majority[k] : nlohmann::json();
    const auto b = mine.contains(k) ? mine[k] : nlohmann::json();
    if (a != b) out.push_back({{"field", k}, {"majority", a}, {"peer", b}});
  }
  return out;
}

}  // namespace

Verdict decide_replay(const std::vector<std::optional<PeerEvidence>>& peers, const DecideOptions& o) {
  Verdict v;
  v.command = "replay";
  v.job = o.job;
  const std::int64_t n = static_cast<std::int64_t>(peers.size());
  auto rank_of = [&](std::int64_t p) {
    return peers[static_cast<std::size_t>(p)] ? peers[static_cast<std::size_t>(p)]->rank : p;
  };

  // Recipe instances in the order the first reporting peer lists them.
  std::vector<std::string> recipe_ids;
  nlohmann::json missing = nlohmann::json::array();
  for (std::int64_t p = 0; p < n; ++p) {
    if (!peers[static_cast<std::size_t>(p)]) {
      missing.push_back(p);
      continue;
    }
    for (const auto& r : peers[static_cast<std::size_t>(p)]->recipes)
      if (std::find(recipe_ids.begin(), recipe_ids.end(), r.recipe) == recipe_ids.end()) recipe_ids.push_back(r.recipe);
  }

  std::vector<Finding> findings;
  // Slow peers per (peer, "compute"|"gather"), and how many recipes had their times compared.
  std::map<std::pair<std::int64_t, std::string>, std::vector<nlohmann::json>> slow_seen;
  std::map<std::string, std::int64_t> timed_recipes;
  nlohmann::json uncomparable = nlohmann::json::array();
  nlohmann::json recipes_json = nlohmann::json::array();
  bool any_inconclusive = !missing.empty() && static_cast<std::int64_t>(missing.size()) * 2 >= n;
  bool hashes_unclear = any_inconclusive;

  for (const auto& id : recipe_ids) {
    nlohmann::json rj = {{"recipe", id}};
    // Peers holding this recipe without error.
    std::vector<std::int64_t> have;
    std::vector<const RecipeEvidence*> ev;
    for (std::int64_t p = 0; p < n; ++p) {
      const auto& pe = peers[static_cast<std::size_t>(p)];
      if (!pe) continue;
      const RecipeEvidence* found = nullptr;
      for (const auto& r : pe->recipes)
        if (r.recipe == id) found = &r;
      if (!found) {
        uncomparable.push_back({{"peer", p}, {"rank", rank_of(p)}, {"recipe", id}, {"reason", "recipe_missing"}});
        continue;
      }
      if (!found->error.empty()) {
        uncomparable.push_back(
            {{"peer", p}, {"rank", rank_of(p)}, {"recipe", id}, {"reason", "peer_error"}, {"error", found->error}});
        continue;
      }
      have.push_back(p);
      ev.push_back(found);
    }
    std::vector<std::int64_t> members;
    for (auto p : have) members.push_back(rank_of(p));
    rj["peers"] = have;
    std::string status = "agree", reason = "unanimous";
    if (static_cast<std::int64_t>(have.size()) * 2 <= n) {
      status = "inconclusive";
      reason = have.empty() ? "no_peer_ran_it" : "too_few_peers";
    }

    // 1. The replay contract, exact C3: peers that cannot be compared say so.
    std::vector<std::string> contracts;
    nlohmann::json cvalues = nlohmann::json::array();
    for (const auto* e : ev) {
      contracts.push_back(e->contract.dump());
      cvalues.push_back(e->contract);
    }
    if (status == "agree") {
      const C3Result c = c3_exact_values<std::string>(contracts);
      v.groups.push_back(make_group_run("replay_contract:" + id, members, C3Mode::exact, c, cvalues));
      if (c.status != C3Status::agree) {
        status = "inconclusive";
        reason = "contract_mismatch";
        const nlohmann::json majority =
            c.majority_peer >= 0 ? ev[static_cast<std::size_t>(c.majority_peer)]->contract : ev[0]->contract;
        for (std::size_t i = 0; i < ev.size(); ++i)
          if (ev[i]->contract != majority || c.majority_peer < 0)
            uncomparable.push_back({{"peer", have[i]},
                                    {"rank", members[i]},
                                    {"recipe", id},
                                    {"reason", "contract_mismatch"},
                                    {"differs", contract_differences(majority, ev[i]->contract)}});
      }
      rj["contract"] =
          c.majority_peer >= 0 ? ev[static_cast<std::size_t>(c.majority_peer)]->contract : nlohmann::json();
    }

    // 2. The source's input and RNG state as every peer received them.
    std::vector<bool> excluded(ev.size(), false);
    if (status == "agree") {
      std::vector<std::uint64_t> keys;
      nlohmann::json vals = nlohmann::json::array();
      for (const auto* e : ev) {
        keys.push_back(e->input_hash);
        vals.push_back(hash_hex(e->input_hash));
      }
      const C3Result c = c3_exact(keys);
      v.groups.push_back(make_group_run("replay_input:" + id, members, C3Mode::exact, c, vals));
      if (c.status == C3Status::inconclusive) {
        status = "inconclusive";
        reason = "input_no_majority";
      } else if (c.status == C3Status::attributed) {
        for (std::size_t i = 0; i < ev.size(); ++i) {
          if (!c.outliers[i]) continue;
          excluded[i] = true;
          findings.push_back({have[i],
                              "input_mismatch",
                              {{"recipe", id},
                               {"input_hash", hash_hex(keys[i])},
                               {"majority_hash", hash_hex(keys[static_cast<std::size_t>(c.majority_peer)])}}});
        }
        status = "attributed";
        reason = "strict_minority";
      }
    }

    // 3. Each compared quantity, exact C3 among peers whose input agreed.
    nlohmann::json qs = nlohmann::json::array();
    if (status != "inconclusive") {
      std::vector<std::int64_t> qpeers, qmembers;
      std::vector<const RecipeEvidence*> qev;
      for (std::size_t i = 0; i < ev.size(); ++i)
        if (!excluded[i]) {
          qpeers.push_back(have[i]);
          qmembers.push_back(members[i]);
          qev.push_back(ev[i]);
        }
      for (auto q : k_quantities) {
        std::vector<std::uint64_t> keys;
        nlohmann::json vals = nlohmann::json::array();
        bool all = true;
        for (const auto* e : qev) {
          auto it = e->hashes.find(q);
          if (it == e->hashes.end()) {
            all = false;
            break;
          }
          keys.push_back(it->second);
          vals.push_back(hash_hex(it->second));
        }
        if (!all || keys.empty()) continue;
        const C3Result c = c3_exact(keys);
        v.groups.push_back(
            make_group_run(fmt::format("replay:{}:{}", id, quantity_name(q)), qmembers, C3Mode::exact, c, vals));
        nlohmann::json qj = {
            {"quantity", quantity_name(q)},
            {"status", c3_status_name(c.status)},
            {"reason", c3_reason_name(c.reason)},
            {"majority_hash", c.majority_peer >= 0
                                  ? nlohmann::json(hash_hex(keys[static_cast<std::size_t>(c.majority_peer)]))
                                  : nlohmann::json()}};
        nlohmann::json outl = nlohmann::json::array();
        if (c.status == C3Status::attributed) {
          for (std::size_t i = 0; i < qev.size(); ++i) {
            if (!c.outliers[i]) continue;
            outl.push_back(qpeers[i]);
            findings.push_back({qpeers[i],
                                "sdc",
                                {{"recipe", id},
                                 {"quantity", quantity_name(q)},
                                 {"hash", hash_hex(keys[i])},
                                 {"majority_hash", hash_hex(keys[static_cast<std::size_t>(c.majority_peer)])},
                                 {"majority_count", c.majority_count}}});
          }
          status = "attributed";
          reason = "strict_minority";
        } else if (c.status == C3Status::inconclusive && status != "attributed") {
          status = "inconclusive";
          reason = "no_majority";
        } else if (c.status == C3Status::inconclusive) {
          reason = "no_majority";
          status = "inconclusive";
        }
        qj["outliers"] = outl;
        qs.push_back(qj);
      }
      if (status == "inconclusive") hashes_unclear = true;
    } else {
      hashes_unclear = true;
    }
    rj["quantities"] = qs;

    // 4. Timings, statistical C3 (slow only): module call and parameter gather.
    nlohmann::json tj = nlohmann::json::object();
    if (ev.size() >= 3) {
      StatisticalOptions so;
      so.kappa = o.kappa;
      so.min_relative = o.straggler_min_rel;
      so.min_absolute = o.straggler_min_abs;
      so.direction = Direction::high;
      for (const char* which : {"compute", "gather"}) {
        so.min_absolute = std::string(which) == "compute" ? o.straggler_min_abs : o.gather_min_abs;
        std::vector<double> xs;
        for (const auto* e : ev)
          xs.push_back(std::string(which) == "compute" ? e->forward_s + e->backward_s : e->gather_s);
        const C3Result c = c3_statistical(xs, so);
        v.groups.push_back(
            make_group_run(fmt::format("replay_{}_time:{}", which, id), members, C3Mode::statistical, c, xs));
        nlohmann::json outl = nlohmann::json::array();
        ++timed_recipes[which];
        if (c.status == C3Status::attributed)
          for (std::size_t i = 0; i < ev.size(); ++i) {
            if (!c.outliers[i]) continue;
            outl.push_back(have[i]);
            slow_seen[{have[i], which}].push_back({{"recipe", id},
                                                   {"seconds", xs[i]},
                                                   {"median_s", c.median},
                                                   {"ratio", c.median > 0 ? xs[i] / c.median : 0.0}});
          }
        tj[which] = {{"status", c3_status_name(c.status)},
                     {"reason", c3_reason_name(c.reason)},
                     {"median_s", c.median},
                     {"outliers", outl}};
      }
    }
    nlohmann::json per = nlohmann::json::array();
    for (std::size_t i = 0; i < ev.size(); ++i)
      per.push_back({{"peer", have[i]},
                     {"gather_s", ev[i]->gather_s},
                     {"forward_s", ev[i]->forward_s},
                     {"backward_s", ev[i]->backward_s}});
    tj["peers"] = per;
    rj["timings"] = tj;
    nlohmann::json inj = nlohmann::json::array();
    for (std::size_t i = 0; i < ev.size(); ++i)
      for (const auto& x : ev[i]->injected) inj.push_back(nlohmann::json{{"peer", have[i]}, {"what", x}});
    if (!inj.empty()) rj["injected"] = inj;
    rj["status"] = status;
    rj["reason"] = reason;
    if (status == "inconclusive") any_inconclusive = true;
    recipes_json.push_back(rj);
  }
  if (recipe_ids.empty()) any_inconclusive = hashes_unclear = true;
  // A straggler is slow in most of the recipes whose times were compared: one
  // slow sample on a busy machine names nobody; a slow device is slow throughout.
  nlohmann::json slow_once = nlohmann::json::array();
  for (const auto& [key, where] : slow_seen) {
    const std::int64_t compared = timed_recipes[key.second];
    if (static_cast<std::int64_t>(where.size()) * 2 > compared) {
      for (const auto& w : where)
        findings.push_back({key.first, key.second == "compute" ? "compute_straggler" : "gather_straggler", w});
    } else {
      slow_once.push_back(
          {{"peer", key.first}, {"kind", key.second}, {"slow_in", where.size()}, {"compared", compared}});
    }
  }

  // Findings -> suspects, one per (peer, reason), in peer order.
  std::map<std::pair<std::int64_t, std::string>, nlohmann::json> grouped;
  for (const auto& f : findings) {
    auto& slot = grouped[{f.peer, f.reason}];
    if (slot.is_null()) slot = nlohmann::json::array();
    slot.push_back(f.evidence);
  }
  nlohmann::json findings_json = nlohmann::json::array();
  bool sdc = false;
  std::vector<Suspect> suspects;
  for (const auto& [key, evs] : grouped) {
    Suspect s;
    s.rank = rank_of(key.first);
    if (peers[static_cast<std::size_t>(key.first)]) s.node = peers[static_cast<std::size_t>(key.first)]->node;
    s.reason = key.second;
    s.evidence = {{"peer", key.first}, {"where", evs}};
    if (key.second == "sdc" || key.second == "input_mismatch") sdc = true;
    findings_json.push_back({{"peer", key.first}, {"rank", s.rank}, {"reason", key.second}, {"where", evs}});
    suspects.push_back(std::move(s));
  }

  const std::string numerics = hashes_unclear ? "unclear" : sdc ? "sdc" : "clean";
  std::set<std::string> unc_reasons;
  for (const auto& u : uncomparable) unc_reasons.insert(u["reason"].get<std::string>());
  if (any_inconclusive) {
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::group;
    v.action = "escalate";
    std::string why = unc_reasons.count("contract_mismatch")
                          ? "peers whose replay contract differs cannot be compared (contract_mismatch)"
                      : !missing.empty() && static_cast<std::int64_t>(missing.size()) * 2 >= n
                          ? "too few peers reported"
                          : "no strict majority among the peers' results";
    v.summary = fmt::format("replay inconclusive: {}", why);
    if (!suspects.empty())
      v.summary += fmt::format("; {} finding(s) kept in details.findings, not attributed", suspects.size());
  } else if (!suspects.empty()) {
    v.status = VerdictStatus::attributed;
    v.scope = Scope::rank;
    v.action = sdc ? "drain_and_replace" : "investigate_suspects";
    std::vector<std::string> parts;
    for (const auto& s : suspects) parts.push_back(fmt::format("rank {} ({})", s.rank, s.reason));
    v.summary = fmt::format("replay names {}", fmt::join(parts, ", "));
    v.suspects = std::move(suspects);
  } else if (!missing.empty()) {
    // The peers that reported agree, but a peer that did not may be the very one at fault (hung, or too slow to
    // arrive): a cron job reading the exit code must not see "healthy" for a device nobody checked.
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::group;
    v.action = "escalate";
    std::vector<std::string> who;
    for (const auto& p : missing) who.push_back(fmt::format("{}", rank_of(p.get<std::int64_t>())));
    v.summary = fmt::format(
        "replay inconclusive: rank(s) {} did not report; the {} peers that did agree on every compared quantity of {} "
        "recipe(s)",
        fmt::join(who, ", "), n - static_cast<std::int64_t>(missing.size()), recipe_ids.size());
  } else {
    v.status = VerdictStatus::healthy;
    v.scope = Scope::job;
    v.action = "none";
    v.summary = fmt::format("{} peers agree on every compared quantity of {} recipe(s)", n, recipe_ids.size());
  }
  v.details = {{"mode", o.mode},
               {"cycle", o.cycle ? nlohmann::json(*o.cycle) : nlohmann::json()},
               {"checkpoint", o.checkpoint ? nlohmann::json(*o.checkpoint) : nlohmann::json()},
               {"sweep", o.sweep},
               {"numerics", numerics},
               {"peers", n},
               {"missing_peers", missing},
               {"recipes", recipes_json},
               {"uncomparable", uncomparable},
               {"findings", findings_json},
               {"slow_but_not_consistently", slow_once},
               {"thresholds",
                {{"straggler_min_rel", o.straggler_min_rel},
                 {"straggler_min_abs_s", o.straggler_min_abs},
                 {"gather_min_abs_s", o.gather_min_abs},
                 {"kappa", o.kappa}}}};
  if (o.oversubscribed)
    v.details["thresholds"]["oversubscribed"] = {{"peers", o.oversubscribed->first},
                                                 {"cpus", o.oversubscribed->second}};
  return v;
}

nlohmann::json golden_from_verdict(const Verdict& v) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& r : v.details.value("recipes", nlohmann::json::array())) {
    nlohmann::json q = nlohmann::json::object();
    for (const auto& x : r.value("quantities", nlohmann::json::array()))
      if (x.contains("majority_hash") && x["majority_hash"].is_string())
        q[x["quantity"].get<std::string>()] = x["majority_hash"];
    out[r["recipe"].get<std::string>()] = {{"contract", r.value("contract", nlohmann::json())}, {"hashes", q}};
  }
  return out;
}

nlohmann::json golden_drift(const nlohmann::json& golden, const nlohmann::json& now) {
  nlohmann::json drift = nlohmann::json::array();
  for (const auto& [recipe, cur] : now.items()) {
    if (!golden.contains(recipe)) {
      drift.push_back({{"recipe", recipe}, {"quantity", nullptr}, {"reason", "not_in_golden"}});
      continue;
    }
    const auto& g = golden[recipe];
    for (const auto& [q, h] : cur["hashes"].items()) {
      const auto gh = g.contains("hashes") && g["hashes"].contains(q) ? g["hashes"][q] : nlohmann::json();
      if (gh != h)
        drift.push_back({{"recipe", recipe}, {"quantity", q}, {"golden", gh}, {"now", h}, {"reason", "hash_differs"}});
    }
    if (g.contains("contract") && g["contract"] != cur["contract"])
      drift.push_back({{"recipe", recipe},
                       {"quantity", nullptr},
                       {"reason", "contract_differs"},
                       {"differs", contract_differences(g["contract"], cur["contract"])}});
  }
  return drift;
}

}  // namespace scout::replay
