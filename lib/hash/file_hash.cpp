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
