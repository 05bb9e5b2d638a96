#include "lib/checkpoint/manifest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "lib/checkpoint/durable_file.hpp"
#include "lib/common/json_input.hpp"
#include "lib/common/schema.hpp"
#include "lib/hash/tensor_hash.hpp"
#include "lib/report/verdict.hpp"

namespace scout::checkpoint {

namespace fs = std::filesystem;

nlohmann::ordered_json manifest_to_json(const CheckpointLayout& layout, const std::vector<FileDigest>& digests) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  std::size_t k = 0;
  for (const auto& set : layout.sets) {
    for (std::size_t i = 0; i < set.files.size(); ++i, ++k) {
      const auto& d = digests.at(k);
      nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
      for (const auto& t : d.tensors)
        tensors.push_back({{"name", t.name},
                           {"dtype", dtype_name(t.dtype)},
                           {"shape", t.shape},
                           {"bytes", t.bytes},
                           {"hash", hash_hex(t.hash)}});
      files.push_back({{"path", fs::path(set.files[i].path).filename().string()},
                       {"rank", set.files[i].rank >= 0 ? nlohmann::ordered_json(set.files[i].rank)
                                                       : nlohmann::ordered_json(nullptr)},
                       {"shard", set.shard},
                       {"replica", i},
                       {"format", file_format_name(d.format)},
                       {"size", d.size},
                       {"tensors", std::move(tensors)}});
    }
  }
  return {{"schema", k_manifest_schema},
          {"schema_version", k_manifest_schema_version},
          {"hash_spec_version", hash::k_hash_spec_version},
          {"created_at", now_rfc3339()},
          {"mesh", layout.mesh.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(layout.mesh)},
          {"files", std::move(files)}};
}

namespace {

Error bad_manifest(const std::string& path, const std::string& what) {
  return input_error(fmt::format("{}: {}", path, what), "the hash manifest is malformed",
                     "rewrite it with 'scout verify-ckpt manifest write' from a known-good copy, or delete it");
}

}  // namespace

Result<Manifest> read_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / k_manifest_file_name).string();
  auto text = read_small_file(path, std::size_t{256} << 20);
  if (!text) return text.error();
  nlohmann::json j = parse_json_input(*text);
  if (j.is_discarded() || !j.is_object()) return bad_manifest(path, "not a JSON object");
  if (auto st =
          check_schema(j, k_manifest_schema, 1, path, "use the scout version that wrote it, or rewrite the manifest");
      !st)
    return st.error();
  if (!j.contains("hash_spec_version") || j["hash_spec_version"] != hash::k_hash_spec_version)
    return input_error(
        fmt::format("{}: hash_spec_version differs from this scout's ({})", path, hash::k_hash_spec_version),
        "hashes of another specification cannot be compared", "rewrite the manifest with this scout");
  Manifest m;
  m.dir = dir;
  auto created = optional_string(j, "created_at");
  if (!created) return bad_manifest(path, "created_at is not a string");
  m.created_at = *created;
  if (j.contains("mesh") && j["mesh"].is_string()) m.mesh = j["mesh"].get<std::string>();
  if (!j.contains("files") || !j["files"].is_array() || j["files"].empty())
    return bad_manifest(path, "files must be a non-empty array");
  for (std::size_t i = 0; i < j["files"].size(); ++i) {
    const auto& f = j["files"][i];
    const std::string where = fmt::format("files[{}]", i);
    if (!f.is_object()) return bad_manifest(path, where + " is not an object");
    ManifestFile mf;
    if (!f.contains("path") || !f["path"].is_string()) return bad_manifest(path, where + ".path missing");
    mf.path = f["path"].get<std::string>();
    if (mf.path.empty() || mf.path.find('/') != std::string::npos || mf.path == "." || mf.path == "..")
      return bad_manifest(path, where + ".path must be a file name inside the directory");
    if (f.contains("rank") && f["rank"].is_number_integer()) mf.rank = f["rank"].get<std::int64_t>();
    if (!f.contains("shard") || !f["shard"].is_string()) return bad_manifest(path, where + ".shard missing");
    mf.shard = f["shard"].get<std::string>();
    if (!f.contains("replica") || !f["replica"].is_number_unsigned())
      return bad_manifest(path, where + ".replica missing");
    mf.replica = f["replica"].get<std::size_t>();
    mf.digest.path = (fs::path(dir) / mf.path).string();
    if (f.contains("size") && !f["size"].is_number_unsigned())
      return bad_manifest(path, where + ".size is not a byte count");
    mf.digest.size = f.contains("size") ? f["size"].get<std::uint64_t>() : 0;
    if (!f.contains("tensors") || !f["tensors"].is_array()) return bad_manifest(path, where + ".tensors missing");
    for (std::size_t t = 0; t < f["tensors"].size(); ++t) {
      const auto& e = f["tensors"][t];
      const std::string tw = fmt::format("{}.tensors[{}]", where, t);
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string())
        return bad_manifest(path, tw + ".name missing");
      TensorDigest d;
      d.name = e["name"].get<std::string>();
      auto dt =
          e.contains("dtype") && e["dtype"].is_string() ? parse_dtype(e["dtype"].get<std::string>()) : std::nullopt;
      if (!dt) return bad_manifest(path, tw + ".dtype missing or unknown");
      d.dtype = *dt;
      if (!e.contains("shape") || !e["shape"].is_array()) return bad_manifest(path, tw + ".shape missing");
      for (const auto& s : e["shape"]) {
        if (!s.is_number_unsigned()) return bad_manifest(path, tw + ".shape has a non-integer size");
        d.shape.push_back(s.get<std::int64_t>());
      }
      if (!e.contains("bytes") || !e["bytes"].is_number_unsigned()) return bad_manifest(path, tw + ".bytes missing");
      d.bytes = e["bytes"].get<std::uint64_t>();
      auto h =
          e.contains("hash") && e["hash"].is_string() ? parse_hash_hex(e["hash"].get<std::string>()) : std::nullopt;
      if (!h) return bad_manifest(path, tw + ".hash must be \"0x\" and 16 hex digits");
      d.hash = *h;
      mf.digest.tensors.push_back(std::move(d));
    }
    std::sort(mf.digest.tensors.begin(), mf.digest.tensors.end(),
              [](const TensorDigest& a, const TensorDigest& b) { return a.name < b.name; });
    m.files.push_back(std::move(mf));
  }
  return m;
}

CheckpointLayout layout_from_manifest(const Manifest& manifest) {
  CheckpointLayout layout;
  layout.dir = manifest.dir;
  layout.source = "manifest";
  layout.mesh = manifest.mesh;
  std::map<std::string, std::vector<const ManifestFile*>> by_shard;
  std::vector<std::string> order;
  for (const auto& f : manifest.files) {
    if (!by_shard.count(f.shard)) order.push_back(f.shard);
    by_shard[f.shard].push_back(&f);
  }
  for (const auto& shard : order) {
    auto files = by_shard[shard];
    std::stable_sort(files.begin(), files.end(),
                     [](const ManifestFile* a, const ManifestFile* b) { return a->replica < b->replica; });
    ReplicaSet set;
    set.shard = shard;
    for (const auto* f : files) set.files.push_back({f->digest.path, f->rank});
    layout.sets.push_back(std::move(set));
  }
  return layout;
}

Result<std::vector<ManifestMismatch>> compare_with_manifest(const Manifest& manifest,
                                                            const std::vector<FileDigest>& digests) {
  std::map<std::string, const FileDigest*> fresh;
  for (const auto& d : digests) fresh[d.path] = &d;
  std::vector<ManifestMismatch> out;
  for (const auto& f : manifest.files) {
    auto it = fresh.find(f.digest.path);
    if (it == fresh.end())
      return input_error(
          fmt::format("{}: missing shard: {} is listed in the manifest but was not read", manifest.dir, f.path));
    const auto& want = f.digest.tensors;
    const auto& got = it->second->tensors;
    std::size_t a = 0, b = 0;
    while (a < want.size() || b < got.size()) {
      if (b >= got.size() || (a < want.size() && want[a].name < got[b].name))
        return input_error(
            fmt::format("{}: tensor '{}' is in the manifest but missing from the file", f.digest.path, want[a].name),
            {}, "the file was replaced or truncated; restore it from a replica");
      if (a >= want.size() || got[b].name < want[a].name)
        return input_error(
            fmt::format("{}: tensor '{}' is in the file but not in the manifest", f.digest.path, got[b].name), {},
            "the file was replaced after the manifest was written; rewrite the manifest if that was intended");
      if (want[a].dtype != got[b].dtype || want[a].shape != got[b].shape)
        return input_error(
            fmt::format("{}: tensor '{}' changed dtype or shape since the manifest was written ({} -> {})",
                        f.digest.path, want[a].name, dtype_name(want[a].dtype), dtype_name(got[b].dtype)),
            {}, "restore the file from a replica");
      if (want[a].hash != got[b].hash) out.push_back({f.digest.path, f.rank, want[a].name, want[a].hash, got[b].hash});
      ++a;
      ++b;
    }
  }
  return out;
}

}  // namespace scout::checkpoint
