#include "lib/plugin/module_loader.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <mutex>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "scout/config.hpp"

namespace scout {

namespace {

struct ModuleState {
  std::mutex mutex;
  void* handle = nullptr;
  std::string path;
  std::string failure;
};

ModuleState& state() {
  static ModuleState s;
  return s;
}

std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("SCOUT_TORCH_MODULE"); env && *env) out.emplace_back(env);
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / SCOUT_TORCH_MODULE_NAME).string());
    out.push_back((exe.parent_path().parent_path() / "lib" / "scout" / SCOUT_TORCH_MODULE_NAME).string());
  }
  out.push_back(std::string(SCOUT_INSTALL_LIBDIR) + "/" + SCOUT_TORCH_MODULE_NAME);
  return out;
}

}  // namespace

Result<void*> torch_module_symbol(const char* symbol) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (!SCOUT_WITH_TORCH)
    return unavailable_error("this scout was built without LibTorch", "the feature needs the LibTorch module",
                             "rebuild with libtorch-dev installed (cmake -DSCOUT_WITH_TORCH=ON)");
  if (!s.handle) {
    std::string tried;
    for (const auto& path : candidates()) {
      if (!std::filesystem::exists(path)) {
        tried += fmt::format(" {} (absent)", path);
        continue;
      }
      void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h) {
        s.handle = h;
        s.path = path;
        break;
      }
      tried += fmt::format(" {} ({})", path, dlerror());
    }
    if (!s.handle)
      return unavailable_error("cannot load scout's LibTorch module", fmt::format("tried:{}", tried),
                               "install scout completely, or set SCOUT_TORCH_MODULE to the path of libscout_torch.so");
  }
  dlerror();
  void* sym = dlsym(s.handle, symbol);
  if (!sym)
    return unavailable_error(fmt::format("the LibTorch module {} lacks '{}'", s.path, symbol), "it is from another scout version",
                             "use the module built with this scout");
  return sym;
}

std::string torch_module_path() {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.path;
}

}  // namespace scout
