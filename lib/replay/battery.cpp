#include "lib/replay/battery.hpp"

#include <fmt/format.h>

#include <cstring>

#include "lib/catalog/catalog_io.hpp"
#include "lib/common/file.hpp"

namespace scout::replay {

namespace {

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

int size_index(const std::string& size) {
  for (int i = 0; i < 4; ++i)
    if (size == k_sizes[i]) return i;
  return -1;
}

TensorSpec f32(std::string name, std::vector<std::int64_t> shape, double scale = 1.0, bool nonneg = false) {
  return TensorSpec{std::move(name), DType::f32, std::move(shape), scale, nonneg};
}

}  // namespace

Result<RecipeSpec> battery_recipe(const std::string& id, const std::string& size,
                                  const std::vector<std::int64_t>& expert_rows) {
  const int s = size_index(size);
  if (s < 0)
    return usage_error(fmt::format("--size {} is not a battery size", size), {}, "use tiny, small, medium or large");
  RecipeSpec r;
  r.id = id;
  r.size = size;
  if (id == "transformer_block") {
    const std::int64_t B[] = {2, 4, 8, 8}, T[] = {8, 32, 64, 128}, D[] = {32, 64, 128, 256}, H[] = {4, 4, 8, 8};
    const std::int64_t b = B[s], t = T[s], d = D[s];
    const double w = 1.0 / std::sqrt(static_cast<double>(d));
    r.config = {{"batch", b}, {"tokens", t}, {"dim", d}, {"heads", H[s]}, {"dropout", 0.1}, {"lr", 1e-3}};
    r.inputs = {f32("x", {b, t, d}), f32("grad_out", {b, t, d})};
    r.params = {f32("ln1.weight", {d}, 1.0, true),         f32("ln1.bias", {d}, 0.1),
                f32("attn.in_proj_weight", {3 * d, d}, w), f32("attn.in_proj_bias", {3 * d}, 0.1),
                f32("attn.out_proj_weight", {d, d}, w),    f32("attn.out_proj_bias", {d}, 0.1),
                f32("ln2.weight", {d}, 1.0, true),         f32("ln2.bias", {d}, 0.1),
                f32("mlp.fc1_weight", {4 * d, d}, w),      f32("mlp.fc1_bias", {4 * d}, 0.1),
                f32("mlp.fc2_weight", {d, 4 * d}, w / 2),  f32("mlp.fc2_bias", {d}, 0.1)};
    r.quantities = {Quantity::output, Quantity::input_grad, Quantity::param_grad, Quantity::param};
  } else if (id == "adamw_step") {
    const std::int64_t N[] = {4096, 65536, 1 << 20, 1 << 23};
    const std::int64_t n = N[s];
    r.config = {{"elements", n}, {"lr", 1e-3},           {"beta1", 0.9}, {"beta2", 0.999},
                {"eps", 1e-8},   {"weight_decay", 0.01}, {"step", 10}};
    r.inputs = {f32("grad", {n}, 0.1), f32("exp_avg", {n}, 0.01), f32("exp_avg_sq", {n}, 1e-4, true)};
    r.params = {f32("param", {n})};
    r.quantities = {Quantity::output, Quantity::param};
  } else if (id == "expert_gemm") {
    const std::int64_t K[] = {32, 64, 128, 256}, N[] = {64, 128, 256, 512};
    std::vector<std::int64_t> rows = expert_rows;
    if (rows.empty()) {
      const std::vector<std::int64_t> def[] = {{3, 0, 17, 8},
                                               {64, 1, 128, 31, 7, 256, 0, 16},
                                               {256, 3, 512, 128, 1, 1024, 0, 77},
                                               {1024, 17, 2048, 512, 3, 4096, 0, 300}};
      rows = def[s];
    }
    std::int64_t total = 0;
    for (auto x : rows) {
      if (x < 0 || x > 1 << 20)
        return usage_error(fmt::format("expert rows {} out of range", x), {}, "give rows per expert in 0..1048576");
      total += x;
    }
    const std::int64_t e = static_cast<std::int64_t>(rows.size()), k = K[s], n = N[s];
    if (e == 0) return usage_error("expert_gemm needs at least one expert", {}, "give rows per expert");
    r.config = {{"rows", rows}, {"k", k}, {"n", n}};
    r.inputs = {f32("x", {total, k}), f32("grad_out", {total, n})};
    r.params = {f32("w", {e, k, n}, 1.0 / std::sqrt(static_cast<double>(k)))};
    r.quantities = {Quantity::output, Quantity::input_grad, Quantity::param_grad};
  } else if (id == "param_allgather") {
    const std::int64_t N[] = {1 << 14, 1 << 18, 1 << 22, 1 << 24};
    r.config = {{"elements", N[s]}};
    r.inputs = {};
    r.params = {f32("flat_param", {N[s]})};
    r.quantities = {Quantity::param};
  } else {
    return usage_error(fmt::format("'{}' is not a battery recipe", id), {},
                       "use transformer_block, adamw_step, expert_gemm or param_allgather");
  }
  return r;
}

PackedTensor generate_tensor(const TensorSpec& spec, std::uint64_t seed, std::uint64_t stream) {
  PackedTensor t;
  t.name = spec.name;
  t.dtype = spec.dtype;
  t.shape = spec.shape;
  const std::int64_t n = numel(spec.shape);
  t.data.resize(static_cast<std::size_t>(n) * dtype_size(spec.dtype));
  std::uint64_t state = seed * 0x100000001B3ULL ^ (stream + 1) * 0xC2B2AE3D27D4EB4FULL;
  float* out = reinterpret_cast<float*>(t.data.data());
  for (std::int64_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(splitmix(state) >> 11) * 0x1.0p-53;  // [0, 1)
    out[i] = static_cast<float>(spec.nonneg ? u * spec.scale : (2 * u - 1) * spec.scale);
  }
  return t;
}

std::vector<PackedTensor> generate_inputs(const RecipeSpec& recipe, std::uint64_t seed) {
  std::vector<PackedTensor> out;
  for (std::size_t i = 0; i < recipe.inputs.size(); ++i)
    out.push_back(generate_tensor(recipe.inputs[i], seed, 1000 + i));
  PackedTensor rng;
  rng.name = "rng";
  rng.dtype = DType::u64;
  rng.shape = {2};
  const std::uint64_t st[2] = {seed ^ 0x5C0D7EA11ULL, 0};
  rng.data.resize(16);
  std::memcpy(rng.data.data(), st, 16);
  out.push_back(std::move(rng));
  return out;
}

namespace {

std::uint64_t flat_bytes(const RecipeSpec& r) {
  std::uint64_t n = 0;
  for (const auto& p : r.params) n += static_cast<std::uint64_t>(numel(p.shape)) * dtype_size(p.dtype);
  return n;
}

std::pair<std::uint64_t, std::uint64_t> shard_range(std::uint64_t total, std::int64_t peer, std::int64_t peers) {
  const std::uint64_t words = (total + 7) / 8,
                      per = (words + static_cast<std::uint64_t>(peers) - 1) / static_cast<std::uint64_t>(peers);
  const std::uint64_t a = std::min(total, per * 8 * static_cast<std::uint64_t>(peer));
  const std::uint64_t b = std::min(total, per * 8 * static_cast<std::uint64_t>(peer + 1));
  return {a, b};
}

}  // namespace

std::vector<std::uint8_t> param_shard(const RecipeSpec& recipe, std::uint64_t seed, std::int64_t peer,
                                      std::int64_t peers) {
  const auto [a, b] = shard_range(flat_bytes(recipe), peer, peers);
  std::vector<std::uint8_t> out;
  out.reserve(b - a);
  std::uint64_t off = 0;
  for (std::size_t i = 0; i < recipe.params.size(); ++i) {
    const std::uint64_t n =
        static_cast<std::uint64_t>(numel(recipe.params[i].shape)) * dtype_size(recipe.params[i].dtype);
    if (off + n > a && off < b) {
      // Generated whole and sliced: simple, and params are small at battery sizes.
      auto t = generate_tensor(recipe.params[i], seed, i);
      const std::uint64_t lo = std::max(a, off) - off, hi = std::min(b, off + n) - off;
      out.insert(out.end(), t.data.begin() + static_cast<std::ptrdiff_t>(lo),
                 t.data.begin() + static_cast<std::ptrdiff_t>(hi));
    }
    off += n;
  }
  return out;
}

std::vector<std::uint8_t> tensors_shard(const std::vector<PackedTensor>& tensors, std::int64_t peer,
                                        std::int64_t peers) {
  std::vector<std::uint8_t> flat;
  for (const auto& t : tensors) flat.insert(flat.end(), t.data.begin(), t.data.end());
  const auto [a, b] = shard_range(flat.size(), peer, peers);
  return std::vector<std::uint8_t>(flat.begin() + static_cast<std::ptrdiff_t>(a),
                                   flat.begin() + static_cast<std::ptrdiff_t>(b));
}

Result<std::vector<PackedTensor>> assemble_params(const RecipeSpec& recipe,
                                                  const std::vector<std::vector<std::uint8_t>>& shards) {
  std::vector<std::uint8_t> flat;
  for (const auto& s : shards) flat.insert(flat.end(), s.begin(), s.end());
  if (flat.size() != flat_bytes(recipe))
    return input_error(
        fmt::format("{}: gathered {} parameter bytes, the recipe has {}", recipe.id, flat.size(), flat_bytes(recipe)),
        "a peer sent a shard of another size", "check that every peer runs the same recipe and size");
  std::vector<PackedTensor> out;
  std::uint64_t off = 0;
  for (const auto& p : recipe.params) {
    PackedTensor t;
    t.name = p.name;
    t.dtype = p.dtype;
    t.shape = p.shape;
    const std::uint64_t n = static_cast<std::uint64_t>(numel(p.shape)) * dtype_size(p.dtype);
    t.data.assign(flat.begin() + static_cast<std::ptrdiff_t>(off), flat.begin() + static_cast<std::ptrdiff_t>(off + n));
    off += n;
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::vector<std::vector<std::int64_t>>> catalog_expert_rows(const std::string& path, std::size_t limit) {
  std::vector<std::vector<std::int64_t>> all;
  auto text = read_small_file(path);
  if (!text) return text.error();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  auto bad = [&](const std::string& why) {
    return input_error(fmt::format("--catalog {}: {}", path, why),
                       "replay takes the representatives' row counts from a scout catalog",
                       "pass a file 'scout catalog build' wrote");
  };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (!j.contains("regimes") || !j["regimes"].is_array()) return bad("no regimes array");
  std::int64_t experts = 0;
  if (j.contains("config") && j["config"].is_object() && j["config"].contains("experts") &&
      j["config"]["experts"].is_number_integer())
    experts = j["config"]["experts"].get<std::int64_t>();
  for (const auto& reg : j["regimes"]) {
    if (!reg.is_object() || !reg.contains("representatives") || !reg["representatives"].is_array()) continue;
    for (const auto& rep : reg["representatives"]) {
      std::vector<std::int64_t> rows;
      if (rep.is_number_integer()) {
        if (experts <= 0 || experts > 4096) return bad("a uniform representative needs config.experts");
        rows.assign(static_cast<std::size_t>(experts), rep.get<std::int64_t>());
      } else if (rep.is_array()) {
        for (const auto& x : rep) {
          if (!x.is_number_integer() || x.get<std::int64_t>() < 0)
            return bad("a representative's rows are not non-negative integers");
          rows.push_back(x.get<std::int64_t>());
        }
      } else {
        return bad("a representative is neither an integer nor an array");
      }
      if (!rows.empty() && all.size() < limit) all.push_back(std::move(rows));
    }
  }
  if (all.empty()) return bad("no representatives");
  return all;
}

}  // namespace scout::replay
