#include "lib/plugin/module_loader.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <vector>

#include "scout/config.hpp"

namespace scout {

namespace {

struct ModuleState {
  std::mutex mutex;
  void* handle = nullptr;
  std::string path;
};

ModuleState& state() {
  static ModuleState s;
  return s;
}

// $SCOUT_TORCH_MODULE, when it names a module's path (the old choices "1"/"2" name none: one module is built now).
const char* module_env() {
  const char* env = std::getenv("SCOUT_TORCH_MODULE");
  if (!env || !*env) return nullptr;
  const std::string v = env;
  if (v == "1" || v == "2" || v == "system" || v == "venv") return nullptr;
  return env;
}

std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* env = module_env()) {
    out.emplace_back(env);  // a path: only that file
    return out;
  }
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
                             "rebuild with a torch 2.x venv (scripts/install-deps.sh makes one; cmake "
                             "-DSCOUT_TORCH_PYTHON=/path/to/python names another)");
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
                               "install scout completely, or set SCOUT_TORCH_MODULE to the path of a module");
  }
  dlerror();
  void* sym = dlsym(s.handle, symbol);
  if (!sym)
    return unavailable_error(fmt::format("the LibTorch module {} lacks '{}'", s.path, symbol),
                             "it is from another scout version", "use the module built with this scout");
  return sym;
}

std::string torch_module_version() {
  auto sym = torch_module_symbol("scout_torch_module_version");
  if (!sym) return {};
  auto version = reinterpret_cast<const char* (*)()>(*sym)();
  return version ? version : "";
}

std::string torch_module_description() {
  auto sym = torch_module_symbol("scout_torch_module_version");
  if (!sym) return fmt::format("not loadable ({})", sym.error().what);
  auto version = reinterpret_cast<const char* (*)()>(*sym)();
  return fmt::format("{} (built for LibTorch {})", torch_module_path(), version ? version : "?");
}

std::string torch_module_candidate_description() {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (!SCOUT_WITH_TORCH) return "none (built without LibTorch)";
  if (s.handle) return fmt::format("{} (loaded)", s.path);
  std::string tried;
  for (const auto& path : candidates()) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      tried += fmt::format(" {}", path);
      continue;
    }
    if (!module_env()) return fmt::format("{} (built for LibTorch {})", path, SCOUT_TORCH_VERSION);
    return fmt::format("{} (its LibTorch version is read when a command loads it)", path);
  }
  return fmt::format("none found (tried:{})", tried);
}

std::string torch_module_path() {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.path;
}

}  // namespace scout
