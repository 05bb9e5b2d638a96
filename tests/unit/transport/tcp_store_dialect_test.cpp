// The TCPStore protocol probe against loopback servers that answer as each
// torch's server does (the bytes observed from torch 1.13's and 2.15's
// servers; the real servers are probed in test_torch2_capture.Modules).
#include "lib/transport/tcp_store_dialect.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

namespace scout::transport {
namespace {

using namespace std::chrono_literals;

enum class Behaviour { torch1, torch2, silent, closes };

// A one-thread loopback server answering every connection as `b` would.
class FakeServer {
 public:
  explicit FakeServer(Behaviour b) : m_b(b) {
    m_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(m_fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&a), &len);
    m_port = ntohs(a.sin_port);
    ::listen(m_fd, 4);
    m_thread = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    m_stop = true;
    ::shutdown(m_fd, SHUT_RDWR);
    ::close(m_fd);
    m_thread.join();
  }
  std::uint16_t port() const { return m_port; }

 private:
  void serve() {
    while (!m_stop) {
      int c = ::accept(m_fd, nullptr, nullptr);
      if (c < 0) return;
      unsigned char buf[16];
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (m_b == Behaviour::torch1 && n >= 1 && buf[0] == 6) {
        const unsigned char zero[8] = {};
        ::send(c, zero, sizeof zero, MSG_NOSIGNAL);
      } else if (m_b == Behaviour::torch2 && n >= 10 && buf[0] == 0 && buf[5] == 13) {
        ::send(c, buf + 6, 4, MSG_NOSIGNAL);
      } else if (m_b == Behaviour::silent) {
        std::this_thread::sleep_for(400ms);
      }
      ::close(c);
    }
  }
  Behaviour m_b;
  int m_fd = -1;
  std::uint16_t m_port = 0;
  std::atomic<bool> m_stop{false};
  std::thread m_thread;
};

TEST(StoreDialect, EachServersAnswerNamesItsProtocol) {
  FakeServer one(Behaviour::torch1), two(Behaviour::torch2);
  EXPECT_EQ(probe_store_dialect("127.0.0.1", one.port(), 2s), StoreDialect::torch1);
  EXPECT_EQ(probe_store_dialect("127.0.0.1", two.port(), 2s), StoreDialect::torch2);
}

TEST(StoreDialect, ASilentServerIsSilentAClosingServerOrNoneUnknownWithinTheWait) {
  FakeServer silent(Behaviour::silent), closes(Behaviour::closes);
  auto t0 = std::chrono::steady_clock::now();
  // Connected and unanswered both times (a stopped store host): silent, which open_store refuses.
  EXPECT_EQ(probe_store_dialect("127.0.0.1", silent.port(), 200ms), StoreDialect::silent);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);  // bounded by the wait, not a hang
  EXPECT_EQ(probe_store_dialect("127.0.0.1", closes.port(), 2s), StoreDialect::unknown);
  EXPECT_EQ(probe_store_dialect("no-such-host.invalid", 1, 500ms), StoreDialect::unknown);
}

}  // namespace
}  // namespace scout::transport
