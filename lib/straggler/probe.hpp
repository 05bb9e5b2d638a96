// `scout straggler` end to end (lib/straggler/README.md "Stragglers"): R rounds, each
// a read of this node's records (the rings), gathered with the other nodes'
// observers when there are several (lib/transport gather, authenticated with
// the job token, one gather per round), then the pure decision (decide.hpp),
// the optional controlled probe (bench.hpp) and the temporal baseline
// (history.hpp). The seam to the observer session of issue #10 is
// `RoundExchange`: the session replaces gather_round() without touching the rest.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/records/snapshot.hpp"
#include "lib/report/verdict.hpp"
#include "lib/session/join.hpp"
#include "lib/straggler/bench.hpp"
#include "lib/straggler/decide.hpp"
#include "lib/straggler/evidence.hpp"
#include "lib/straggler/history.hpp"
#include "lib/straggler/stopped.hpp"
#include "lib/transport/store.hpp"

namespace scout::straggler {

using RecordSource = std::function<Result<std::vector<records::RecordRead>>()>;

struct LiveOptions {
  std::string job;
  std::string attempt;
  std::int64_t rounds = 3;
  std::chrono::milliseconds interval{1000};
  std::optional<Mesh> mesh;
  std::optional<std::set<std::int64_t>> local_ranks;
  DecideOptions decide;
  // Several nodes: one observer each.
  std::int64_t nodes = 1;
  std::optional<std::int64_t> node_index;
  std::optional<transport::StoreUri> store;
  using HostStore = session::HostStore;
  HostStore host_store = HostStore::auto_observer0;
  std::chrono::milliseconds round_timeout{10000};
  std::string token_file;
  std::string listen_address;
  // Controlled probe and temporal baseline.
  bool bench = false;
  BenchOptions bench_options;
  std::string history_path;
  DriftOptions drift;
  std::string evidence_in;   // decide on recorded rounds instead of reading records
  std::string evidence_out;  // write the rounds read
  std::string command = "straggler";
};

// This node's evidence from one read (records of other jobs, attempts, stale or unreadable ones left out).
// `states`: each rank's process state samples since the previous read (StopSampler::take; absent: -1).
RoundEvidence local_evidence(const std::vector<records::RecordRead>& reads, const LiveOptions& options,
                             std::int64_t now_ns, std::vector<std::string>* notes,
                             const std::map<std::int64_t, StopSampler::Counts>* states = nullptr);

// Runs the rounds and returns the verdict. `rounds`, when given, receives the evidence decided on
// (the baseline read first, every node's ranks merged per round), for a timeline trace (lib/trace).
Result<Verdict> run_straggler(const LiveOptions& options, const RecordSource& source,
                              std::vector<RoundEvidence>* rounds = nullptr);

}  // namespace scout::straggler
