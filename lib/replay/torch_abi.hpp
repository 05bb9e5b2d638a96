// The C ABI of the replay battery in the LibTorch module
// (lib/torch_module/replay_battery.cpp). Reach it with
// torch_module_symbol(k_replay_*_symbol). No exception crosses it; every
// function returns 0 on success, else 1 with a reason in `message`.
// Buffers the module returns are freed with scout_replay_free.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

struct ScoutReplayBuffer {
  std::uint8_t* data;
  std::size_t size;
};

// Sets the deterministic settings (deterministic algorithms on, `threads`
// intra-op threads) and writes the environment part of the replay contract as
// a JSON object (torch version, device model, deterministic flags, threads)
// into *json.
int scout_replay_environment(int threads, const char* device, ScoutReplayBuffer* json, char* message,
                             std::size_t message_size);

// Runs one recipe. `request_json`: {"recipe": base id, "config": {...}, "repeat": R,
// "slow_factor": F, "device": "cpu"|"cuda:N"}. `inputs` and `params` are tensor
// packs (lib/replay/pack.hpp) in the recipe's order, inputs ending with "rng".
// *results: a pack of the result tensors, each named "<quantity>/<index>";
// *info_json: {"forward_s", "backward_s", "repeats_agree"}.
int scout_replay_run(const char* request_json, const std::uint8_t* inputs, std::size_t inputs_size,
                     const std::uint8_t* params, std::size_t params_size, ScoutReplayBuffer* results,
                     ScoutReplayBuffer* info_json, char* message, std::size_t message_size);

void scout_replay_free(ScoutReplayBuffer* buffer);
}

namespace scout::replay {
inline constexpr const char* k_replay_environment_symbol = "scout_replay_environment";
inline constexpr const char* k_replay_run_symbol = "scout_replay_run";
inline constexpr const char* k_replay_free_symbol = "scout_replay_free";
using ReplayEnvironmentFn = int (*)(int, const char*, ScoutReplayBuffer*, char*, std::size_t);
using ReplayRunFn = int (*)(const char*, const std::uint8_t*, std::size_t, const std::uint8_t*, std::size_t,
                            ScoutReplayBuffer*, ScoutReplayBuffer*, char*, std::size_t);
using ReplayFreeFn = void (*)(ScoutReplayBuffer*);
}  // namespace scout::replay
