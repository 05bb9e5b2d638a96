// libFuzzer target: a whole torch.save file (zip directory, local headers,
// data.pkl, tensor views) read and hashed from an in-memory file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "lib/checkpoint/checkpoint_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  int fd = ::memfd_create("fuzz_torch_zip", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) {
    ::close(fd);
    return 0;
  }
  (void)scout::checkpoint::digest_torch_archive(fd, 0, size, "fuzz");
  // The same bytes as an archive embedded at an offset, as in a .distcp file.
  if (size > 16) (void)scout::checkpoint::digest_torch_archive(fd, 7, size - 7, "fuzz+7");
  ::close(fd);
  return 0;
}
