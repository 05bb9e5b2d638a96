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
// The module (libscout_torch.so) is built against the torch 2.x wheel of the
// project venv; it is looked for in the directory of the running executable,
// then the install directory (lib/scout). $SCOUT_TORCH_MODULE, a path, names
// another (e.g. a site's build). Errors are `unavailable` and say how to point
// scout at a module.
Result<void*> torch_module_symbol(const char* symbol);

// "<path> (built for LibTorch <version>)" of the module, loading it, or
// "not loadable (<why>)".
std::string torch_module_description();

// What torch_module_symbol would load, without loading it (for `scout
// --version`: loading LibTorch costs ~0.4 s): "<path> (built for LibTorch
// <version>)" for a module this build made (its version is compiled in), the
// path alone for one $SCOUT_TORCH_MODULE names, "none found (tried: ...)".
std::string torch_module_candidate_description();

// The LibTorch version the module was built for ("2.15.0"...),
// loading it; empty when it cannot be loaded.
std::string torch_module_version();

// Path of the loaded module, or empty when none has been loaded.
std::string torch_module_path();

}  // namespace scout
