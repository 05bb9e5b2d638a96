// The standard battery (man scout-replay, BATTERY): what each recipe computes,
// the shapes at each size, and its deterministic inputs and parameters from a
// seed. Pure: the LibTorch module (lib/torch_module/replay_battery.cpp) runs
// the computation, everything else (generation, sharding, hashing) is here so
// that every peer derives the same bytes without LibTorch.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/replay/inject.hpp"
#include "lib/replay/pack.hpp"

namespace scout::replay {

inline constexpr const char* k_battery_recipes[] = {"transformer_block", "adamw_step", "expert_gemm",
                                                    "param_allgather"};
inline constexpr const char* k_sizes[] = {"tiny", "small", "medium", "large"};

struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  double scale = 1.0;  // values uniform in [-scale, scale) (or [0, scale) when nonneg)
  bool nonneg = false;
};

struct RecipeSpec {
  std::string id;                    // e.g. "transformer_block"
  std::string size;                  // tiny | small | medium | large
  nlohmann::json config;             // dimensions the module needs (e.g. heads, rows per expert)
  std::vector<TensorSpec> inputs;    // broadcast from the source peer (an "rng" u64[2] is added by the runner)
  std::vector<TensorSpec> params;    // sharded over peers and gathered
  std::vector<Quantity> quantities;  // what is compared
};

// The recipe `id` at `size`. `expert_rows`: rows per expert for expert_gemm
// (empty: the size's default). Usage error for an unknown id or size.
Result<RecipeSpec> battery_recipe(const std::string& id, const std::string& size,
                                  const std::vector<std::int64_t>& expert_rows = {});

// Deterministic tensor from (seed, stream): the same bytes on every machine.
PackedTensor generate_tensor(const TensorSpec& spec, std::uint64_t seed, std::uint64_t stream);
// The recipe's inputs (as the source peer creates them), RNG state included
// ("rng": u64[2] = seed, offset), from `seed`.
std::vector<PackedTensor> generate_inputs(const RecipeSpec& recipe, std::uint64_t seed);

// Parameters as one flat byte string (each param's bytes in order) split into
// `peers` shards at 8-byte boundaries; shard `peer` of it, generated from `seed`.
std::vector<std::uint8_t> param_shard(const RecipeSpec& recipe, std::uint64_t seed, std::int64_t peer,
                                      std::int64_t peers);
// Shard `peer` of `tensors`' bytes taken as one flat string (the same split as param_shard).
std::vector<std::uint8_t> tensors_shard(const std::vector<PackedTensor>& tensors, std::int64_t peer,
                                        std::int64_t peers);
// Reassembles the gathered shards (in peer order) into the recipe's params;
// bad input when the total does not match the specs.
Result<std::vector<PackedTensor>> assemble_params(const RecipeSpec& recipe,
                                                  const std::vector<std::vector<std::uint8_t>>& shards);

// Reads a `scout catalog` file's representatives' per-expert row counts, at
// most `limit` of them in file order (bad input naming the file when it has none).
Result<std::vector<std::vector<std::int64_t>>> catalog_expert_rows(const std::string& path, std::size_t limit = 16);

}  // namespace scout::replay
