// Plain TCP client sockets bounded by a deadline: the one home of the connect/send/receive
// loops that the TCPStore dialect probe and the etcd store's HTTP client share. Every call
// returns by its deadline, whatever the peer does (refuses, black-holes, accepts and never
// answers, as a SIGSTOPped server does).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace scout::transport {

using SocketClock = std::chrono::steady_clock;

// Milliseconds left until `deadline` (0 when it has passed), as poll() takes them.
int remaining_ms(SocketClock::time_point deadline);

// A connected, non-blocking socket to host:port, or -1 (with *why, when given, saying why in
// words); resolving is not bounded (getaddrinfo), the connection is bounded by `deadline`.
int connect_by(const std::string& host, std::uint16_t port, SocketClock::time_point deadline,
               std::string* why = nullptr);

// Sends all `n` bytes of `data` on the non-blocking socket `fd` by `deadline`; false when it
// cannot (an error, or the deadline).
bool send_all(int fd, const unsigned char* data, std::size_t n, SocketClock::time_point deadline);

// What one bounded receive got.
enum class RecvOutcome { data, end_of_stream, timed_out, failed };

// Receives up to `n` bytes into `out` on the non-blocking socket `fd`, waiting until `deadline`
// for the first; *got holds how many when the outcome is `data`.
RecvOutcome recv_some(int fd, unsigned char* out, std::size_t n, SocketClock::time_point deadline, std::size_t* got);

}  // namespace scout::transport
