// The entries of scout's network module (lib/transport/net_module.hpp), as the
// module's own sources define them; only the module includes this.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "lib/common/error.hpp"
#include "lib/transport/gloo_group.hpp"
#include "lib/transport/store.hpp"

namespace scout::transport::net_impl {

void make_tcp_device(const std::string& address, Result<std::shared_ptr<gloo::transport::Device>>& out);
void connect(KeyValueStore& store, const std::string& prefix, int rank, int size,
             const std::shared_ptr<gloo::transport::Device>& device, std::chrono::milliseconds timeout,
             TrafficCounters* counters, Result<std::unique_ptr<GlooGroup>>& out);
void open_file_store(const std::string& dir, Result<std::unique_ptr<KeyValueStore>>& out);

}  // namespace scout::transport::net_impl
