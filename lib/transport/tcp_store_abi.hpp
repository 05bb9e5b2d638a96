// The C ABI of the tcp:// store adapter in the LibTorch module
// (lib/torch_module/tcp_store.cpp). Plain byte buffers only: Gloo and c10d
// types never cross it, and the Gloo-facing code stays in scout_core (Debian's
// LibTorch links the system libgloo.so.0 itself, so there is one Gloo in the
// process either way). No exception crosses it: each call returns 0 on
// success, and on failure writes a message into err (err_len bytes).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
// Opens (is_server=0) or hosts (is_server=1) a c10d TCPStore; null on failure.
typedef void* (*scout_tcp_store_open_fn)(const char* host, std::uint16_t port, int is_server, std::int64_t timeout_ms,
                                         char* err, std::size_t err_len);
// Sets key to len bytes of data.
typedef int (*scout_tcp_store_set_fn)(void* store, const char* key, const void* data, std::size_t len, char* err,
                                      std::size_t err_len);
// Gets key, waiting up to timeout_ms; *out is malloc'ed (free with scout_tcp_store_free).
typedef int (*scout_tcp_store_get_fn)(void* store, const char* key, std::int64_t timeout_ms, void** out,
                                      std::size_t* out_len, char* err, std::size_t err_len);
// *exists = 1 when key exists.
typedef int (*scout_tcp_store_check_fn)(void* store, const char* key, int* exists, char* err, std::size_t err_len);
// Atomically adds delta to the integer counter at key (created at 0); *value is the new value.
typedef int (*scout_tcp_store_add_fn)(void* store, const char* key, std::int64_t delta, std::int64_t* value, char* err,
                                      std::size_t err_len);
// Deletes key (best effort).
typedef int (*scout_tcp_store_delete_fn)(void* store, const char* key);
// Frees a buffer returned by get.
typedef void (*scout_tcp_store_free_fn)(void* data);
// Closes the store (stops the server when hosted).
typedef void (*scout_tcp_store_close_fn)(void* store);
}
