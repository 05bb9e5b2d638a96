#include "lib/checkpoint/replica_consensus.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <string_view>

namespace scout::checkpoint {

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string replica_name(const ReplicaSet& set, std::size_t i) {
  const auto& f = set.files[i];
  return f.rank >= 0 ? fmt::format("{} (replica {}, rank {})", f.path, i, f.rank)
                     : fmt::format("{} (replica {})", f.path, i);
}

// A DCP chunk is named "tensor@[offsets]" unless it is the whole tensor.
std::string_view tensor_of_chunk(std::string_view name) {
  const auto at = name.rfind("@[");
  return at == std::string_view::npos ? name : name.substr(0, at);
}

// When `name` (in replica `here`) is missing from `others` (replica `there`)
// because the same tensor is cut into other chunks there: the error that says so.
std::optional<Error> sharded_differently(const std::string& name, const std::vector<TensorDigest>& others,
                                         const std::string& here, const std::string& there) {
  const auto tensor = tensor_of_chunk(name);
  for (const auto& o : others)
    if (o.name != name && tensor_of_chunk(o.name) == tensor)
      return input_error(
          fmt::format("replicas are sharded differently: tensor '{}' is saved as '{}' in {} but as '{}' in {}", tensor,
                      name, here, o.name, there),
          "DCP chunks are compared one by one, so copies must be cut the same way",
          "compare copies saved with the same world size and parallelism (e.g. the HSDP replica groups of one save)");
  return std::nullopt;
}

}  // namespace

Result<ShardVerdict> compare_replicas(const ReplicaSet& set, const std::vector<FileDigest>& digests) {
  ShardVerdict out;
  out.shard = set.shard;
  if (digests.size() != set.files.size() || digests.empty())
    return internal_error(
        fmt::format("shard {}: {} digests for {} files", set.shard, digests.size(), set.files.size()));
  const std::size_t n = digests.size();
  // Every replica must hold exactly the same tensor names: walk the sorted lists together.
  const auto& ref = digests[0].tensors;
  for (std::size_t i = 1; i < n; ++i) {
    const auto& other = digests[i].tensors;
    std::size_t a = 0, b = 0;
    while (a < ref.size() || b < other.size()) {
      if (b >= other.size() || (a < ref.size() && ref[a].name < other[b].name)) {
        if (auto e = sharded_differently(ref[a].name, other, replica_name(set, 0), replica_name(set, i))) return *e;
        return input_error(
            fmt::format("shard {}: tensor '{}' is in {} but missing from {}", set.shard, ref[a].name,
                        replica_name(set, 0), replica_name(set, i)),
            "replicas of one shard must hold the same tensors",
            "the checkpoint is incomplete or the files are not replicas of each other; check --mesh / the layout");
      }
      if (a >= ref.size() || other[b].name < ref[a].name) {
        if (auto e = sharded_differently(other[b].name, ref, replica_name(set, i), replica_name(set, 0))) return *e;
        return input_error(
            fmt::format("shard {}: tensor '{}' is in {} but missing from {}", set.shard, other[b].name,
                        replica_name(set, i), replica_name(set, 0)),
            "replicas of one shard must hold the same tensors",
            "the checkpoint is incomplete or the files are not replicas of each other; check --mesh / the layout");
      }
      if (ref[a].dtype != other[b].dtype)
        return input_error(fmt::format("shard {}: tensor '{}' is {} in {} but {} in {}", set.shard, ref[a].name,
                                       dtype_name(ref[a].dtype), replica_name(set, 0), dtype_name(other[b].dtype),
                                       replica_name(set, i)),
                           "replicas disagree on a dtype, so their bytes cannot be compared",
                           "re-save the checkpoint with one dtype per tensor");
      if (ref[a].shape != other[b].shape)
        return input_error(fmt::format("shard {}: tensor '{}' has shape {} in {} but {} in {}", set.shard, ref[a].name,
                                       shape_text(ref[a].shape), replica_name(set, 0), shape_text(other[b].shape),
                                       replica_name(set, i)),
                           "replicas disagree on a shape",
                           "the files are not replicas of the same shard; check --mesh / the layout");
      ++a;
      ++b;
    }
  }
  out.tensors = ref.size();
  std::vector<std::uint64_t> keys(n);
  for (std::size_t t = 0; t < ref.size(); ++t) {
    out.bytes += ref[t].bytes;
    bool same = true;
    for (std::size_t i = 0; i < n; ++i) {
      keys[i] = digests[i].tensors[t].hash;
      same = same && keys[i] == keys[0];
    }
    if (same) continue;
    out.disagreements.push_back({ref[t].name, keys, c3_exact(keys)});
  }
  return out;
}

}  // namespace scout::checkpoint
