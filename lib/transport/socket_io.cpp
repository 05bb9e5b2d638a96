#include "lib/transport/socket_io.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace scout::transport {

int remaining_ms(SocketClock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SocketClock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

int connect_by(const std::string& host, std::uint16_t port, SocketClock::time_point deadline, std::string* why) {
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

bool send_all(int fd, const unsigned char* data, std::size_t n, SocketClock::time_point deadline) {
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

RecvOutcome recv_some(int fd, unsigned char* out, std::size_t n, SocketClock::time_point deadline, std::size_t* got) {
  *got = 0;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, remaining_ms(deadline));
    if (ready == 0) return RecvOutcome::timed_out;
    if (ready < 0) {
      if (errno == EINTR) continue;
      return RecvOutcome::failed;
    }
    ssize_t r = ::recv(fd, out, n, 0);
    if (r == 0) return RecvOutcome::end_of_stream;
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return RecvOutcome::failed;
    }
    *got = static_cast<std::size_t>(r);
    return RecvOutcome::data;
  }
}

}  // namespace scout::transport
