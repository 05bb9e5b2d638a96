#include "lib/transport/tcp_store_dialect.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace scout::transport {

std::string_view store_dialect_name(StoreDialect d) {
  switch (d) {
    case StoreDialect::torch1:
      return "torch 1.x";
    case StoreDialect::torch2:
      return "torch 2.x";
    case StoreDialect::silent:
      return "none (connected, no answer)";
    case StoreDialect::unknown:
      break;
  }
  return "unknown";
}

namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// A connected socket, or -1 (with *why, when given, saying why); the connection itself is
// bounded by `deadline`.
int connect_by(const std::string& host, std::uint16_t port, Clock::time_point deadline, std::string* why = nullptr) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    if (why) *why = std::string("cannot resolve ") + host + ": " + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (auto* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    bool ok = false;
    if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      const int ready = ::poll(&p, 1, remaining_ms(deadline));
      ok = ready == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
      if (why && ready == 0) *why = "no answer to the connection (a black-holed address, or a firewall)";
      if (why && ready == 1 && err != 0) errno = err;
    }
    if (!ok && why && (why->empty() || errno == ECONNREFUSED))
      *why = errno == ECONNREFUSED ? "connection refused: nothing listens there" : std::strerror(errno);
    if (!ok) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

bool send_all(int fd, const unsigned char* data, std::size_t n, Clock::time_point deadline) {
  while (n > 0) {
    ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w > 0) {
      data += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR) return false;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) != 1) return false;
  }
  return true;
}

// What one probe saw: its reply, nothing by its deadline on a connected socket, or anything else
// (no connection, a reset, an end of stream, a wrong reply).
enum class Outcome { answered, silent, failed };

// Reads exactly n bytes by the deadline; false on timeout, EOF or error (*timed_out says which).
bool recv_exact(int fd, unsigned char* out, std::size_t n, Clock::time_point deadline, bool* timed_out) {
  *timed_out = false;
  while (n > 0) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, remaining_ms(deadline));
    if (ready == 0) *timed_out = true;
    if (ready != 1) return false;
    ssize_t r = ::recv(fd, out, n, 0);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return false;
    }
    out += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// torch 1.13's query numbers start at SET = 0: GETNUMKEYS is 6, answered by an int64.
Outcome answers_as_torch1(const std::string& host, std::uint16_t port, std::chrono::milliseconds wait) {
  const auto deadline = Clock::now() + wait;
  int fd = connect_by(host, port, deadline);
  if (fd < 0) return Outcome::failed;
  const unsigned char query[] = {6};
  unsigned char reply[8];
  bool timed_out = false;
  bool ok = send_all(fd, query, sizeof query, deadline) && recv_exact(fd, reply, sizeof reply, deadline, &timed_out);
  ::close(fd);
  return ok ? Outcome::answered : timed_out ? Outcome::silent : Outcome::failed;
}

// torch 2.x: VALIDATE (0) with the magic number, then PING (13) with a nonce it echoes.
Outcome answers_as_torch2(const std::string& host, std::uint16_t port, std::chrono::milliseconds wait) {
  const auto deadline = Clock::now() + wait;
  int fd = connect_by(host, port, deadline);
  if (fd < 0) return Outcome::failed;
  std::uint32_t nonce = std::random_device{}() | 1u;
  const std::uint32_t magic = 0x3C85F7CEu;
  unsigned char msg[10];
  msg[0] = 0;
  std::memcpy(msg + 1, &magic, 4);  // little-endian on the hosts torch runs on
  msg[5] = 13;
  std::memcpy(msg + 6, &nonce, 4);
  unsigned char reply[4];
  bool timed_out = false;
  bool got = send_all(fd, msg, sizeof msg, deadline) && recv_exact(fd, reply, sizeof reply, deadline, &timed_out);
  ::close(fd);
  if (got) return std::memcmp(reply, &nonce, 4) == 0 ? Outcome::answered : Outcome::failed;
  return timed_out ? Outcome::silent : Outcome::failed;
}

}  // namespace

std::string await_listener(const std::string& host, std::uint16_t port, std::chrono::milliseconds wait) {
  const auto deadline = Clock::now() + wait;
  for (;;) {
    std::string why;
    const int fd = connect_by(host, port, deadline, &why);
    if (fd >= 0) {
      ::close(fd);
      return {};
    }
    if (why.empty()) why = "no connection";
    if (Clock::now() + std::chrono::milliseconds(50) >= deadline) return why;
    ::poll(nullptr, 0, 50);
  }
}

StoreDialect probe_store_dialect(const std::string& host, std::uint16_t port, std::chrono::milliseconds wait) {
  // A 1.13 server answers its one-byte query at once; a 2.x libuv server ignores it, so this
  // wait is what probing a 2.x store costs. Past it the 2.x handshake is sent, which a slow
  // 1.13 server resets (what a 2.x client does to it anyway): unknown, the default module.
  using std::chrono::milliseconds;
  // Silent only when both probes connected and waited out their time: a server that resets or
  // closes either is a server that runs (unknown, as before).
  const Outcome one = answers_as_torch1(host, port, std::min(wait, milliseconds(500)));
  if (one == Outcome::answered) return StoreDialect::torch1;
  const Outcome two = answers_as_torch2(host, port, wait);
  if (two == Outcome::answered) return StoreDialect::torch2;
  return one == Outcome::silent && two == Outcome::silent ? StoreDialect::silent : StoreDialect::unknown;
}

}  // namespace scout::transport
