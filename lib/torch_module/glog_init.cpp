// LibTorch builds that log through glog (Debian's libtorch 1.13) print
// "WARNING: Logging before InitGoogleLogging() is written to STDERR" the first
// time c10 or c10d logs, and glog left to itself would write log files under
// /tmp. scout reports through its own errors on stderr, so the module sets
// glog's state once, when it is loaded and before LibTorch logs anything:
// no log files, nothing below FATAL (scout reports what went wrong in its own
// words, with what to do). Builds without glog (the PyPI wheels)
// compile this to nothing.
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
#endif
