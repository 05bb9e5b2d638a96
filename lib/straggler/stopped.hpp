// Direct evidence of a rank stopped from outside (lib/straggler/README.md "Stragglers"): between the observer's
// reads a background thread samples the state of each local rank's main thread (/proc/PID/task/PID/stat,
// field 3: 'T' stopped by a signal, 't' stopped by a tracer) at a jittered few-ms interval (a SIGSTOP duty
// cycle is periodic: a fixed interval could alias with it) and counts, per rank, the samples and the
// stopped ones. Timing cannot tell stopped time that falls inside a collective from a slow link, nor can
// schedstat tell it from a peer blocked in recv; the process state can. The peers of a synchronous job
// are never stopped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

namespace scout::straggler {

class StopSampler {
 public:
  struct Options {
    std::chrono::microseconds min_interval{4000};  // between two sweeps over the ranks: uniform in [min, max]
    std::chrono::microseconds max_interval{12000};
    std::uint64_t seed = 0;  // 0: from the clock
  };
  struct Counts {
    std::int64_t samples = 0;
    std::int64_t stopped = 0;
  };
  // What sampling cost (the sampler thread's own CPU time) over its life so far.
  struct Cost {
    std::int64_t ranks = 0;
    std::int64_t sweeps = 0;
    std::int64_t samples = 0;
    double cpu_s = 0;
    double wall_s = 0;
  };

  StopSampler();
  explicit StopSampler(Options options);
  ~StopSampler();
  StopSampler(const StopSampler&) = delete;
  StopSampler& operator=(const StopSampler&) = delete;

  // Samples rank's process `pid` from now on (the thread starts with the first rank). A rank whose pid
  // changed starts over with the new process; false when its state cannot be read.
  bool track(std::int64_t rank, std::int64_t pid);
  // Per tracked rank, its counts since the previous take (or since it was tracked). A rank whose process
  // went away keeps the counts taken before, then is left out.
  std::map<std::int64_t, Counts> take();
  // Ends the thread (joined; at most one sweep's time). Idempotent; the destructor calls it.
  void stop();
  Cost cost() const;

  // The state letter in a /proc/.../stat text ('\0' when malformed): the first field after the last ')'.
  static char state_of(const char* text, std::size_t size);

 private:
  struct Target {
    std::int64_t pid = -1;
    int fd = -1;
    bool gone = false;
    Counts counts;
  };
  void loop();

  Options m_options;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;
  std::map<std::int64_t, Target> m_targets;
  std::thread m_thread;
  std::chrono::steady_clock::time_point m_started{};
  std::chrono::steady_clock::time_point m_ended{};
  std::int64_t m_sweeps = 0;
  std::int64_t m_samples = 0;
  std::int64_t m_cpu_ns = 0;  // the thread's CPU time, updated every sweep
};

}  // namespace scout::straggler
