// verify-ckpt's verdicts: one checkpoint check (replica consensus per tensor,
// manifest comparison) as a Verdict, the ledger's summary and outstanding
// corrupt checkpoints as they appear in every verdict that reads the ledger.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/checkpoint/ledger.hpp"
#include "lib/checkpoint/verify.hpp"
#include "lib/report/verdict.hpp"

namespace scout::checkpoint {

// A verify-ckpt verdict with no findings yet, for `job` (may be empty).
Verdict verify_ckpt_verdict(const std::string& job);

// The verdict of one check: suspects for replicas outside a strict majority
// (file, tensor, shard, replica, both hashes) and for manifest mismatches; a
// tensor with no strict majority makes it inconclusive. `checkpoint`: the
// directory checked (empty for explicit replicas).
Verdict check_verdict(const VerifyReport& report, const std::string& checkpoint);

// details.ledger of every verdict that reads the ledger at `path`.
nlohmann::json ledger_summary(const Ledger& ledger, const std::string& path);

// The ledger's corrupt checkpoints still to report, as JSON; their ids are appended to `ids`.
nlohmann::json outstanding_json(const Ledger& ledger, std::vector<std::string>& ids);

// Adds a suspect for each outstanding corrupt checkpoint that `verdict` does
// not already name (found by an earlier run).
void add_outstanding_suspects(Verdict& verdict, const Ledger& ledger);

}  // namespace scout::checkpoint
