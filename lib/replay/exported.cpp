#include "lib/replay/exported.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lib/common/file.hpp"
#include "lib/replay/evidence.hpp"

namespace scout::replay {

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t k_max_pack_bytes = 1ULL << 30;

Result<std::vector<std::uint8_t>> read_bytes(const fs::path& p) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec) return input_error(fmt::format("{}: cannot read", p.string()), ec.message(), "export the recipe again");
  if (size > k_max_pack_bytes)
    return input_error(fmt::format("{}: {} bytes is larger than a replay recipe may be (1 GiB)", p.string(), size), {},
                       "export a smaller layer");
  auto text = read_small_file(p.string(), k_max_pack_bytes);
  if (!text) return text.error();
  return std::vector<std::uint8_t>(text->begin(), text->end());
}

Result<std::vector<PackedTensor>> read_pack(const fs::path& p) {
  auto b = read_bytes(p);
  if (!b) return b.error();
  auto d = decode_pack(*b);
  if (!d)
    return input_error(fmt::format("{}: {}", p.string(), d.error().what), "the tensor pack is damaged",
                       "export the recipe again");
  return d;
}

// The manifest's tensor list must name the pack's tensors in order, with their dtypes and shapes.
Status check_specs(const nlohmann::json& specs, const std::vector<PackedTensor>& ts, const std::string& what,
                   const std::string& where) {
  auto bad = [&](const std::string& why) {
    return Status(input_error(fmt::format("{}: manifest {} disagree with the tensor pack: {}", where, what, why), {},
                              "export the recipe again"));
  };
  if (!specs.is_array()) return bad("not a list");
  std::size_t k = 0;
  for (const auto& t : ts) {
    if (what == "inputs" && t.name == "rng") continue;
    if (k >= specs.size()) return bad(fmt::format("the pack has more tensors ({})", t.name));
    const auto& s = specs[k++];
    if (!s.is_object() || !s.contains("name") || s["name"] != t.name)
      return bad(fmt::format("tensor {} is not {}", k - 1, t.name));
    if (!s.contains("shape") || s["shape"] != nlohmann::json(t.shape))
      return bad(fmt::format("{}: shape differs", t.name));
  }
  if (k != specs.size()) return bad("the manifest lists more tensors");
  return Ok{};
}

Result<RecipeInstance> load_one(const fs::path& dir) {
  const std::string where = dir.string();
  auto bad = [&](const std::string& what) {
    return input_error(fmt::format("{}: {}", where, what), "not a recipe scout can replay",
                       "point --recipe at a directory the trainer's RecipeExporter (SCOUT_REPLAY_EXPORT) wrote");
  };
  auto text = read_small_file((dir / "manifest.json").string());
  if (!text) return text.error();
  const auto m = nlohmann::json::parse(*text, nullptr, false);
  if (!m.is_object() || !m.contains("schema") || m["schema"] != k_recipe_schema)
    return bad("manifest.json is not a scout.replay.recipe document");
  if (!m.contains("schema_version") || !m["schema_version"].is_string() ||
      m["schema_version"].get<std::string>().rfind("1.", 0) != 0)
    return bad("manifest.json schema_version is not 1.x");
  for (const char* k : {"layer", "layer_type", "torch"})
    if (!m.contains(k) || !m[k].is_string()) return bad(fmt::format("manifest.json: {} missing", k));
  if (!m.contains("step") || !m["step"].is_number_integer()) return bad("manifest.json: step missing");
  std::error_code ec;
  if (!fs::is_regular_file(dir / "module.pt", ec)) return bad("module.pt missing");
  auto module = read_bytes(dir / "module.pt");
  if (!module) return module.error();
  auto inputs = read_pack(dir / "input.pack");
  if (!inputs) return inputs.error();
  auto params = read_pack(dir / "params.pack");
  if (!params) return params.error();
  if (auto s = check_specs(m.value("inputs", nlohmann::json()), *inputs, "inputs", where); !s) return s.error();
  if (auto s = check_specs(m.value("params", nlohmann::json()), *params, "params", where); !s) return s.error();
  const PackedTensor* x = nullptr;
  const PackedTensor* rng = nullptr;
  for (const auto& t : *inputs) {
    if (t.name == "x") x = &t;
    if (t.name == "rng") rng = &t;
  }
  if (!x || !rng || rng->data.size() != 16)
    return bad("input.pack must hold the captured input \"x\" and the RNG state \"rng\" (two 64-bit words)");
  if (x->dtype != DType::f32 && x->dtype != DType::f64) return bad("the captured input is not float32 or float64");
  // The exporter's own hashes: a recipe damaged after export is bad input, not an SDC.
  const auto& h = m.value("hashes", nlohmann::json::object());
  std::vector<const PackedTensor*> ps;
  for (const auto& t : *params) ps.push_back(&t);
  if (!h.is_object() || h.value("input", "") != hash_hex(hash_packed(*x)) ||
      h.value("params", "") != hash_hex(hash_list(ps)))
    return bad("the packs' hashes differ from the manifest's (damaged after export?)");

  RecipeInstance r;
  r.name = fmt::format("{}@{}", m["layer"].get<std::string>(), m["step"].get<std::int64_t>());
  r.spec.id = k_exported_recipe_id;
  r.spec.size = "exported";
  // The contract: what must be equal for peers to be comparable (not where the files lie).
  PackedTensor mod_t;
  mod_t.name = "module.pt";
  mod_t.dtype = DType::u8;
  mod_t.shape = {static_cast<std::int64_t>(module->size())};
  mod_t.data = std::move(*module);
  r.spec.config = {{"layer", m["layer"]},
                   {"layer_type", m["layer_type"]},
                   {"step", m["step"]},
                   {"exported_with_torch", m["torch"]},
                   {"module_hash", hash_hex(hash_packed(mod_t))},
                   {"rng_seed", m.value("rng_seed", nlohmann::json())}};
  for (const auto& t : *inputs)
    if (t.name != "rng") r.spec.inputs.push_back({t.name, t.dtype, t.shape});
  for (const auto& t : *params) r.spec.params.push_back({t.name, t.dtype, t.shape});
  r.spec.quantities = {Quantity::output, Quantity::input_grad, Quantity::param_grad, Quantity::param};
  r.exported_inputs = std::move(*inputs);
  r.exported_params = std::move(*params);
  r.module_path = fs::absolute(dir / "module.pt", ec).string();
  return r;
}

}  // namespace

Result<std::vector<std::string>> find_recipe_dirs(const std::string& dir, std::size_t limit) {
  std::error_code ec;
  std::vector<fs::path> found;
  if (!fs::is_directory(dir, ec)) return std::vector<std::string>{};
  if (fs::is_regular_file(fs::path(dir) / "manifest.json", ec)) {
    found.push_back(dir);
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_directory() && fs::is_regular_file(e.path() / "manifest.json")) found.push_back(e.path());
    std::sort(found.begin(), found.end());
  }
  if (ec) return input_error(fmt::format("--recipe {}: cannot list", dir), ec.message());
  if (found.size() > limit) found.erase(found.begin(), found.end() - static_cast<std::ptrdiff_t>(limit));
  return std::vector<std::string>(found.begin(), found.end());
}

Result<std::vector<RecipeInstance>> load_exported_recipes(const std::string& dir, std::size_t limit) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return input_error(fmt::format("--recipe {}: not a directory", dir), {},
                       "pass the trainer's recipe directory (SCOUT_REPLAY_EXPORT)");
  auto found = find_recipe_dirs(dir, limit);
  if (!found) return found.error();
  if (found->empty())
    return input_error(fmt::format("--recipe {}: no recipe (no manifest.json in it or its subdirectories)", dir), {},
                       "wait for the trainer's exporter to save one, or check SCOUT_REPLAY_EXPORT");
  std::vector<RecipeInstance> out;
  for (const auto& d : *found) {
    const fs::path p(d);
    auto r = load_one(p);
    if (!r) return r.error();
    for (const auto& o : out)
      if (o.name == r->name) r->name += "#" + p.filename().string();
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace scout::replay
