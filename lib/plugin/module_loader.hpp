// On-demand loading of scout's LibTorch module (libscout_torch.so).
//
// Linking LibTorch costs every process ~0.3 s at start-up, so only this
// module links it and commands that need it load it here. Interfaces the
// module implements are declared in lib/ (e.g. lib/checkpoint/, lib/transport/)
// and reached through extern "C" factory functions looked up by name; no
// exception crosses that boundary.
#pragma once

#include <string>

#include "lib/common/error.hpp"

namespace scout {

// Address of `symbol` in the LibTorch module, loading the module on first use.
// Search order: $SCOUT_TORCH_MODULE (a file path), the directory of the running
// executable, then the install directory (lib/scout). Errors are `unavailable`
// and say how to point scout at a module (e.g. a site's CUDA-enabled build).
Result<void*> torch_module_symbol(const char* symbol);

// Path of the loaded module, or empty when none has been loaded.
std::string torch_module_path();

}  // namespace scout
