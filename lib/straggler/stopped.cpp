#include "lib/straggler/stopped.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "lib/common/clock.hpp"

namespace scout::straggler {

namespace {

// The state letter of the open stat file `fd` ('\0': unreadable, the process gone).
char read_state(int fd) {
  // "PID (COMM) S ...": the pid has at most 7 digits and the name at most 15 characters, so the first 64
  // bytes hold the state; procfs makes the text anew on every read from offset 0.
  char buf[64];
  const ssize_t n = pread(fd, buf, sizeof buf, 0);
  if (n <= 0) return '\0';
  return StopSampler::state_of(buf, static_cast<std::size_t>(n));
}

}  // namespace

char StopSampler::state_of(const char* text, std::size_t size) {
  std::size_t close = size;
  for (std::size_t i = 0; i < size; ++i)
    if (text[i] == ')') close = i;
  if (close == size || close + 2 >= size || text[close + 1] != ' ') return '\0';
  return text[close + 2];
}

StopSampler::StopSampler() : StopSampler(Options{}) {}

StopSampler::StopSampler(Options options) : m_options(options) {
  if (m_options.max_interval < m_options.min_interval) m_options.max_interval = m_options.min_interval;
}

StopSampler::~StopSampler() {
  stop();
  for (auto& [rank, t] : m_targets)
    if (t.fd >= 0) close(t.fd);
}

bool StopSampler::track(std::int64_t rank, std::int64_t pid) {
  if (pid <= 0) return false;
  std::unique_lock<std::mutex> lock(m_mutex);
  if (m_stop) return false;
  auto it = m_targets.find(rank);
  if (it != m_targets.end() && it->second.pid == pid && !it->second.gone) return true;
  const std::string path = fmt::format("/proc/{}/task/{}/stat", pid, pid);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read_state(fd) == '\0') {
    if (fd >= 0) close(fd);
    return false;
  }
  Target& t = m_targets[rank];
  if (t.fd >= 0) close(t.fd);
  t = Target{pid, fd, false, Counts{}};
  if (!m_thread.joinable()) {
    m_started = std::chrono::steady_clock::now();
    m_thread = std::thread([this] { loop(); });
  }
  return true;
}

std::map<std::int64_t, StopSampler::Counts> StopSampler::take() {
  std::unique_lock<std::mutex> lock(m_mutex);
  std::map<std::int64_t, Counts> out;
  for (auto it = m_targets.begin(); it != m_targets.end();) {
    out[it->first] = it->second.counts;
    it->second.counts = Counts{};
    if (it->second.gone) {
      if (it->second.fd >= 0) close(it->second.fd);
      it = m_targets.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void StopSampler::stop() {
  {
    std::unique_lock<std::mutex> lock(m_mutex);
    if (m_stop) return;
    m_stop = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) m_thread.join();
  std::unique_lock<std::mutex> lock(m_mutex);
  m_ended = std::chrono::steady_clock::now();
}

StopSampler::Cost StopSampler::cost() const {
  std::unique_lock<std::mutex> lock(m_mutex);
  Cost c;
  c.ranks = static_cast<std::int64_t>(m_targets.size());
  c.sweeps = m_sweeps;
  c.samples = m_samples;
  c.cpu_s = static_cast<double>(m_cpu_ns) / 1e9;
  if (m_started != std::chrono::steady_clock::time_point{}) {
    const auto end = m_ended != std::chrono::steady_clock::time_point{} ? m_ended : std::chrono::steady_clock::now();
    c.wall_s = std::chrono::duration<double>(end - m_started).count();
  }
  return c;
}

void StopSampler::loop() {
  std::mt19937_64 rng(m_options.seed != 0
                          ? m_options.seed
                          : static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_int_distribution<std::int64_t> gap(m_options.min_interval.count(), m_options.max_interval.count());
  const std::int64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  std::unique_lock<std::mutex> lock(m_mutex);
  while (!m_stop) {
    // A jittered gap: the duty cycle of a SIGSTOP loop is periodic, and a fixed interval could alias with it.
    m_wake.wait_for(lock, std::chrono::microseconds(gap(rng)), [this] { return m_stop; });
    if (m_stop) break;
    for (auto& [rank, t] : m_targets) {
      if (t.gone) continue;
      const char s = read_state(t.fd);
      if (s == '\0') {  // the process went away (its pid may be reused: the open file says ESRCH)
        t.gone = true;
        continue;
      }
      ++t.counts.samples;
      ++m_samples;
      if (s == 'T' || s == 't') ++t.counts.stopped;
    }
    ++m_sweeps;
    m_cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  }
}

}  // namespace scout::straggler
