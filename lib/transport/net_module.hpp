// scout's network module, libscout_net.so: Gloo (lib/transport/gloo_group.cpp,
// lib/transport/file_store.cpp) behind one C entry point, loaded on first use.
//
// Linking Gloo made every scout process load libgloo, libibverbs, libnl-3,
// libnl-route-3 (whose constructors read /etc/libnl) and hiredis and bind
// ~1,200 symbols at start-up (~1.3 ms, ~70 page faults on the 2-core VM), also
// for commands that never meet a peer (verify-ckpt, hash, consensus, groups...).
// The module is built with scout, from the same sources (the table's version
// and the size of its types must match), and looked for like the LibTorch
// module: $SCOUT_NET_MODULE (a path), the directory of the running executable,
// <prefix>/lib/scout, the install directory, then the build's bin directory
// (test and bench programs). No exception crosses the boundary: every entry
// returns its Result through an out-parameter.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "lib/common/error.hpp"
#include "lib/transport/gloo_group.hpp"
#include "lib/transport/store.hpp"

namespace scout::transport {

inline constexpr unsigned k_net_module_abi = 1;

struct NetModuleApi {
  unsigned abi = 0;          // k_net_module_abi of the build that made the module
  std::size_t api_size = 0;  // sizeof(NetModuleApi) there
  void (*make_tcp_device)(const std::string& address, Result<std::shared_ptr<gloo::transport::Device>>& out) = nullptr;
  void (*connect)(KeyValueStore& store, const std::string& prefix, int rank, int size,
                  const std::shared_ptr<gloo::transport::Device>& device, std::chrono::milliseconds timeout,
                  TrafficCounters* counters, Result<std::unique_ptr<GlooGroup>>& out) = nullptr;
  // Gloo's FileStore in `dir` (which exists and is writable), as a KeyValueStore.
  void (*open_file_store)(const std::string& dir, Result<std::unique_ptr<KeyValueStore>>& out) = nullptr;
};

// The module's table, loading the module on first use; `unavailable` naming
// what was tried when it cannot be loaded or is from another build.
Result<const NetModuleApi*> net_module();

}  // namespace scout::transport

// The module's one exported symbol.
extern "C" const scout::transport::NetModuleApi* scout_net_module_api();
