#include "lib/hash/file_hash.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>
#include <span>

#include "lib/hash/tensor_hash.hpp"

namespace scout::hash {

namespace {

// The guarded read of this thread, if one is running (run_sigbus_guarded): where to return to and the bytes it
// covers.
struct Guard {
  sigjmp_buf back;
  const char* begin = nullptr;
  const char* end = nullptr;
};
thread_local Guard* t_guard = nullptr;
struct sigaction g_previous_sigbus {};

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (Guard* g = t_guard) {
    const auto* at = static_cast<const char*>(info != nullptr ? info->si_addr : nullptr);
    if (at >= g->begin && at < g->end) {
      t_guard = nullptr;  // run_sigbus_guarded restores the outer guard
      siglongjmp(g->back, 1);
    }
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

bool run_sigbus_guarded(const void* begin, const void* end, void (*fn)(void*), void* arg) {
  install_sigbus_handler();
  Guard guard;
  guard.begin = static_cast<const char*>(begin);
  guard.end = static_cast<const char*>(end);
  Guard* const outer = t_guard;
  if (sigsetjmp(guard.back, 1) != 0) {  // the handler came back: a read faulted
    t_guard = outer;
    return false;
  }
  t_guard = &guard;
  fn(arg);
  t_guard = outer;
  return true;
}

std::optional<std::uint64_t> guarded_partial_sum(std::span<const std::byte> bytes, std::uint64_t first_word) {
  struct Args {
    std::span<const std::byte> bytes;
    std::uint64_t first_word;
    std::uint64_t sum;
  } args{bytes, first_word, 0};
  const bool ok = run_sigbus_guarded(
      bytes.data(), bytes.data() + bytes.size(),
      [](void* a) {
        auto& x = *static_cast<Args*>(a);
        x.sum = partial_sum(x.bytes, x.first_word);
      },
      &args);
  if (!ok) return std::nullopt;
  return args.sum;
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
    // Each thread's read is guarded against SIGBUS.
    const auto hash = hash_tensor_with(DType::u8, shape, std::span(static_cast<const std::byte*>(map), out.size),
                                       threads, guarded_partial_sum);
    ::munmap(map, out.size);
    if (!hash) {
      ::close(fd);
      return input_error(fmt::format("cannot hash {}", path),
                         fmt::format("the file shrank below its {} bytes while it was read", out.size),
                         "a writer truncated it; hash it again once it is complete");
    }
    out.hash = *hash;
  }
  ::close(fd);
  return out;
}

}  // namespace scout::hash
