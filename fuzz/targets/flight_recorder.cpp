// Fuzz target: one torch Flight Recorder dump (`scout probe-hang
// --flight-recorder DIR`), pickled (dump-on-timeout) or JSON, turned into a
// rank's snapshot.
#include "lib/hang/flight_recorder.hpp"

#include "fuzz/targets/fuzz_support.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto snap = hang::snapshot_from_flight_recorder(text, 3, "fuzz-job");
  if (snap) {
    SCOUT_FUZZ_CHECK(snap->rank == 3);
    SCOUT_FUZZ_CHECK(snap->world_size >= 4);
    SCOUT_FUZZ_CHECK(snap->recent.size() <= 64);
    SCOUT_FUZZ_CHECK(snap->job == "fuzz-job");
  } else {
    SCOUT_FUZZ_CHECK(snap.error().code == ExitCode::bad_input);
  }
  return 0;
}
