// The network module's one exported symbol (lib/transport/net_module.hpp).
#include "lib/transport/net_module.hpp"
#include "lib/transport/net_module_impl.hpp"

extern "C" __attribute__((visibility("default"))) const scout::transport::NetModuleApi* scout_net_module_api() {
  using namespace scout::transport;
  static const NetModuleApi api = [] {
    NetModuleApi a;
    a.abi = k_net_module_abi;
    a.api_size = sizeof(NetModuleApi);
    a.make_tcp_device = &net_impl::make_tcp_device;
    a.connect = &net_impl::connect;
    a.open_file_store = &net_impl::open_file_store;
    return a;
  }();
  return &api;
}
