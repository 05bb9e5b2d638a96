#include "lib/replay/recipe_share.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "lib/common/file.hpp"
#include "lib/common/hex.hpp"
#include "lib/replay/exported.hpp"
#include "lib/replay/node_status.hpp"
#include "lib/session/oneshot.hpp"

namespace scout::replay {

namespace {

namespace fs = std::filesystem;

constexpr std::size_t k_max_recipes = 64;

bool known_file(const std::string& f) {
  return std::any_of(std::begin(k_recipe_files), std::end(k_recipe_files), [&](const char* k) { return f == k; });
}

// A recipe directory's name as it travels: one plain path component.
bool plain_name(const std::string& n) {
  if (n.empty() || n.size() > 255 || n == "." || n == "..") return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-' || c == '@' || c == '+';
  });
}

// The files on which two copies differ, at most `limit` named.
std::string differing_files(const NodeStatus& a, const NodeStatus& b, std::size_t limit = 4) {
  std::set<std::string> names;
  for (const auto& [k, v] : a.files) names.insert(k);
  for (const auto& [k, v] : b.files) names.insert(k);
  std::vector<std::string> out;
  std::size_t n = 0;
  for (const auto& k : names) {
    auto ia = a.files.find(k), ib = b.files.find(k);
    std::string why;
    if (ia == a.files.end())
      why = "only on the source";
    else if (ib == b.files.end())
      why = "missing on the source";
    else if (ia->second != ib->second)
      why = "differs";
    else
      continue;
    if (n++ < limit) out.push_back(fmt::format("{} {}", k, why));
  }
  if (n > limit) out.push_back(fmt::format("{} more", n - limit));
  return fmt::format("{}", fmt::join(out, ", "));
}

}  // namespace

Result<std::unique_ptr<PrivateDir>> PrivateDir::create(const std::string& prefix) {
  const char* env = std::getenv("TMPDIR");
  const std::string base = env && *env ? env : "/tmp";
  std::string tmpl = fmt::format("{}/{}XXXXXX", base, prefix);
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))  // mode 0700
    return unavailable_error(fmt::format("cannot create a private directory under {}", base), std::strerror(errno),
                             "free space or set TMPDIR");
  return std::unique_ptr<PrivateDir>(new PrivateDir(buf.data()));
}

PrivateDir::~PrivateDir() {
  std::error_code ec;
  fs::remove_all(m_path, ec);
}

Result<std::vector<PackedTensor>> read_recipe_files(const std::vector<std::string>& dirs) {
  std::vector<PackedTensor> out;
  std::uint64_t total = 0;
  for (const auto& d : dirs) {
    // One recipe (perhaps `dir` itself) travels under a fixed name, so copies compare equal wherever they lie.
    const std::string name = dirs.size() == 1 ? std::string("recipe") : fs::path(d).filename().string();
    if (!plain_name(name))
      return input_error(fmt::format("{}: the directory's name cannot be sent to other nodes", d), {},
                         "rename it to letters, digits and ._-@+");
    for (const char* f : k_recipe_files) {
      const fs::path p = fs::path(d) / f;
      auto text = read_small_file(p.string(), k_max_shared_recipe_bytes);
      if (!text) return text.error();
      PackedTensor t;
      t.name = name + "/" + f;
      t.dtype = DType::u8;
      t.shape = {static_cast<std::int64_t>(text->size())};
      t.data.assign(text->begin(), text->end());
      total += t.data.size();
      if (total > k_max_shared_recipe_bytes)
        return input_error(fmt::format("--recipe: the recipes' files exceed {} bytes", k_max_shared_recipe_bytes), {},
                           "keep fewer recipes in the directory");
      out.push_back(std::move(t));
    }
  }
  return out;
}

std::uint64_t recipe_files_digest(const std::vector<PackedTensor>& files) {
  std::vector<PackedTensor> names;
  names.reserve(files.size());
  for (const auto& f : files) {
    PackedTensor n;
    n.dtype = DType::u8;
    n.shape = {static_cast<std::int64_t>(f.name.size())};
    n.data.assign(f.name.begin(), f.name.end());
    names.push_back(std::move(n));
  }
  std::vector<const PackedTensor*> all;
  for (std::size_t i = 0; i < files.size(); ++i) {
    all.push_back(&names[i]);
    all.push_back(&files[i]);
  }
  return hash_list(all);
}

Status write_recipe_files(const std::string& dir, const std::vector<PackedTensor>& files) {
  auto bad = [](const std::string& what) {
    return Status(input_error(fmt::format("recipes from the source node: {}", what),
                              "not what a scout source node sends", "rerun; if it repeats, check the source node"));
  };
  std::set<std::string> seen, recipes;
  std::uint64_t total = 0;
  for (const auto& f : files) {
    const auto slash = f.name.find('/');
    if (slash == std::string::npos) return bad(fmt::format("'{}' names no recipe", f.name));
    const std::string recipe = f.name.substr(0, slash), file = f.name.substr(slash + 1);
    if (!plain_name(recipe) || !known_file(file)) return bad(fmt::format("'{}' is not a recipe file", f.name));
    if (!seen.insert(f.name).second) return bad(fmt::format("'{}' arrived twice", f.name));
    recipes.insert(recipe);
    if (recipes.size() > k_max_recipes) return bad(fmt::format("more than {} recipes", k_max_recipes));
    if (f.dtype != DType::u8 || f.shape.size() != 1) return bad(fmt::format("'{}' is not a byte string", f.name));
    total += f.data.size();
    if (total > k_max_shared_recipe_bytes) return bad(fmt::format("more than {} bytes", k_max_shared_recipe_bytes));
  }
  for (const auto& f : files) {
    const auto slash = f.name.find('/');
    const fs::path sub = fs::path(dir) / f.name.substr(0, slash);
    if (::mkdir(sub.c_str(), 0700) != 0 && errno != EEXIST)
      return unavailable_error(fmt::format("cannot create {}", sub.string()), std::strerror(errno), "free space");
    const std::string_view content(reinterpret_cast<const char*>(f.data.data()), f.data.size());
    if (auto w = atomic_write_file((fs::path(dir) / f.name).string(), content, 0600); !w) return w.error();
  }
  return Ok{};
}

Result<SharedRecipes> share_recipes(transport::KeyValueStore& store, const ShareOptions& o) {
  SharedRecipes out;
  std::int64_t round = 0;
  auto gather = [&](const std::vector<std::uint8_t>& blob) -> Result<session::OneShotResult> {
    session::OneShotOptions go;
    go.key_namespace = fmt::format("{}/r{}", o.key_namespace, round++);
    go.member = o.node;
    go.members = o.nodes;
    go.timeout = o.timeout;
    go.listen_address = o.listen_address;
    return session::gather_once(store, go, blob);
  };

  // This node's copy: absent or empty is no error here; damaged is, for everyone.
  NodeStatus mine;
  std::vector<PackedTensor> files;
  auto dirs = find_recipe_dirs(o.recipe_dir);
  if (!dirs) {
    mine.error = dirs.error().message();
  } else if (!dirs->empty()) {
    auto loaded = load_exported_recipes(o.recipe_dir);
    auto read = loaded ? read_recipe_files(*dirs) : Result<std::vector<PackedTensor>>(loaded.error());
    if (!read) {
      mine.error = read.error().message();
    } else {
      mine.has = true;
      files = std::move(*read);
      out.recipes = std::move(*loaded);
      mine.digest = recipe_files_digest(files);
      for (const auto& f : files) {
        mine.bytes += f.data.size();
        mine.files[f.name] = hex64(hash_packed(f));
      }
    }
  }

  auto g = gather(encode_status(mine));
  if (!g) return g.error();
  std::vector<NodeStatus> all;
  for (std::int64_t n = 0; n < o.nodes; ++n) {
    const auto& b = g->blobs[static_cast<std::size_t>(n)];
    auto s = b ? decode_status(*b) : std::nullopt;
    if (!s)
      return unavailable_error(fmt::format("replay: node {} {} the recipe exchange", n,
                                           b ? "sent something else than its recipe status in" : "never joined"),
                               fmt::format("{}", fmt::join(g->notes, "; ")),
                               "start 'scout replay --recipe' on every node with the same --store, --job and --nodes");
    all.push_back(std::move(*s));
  }
  for (std::int64_t n = 0; n < o.nodes; ++n)
    if (!all[static_cast<std::size_t>(n)].error.empty())
      return input_error(fmt::format("replay: node {}'s recipe directory is damaged", n),
                         all[static_cast<std::size_t>(n)].error,
                         fmt::format("export the recipes again, or remove --recipe's directory on node {} so that it "
                                     "receives the source node's",
                                     n));
  std::int64_t source = -1;
  for (std::int64_t n = 0; n < o.nodes && source < 0; ++n)
    if (all[static_cast<std::size_t>(n)].has) source = n;
  if (source < 0)
    return input_error(fmt::format("replay: no node holds a recipe under --recipe {}", o.recipe_dir),
                       "on every node the directory is absent or has no manifest.json",
                       "point --recipe at the trainer's RecipeExporter directory (SCOUT_REPLAY_EXPORT) on the node "
                       "that exported (usually rank 0's)");
  const NodeStatus& src = all[static_cast<std::size_t>(source)];
  std::vector<std::string> differ;
  bool someone_lacks = false;
  for (std::int64_t n = 0; n < o.nodes; ++n) {
    const auto& s = all[static_cast<std::size_t>(n)];
    out.nodes.push_back(
        {{"node", n}, {"has_recipes", s.has}, {"digest", s.has ? nlohmann::json(hex64(s.digest)) : nlohmann::json()}});
    if (!s.has) someone_lacks = true;
    if (s.has && s.digest != src.digest) differ.push_back(fmt::format("node {} ({})", n, differing_files(src, s)));
  }
  if (!differ.empty())
    return input_error(
        fmt::format("replay: the recipes under --recipe differ from the source node {}'s on {}", source,
                    fmt::join(differ, "; ")),
        "every node must replay the same recipes (a copy that differs would read as an SDC)",
        "copy the source node's directory to those nodes, or remove it there so that they receive the source's");
  out.source_node = source;
  out.digest = src.digest;
  out.bytes = src.bytes;
  if (!someone_lacks) return out;
  if (src.bytes > k_max_shared_recipe_bytes)
    return input_error(fmt::format("replay: node {}'s recipes are {} bytes, above the {} scout sends between nodes",
                                   source, src.bytes, k_max_shared_recipe_bytes),
                       {}, "put the recipe directory on every node, or keep fewer recipes in it");

  // The source's files, in pieces; every node takes part in every round.
  std::vector<std::uint8_t> packed;
  if (o.node == source) packed = encode_pack(files);
  // Everyone derives the count from what the source announced: its pack's size.
  std::uint64_t pack_bytes = 4 + 4;  // "SRP1", count
  for (const auto& [name, h] : src.files) pack_bytes += 2 + name.size() + 1 + 1 + 8 + 8;
  pack_bytes += src.bytes;
  const std::uint64_t pieces = (pack_bytes + k_shared_recipe_piece_bytes - 1) / k_shared_recipe_piece_bytes;
  std::vector<std::uint8_t> got;
  for (std::uint64_t k = 0; k < pieces; ++k) {
    std::vector<std::uint8_t> piece;
    if (o.node == source) {
      const std::uint64_t from = k * k_shared_recipe_piece_bytes;
      const std::uint64_t to = std::min<std::uint64_t>(packed.size(), from + k_shared_recipe_piece_bytes);
      if (from < to)
        piece.assign(packed.begin() + static_cast<std::ptrdiff_t>(from),
                     packed.begin() + static_cast<std::ptrdiff_t>(to));
    }
    auto p = gather(piece);
    if (!p) return p.error();
    if (mine.has) continue;
    const auto& b = p->blobs[static_cast<std::size_t>(source)];
    if (!b)
      return unavailable_error(
          fmt::format("replay: piece {} of {} of node {}'s recipes never arrived", k + 1, pieces, source),
          fmt::format("{}", fmt::join(p->notes, "; ")), "rerun; raise --timeout on a slow network");
    got.insert(got.end(), b->begin(), b->end());
  }
  if (mine.has) return out;

  auto arrived = [&](const std::string& what) {
    return input_error(fmt::format("replay: the recipes received from node {} {}", source, what),
                       "they changed on the way or the source node's scout differs from this one's",
                       "rerun; if it repeats, copy the recipe directory to this node");
  };
  if (got.size() != pack_bytes)
    return arrived(fmt::format("are {} bytes, not the {} announced", got.size(), pack_bytes));
  auto received = decode_pack(got);
  if (!received) return arrived(fmt::format("are damaged: {}", received.error().what));
  if (recipe_files_digest(*received) != src.digest) return arrived("differ from the digest it announced");
  auto dir = PrivateDir::create("scout-recipes-");
  if (!dir) return dir.error();
  if (auto w = write_recipe_files((*dir)->path(), *received); !w) return w.error();
  // The checks of a local directory (manifest against packs, the exporter's hashes).
  auto loaded = load_exported_recipes((*dir)->path());
  if (!loaded) return loaded.error();
  out.recipes = std::move(*loaded);
  out.dir = std::move(*dir);
  out.received = true;
  return out;
}

}  // namespace scout::replay
