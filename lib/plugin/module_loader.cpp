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
  std::string failure;
  int preferred_major = 0;  // prefer_torch_module(): 1 or 2, 0 for none
};

ModuleState& state() {
  static ModuleState s;
  return s;
}

// The module file names to look for, in order of preference. SCOUT_TORCH_MODULE
// "1" (or "system") names the module built against the system LibTorch
// (Debian's 1.13), "2" (or "venv") the one built against the torch 2.x wheel;
// any other value is a path. Unset: the system one, then the 2.x one.
std::vector<std::string> module_names(const char* env) {
  std::string v = env ? env : "";
  if (v == "1" || v == "system") return {SCOUT_TORCH_MODULE_NAME};
  if (v == "2" || v == "venv") return {SCOUT_TORCH2_MODULE_NAME};
  return {SCOUT_TORCH_MODULE_NAME, SCOUT_TORCH2_MODULE_NAME};
}

bool is_choice(const char* env) {
  std::string v = env ? env : "";
  return v == "1" || v == "2" || v == "system" || v == "venv";
}

std::vector<std::string> candidates(int preferred_major) {
  std::vector<std::string> out;
  const char* env = std::getenv("SCOUT_TORCH_MODULE");
  if ((!env || !*env) && preferred_major == 1) env = "1";
  if ((!env || !*env) && preferred_major == 2) env = "2";
  if (env && *env && !is_choice(env)) {
    out.emplace_back(env);  // a path: only that file
    return out;
  }
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  for (const auto& name : module_names(env)) {
    if (!ec) {
      out.push_back((exe.parent_path() / name).string());
      out.push_back((exe.parent_path().parent_path() / "lib" / "scout" / name).string());
    }
    out.push_back(std::string(SCOUT_INSTALL_LIBDIR) + "/" + name);
  }
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
    for (const auto& path : candidates(s.preferred_major)) {
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
                               "install scout completely, or set SCOUT_TORCH_MODULE to 1 (system LibTorch), 2 (torch "
                               "2.x) or the path of a module");
  }
  dlerror();
  void* sym = dlsym(s.handle, symbol);
  if (!sym)
    return unavailable_error(fmt::format("the LibTorch module {} lacks '{}'", s.path, symbol),
                             "it is from another scout version", "use the module built with this scout");
  return sym;
}

bool prefer_torch_module(int major) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const char* env = std::getenv("SCOUT_TORCH_MODULE");
  if (s.handle || (env && *env) || (major != 1 && major != 2)) return false;
  s.preferred_major = major;
  return true;
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
  for (const auto& path : candidates(s.preferred_major)) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      tried += fmt::format(" {}", path);
      continue;
    }
    const std::string name = std::filesystem::path(path).filename().string();
    const char* env = std::getenv("SCOUT_TORCH_MODULE");
    const bool ours = !(env && *env && !is_choice(env));  // not a path given by the user
    if (ours && name == SCOUT_TORCH_MODULE_NAME)
      return fmt::format("{} (built for LibTorch {})", path, SCOUT_TORCH_VERSION);
    if (ours && name == SCOUT_TORCH2_MODULE_NAME && SCOUT_WITH_TORCH2)
      return fmt::format("{} (built for LibTorch {})", path, SCOUT_TORCH2_VERSION);
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
