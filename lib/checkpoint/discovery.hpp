// Finding checkpoints and their layouts for verify-ckpt: which directories
// under the roots a cron run was given are checkpoints (natural order), how
// long ago one was last written, which files of one are replicas (explicit
// files, its manifest, or a mesh with a naming pattern), and where a job's
// ledger lives by default.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lib/checkpoint/layout.hpp"
#include "lib/checkpoint/manifest.hpp"
#include "lib/common/error.hpp"

namespace scout::checkpoint {

// How the user said which files are replicas.
struct LayoutRequest {
  std::vector<std::string> replicas;  // explicit replica files (then `dir` is unused)
  std::string mesh;                   // "dp=4,tp=2"
  std::string pattern;                // per-rank file name with {rank}
  bool no_manifest = false;           // do not read DIR/scout-ckpt.json
};

// The layout of one checkpoint: the explicit replicas; else the manifest of
// `dir` when present (read into `manifest` to compare against) and no mesh is
// given; else the mesh with the naming pattern. No mesh and no manifest is a
// usage error; `dir` not a directory is bad input.
Result<CheckpointLayout> resolve_layout(const LayoutRequest& request, const std::string& dir,
                                        std::optional<Manifest>& manifest);

// True when `dir` holds a manifest or a checkpoint file.
bool looks_like_checkpoint(const std::string& dir);

// The checkpoints among `roots`: each root that is a checkpoint, else its
// non-hidden subdirectories that are, in natural order (by the last number in
// the name, then by name). Absolute, normalized paths. A root that is not a
// directory is bad input.
Result<std::vector<std::string>> discover_checkpoints(const std::vector<std::string>& roots);

// Seconds since the newest entry of `dir` was modified.
double seconds_since_modified(const std::string& dir);

// `ledger` when given; else $SCOUT_STATE_DIR (or /var/lib/scout)/verify-ckpt/<job>.ledger.json.
// No job, or a job with characters not allowed in a file name, is a usage error.
Result<std::string> default_ledger_path(const std::string& job, const std::string& ledger);

}  // namespace scout::checkpoint
