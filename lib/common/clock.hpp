// The one home of scout's clocks. Header-only: the publisher uses it too.
// Timestamps that cross processes or hosts (records, evidence, presence,
// verdicts) are CLOCK_REALTIME nanoseconds; durations and deadlines inside one
// process use the monotonic clock (std::chrono::steady_clock).
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace scout {

// Nanoseconds of `clock` (clock_gettime), 0 when the clock is unavailable.
inline std::int64_t clock_ns(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// CLOCK_REALTIME now, in nanoseconds since the epoch.
inline std::int64_t realtime_ns() {
  return clock_ns(CLOCK_REALTIME);
}

// CLOCK_MONOTONIC now, in nanoseconds.
inline std::int64_t monotonic_ns() {
  return clock_ns(CLOCK_MONOTONIC);
}

// The monotonic clock of deadlines and timeouts.
using SteadyClock = std::chrono::steady_clock;

// A deadline `timeout` from now on the monotonic clock.
template <typename Rep, typename Period>
SteadyClock::time_point deadline_after(std::chrono::duration<Rep, Period> timeout) {
  return SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(timeout);
}

}  // namespace scout
