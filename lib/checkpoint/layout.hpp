// Which files of a checkpoint are replicas of the same logical shard.
//
// Three sources, in the order verify-ckpt tries them:
//  - explicit: `--replicas F1 F2 F3...`, one shard, replica i = the i-th file;
//  - a directory with --mesh: files named per rank (default: "rank" then the
//    rank number in the file name, e.g. model_rank3.safetensors; or
//    --pattern 'shard-{rank}.pt'); files whose names differ only in the rank
//    number form one role, and each role's ranks are grouped by the mesh's
//    replica peer groups (same coordinates but dp);
//  - a directory with a hash manifest (scout-ckpt.json, lib/checkpoint/manifest.hpp)
//    that records each file's rank and shard.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lib/checkpoint/replica_consensus.hpp"
#include "lib/common/error.hpp"

namespace scout::checkpoint {

// File extensions read as checkpoint files when no --pattern is given.
bool is_checkpoint_file_name(const std::string& name);

struct CheckpointLayout {
  std::string dir;     // checkpoint directory; empty for explicit replicas
  std::string source;  // "replicas", "pattern", "manifest" or "single_copy"
  std::string mesh;    // canonical mesh spec; empty when none
  std::vector<ReplicaSet> sets;
  std::size_t file_count() const;
};

// One shard "replicas" made of `files` in the given order (at least 2, no
// duplicates, each a regular file or a checkpoint directory: DCP, sharded
// safetensors): usage error otherwise.
Result<CheckpointLayout> layout_from_replicas(const std::vector<std::string>& files);

// A directory that is one checkpoint by itself (torch.distributed.checkpoint,
// sharded safetensors) given with no replica, mesh or manifest: one shard
// "single_copy" of that directory, read whole and checked on its own (zip
// CRC-32s of DCP chunks), compared with nothing.
CheckpointLayout layout_single_copy(const std::string& dir);

// Per-rank files of `dir` grouped into replica sets by `mesh_spec`
// ("dp=4,tp=2"); `pattern` (optional) names the files with a {rank}
// placeholder. Bad input, naming the directory, the role and the rank: a
// rank with no file (missing shard), a rank outside the mesh, two files for
// one rank and role, no checkpoint files at all.
Result<CheckpointLayout> layout_from_directory(const std::string& dir, const std::string& mesh_spec,
                                               const std::string& pattern = {});

}  // namespace scout::checkpoint
