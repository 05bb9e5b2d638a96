// verify-ckpt's cron pass: check every checkpoint not yet in the ledger
// (skipping ones still being written), record each result in the ledger, and
// build the run's verdict, which keeps reporting corrupt checkpoints until
// they are superseded or acknowledged.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lib/checkpoint/discovery.hpp"
#include "lib/checkpoint/ledger.hpp"
#include "lib/checkpoint/prometheus.hpp"
#include "lib/checkpoint/verify.hpp"
#include "lib/report/verdict.hpp"

namespace scout::checkpoint {

struct CronRequest {
  std::string job;
  LayoutRequest layout;          // mesh, pattern, no_manifest (no explicit replicas)
  unsigned jobs = 0;             // files hashed at once (0 = automatic)
  double settle_s = 60;          // skip checkpoints with files modified more recently
  bool recheck_invalid = false;  // check again checkpoints recorded as invalid
  // Progress display for the check of one checkpoint (optional).
  std::function<VerifyProgressFn(const std::string& checkpoint)> progress;
};

struct CronOutcome {
  Verdict verdict;    // details.action "cron"; no side outputs
  int exit_code = 0;  // 1 corrupt (now or outstanding), 4 invalid, 3 inconclusive, else 0
  Ledger ledger;      // as last written
  RunStats stats;     // for the Prometheus textfile (exit_code included)
};

// Runs the pass over the checkpoints under `roots` (discover_checkpoints),
// with the ledger in `store`. A checkpoint that cannot be read as one (bad input,
// usage) is recorded invalid; unavailable and internal errors end the pass
// with nothing recorded for that checkpoint.
Result<CronOutcome> run_cron_pass(const CronRequest& request, const std::vector<std::string>& roots,
                                  const LedgerStore& store);

}  // namespace scout::checkpoint
