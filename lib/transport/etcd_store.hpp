// The observers' rendezvous on an etcd v3 cluster (--store etcd://H1:P1,H2:P2,...): a store that
// outlives any one node, the store's host included (docs/contracts.md "Rendezvous and transport").
//
// scout never hosts it: every observer joins. It speaks to etcd's JSON gateway (HTTP/1.1 on each
// member's client port: /v3/kv/put, /v3/kv/range, /v3/kv/txn; keys and values base64) over plain
// sockets, one connection per request. Every request is bounded by min(what is left of its call's
// time, k_etcd_request_timeout); a member that refuses, times out (stopped, frozen, cut off) or
// answers with an error sends the request to the next member, and the member that answered last is
// asked first next time. Keys live under k_etcd_key_root; the caller's keys carry the job's
// namespace already, as with the other stores.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "lib/common/error.hpp"
#include "lib/transport/store.hpp"

namespace scout::transport {

// Longest wait for one member's answer to one request before the next member is asked: a live
// member answers a read or a write in milliseconds; a stopped one (SIGSTOP, a frozen cgroup)
// accepts the connection and never answers; one cut off from its quorum holds the request until
// etcd's own timeout (~7 s). Also longer than etcd's leader election after the leader dies
// (about 1 to 2 election timeouts, 1 s each by default), so a request is not abandoned just
// before the new leader answers it.
inline constexpr std::chrono::milliseconds k_etcd_request_timeout{2000};

// Prefix of every key scout writes to etcd (the caller's key follows it).
inline constexpr std::string_view k_etcd_key_root = "/scout/";

// Joins the etcd cluster of `uri` (Kind::etcd): waits up to `timeout` for one member to answer a
// read, and bounds each later set(), check() and add() by `timeout` as well (get() and add() by
// their own). Errors name every member tried and why each failed.
Result<std::unique_ptr<KeyValueStore>> open_etcd_store(const StoreUri& uri, std::chrono::milliseconds timeout);

}  // namespace scout::transport
