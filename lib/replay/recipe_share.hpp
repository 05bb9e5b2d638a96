// Exported recipes across nodes (`scout replay --recipe DIR --nodes N`): the
// trainer may have exported them on one node only (rank 0's local disk). Before
// the replay, one scout per node meets the others over the run's store
// (session::gather_once, member = node index) and
//   round 0: every node announces whether DIR holds recipes on it, the hash of
//            each recipe file and of all of them (the digest), or why its copy
//            is damaged;
//   the source node is the lowest index that holds recipes; every other copy
//   must equal the source's (else bad input naming the node and the files);
//   rounds 1..k, only when some node has none: the source sends its files (an
//            SRP1 pack of U8 tensors "<recipe>/<file>") in pieces; a receiver
//            checks names, sizes and the digest, writes them into a private
//            temporary directory (0700, removed by its owner) and loads them
//            with load_exported_recipes: the checks of a local directory.
// Every node decides round 0 alike, so all run or all stop with one error.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/replay/pack.hpp"
#include "lib/replay/runner.hpp"
#include "lib/transport/store.hpp"

namespace scout::replay {

// The most bytes of recipe files one source sends (the files of every recipe
// it replays, as one pack); above it the directory must exist on every node.
inline constexpr std::uint64_t k_max_shared_recipe_bytes = std::uint64_t{1} << 30;
// One piece of them per all-gather (below the session's 64 MiB per member).
inline constexpr std::uint64_t k_shared_recipe_piece_bytes = std::uint64_t{32} << 20;

// The files a recipe directory may hold, in the order they travel.
inline constexpr const char* k_recipe_files[] = {"manifest.json", "module.pt", "input.pack", "params.pack"};

// A directory created 0700 under $TMPDIR (else /tmp), removed with everything
// in it when the object is destroyed. A forked child that _exits removes nothing.
class PrivateDir {
 public:
  // Unavailable when it cannot be created.
  static Result<std::unique_ptr<PrivateDir>> create(const std::string& prefix);
  ~PrivateDir();
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  const std::string& path() const { return m_path; }

 private:
  explicit PrivateDir(std::string path) : m_path(std::move(path)) {}
  std::string m_path;
};

// The files of the recipe directories `dirs` (find_recipe_dirs), each a U8
// tensor named "<recipe>/<file>" (recipe: the directory's name), in order.
// Bad input naming the file when one cannot be read or is above the limit.
Result<std::vector<PackedTensor>> read_recipe_files(const std::vector<std::string>& dirs);

// The hash of the files' names and bytes, in order (lib/hash's tensor hash).
std::uint64_t recipe_files_digest(const std::vector<PackedTensor>& files);

// Checks files that came from another node (names "<recipe>/<file>" with a
// plain recipe name and a file of k_recipe_files, U8 and one-dimensional, no
// repeats, at most 64 recipes, k_max_shared_recipe_bytes in all) and writes
// them under `dir` (one subdirectory per recipe). Bad input naming what is wrong.
Status write_recipe_files(const std::string& dir, const std::vector<PackedTensor>& files);

struct ShareOptions {
  std::string recipe_dir;  // --recipe: may be absent or empty on this node
  std::int64_t node = 0;   // --node-index
  std::int64_t nodes = 1;  // --nodes
  std::string key_namespace;
  std::chrono::milliseconds timeout{30000};  // each all-gather
  std::string listen_address = "127.0.0.1";
};

struct SharedRecipes {
  std::vector<RecipeInstance> recipes;             // every node's are equal
  std::int64_t source_node = 0;                    // the lowest node holding recipes
  bool received = false;                           // this node had none and took the source's
  std::uint64_t digest = 0;                        // of the source's files
  std::uint64_t bytes = 0;                         // of the source's files
  std::unique_ptr<PrivateDir> dir;                 // where received files lie (null when local); holds module paths
  nlohmann::json nodes = nlohmann::json::array();  // per node: {"node", "has_recipes", "digest"}
};

// Runs the exchange above with every node. Bad input when no node holds
// recipes, when a node's copy is damaged or differs from the source's, or
// when what arrived fails the checks; unavailable when a node never took part.
Result<SharedRecipes> share_recipes(transport::KeyValueStore& store, const ShareOptions& options);

}  // namespace scout::replay
