// Checkpoints that are directories, read as one unit of tensor digests:
//  - torch.distributed.checkpoint (DCP; FSDP2, TorchTitan, Megatron torch_dist):
//    `.metadata` (a pickle of torch.distributed.checkpoint.metadata.Metadata,
//    read by the restricted pickle reader) indexing chunks in `__R_S.distcp`
//    files, each chunk a torch.save archive at (offset, length). A tensor
//    saved in one chunk is named by its fully qualified name; a sharded one
//    gives one digest per chunk, "fqn@[o0,o1]" (the chunk's offsets). Non-tensor
//    items (BytesStorageMetadata) are torch.save payloads: their values are
//    digested as leaves under their fqn.
//  - Hugging Face sharded safetensors (or .bin): `*.index.json` with a
//    "weight_map" from tensor name to shard file; every shard read and checked
//    against the map.
// DCP keeps one copy of replicated state, so replicas are compared only across
// directories (e.g. HSDP replica groups saving to separate directories).
#pragma once

#include <optional>
#include <string>

#include "lib/checkpoint/checkpoint_file.hpp"
#include "lib/pickle/pickle.hpp"

namespace scout::checkpoint {

// Name of DCP's metadata file.
inline constexpr const char* k_dcp_metadata_file = ".metadata";

enum class DirectoryFormat { dcp, hf_index };

// The format of directory `dir` (DCP when it holds .metadata, HF when it holds
// exactly one *.index.json), or nullopt.
std::optional<DirectoryFormat> detect_directory_format(const std::string& dir);

// The allow-list of globals a DCP .metadata may name.
const pickle::Policy& dcp_pickle_policy();

// One chunk of a DCP checkpoint as its metadata describes it.
struct DcpItem {
  std::string name;  // fqn, or fqn@[offsets] for a chunk of a sharded tensor
  std::string fqn;
  bool tensor = true;  // false: a bytes item (a torch.save payload of a non-tensor value)
  DType dtype = DType::u8;
  std::vector<std::int64_t> sizes;  // chunk sizes
  std::string file;                 // relative path of the .distcp file
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

// Parses DCP metadata bytes; `label` names the file in errors (bad input).
Result<std::vector<DcpItem>> parse_dcp_metadata(std::span<const std::byte> bytes, const std::string& label);

// Parses a Hugging Face index JSON text into (tensor name, shard file) pairs;
// bad input naming `label` for invalid JSON, a missing weight_map, or shard
// names that leave the directory.
Result<std::vector<std::pair<std::string, std::string>>> parse_hf_index(const std::string& text,
                                                                        const std::string& label);

// Digests every tensor (and value) of the checkpoint directory `dir`, sorted by
// name, each with the file that holds it (TensorDigest::source).
Result<FileDigest> digest_directory(const std::string& dir, const ProgressFn& progress = {}, unsigned threads = 0);

}  // namespace scout::checkpoint
