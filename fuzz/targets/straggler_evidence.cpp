// Fuzz target: straggler evidence as `scout straggler --evidence-in FILE` reads
// it (JSON) and as another observer's round arrives in the gather (CBOR), then
// the whole decision on what was accepted: tables, rounds, verdict.
#include <nlohmann/json.hpp>

#include "fuzz/targets/fuzz_support.hpp"
#include "lib/straggler/decide.hpp"
#include "lib/straggler/evidence.hpp"

using namespace scout;
using namespace scout::straggler;

namespace {

void decide_on(const std::vector<RoundEvidence>& rounds) {
  std::int64_t world = 0;
  for (const auto& r : rounds) world = std::max(world, r.world);
  if (world < 1 || world > 4096) return;  // the mesh of a huge world is fine, but slow for a fuzzer
  std::vector<RoundEvidence> ev = rounds;
  for (auto& r : ev) r.world = world;
  std::string how;
  Mesh mesh = infer_mesh(ev.front(), how);
  SCOUT_FUZZ_CHECK(mesh.world_size() == world);
  Analysis a = analyse(ev, mesh, DecideOptions{});
  std::size_t decided = 0;
  for (const auto& r : ev) decided += r.baseline ? 0 : 1;
  SCOUT_FUZZ_CHECK(a.rounds.size() == decided && a.tables.size() == decided);
  for (const auto& s : a.decision.suspects) SCOUT_FUZZ_CHECK(s.rank < world);
  Verdict v = make_verdict("straggler", "j", a.decision, a.rounds, a.tables, mesh, how);
  (void)v.summary.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto rounds = parse_evidence(text, "j", "evidence.json");
  if (rounds) {
    SCOUT_FUZZ_CHECK(!rounds->empty());
    decide_on(*rounds);
    // What was accepted is written back the same way.
    auto again = parse_evidence(evidence_json(*rounds, "j").dump(), "j", "again");
    SCOUT_FUZZ_CHECK(again.ok() && again->size() == rounds->size());
  } else {
    SCOUT_FUZZ_CHECK(rounds.error().code == ExitCode::bad_input);
  }
  auto round = decode_round(std::vector<std::uint8_t>(data, data + size), "j", 1);
  if (round) {
    decide_on({*round});
    auto back = decode_round(encode_round(*round, "j", 1), "j", 1);
    SCOUT_FUZZ_CHECK(back.ok() && back->ranks.size() == round->ranks.size());
  } else {
    SCOUT_FUZZ_CHECK(round.error().code == ExitCode::bad_input);
  }
  return 0;
}
