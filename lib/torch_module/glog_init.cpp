// LibTorch builds that log through glog (Debian's libtorch 1.13) print
// "WARNING: Logging before InitGoogleLogging() is written to STDERR" the first
// time c10 or c10d logs, and glog left to itself would write log files under
// /tmp. scout reports through its own errors on stderr, so the module sets
// glog's state once, when it is loaded and before LibTorch logs anything:
// no log files, nothing below FATAL (scout reports what went wrong in its own
// words, with what to do). Builds without glog (the PyPI wheels) set
// c10's own level the same way.
#include <c10/macros/cmake_macros.h>

#if defined(C10_USE_GLOG) && __has_include(<glog/logging.h>)
#include <glog/logging.h>

namespace {

struct GlogState {
  GlogState() {
    FLAGS_logtostderr = true;
    FLAGS_minloglevel = google::GLOG_FATAL;  // scout words the errors itself (e.g. a store out of reach)
    if (!google::IsGoogleLoggingInitialized()) google::InitGoogleLogging("scout");
  }
};

const GlogState g_glog_state;

}  // namespace
#else
// The wheels log through c10's own logging: c10d's warnings (e.g. "The hostname of the client socket cannot
// be retrieved", on every observer in a network namespace) reached scout's stderr. Nothing below FATAL either,
// unless the user asked for more with TORCH_CPP_LOG_LEVEL.
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
#endif
