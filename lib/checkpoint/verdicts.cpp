#include "lib/checkpoint/verdicts.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "lib/report/c3_suspects.hpp"

namespace scout::checkpoint {

namespace fs = std::filesystem;

namespace {

nlohmann::json null_or(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}
nlohmann::json rank_json(std::int64_t r) {
  return r >= 0 ? nlohmann::json(r) : nlohmann::json(nullptr);
}

// The file inside a directory checkpoint (DCP .distcp, HF shard) that holds `tensor`; empty for single files.
std::string source_of(const FileDigest& d, const std::string& tensor) {
  auto it = std::lower_bound(d.tensors.begin(), d.tensors.end(), tensor,
                             [](const TensorDigest& t, const std::string& n) { return t.name < n; });
  return it != d.tensors.end() && it->name == tensor ? it->source : std::string();
}

}  // namespace

Verdict check_verdict(const VerifyReport& r, const std::string& checkpoint) {
  Verdict v;
  v.command = "verify-ckpt";
  nlohmann::json files = nlohmann::json::array();
  nlohmann::json disagreements = nlohmann::json::array();
  nlohmann::json crc_json = nlohmann::json::array();
  std::size_t k = 0, compared = 0, single = 0, inconclusive = 0;
  for (std::size_t s = 0; s < r.layout.sets.size(); ++s) {
    const auto& set = r.layout.sets[s];
    const auto& shard = r.shards[s];
    bool ranks_known =
        std::all_of(set.files.begin(), set.files.end(), [](const ReplicaFile& f) { return f.rank >= 0; });
    const std::size_t first_suspect = v.suspects.size();
    std::vector<std::pair<std::size_t, const CrcFailure*>> crc_failed;  // (replica, failure)
    for (std::size_t i = 0; i < set.files.size(); ++i, ++k) {
      const auto& d = r.digests[k];
      files.push_back({{"path", set.files[i].path},
                       {"rank", rank_json(set.files[i].rank)},
                       {"shard", set.shard},
                       {"replica", i},
                       {"format", file_format_name(d.format)},
                       {"bytes", d.size},
                       {"tensors", d.tensors.size()}});
      for (const auto& f : d.crc_failures) {
        crc_failed.emplace_back(i, &f);
        crc_json.push_back({{"file", set.files[i].path},
                            {"shard", set.shard},
                            {"replica", i},
                            {"source", null_or(f.source)},
                            {"entry", f.entry},
                            {"tensors", f.tensors},
                            {"expected_crc32", fmt::format("0x{:08x}", f.expected)},
                            {"actual_crc32", fmt::format("0x{:08x}", f.actual)}});
      }
    }
    // A zip entry that fails its CRC-32 is corruption in that file, with or without replicas: it marks the
    // suspect that consensus names for the same tensor, or is a suspect of its own.
    auto add_crc_suspects = [&] {
      for (const auto& [i, f] : crc_failed) {
        nlohmann::json crc = {{"entry", f->entry},
                              {"expected_crc32", fmt::format("0x{:08x}", f->expected)},
                              {"actual_crc32", fmt::format("0x{:08x}", f->actual)}};
        bool marked = false;
        for (std::size_t s2 = first_suspect; s2 < v.suspects.size(); ++s2) {
          auto& ev = v.suspects[s2].evidence;
          if (ev.value("file", "") == set.files[i].path &&
              std::find(f->tensors.begin(), f->tensors.end(), ev.value("tensor", "")) != f->tensors.end()) {
            ev["zip_crc"] = crc;
            marked = true;
          }
        }
        if (marked) continue;
        Suspect sp;
        sp.rank = set.files[i].rank;
        sp.reason = "zip_entry_fails_crc";
        sp.evidence = {{"file", set.files[i].path},
                       {"tensor", f->tensors.empty() ? f->entry : f->tensors.front()},
                       {"tensors", f->tensors},
                       {"shard", set.shard},
                       {"replica", i},
                       {"source", null_or(f->source)},
                       {"replicas", set.files.size()},
                       {"zip_crc", crc}};
        v.suspects.push_back(std::move(sp));
      }
    };
    if (set.files.size() < 2) {
      ++single;
      add_crc_suspects();
      continue;
    }
    compared += shard.tensors;
    for (const auto& dis : shard.disagreements) {
      std::vector<std::int64_t> members;
      nlohmann::json values = nlohmann::json::array();
      nlohmann::json replicas = nlohmann::json::array();
      for (std::size_t i = 0; i < set.files.size(); ++i) {
        members.push_back(ranks_known ? set.files[i].rank : static_cast<std::int64_t>(i));
        values.push_back(hash_hex(dis.hashes[i]));
        replicas.push_back({{"file", set.files[i].path},
                            {"source", null_or(source_of(r.digests[k - set.files.size() + i], dis.tensor))},
                            {"replica", i},
                            {"rank", rank_json(set.files[i].rank)},
                            {"hash", hash_hex(dis.hashes[i])},
                            {"outlier", dis.result.status == C3Status::attributed && dis.result.outliers[i]}});
      }
      C3Attribution att = attribute_c3("checkpoint_replica", members, C3Mode::exact, dis.result, values);
      v.groups.push_back(att.run);
      disagreements.push_back({{"shard", set.shard},
                               {"tensor", dis.tensor},
                               {"status", c3_status_name(dis.result.status)},
                               {"replicas", replicas}});
      if (dis.result.status != C3Status::attributed || !att.majority) {
        ++inconclusive;
        continue;
      }
      const std::size_t first = k - set.files.size();
      const std::size_t maj = *att.majority;
      for (auto& sp : suspects_from_c3(att, [&](std::size_t i, Suspect&sp) {
             sp.rank = set.files[i].rank;  // the member id is the replica's index when ranks are unknown
             sp.reason = "replica_differs_from_majority";
             sp.evidence = {{"file", set.files[i].path},
                            {"tensor", dis.tensor},
                            {"shard", set.shard},
                            {"replica", i},
                            {"source", null_or(source_of(r.digests[first + i], dis.tensor))},
                            {"hash", hash_hex(dis.hashes[i])},
                            {"majority_hash", hash_hex(dis.hashes[maj])},
                            {"majority_count", dis.result.majority_count},
                            {"replicas", set.files.size()}};
           }))
        v.suspects.push_back(std::move(sp));
    }
    add_crc_suspects();
  }
  nlohmann::json manifest = nullptr;
  if (r.manifest_checked) {
    nlohmann::json mm = nlohmann::json::array();
    for (const auto& m : r.manifest_mismatches) {
      mm.push_back({{"file", m.file},
                    {"rank", rank_json(m.rank)},
                    {"tensor", m.tensor},
                    {"expected", hash_hex(m.expected)},
                    {"actual", hash_hex(m.actual)}});
      Suspect sp;
      sp.rank = m.rank;
      sp.reason = "hash_differs_from_manifest";
      sp.evidence = {
          {"file", m.file}, {"tensor", m.tensor}, {"expected", hash_hex(m.expected)}, {"actual", hash_hex(m.actual)}};
      v.suspects.push_back(std::move(sp));
    }
    manifest = {{"path", (fs::path(r.layout.dir) / k_manifest_file_name).string()}, {"mismatches", mm}};
  }
  const double mib_s = r.seconds > 0 ? r.bytes_read / r.seconds / (1024.0 * 1024.0) : 0.0;
  v.details = {{"action", "check"},
               {"checkpoint", null_or(checkpoint)},
               {"layout",
                {{"source", r.layout.source},
                 {"mesh", null_or(r.layout.mesh)},
                 {"shards", r.layout.sets.size()},
                 {"files", r.layout.file_count()}}},
               {"files", files},
               {"tensors_compared", compared},
               {"single_copy_shards", single},
               {"disagreements", disagreements},
               {"crc_failures", crc_json},
               {"manifest", manifest},
               {"bytes_read", r.bytes_read},
               {"seconds", std::round(r.seconds * 1000.0) / 1000.0},
               {"throughput_mib_s", std::round(mib_s * 10.0) / 10.0}};
  const std::string what = checkpoint.empty() ? "the replicas" : checkpoint;
  if (!v.suspects.empty()) {
    v.status = VerdictStatus::attributed;
    v.scope = Scope::rank;
    v.action = "repair_replica";
    const auto& ev = v.suspects.front().evidence;
    v.summary = fmt::format("{} corrupted tensor cop{} in {}; first: tensor '{}' of {}{}{}", v.suspects.size(),
                            v.suspects.size() == 1 ? "y" : "ies", what, ev.value("tensor", ""), ev.value("file", ""),
                            ev.contains("replica") ? fmt::format(" (replica {})", ev["replica"].get<std::size_t>())
                                                   : std::string(" (differs from its manifest)"),
                            ev.contains("zip_crc")
                                ? fmt::format(", whose zip entry {} fails its CRC-32", ev["zip_crc"].value("entry", ""))
                                : std::string());
  } else if (inconclusive > 0) {
    v.status = VerdictStatus::inconclusive;
    v.scope = Scope::group;
    v.action = "escalate";
    const auto& d0 = disagreements.front();
    std::vector<std::string> names;
    for (const auto& rep : d0["replicas"]) names.push_back(rep["file"].get<std::string>());
    v.summary = fmt::format(
        "{} tensor(s) differ with no strict majority; first: '{}' differs between {} (which copy is right is unknown)",
        inconclusive, d0["tensor"].get<std::string>(), fmt::format("{}", fmt::join(names, " and ")));
  } else if (r.layout.source == "single_copy" && !r.digests.empty()) {
    // One copy of everything: say what was checked and what could not be.
    v.status = VerdictStatus::healthy;
    v.scope = Scope::job;
    v.action = "none";
    const auto& d = r.digests.front();
    v.summary = fmt::format(
        "{} read whole, {} tensor(s) in one copy: {}; nothing to compare them with (no replica: give --replicas with "
        "copies saved separately, e.g. per HSDP replica group, or write a manifest with 'scout verify-ckpt "
        "manifest write' to catch later bit rot)",
        what, d.tensors.size(),
        d.format == FileFormat::dcp ? "every chunk's zip entry matches its CRC-32"
                                    : "safetensors carry no checksum, so only their structure was checked");
  } else {
    v.status = VerdictStatus::healthy;
    v.scope = Scope::job;
    v.action = "none";
    v.summary =
        fmt::format("{} intact: {} file(s), {} tensor(s) agree across replicas{}{}", what, r.layout.file_count(),
                    compared, single ? fmt::format(", {} single-copy shard(s) not compared", single) : std::string(),
                    r.manifest_checked ? ", manifest matches" : "");
  }
  return v;
}

nlohmann::json ledger_summary(const Ledger& l, const std::string& path) {
  auto id = [](const LedgerCheckpoint* c) { return c ? nlohmann::json(c->id) : nlohmann::json(nullptr); };
  const auto* cand = l.candidate();
  return {{"path", path},
          {"job", l.job},
          {"revision", l.revision},
          {"latest", id(l.latest())},
          {"candidate", id(cand)},
          {"verified", id(l.verified())},
          {"candidate_clean_cycles", cand ? cand->clean_cycles : 0},
          {"last_cycle", l.last_cycle ? nlohmann::json(*l.last_cycle) : nlohmann::json(nullptr)},
          {"clean_streak", l.clean_streak},
          {"checkpoints", l.checkpoints.size()}};
}

// Suspects for outstanding corrupt checkpoints that `v` does not already name (found by an earlier run).
void add_outstanding_suspects(Verdict& v, const Ledger& l) {
  for (const auto* c : outstanding_corrupt(l)) {
    const bool named = std::any_of(v.suspects.begin(), v.suspects.end(), [&](const Suspect& s) {
      return s.evidence.contains("checkpoint") && s.evidence["checkpoint"] == c->id;
    });
    if (named) continue;
    Suspect sp;
    sp.reason = "checkpoint_recorded_corrupt";
    sp.evidence = {{"checkpoint", c->id}, {"recorded_at", c->recorded_at}, {"summary", c->summary}};
    v.suspects.push_back(std::move(sp));
  }
}

// The ledger's corrupt checkpoints still to report, as JSON, and their ids.
nlohmann::json outstanding_json(const Ledger& l, std::vector<std::string>& ids) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto* c : outstanding_corrupt(l)) {
    ids.push_back(c->id);
    out.push_back({{"id", c->id},
                   {"state", checkpoint_state_name(c->state)},
                   {"recorded_at", c->recorded_at},
                   {"summary", c->summary}});
  }
  return out;
}

Verdict verify_ckpt_verdict(const std::string& job) {
  Verdict v;
  v.command = "verify-ckpt";
  v.job = job;
  return v;
}

}  // namespace scout::checkpoint
