// Loads scout's network module (lib/transport/net_module.hpp) and forwards
// the Gloo entry points of lib/transport/gloo_group.hpp to it.
#include "lib/transport/net_module.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "scout/config.hpp"

namespace scout::transport {

namespace {

constexpr const char* k_module_name = "libscout_net.so";

std::vector<std::string> candidates() {
  if (const char* env = std::getenv("SCOUT_NET_MODULE"); env && *env) return {env};
  std::vector<std::string> out;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / k_module_name).string());
    out.push_back((exe.parent_path().parent_path() / "lib" / "scout" / k_module_name).string());
  }
  out.push_back(std::string(SCOUT_INSTALL_LIBDIR) + "/" + k_module_name);
#ifdef SCOUT_NET_MODULE_BUILD_DIR
  out.push_back(std::string(SCOUT_NET_MODULE_BUILD_DIR) + "/" + k_module_name);  // tests and benchmarks
#endif
  return out;
}

Result<const NetModuleApi*> load() {
  std::string tried;
  for (const auto& path : candidates()) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      tried += fmt::format(" {} (absent)", path);
      continue;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      tried += fmt::format(" {} ({})", path, why ? why : "?");
      continue;
    }
    auto entry = reinterpret_cast<const NetModuleApi* (*)()>(dlsym(h, "scout_net_module_api"));
    const NetModuleApi* api = entry ? entry() : nullptr;
    if (!api || api->abi != k_net_module_abi || api->api_size != sizeof(NetModuleApi)) {
      tried += fmt::format(" {} (from another scout build)", path);
      dlclose(h);
      continue;
    }
    return api;
  }
  return unavailable_error("cannot load scout's network module (Gloo)", fmt::format("tried:{}", tried),
                           "install scout completely (libscout_net.so beside scout or in lib/scout), or set "
                           "SCOUT_NET_MODULE to its path");
}

}  // namespace

Result<const NetModuleApi*> net_module() {
  static std::mutex mutex;
  static const NetModuleApi* api = nullptr;
  std::lock_guard lock(mutex);
  if (api) return api;
  auto loaded = load();
  if (loaded) api = *loaded;
  return loaded;
}

Result<std::shared_ptr<gloo::transport::Device>> make_tcp_device(const std::string& address) {
  auto net = net_module();
  if (!net) return net.error();
  Result<std::shared_ptr<gloo::transport::Device>> out = internal_error("the network module made no device");
  (*net)->make_tcp_device(address, out);
  return out;
}

Result<std::unique_ptr<GlooGroup>> GlooGroup::connect(KeyValueStore& store, const std::string& prefix, int rank,
                                                      int size, const std::shared_ptr<gloo::transport::Device>& device,
                                                      std::chrono::milliseconds timeout, TrafficCounters* counters) {
  auto net = net_module();
  if (!net) return net.error();
  Result<std::unique_ptr<GlooGroup>> out = internal_error("the network module formed no group");
  (*net)->connect(store, prefix, rank, size, device, timeout, counters, out);
  return out;
}

}  // namespace scout::transport
