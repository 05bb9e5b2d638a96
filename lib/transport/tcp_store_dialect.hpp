// Which c10d TCPStore protocol a tcp:// store server speaks, found without
// LibTorch, so that scout loads the LibTorch module whose client can talk to it.
//
// torch 1.13's and torch 2.x's TCPStore wire protocols are incompatible in both
// directions (2.x clients validate and ping first, and number the queries one
// higher): a 1.13 client against a 2.x server waits until its timeout, a 2.x
// client against a 1.13 server is reset. The probe sends one query that is
// complete and harmless in 1.13's protocol (GETNUMKEYS, a single byte) and
// incomplete for a 2.x server, which closes or ignores it: an 8-byte answer
// means 1.13. Otherwise a second connection sends 2.x's handshake (VALIDATE
// with its magic number, then PING with a nonce): the nonce echoed back means
// 2.x. Observed on Debian's 1.13 server and torch 2.15's libuv and classic
// servers (tests/integration/test_torch2_capture.py).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace scout::transport {

// silent: both probes connected (something listens there) and neither got a reply or an end of
// stream by its wait: the process that holds the listening socket does not run (SIGSTOP, a frozen
// cgroup, a debugger) or is no TCPStore that answers. A client of either torch would block there.
enum class StoreDialect { unknown, torch1, torch2, silent };

std::string_view store_dialect_name(StoreDialect d);

// Probes the server at host:port; the first step waits at most min(`wait`,
// 500 ms), the second at most `wait`. Never
// throws; `unknown` when the server cannot be reached or answers neither way, `silent` when both
// probes connected and waited out their time with no reply.
StoreDialect probe_store_dialect(const std::string& host, std::uint16_t port, std::chrono::milliseconds wait);

// Whether anything accepts a TCP connection at host:port: tries again (every
// 50 ms: a store that an observer or the launcher is still starting) until
// one is accepted or `wait` is over. "" when one was; else why not, in words
// ("connection refused: nothing listens there", "no answer to the connection").
std::string await_listener(const std::string& host, std::uint16_t port, std::chrono::milliseconds wait);

}  // namespace scout::transport
