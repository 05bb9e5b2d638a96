#include "lib/checkpoint/discovery.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "lib/checkpoint/checkpoint_dir.hpp"

namespace scout::checkpoint {

namespace fs = std::filesystem;

Result<CheckpointLayout> resolve_layout(const LayoutRequest& o, const std::string& dir,
                                        std::optional<Manifest>& manifest) {
  if (!o.replicas.empty()) return layout_from_replicas(o.replicas);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return input_error(fmt::format("{} is not a directory", dir), {},
                       "give a checkpoint directory or --replicas FILE...");
  const bool has_manifest = fs::exists(fs::path(dir) / k_manifest_file_name, ec);
  if (has_manifest && !o.no_manifest) {
    auto m = read_manifest(dir);
    if (!m) return m.error();
    manifest = std::move(*m);
    if (o.mesh.empty()) return layout_from_manifest(*manifest);
  }
  // A DCP or sharded-safetensors directory alone: one copy, checked on its own.
  if (o.mesh.empty() && detect_directory_format(dir)) return layout_single_copy(dir);
  if (o.mesh.empty())
    return usage_error(
        fmt::format("{}: no --mesh and no {} to say which files are replicas", dir, k_manifest_file_name), {},
        "give --mesh (e.g. --mesh dp=4,tp=2), --replicas FILE..., or write a manifest with 'scout verify-ckpt manifest "
        "write'");
  return layout_from_directory(dir, o.mesh, o.pattern);
}

namespace {

// Natural order for checkpoint directories: by the last number in the name, then by name.
bool natural_less(const fs::path& a, const fs::path& b) {
  auto key = [](const std::string& s) {
    std::int64_t n = -1;
    std::size_t end = s.find_last_of("0123456789");
    if (end != std::string::npos) {
      std::size_t begin = end;
      while (begin > 0 && std::isdigit(static_cast<unsigned char>(s[begin - 1]))) --begin;
      if (end - begin < 18) n = std::stoll(s.substr(begin, end - begin + 1));
    }
    return n;
  };
  auto ka = key(a.filename().string()), kb = key(b.filename().string());
  return ka != kb ? ka < kb : a < b;
}

}  // namespace

bool looks_like_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / k_manifest_file_name, ec)) return true;
  if (detect_directory_format(dir)) return true;  // DCP or sharded safetensors: checked as one copy
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && is_checkpoint_file_name(e.path().filename().string())) return true;
  return false;
}

Result<std::vector<std::string>> discover_checkpoints(const std::vector<std::string>& roots) {
  std::vector<std::string> found;
  for (const auto& d : roots) {
    std::error_code ec;
    fs::path p = fs::absolute(d, ec).lexically_normal();
    if (!fs::is_directory(p, ec))
      return input_error(fmt::format("{} is not a directory", d), {}, "give checkpoint directories or their parent");
    if (!p.has_filename()) p = p.parent_path();
    if (looks_like_checkpoint(p.string())) {
      found.push_back(p.string());
      continue;
    }
    std::vector<fs::path> subs;
    for (const auto& e : fs::directory_iterator(p, ec))
      if (e.is_directory() && e.path().filename().string().front() != '.') subs.push_back(e.path());
    std::sort(subs.begin(), subs.end(), natural_less);
    for (auto& s : subs)
      if (looks_like_checkpoint(s.string())) found.push_back(s.string());
  }
  return found;
}

double seconds_since_modified(const std::string& dir) {
  std::error_code ec;
  auto newest = fs::file_time_type::min();
  for (const auto& e : fs::directory_iterator(dir, ec)) newest = std::max(newest, e.last_write_time(ec));
  return std::chrono::duration<double>(fs::file_time_type::clock::now() - newest).count();
}

Result<std::string> default_ledger_path(const std::string& job, const std::string& ledger) {
  if (!ledger.empty()) return ledger;
  if (job.empty())
    return usage_error("no ledger given", "--ledger and --job are both absent",
                       "give --job J (default ledger path) or --ledger FILE");
  for (char c : job)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return usage_error(fmt::format("--job '{}' has characters not allowed in a file name", job), {},
                         "use letters, digits, '-', '_', '.' or give --ledger");
  const char* base = std::getenv("SCOUT_STATE_DIR");
  return (fs::path(base && *base ? base : "/var/lib/scout") / "verify-ckpt" / (job + ".ledger.json")).string();
}

}  // namespace scout::checkpoint
