// Process evidence from the real /proc of real child processes.
#include "lib/hang/process_state.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <thread>

#include "lib/common/clock.hpp"

namespace scout::hang {
namespace {

// Polls until the child reaches `want` (or 5 s pass).
ProcessEvidence wait_for(pid_t pid, std::int64_t start, ProcessState want) {
  ProcessEvidence ev;
  for (int i = 0; i < 500; ++i) {
    ev = probe_process(pid, start);
    if (ev.state == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ev;
}

TEST(ProcessState, AliveStoppedExitedGone) {
  const std::int64_t start = realtime_ns();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pause();
    _exit(0);
  }
  EXPECT_EQ(wait_for(pid, start, ProcessState::alive).state, ProcessState::alive);
  kill(pid, SIGSTOP);
  auto stopped = wait_for(pid, start, ProcessState::stopped);
  EXPECT_EQ(stopped.state, ProcessState::stopped);
  EXPECT_EQ(stopped.raw_state, 'T');
  kill(pid, SIGKILL);
  auto dead = wait_for(pid, start, ProcessState::exited);
  EXPECT_EQ(dead.state, ProcessState::exited);
  EXPECT_EQ(dead.signal, SIGKILL) << dead.detail;
  waitpid(pid, nullptr, 0);
  EXPECT_EQ(probe_process(pid, start).state, ProcessState::gone);
}

TEST(ProcessState, ExitCodeOfAZombie) {
  const std::int64_t start = realtime_ns();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(3);
  auto ev = wait_for(pid, start, ProcessState::exited);
  EXPECT_EQ(ev.state, ProcessState::exited);
  EXPECT_EQ(ev.exit_code, 3) << ev.detail;
  waitpid(pid, nullptr, 0);
}

TEST(ProcessState, PidReuseIsDetectedFromTheStartTime) {
  // Our own process started long before a "writer" that claims to start now + 60 s... reversed:
  // a writer that started 60 s before this process means the pid now names another process.
  auto ev = probe_process(getpid(), realtime_ns() - std::int64_t{3600} * 1'000'000'000 * 24 * 365);
  EXPECT_EQ(ev.state, ProcessState::gone);
  EXPECT_TRUE(ev.pid_reused);
  EXPECT_EQ(probe_process(getpid(), realtime_ns()).state, ProcessState::alive);
  EXPECT_EQ(probe_process(0, 0).state, ProcessState::unknown);
}

}  // namespace
}  // namespace scout::hang
