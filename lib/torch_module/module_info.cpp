// The LibTorch module's identity, so `scout --version --verbose` style checks
// and tests can confirm the module loads and which LibTorch it carries.
#include <torch/version.h>

extern "C" const char* scout_torch_module_version() {
  return TORCH_VERSION;
}
