// Gloo's FileStore as a KeyValueStore: built into scout's network module
// (libscout_net.so, lib/transport/net_module.hpp), never into scout_core.
#include <fcntl.h>
#include <fmt/format.h>
#include <gloo/rendezvous/file_store.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "lib/common/parse.hpp"
#include "lib/transport/net_module_impl.hpp"

namespace scout::transport {

namespace {

// Gloo's FileStore with a non-blocking check and removal of what it wrote.
class CheckableFileStore : public gloo::rendezvous::FileStore {
 public:
  using FileStore::FileStore;
  bool exists(const std::string& key) { return check({key}); }
  // The file a key lives in (named by a hash of the key, like every key file).
  std::string path_of(const std::string& key) { return objectPath(key); }
  void remove_own() {
    for (const auto& p : getAllKeyFilePaths()) ::unlink(p.c_str());
    keyFilePaths_.clear();
  }
  void forget(const std::string& key) { std::erase(keyFilePaths_, objectPath(key)); }
  // Gloo's set() refuses a key that exists: replace its file (raw bytes, as Gloo writes
  // them) through a temporary name and a rename, so a reader sees the old or the new value.
  void replace(const std::string& key, const std::vector<char>& value) {
    const std::string path = objectPath(key);
    const std::string tmp = fmt::format("{}.replace.{}", path, ::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
    const bool written = ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
    ::close(fd);
    if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
      const std::string why = std::strerror(errno);
      ::unlink(tmp.c_str());
      throw std::runtime_error(fmt::format("cannot replace {}: {}", path, why));
    }
    if (std::find(keyFilePaths_.begin(), keyFilePaths_.end(), path) == keyFilePaths_.end())
      keyFilePaths_.push_back(path);
  }
};

class FileKeyValueStore final : public KeyValueStore {
 public:
  explicit FileKeyValueStore(std::string dir) : m_dir(std::move(dir)), m_store(m_dir) {}

  Status set(const std::string& key, const std::vector<char>& value) override {
    try {
      if (m_store.exists(key))
        m_store.replace(key, value);  // a presence slot reused, an entry marked ended
      else
        m_store.set(key, value);
      return Ok{};
    } catch (const std::exception& e) {
      return unavailable_error(fmt::format("cannot write key {} to the store {}", key, describe()), e.what());
    }
  }
  Result<std::vector<char>> get(const std::string& key, std::chrono::milliseconds timeout) override {
    try {
      m_store.wait({key}, timeout);
      return m_store.get(key);
    } catch (const std::exception& e) {
      return unavailable_error(fmt::format("key {} did not appear in the store {}", key, describe()), e.what());
    }
  }
  Result<bool> check(const std::string& key) override {
    try {
      return m_store.exists(key);
    } catch (const std::exception& e) {
      return unavailable_error(fmt::format("cannot read the store {}", describe()), e.what());
    }
  }
  // The counter is the decimal text of the key's file, read and rewritten under flock.
  Result<std::int64_t> add(const std::string& key, std::int64_t delta, std::chrono::milliseconds timeout) override {
    const std::string path = m_store.path_of(key);
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
      return unavailable_error(fmt::format("cannot open counter {} in the store {}", key, describe()),
                               std::strerror(errno));
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR)
        return unavailable_error(fmt::format("cannot lock counter {} in the store {}", key, describe()),
                                 std::strerror(errno));
      if (std::chrono::steady_clock::now() >= deadline)
        return unavailable_error(
            fmt::format("timed out waiting for the lock on counter {} in the store {}", key, describe()));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n < 0)
      return unavailable_error(fmt::format("cannot read counter {} in the store {}", key, describe()),
                               std::strerror(errno));
    std::int64_t value = 0;
    if (n > 0) {
      auto parsed = parse_int(std::string_view(buf, static_cast<std::size_t>(n)), "store counter");
      if (!parsed)
        return input_error(fmt::format("counter {} in the store {} is corrupt", key, describe()),
                           parsed.error().message(), fmt::format("remove {}", path));
      value = *parsed;
    }
    if (delta == 0) return value;
    value += delta;
    const std::string text = std::to_string(value);
    if (::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
        ::ftruncate(fd, static_cast<off_t>(text.size())) != 0)
      return unavailable_error(fmt::format("cannot update counter {} in the store {}", key, describe()),
                               std::strerror(errno));
    return value;
  }
  void cleanup() override { m_store.remove_own(); }
  void keep(const std::string& key) override { m_store.forget(key); }
  std::string describe() const override { return "file://" + m_dir; }

 private:
  std::string m_dir;
  CheckableFileStore m_store;
};

}  // namespace

namespace net_impl {

void open_file_store(const std::string& dir, Result<std::unique_ptr<KeyValueStore>>& out) {
  try {
    out = std::unique_ptr<KeyValueStore>(std::make_unique<FileKeyValueStore>(dir));
  } catch (const std::exception& e) {
    out = unavailable_error(fmt::format("cannot open the store file://{}", dir), e.what());
  }
}

}  // namespace net_impl

}  // namespace scout::transport
