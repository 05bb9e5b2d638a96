// Fuzz target: a job token file (--token-file: first line, owner-only mode).
#include <algorithm>

#include "fuzz/targets/fuzz_support.hpp"
#include "lib/transport/auth.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string path = fuzz::write_scratch("token", data, size, 0600);
  auto t = transport::JobToken::load("job", "0", path);
  if (!t) {
    SCOUT_FUZZ_CHECK(t.error().code == ExitCode::bad_input || t.error().code == ExitCode::usage);
    return 0;
  }
  SCOUT_FUZZ_CHECK(t->authenticated());
  SCOUT_FUZZ_CHECK(t->key_id().size() == 16);
  // A blob signed with the token verifies, and one altered byte does not.
  std::vector<std::uint8_t> blob(data, data + std::min<std::size_t>(size, 64));
  auto signed_blob = t->sign(blob, "ctx");
  auto back = t->verify(signed_blob, "ctx");
  SCOUT_FUZZ_CHECK(back && *back == blob);
  signed_blob[0] ^= 1;
  SCOUT_FUZZ_CHECK(!t->verify(signed_blob, "ctx"));
  return 0;
}
