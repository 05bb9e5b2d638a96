#include "lib/checkpoint/layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "lib/topology/mesh.hpp"

namespace scout::checkpoint {

namespace fs = std::filesystem;

std::size_t CheckpointLayout::file_count() const {
  std::size_t n = 0;
  for (const auto& s : sets) n += s.files.size();
  return n;
}

bool is_checkpoint_file_name(const std::string& name) {
  for (const char* ext : {".safetensors", ".pt", ".pth", ".bin"})
    if (name.size() > std::strlen(ext) && name.compare(name.size() - std::strlen(ext), std::string::npos, ext) == 0)
      return true;
  return false;
}

Result<CheckpointLayout> layout_from_replicas(const std::vector<std::string>& files) {
  if (files.size() < 2)
    return usage_error(fmt::format("--replicas needs at least 2 files, got {}", files.size()), {},
                       "give every copy of the same state, e.g. --replicas a.safetensors b.safetensors c.safetensors");
  CheckpointLayout layout;
  layout.source = "replicas";
  ReplicaSet set;
  set.shard = "replicas";
  std::set<std::string> seen;
  for (const auto& f : files) {
    std::error_code ec;
    auto canonical = fs::weakly_canonical(f, ec).string();
    if (!seen.insert(canonical).second)
      return usage_error(fmt::format("--replicas names {} twice", f), {}, "a file compared with itself always agrees");
    if (!fs::is_regular_file(f, ec) && !fs::is_directory(f, ec))
      return input_error(fmt::format("{} is missing or not a regular file or checkpoint directory", f), {},
                         "check the path; a missing replica cannot be verified");
    set.files.push_back({f, -1});
  }
  layout.sets.push_back(std::move(set));
  return layout;
}

CheckpointLayout layout_single_copy(const std::string& dir) {
  CheckpointLayout layout;
  layout.dir = dir;
  layout.source = "single_copy";
  ReplicaSet set;
  set.shard = "single_copy";
  set.files.push_back({dir, -1});
  layout.sets.push_back(std::move(set));
  return layout;
}

namespace {

std::string regex_escape(const std::string& text) {
  static const std::string special = R"(\^$.|?*+()[]{}/)";
  std::string out;
  for (char c : text) {
    if (special.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string coords_label(const Mesh& mesh, std::int64_t rank) {
  Coords c = mesh.coords(rank);
  std::string out;
  for (Dim d : k_all_dims) {
    if (d == Dim::dp || mesh.size(d) == 1) continue;
    out += fmt::format("{}{}={}", out.empty() ? "" : ",", dim_name(d), c[static_cast<int>(d)]);
  }
  return out;
}

}  // namespace

Result<CheckpointLayout> layout_from_directory(const std::string& dir, const std::string& mesh_spec,
                                               const std::string& pattern) {
  auto mesh = Mesh::parse(mesh_spec);
  if (!mesh) return usage_error(fmt::format("--mesh: {}", mesh.error().what), mesh.error().why, mesh.error().hint);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return input_error(fmt::format("{} is not a directory", dir), {}, "give the checkpoint directory");

  std::regex re;
  if (pattern.empty()) {
    re = std::regex(R"(^(.*?rank[_-]?)([0-9]+)(.*)$)", std::regex::icase);
  } else {
    auto at = pattern.find("{rank}");
    if (at == std::string::npos || pattern.find("{rank}", at + 1) != std::string::npos ||
        pattern.find('/') != std::string::npos)
      return usage_error(fmt::format("--pattern '{}' must contain {{rank}} exactly once and no '/'", pattern), {},
                         "e.g. --pattern 'model_rank{rank}.safetensors'");
    re = std::regex("^(" + regex_escape(pattern.substr(0, at)) + ")([0-9]+)(" + regex_escape(pattern.substr(at + 6)) +
                    ")$");
  }

  // role -> rank -> file
  std::map<std::string, std::map<std::int64_t, std::string>> roles;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file()) continue;
    names.push_back(entry.path().filename().string());
  }
  if (ec) return input_error(fmt::format("cannot list {}", dir), ec.message());
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    if (pattern.empty() && !is_checkpoint_file_name(name)) continue;
    std::smatch m;
    if (!std::regex_match(name, m, re)) continue;
    const std::string digits = m[2].str();
    if (digits.size() > 9) return input_error(fmt::format("{}/{}: rank number {} is too large", dir, name, digits));
    std::int64_t rank = std::stoll(digits);
    std::string role = m[1].str() + "{rank}" + m[3].str();
    if (rank >= mesh->world_size())
      return input_error(fmt::format("{}/{} is for rank {} but the mesh {} has {} ranks", dir, name, rank, mesh->spec(),
                                     mesh->world_size()),
                         {}, "give the mesh the job was saved with (--mesh)");
    auto [it, fresh] = roles[role].try_emplace(rank, (fs::path(dir) / name).string());
    if (!fresh)
      return input_error(fmt::format("{}: rank {} has two files for {}: {} and {}", dir, rank, role, it->second, name),
                         {}, "remove the stray copy or give --pattern");
  }
  if (roles.empty())
    return input_error(fmt::format("{}: no per-rank checkpoint files found", dir),
                       pattern.empty() ? "expected names with 'rank<N>' ending in .safetensors, .pt, .pth or .bin"
                                       : "no file matches --pattern",
                       "give --pattern 'NAME{rank}.EXT' or write a manifest with 'scout verify-ckpt manifest write'");

  CheckpointLayout layout;
  layout.dir = dir;
  layout.source = "pattern";
  layout.mesh = mesh->spec();
  for (const auto& [role, files] : roles) {
    for (std::int64_t r = 0; r < mesh->world_size(); ++r)
      if (!files.count(r))
        return input_error(fmt::format("{}: missing shard: rank {} has no {} ({} of {} ranks present)", dir, r, role,
                                       files.size(), mesh->world_size()),
                           "every rank of the mesh must have saved its file",
                           "the checkpoint is incomplete; wait for the save to finish or use an older checkpoint");
    std::vector<std::vector<std::int64_t>> groups;
    if (mesh->peer_kind() == PeerKind::replica) {
      groups = mesh->peer_groups();
    } else {
      for (std::int64_t r = 0; r < mesh->world_size(); ++r)
        groups.push_back({r});  // no replicas: each shard is one copy
    }
    for (const auto& g : groups) {
      ReplicaSet set;
      std::string label = coords_label(*mesh, g.front());
      set.shard = label.empty() ? role : fmt::format("{} {}", role, label);
      if (mesh->peer_kind() != PeerKind::replica) set.shard = fmt::format("{} rank {}", role, g.front());
      for (auto r : g) set.files.push_back({files.at(r), r});
      layout.sets.push_back(std::move(set));
    }
  }
  return layout;
}

}  // namespace scout::checkpoint
