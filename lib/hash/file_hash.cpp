#include "lib/hash/file_hash.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "lib/hash/tensor_hash.hpp"

namespace scout::hash {

namespace {

// The guarded read of this thread, if one is running (guarded_partial_sum).
thread_local sigjmp_buf* t_fault_return = nullptr;
struct sigaction g_previous_sigbus {};

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* back = t_fault_return) {
    t_fault_return = nullptr;
    siglongjmp(*back, 1);
  }
  // Not a guarded read: whoever handled SIGBUS before handles it.
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 && g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN) {
    g_previous_sigbus.sa_handler(sig);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);  // the default action: the fault repeats on return and ends the process
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous_sigbus);
  });
}

}  // namespace

std::optional<std::uint64_t> guarded_partial_sum(std::span<const std::byte> bytes, std::uint64_t first_word) {
  install_sigbus_handler();
  sigjmp_buf back;
  if (sigsetjmp(back, 1) != 0) return std::nullopt;  // the handler came back: a read faulted
  t_fault_return = &back;
  const std::uint64_t sum = partial_sum(bytes, first_word);
  t_fault_return = nullptr;
  return sum;
}

Result<RawFileHash> hash_raw_file(const std::string& path, unsigned threads) {
  auto fail = [&](const char* what, int err) {
    return input_error(fmt::format("cannot read {}", path), fmt::format("{}: {}", what, std::strerror(err)),
                       "check the path and permissions");
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail("open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return fail("fstat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return input_error(fmt::format("cannot hash {}", path), "not a regular file", "give a file");
  }
  RawFileHash out;
  out.size = static_cast<std::uint64_t>(st.st_size);
  const std::int64_t shape[] = {static_cast<std::int64_t>(out.size)};
  if (out.size == 0) {
    out.hash = hash_tensor(DType::u8, shape, {}, threads);
  } else {
    void* map = ::mmap(nullptr, out.size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return fail("mmap", err);
    }
    ::madvise(map, out.size, MADV_SEQUENTIAL);
    // hash_tensor's split over threads, each thread's read guarded against SIGBUS.
    const std::span bytes(static_cast<const std::byte*>(map), static_cast<std::size_t>(out.size));
    static const unsigned k_cores = std::max(1u, std::thread::hardware_concurrency());
    const std::size_t words = (bytes.size() + 7) / 8;
    unsigned n = threads == 0 ? k_cores : threads;
    if (bytes.size() < k_parallel_threshold) n = 1;
    n = static_cast<unsigned>(std::min<std::size_t>(n, words));
    const std::size_t per = (words + n - 1) / n;
    std::vector<std::uint64_t> sums(n, 0);
    std::atomic<bool> faulted{false};
    auto part = [&](unsigned t) {
      const std::size_t w0 = std::min(words, t * per), w1 = std::min(words, w0 + per);
      if (w0 == w1) return;
      const std::size_t b0 = w0 * 8, b1 = std::min(bytes.size(), w1 * 8);
      if (auto s = guarded_partial_sum(bytes.subspan(b0, b1 - b0), w0))
        sums[t] = *s;
      else
        faulted.store(true);
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < n; ++t) pool.emplace_back(part, t);
    part(0);
    for (auto& th : pool) th.join();
    ::munmap(map, out.size);
    if (faulted.load()) {
      ::close(fd);
      return input_error(fmt::format("cannot hash {}", path),
                         fmt::format("the file shrank below its {} bytes while it was read", out.size),
                         "a writer truncated it; hash it again once it is complete");
    }
    std::uint64_t sum = 0;
    for (std::uint64_t s : sums) sum = combine(sum, s);
    out.hash = finalize(sum, DType::u8, shape, out.size);
  }
  ::close(fd);
  return out;
}

}  // namespace scout::hash
