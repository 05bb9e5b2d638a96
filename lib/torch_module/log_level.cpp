// The wheels log through c10's own logging: c10d's warnings (e.g. "The hostname of the client socket cannot be
// retrieved", on every observer in a network namespace) reached scout's stderr. scout reports what went wrong in its
// own words, with what to do, so the module sets c10's level once, when it is loaded and before LibTorch logs
// anything: nothing below FATAL, unless the user asked for more with TORCH_CPP_LOG_LEVEL.
#include <c10/util/Logging.h>

#include <cstdlib>

namespace {

struct C10LogState {
  C10LogState() {
    if (std::getenv("TORCH_CPP_LOG_LEVEL") == nullptr) FLAGS_caffe2_log_level = 3;  // c10's FATAL
  }
};

const C10LogState g_c10_log_state;

}  // namespace
