// Fuzz target: a replay verdict as `verify-ckpt record --replay FILE` and
// `verify-ckpt select --sweep FILE` read it, then applied to a small ledger.
#include <nlohmann/json.hpp>

#include "fuzz/targets/fuzz_support.hpp"
#include "lib/checkpoint/ledger.hpp"

using namespace scout;
using namespace scout::checkpoint;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  auto r = parse_replay_verdict(j, "replay.json", "job");
  if (!r) {
    SCOUT_FUZZ_CHECK(r.error().code == ExitCode::bad_input);
    return 0;
  }
  SCOUT_FUZZ_CHECK(r->cycle >= 0);
  Ledger l;
  l.job = "job";
  (void)ledger_add_checkpoint(l, "/ckpt/a", CheckpointState::pending, "intact", "now");
  (void)ledger_add_checkpoint(l, "/ckpt/b", CheckpointState::pending, "intact", "now");
  auto change = ledger_apply_replay(l, *r, "now");
  if (!change) SCOUT_FUZZ_CHECK(change.error().code == ExitCode::bad_input);
  auto back = ledger_from_json(nlohmann::json::parse(ledger_to_json(l).dump()), "after");
  SCOUT_FUZZ_CHECK(back.ok());
  (void)select_checkpoint(l, FailureKind::hang, *r);
  return 0;
}
