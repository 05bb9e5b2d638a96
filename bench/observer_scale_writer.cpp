// One synthetic trainer rank for bench/observer_scale_run.py: it writes a real
// shared-memory progress record through libscout_publisher.so (the C ABI a
// trainer's publisher uses) and steps in lock-step with every other rank of
// the job on a shared wall clock, as ranks of a synchronous job do:
//
//   step s (s = 1, 2, ...) starts at start + s x period: step_begin, forward,
//   backward, then all_reduce #s of the world group entered at 3/4 of the
//   step and left at the step's end.
//
// Once --stall-file holds a step S (written by the driver a few steps ahead),
// step S is the stall: --culprit never enters all_reduce #S (it stays in its
// backward phase, stuck outside the collective), every other rank enters it
// and waits inside forever. Every rank then sleeps until killed (alive, its
// record frozen), as the processes of a hung job do.
//
//   observer_scale_writer --job J --rank R --world W --start-ns T --period-ms P
//                         --stall-file PATH --culprit C [--attempt A] [--host H]
//
// Prints "ready" once its record exists. Exit status 1 when the record cannot
// be created.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "integrations/publisher/scout_publisher.h"

namespace {

const char* arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void sleep_until(std::int64_t t_ns) {
  for (;;) {
    const std::int64_t d = t_ns - now_ns();
    if (d <= 0) return;
    timespec ts{static_cast<time_t>(d / 1000000000), static_cast<long>(d % 1000000000)};
    nanosleep(&ts, nullptr);
  }
}

// The stall step the driver wrote, or 0 while there is none.
std::uint64_t read_stall_step(const char* path) {
  FILE* f = std::fopen(path, "r");
  if (!f) return 0;
  unsigned long long s = 0;
  const int n = std::fscanf(f, "%llu", &s);
  std::fclose(f);
  return n == 1 ? s : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string job = arg(argc, argv, "--job", "");
  const std::int64_t rank = std::atoll(arg(argc, argv, "--rank", "-1"));
  const std::int64_t world = std::atoll(arg(argc, argv, "--world", "0"));
  const std::int64_t start = std::atoll(arg(argc, argv, "--start-ns", "0"));
  const std::int64_t period = std::atoll(arg(argc, argv, "--period-ms", "500")) * 1000000;
  const char* stall_file = arg(argc, argv, "--stall-file", "");
  const std::int64_t culprit = std::atoll(arg(argc, argv, "--culprit", "-1"));
  const char* attempt = arg(argc, argv, "--attempt", "0");
  const char* host = arg(argc, argv, "--host", nullptr);
  if (job.empty() || rank < 0 || world <= rank || start <= 0 || period <= 0) {
    std::fprintf(stderr, "observer_scale_writer: error: bad arguments; see the usage at the top of %s\n", __FILE__);
    return 2;
  }
  const std::int64_t coords[6] = {rank, 0, 0, 0, 0, 0};  // dp = world
  scout_record_options o{job.c_str(), attempt, rank, world, coords, host};
  scout_record* rec = nullptr;
  if (int s = scout_record_create(&o, &rec); s != SCOUT_OK) {
    std::fprintf(stderr, "observer_scale_writer: error: cannot create the record of rank %lld; %s\n",
                 static_cast<long long>(rank), scout_strerror(s));
    return 1;
  }
  std::vector<std::int64_t> members(static_cast<std::size_t>(world));
  for (std::int64_t r = 0; r < world; ++r) members[static_cast<std::size_t>(r)] = r;
  const std::uint64_t group = scout_group_id(members.data(), members.size());
  std::printf("ready\n");
  std::fflush(stdout);

  // Join the job's clock at the next step to come.
  std::uint64_t step = static_cast<std::uint64_t>(std::max<std::int64_t>(0, (now_ns() - start) / period) + 1);
  std::uint64_t stall = 0;
  for (;; ++step) {
    const std::int64_t t0 = start + static_cast<std::int64_t>(step) * period;
    sleep_until(t0);
    if (stall == 0 && stall_file[0]) stall = read_stall_step(stall_file);
    scout_step_begin(rec, step);
    scout_phase(rec, SCOUT_PHASE_FORWARD);
    sleep_until(t0 + period / 4);
    scout_phase(rec, SCOUT_PHASE_BACKWARD);
    sleep_until(t0 + period * 3 / 4);
    if (stall == 0 && stall_file[0]) stall = read_stall_step(stall_file);
    if (stall != 0 && step >= stall) break;  // the stall step: see below
    std::uint64_t token = 0;
    scout_collective_enter(rec, group, SCOUT_COLL_ALL_REDUCE, 2, 1 << 20, 0, step, &token);
    sleep_until(t0 + period);
    scout_collective_exit(rec, token);
  }
  if (rank != culprit) {
    std::uint64_t token = 0;  // enters and waits for the culprit, forever
    scout_collective_enter(rec, group, SCOUT_COLL_ALL_REDUCE, 2, 1 << 20, 0, step, &token);
  }
  for (;;) pause();
}
