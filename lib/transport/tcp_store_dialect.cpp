#include "lib/transport/tcp_store_dialect.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "lib/transport/socket_io.hpp"

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

using Clock = SocketClock;

// What one probe saw: its reply, nothing by its deadline on a connected socket, or anything else
// (no connection, a reset, an end of stream, a wrong reply).
enum class Outcome { answered, silent, failed };

// Reads exactly n bytes by the deadline; false on timeout, EOF or error (*timed_out says which).
bool recv_exact(int fd, unsigned char* out, std::size_t n, Clock::time_point deadline, bool* timed_out) {
  *timed_out = false;
  while (n > 0) {
    std::size_t got = 0;
    const RecvOutcome r = recv_some(fd, out, n, deadline, &got);
    if (r == RecvOutcome::timed_out) *timed_out = true;
    if (r != RecvOutcome::data) return false;
    out += got;
    n -= got;
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
