#include "lib/straggler/bench.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>

namespace scout::straggler {

namespace {

double now_ns() {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// The cgroup.procs file of `pid`'s cpu cgroup (v1 "cpu" controller, else v2), or "".
std::string cgroup_procs_of(std::int64_t pid) {
  std::ifstream f(fmt::format("/proc/{}/cgroup", pid));
  std::string line, v1, v2;
  while (std::getline(f, line)) {
    auto a = line.find(':');
    auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::stringstream ss(ctrl);
    std::string c;
    while (std::getline(ss, c, ','))
      if (c == "cpu") v1 = path;
    if (ctrl.empty() && line.compare(0, 2, "0:") == 0) v2 = path;
  }
  if (!v1.empty()) return "/sys/fs/cgroup/cpu" + (v1 == "/" ? std::string() : v1) + "/cgroup.procs";
  if (!v2.empty()) {
    for (const char* root : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
      std::string p = std::string(root) + (v2 == "/" ? std::string() : v2) + "/cgroup.procs";
      if (::access(p.c_str(), W_OK) == 0) return p;
    }
  }
  return {};
}

struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::size_t target = 0;
  double started = 0;
};

struct Wire {
  double gemm[16];
  double sweep[16];
  int placed;  // 0 unplaced, 1 affinity, 2 cgroup+affinity
};

}  // namespace

std::pair<double, double> run_unit(const BenchOptions& o, float* a, float* b, float* c, const std::uint64_t* sweep) {
  const std::int64_t n = o.gemm_n;
  double t0 = now_ns();
  for (std::int64_t rep = 0; rep < o.gemm_reps; ++rep) {
    for (std::int64_t i = 0; i < n * n; ++i) c[i] = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < n; ++k) {
        const float aik = a[i * n + k];
        float* ci = c + i * n;
        const float* bk = b + k * n;
        for (std::int64_t j = 0; j < n; ++j) ci[j] += aik * bk[j];
      }
    a[rep % (n * n)] += c[(rep * 7) % (n * n)] * 1e-9f;  // keep the result live
  }
  double t1 = now_ns();
  volatile std::uint64_t sink = 0;
  std::uint64_t acc = 0;
  const std::size_t words = o.sweep_bytes / sizeof(std::uint64_t);
  for (std::size_t i = 0; i < words; ++i) acc += sweep[i];
  sink = acc;
  (void)sink;
  double t2 = now_ns();
  return {t1 - t0, t2 - t1};
}

std::vector<BenchResult> run_bench(const std::vector<BenchTarget>& targets, const BenchOptions& o) {
  std::vector<BenchResult> out(targets.size());
  const std::int64_t n = std::clamp<std::int64_t>(o.gemm_n, 8, 2048);
  const std::int64_t repeats = std::clamp<std::int64_t>(o.repeats, 1, 16);
  BenchOptions opt = o;
  opt.gemm_n = n;
  std::vector<float> a(static_cast<std::size_t>(n * n)), b(a.size()), c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 13) * 0.25f;
    b[i] = static_cast<float>(i % 7) * 0.5f;
  }
  std::vector<std::uint64_t> sweep(o.sweep_bytes / sizeof(std::uint64_t));
  for (std::size_t i = 0; i < sweep.size(); ++i) sweep[i] = i * 0x9e3779b97f4a7c15ULL;
  std::vector<std::string> procs(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    out[i].rank = targets[i].rank;
    if (o.join_cgroup && targets[i].pid > 0) procs[i] = cgroup_procs_of(targets[i].pid);
  }

  std::vector<Child> running;
  std::size_t next = 0;
  const std::size_t parallel = static_cast<std::size_t>(std::max<std::int64_t>(1, o.parallel));
  auto launch = [&](std::size_t i) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      out[i].error = fmt::format("pipe: {}", std::strerror(errno));
      return;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      out[i].error = fmt::format("fork: {}", std::strerror(errno));
      ::close(p[0]);
      ::close(p[1]);
      return;
    }
    if (pid == 0) {
      // Child: no allocation from here on (the parent may have had threads).
      ::close(p[0]);
      Wire w{};
      w.placed = 0;
      if (targets[i].pid > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (::sched_getaffinity(static_cast<pid_t>(targets[i].pid), sizeof set, &set) == 0 &&
            ::sched_setaffinity(0, sizeof set, &set) == 0)
          w.placed = 1;
        if (!procs[i].empty()) {
          int fd = ::open(procs[i].c_str(), O_WRONLY | O_CLOEXEC);
          if (fd >= 0) {
            char buf[32];
            int len = std::snprintf(buf, sizeof buf, "%d\n", static_cast<int>(::getpid()));
            if (::write(fd, buf, static_cast<std::size_t>(len)) == len && w.placed == 1) w.placed = 2;
            ::close(fd);
          }
        }
      }
      for (std::int64_t r = 0; r < repeats; ++r) {
        auto [g, s] = run_unit(opt, a.data(), b.data(), c.data(), sweep.data());
        w.gemm[r] = g;
        w.sweep[r] = s;
      }
      const char* bytes = reinterpret_cast<const char*>(&w);
      std::size_t off = 0;
      while (off < sizeof w) {
        ssize_t k = ::write(p[1], bytes + off, sizeof w - off);
        if (k <= 0) break;
        off += static_cast<std::size_t>(k);
      }
      ::_exit(off == sizeof w ? 0 : 1);
    }
    ::close(p[1]);
    running.push_back(Child{pid, p[0], i, now_ns()});
  };
  auto finish = [&](Child& ch, bool timed_out) {
    auto& r = out[ch.target];
    Wire w{};
    std::size_t off = 0;
    if (!timed_out) {
      char* bytes = reinterpret_cast<char*>(&w);
      while (off < sizeof w) {
        ssize_t k = ::read(ch.fd, bytes + off, sizeof w - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        off += static_cast<std::size_t>(k);
      }
    } else {
      ::kill(ch.pid, SIGKILL);
    }
    ::close(ch.fd);
    int status = 0;
    while (::waitpid(ch.pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
      r.error = fmt::format("probe did not finish within {} ms", o.per_rank_timeout.count());
    } else if (off != sizeof w) {
      r.error = "probe process ended without a result";
    } else {
      std::vector<double> tot, g, s;
      for (std::int64_t k = 0; k < repeats; ++k) {
        g.push_back(w.gemm[k]);
        s.push_back(w.sweep[k]);
        tot.push_back(w.gemm[k] + w.sweep[k]);
      }
      auto med = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      r.gemm_ns = med(g);
      r.sweep_ns = med(s);
      r.total_ns = med(tot);
      r.placement = w.placed == 2 ? "cgroup+affinity" : w.placed == 1 ? "affinity" : "unplaced";
    }
  };
  while (next < targets.size() || !running.empty()) {
    while (next < targets.size() && running.size() < parallel) launch(next++);
    if (running.empty()) continue;
    std::vector<pollfd> fds;
    for (auto& ch : running) fds.push_back(pollfd{ch.fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 50);
    for (std::size_t k = running.size(); k-- > 0;) {
      const bool ready = fds[k].revents != 0;
      const bool late = now_ns() - running[k].started > static_cast<double>(o.per_rank_timeout.count()) * 1e6;
      if (ready || late) {
        finish(running[k], !ready);
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
  }
  return out;
}

}  // namespace scout::straggler
