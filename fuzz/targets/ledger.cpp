// Fuzz target: the ledger reader (a job's ledger file as LedgerStore::load
// parses it), the JSON round trip, and the state machine on what it accepted.
#include "lib/checkpoint/ledger.hpp"

#include <nlohmann/json.hpp>

#include "fuzz/targets/fuzz_support.hpp"

using namespace scout;
using namespace scout::checkpoint;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::write_scratch("ledger.json", data, size);
  LedgerStore store(fuzz::scratch_dir() + "/ledger.json", std::chrono::milliseconds(100));
  auto l = store.load("", false);
  if (!l) {
    SCOUT_FUZZ_CHECK(l.error().code == ExitCode::bad_input);
    return 0;
  }
  // What was accepted is written back as a document the reader accepts again, unchanged.
  auto once = ledger_to_json(*l);
  auto again = ledger_from_json(nlohmann::json::parse(once.dump()), "again");
  SCOUT_FUZZ_CHECK(again.ok());
  SCOUT_FUZZ_CHECK(ledger_to_json(*again).dump() == once.dump());
  for (auto kind :
       {FailureKind::sdc, FailureKind::hang, FailureKind::straggler, FailureKind::machine_lost, FailureKind::unknown})
    (void)select_checkpoint(*l, kind, std::nullopt);
  // Drive the state machine from the loaded state: a new checkpoint, then a few cycles.
  Ledger work = *l;
  (void)ledger_add_checkpoint(work, "/ckpt/fuzz-new", CheckpointState::pending, "intact", "now");
  std::int64_t cycle = work.last_cycle && *work.last_cycle < (std::int64_t{1} << 62) ? *work.last_cycle + 1 : 0;
  for (auto outcome : {ReplayOutcome::clean, ReplayOutcome::clean, ReplayOutcome::sdc, ReplayOutcome::unclear}) {
    ReplayCycle c;
    c.cycle = cycle++;
    c.outcome = outcome;
    c.after = "/ckpt/fuzz-new";
    (void)ledger_apply_replay(work, c, "now");
  }
  (void)ledger_from_json(nlohmann::json::parse(ledger_to_json(work).dump()), "work");
  return 0;
}
