// Recipes a trainer exported (scout_publisher.replay.RecipeExporter): one
// directory per sampled layer holding module.pt (TorchScript), input.pack
// (the captured input "x" and the RNG state "rng", lib/replay/pack.hpp),
// params.pack (the layer's parameters) and manifest.json
// (scout.replay.recipe 1.x: layer, step, torch, inputs, params, hashes).
// Reading and checking them is pure; the LibTorch module runs them
// (recipe id "exported").
#pragma once

#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/replay/runner.hpp"

namespace scout::replay {

inline constexpr const char* k_recipe_schema = "scout.replay.recipe";
inline constexpr const char* k_exported_recipe_id = "exported";

// The recipe directories under `dir` that load_exported_recipes reads (the
// same selection: `dir` itself when it holds manifest.json, else its
// subdirectories that do, in name order, the newest `limit`); empty when `dir`
// is absent or holds no recipe. Bad input when it cannot be listed.
Result<std::vector<std::string>> find_recipe_dirs(const std::string& dir, std::size_t limit = 64);

// The recipes under `dir`: `dir` itself when it holds manifest.json, else its
// subdirectories that do, in name order; at most `limit`, the newest (last)
// ones. Bad input naming the file for a damaged recipe (a manifest that
// disagrees with its packs, a missing file); bad input when none is found.
Result<std::vector<RecipeInstance>> load_exported_recipes(const std::string& dir, std::size_t limit = 64);

}  // namespace scout::replay
