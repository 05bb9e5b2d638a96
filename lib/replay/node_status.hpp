// What one node announces in round 0 of the recipe exchange across nodes
// (recipe_share.hpp): whether DIR holds recipes there, the hash of each file
// and of all of them, or why its copy is damaged. Its JSON form travels
// between nodes, so decoding validates every field (fuzzed:
// fuzz/targets/replay_node_status.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace scout::replay {

struct NodeStatus {
  bool has = false;
  std::string error;  // its copy is damaged: why
  std::uint64_t digest = 0;
  std::uint64_t bytes = 0;                   // its files as one pack
  std::map<std::string, std::string> files;  // "<recipe>/<file>" -> hash
};

std::vector<std::uint8_t> encode_status(const NodeStatus& status);
// nullopt for anything but what encode_status writes (fields missing, of
// another type, a digest that is not 16 hex digits).
std::optional<NodeStatus> decode_status(const std::vector<std::uint8_t>& bytes);

}  // namespace scout::replay
