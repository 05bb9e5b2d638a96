#include "lib/catalog/catalog_io.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "lib/common/json_input.hpp"
#include "lib/common/parse.hpp"
#include "lib/common/schema.hpp"
#include "scout/config.hpp"

namespace scout::catalog {

namespace {

const char* k_rebuild = "rebuild the catalog on this image with 'scout catalog build'";

// A JSON integer in [lo, hi], or an error naming `what`.
Result<std::int64_t> json_int(const nlohmann::json& j, std::string_view what, std::int64_t lo, std::int64_t hi) {
  if (!j.is_number_integer())
    return input_error(fmt::format("{} is not an integer", what), fmt::format("found {}", j.dump().substr(0, 40)));
  std::int64_t v = 0;
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi))
      return input_error(fmt::format("{} is {}", what, u), fmt::format("it must be between {} and {}", lo, hi));
    v = static_cast<std::int64_t>(u);
  } else {
    v = j.get<std::int64_t>();
  }
  if (v < lo || v > hi)
    return input_error(fmt::format("{} is {}", what, v), fmt::format("it must be between {} and {}", lo, hi));
  return v;
}

Result<nlohmann::json> parse_json(std::string_view text, std::string_view origin, std::string_view hint) {
  nlohmann::json j = parse_json_input(text);
  if (j.is_discarded()) return input_error(fmt::format("{} is not valid JSON", origin), {}, std::string(hint));
  return j;
}

Result<CountVector> kernel_counts_from_json(const nlohmann::json& kernels, std::string_view what) {
  CountVector c{};
  if (!kernels.is_object()) return input_error(fmt::format("{}: \"kernels\" is not an object", what));
  for (Kernel k : k_all_kernels) {
    const std::string name(kernel_name(k));
    if (!kernels.contains(name) || !kernels[name].is_object())
      return input_error(fmt::format("{}: kernel '{}' is missing", what, name),
                         "every observation covers forward, input_grad and weight_grad");
    const auto& kj = kernels[name];
    if (!kj.contains("work_items")) return input_error(fmt::format("{}: {} has no work_items", what, name));
    auto w = json_int(kj["work_items"], fmt::format("{}: {}.work_items", what, name), 0, std::int64_t{1} << 50);
    if (!w) return w.error();
    if (!kj.contains("roles") || !kj["roles"].is_object())
      return input_error(fmt::format("{}: {} has no roles object", what, name));
    std::uint64_t sum = 0;
    for (const auto& [role, count] : kj["roles"].items()) {
      const int index = parse_role_name(k, role);
      if (index < 0)
        return input_error(fmt::format("{}: '{}' is not a role of {}", what, role, name),
                           "role names are written as 'first+m_tail+queue_repeat' (linear) or "
                           "'reduction_last+reduction_tail/tile_first' (weight_grad)",
                           "see scout-catalog(1), OBSERVATIONS");
      auto n = json_int(count, fmt::format("{}: {}.roles[{}]", what, name, role), 0, std::int64_t{1} << 50);
      if (!n) return n.error();
      c[static_cast<std::size_t>(count_index(k, index))] = static_cast<std::uint64_t>(*n);
      sum += static_cast<std::uint64_t>(*n);
    }
    if (sum != static_cast<std::uint64_t>(*w))
      return input_error(fmt::format("{}: {} counts {} work items but its roles add up to {}", what, name, *w, sum),
                         "every work item has exactly one role");
    c[static_cast<std::size_t>(kernel_offset(k))] = static_cast<std::uint64_t>(*w);
  }
  return c;
}

nlohmann::ordered_json rows_json(std::span<const std::int64_t> rows, bool uniform) {
  if (uniform) return rows.empty() ? nlohmann::ordered_json(0) : nlohmann::ordered_json(rows[0]);
  return nlohmann::ordered_json(std::vector<std::int64_t>(rows.begin(), rows.end()));
}

}  // namespace

Result<std::vector<std::int64_t>> parse_rows_spec(std::string_view text) {
  if (trim(text).empty())
    return usage_error("--rows is empty", {}, "give a range or a list, e.g. --rows 1-3457 or --rows 31,32,63");
  // Fields become closed intervals, merged before any value is written: the
  // cost is one pass over the distinct row counts, whatever the overlaps.
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  auto fields = split(text, ',');
  for (std::size_t i = 0; i < fields.size(); ++i) {
    std::string_view f = trim(fields[i]);
    auto bad = [&](std::string why) {
      return usage_error(fmt::format("--rows: '{}' is not a row count or range", f), std::move(why),
                         "give row counts >= 1 as a range or a list, e.g. --rows 1-3457 or --rows 31,32,63");
    };
    if (f.empty()) return bad(fmt::format("field {} is empty", i + 1));
    if (f.front() == '-') return bad("row counts cannot be negative");
    const std::size_t dash = f.find('-');
    std::int64_t lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      auto v = parse_int(f, "row count");
      if (!v) return bad(v.error().what);
      lo = hi = *v;
    } else {
      auto a = parse_int(trim(f.substr(0, dash)), "range start");
      auto b = parse_int(trim(f.substr(dash + 1)), "range end");
      if (!a || !b) return bad("a range is LOW-HIGH");
      lo = *a;
      hi = *b;
      if (hi < lo) return bad("the range is empty (HIGH < LOW)");
    }
    if (lo < 1) return bad("a shape needs at least one row");
    if (hi > k_max_rows) return bad(fmt::format("row counts are at most {}", k_max_rows));
    if (static_cast<std::size_t>(hi - lo) >= k_max_shapes)
      return bad(fmt::format("a catalog admits at most {} shapes", k_max_shapes));
    ranges.emplace_back(lo, hi);
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> merged;
  std::size_t total = 0;
  for (const auto& [lo, hi] : ranges) {
    if (!merged.empty() && lo <= merged.back().second + 1) {
      if (hi > merged.back().second) {
        total += static_cast<std::size_t>(hi - merged.back().second);
        merged.back().second = hi;
      }
    } else {
      merged.emplace_back(lo, hi);
      total += static_cast<std::size_t>(hi - lo) + 1;
    }
    if (total > k_max_shapes)
      return usage_error(fmt::format("--rows names more than {} row counts", k_max_shapes),
                         "a catalog admits at most that many shapes", "give a smaller range, e.g. --rows 1-3457");
  }
  std::vector<std::int64_t> out;
  out.reserve(total);
  for (const auto& [lo, hi] : merged)
    for (std::int64_t v = lo; v <= hi; ++v) out.push_back(v);
  return out;
}

Result<RowVectors> parse_rows_file(std::string_view text, std::optional<std::int64_t> experts,
                                   std::string_view origin) {
  std::vector<std::vector<std::int64_t>> vectors;
  const std::string hint =
      "write one vector of per-expert row counts per line (e.g. 12,0,7,33), or a JSON array of such arrays";
  std::string_view body = trim(text);
  if (body.empty()) return input_error(fmt::format("{} is empty", origin), "it has no row vectors", hint);
  if (body.front() == '[' || body.front() == '{') {
    auto j = parse_json(body, origin, hint);
    if (!j) return j.error();
    nlohmann::json shapes = *j;
    if (j->is_object()) {
      if (auto s = check_schema(*j, k_rows_schema, 1, origin, hint); !s) return s.error();
      if (!j->contains("shapes")) return input_error(fmt::format("{} has no \"shapes\" array", origin), {}, hint);
      shapes = (*j)["shapes"];
    }
    if (!shapes.is_array()) return input_error(fmt::format("{}: \"shapes\" is not an array", origin), {}, hint);
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      if (!shapes[i].is_array())
        return input_error(fmt::format("{}: shape {} is not an array of row counts", origin, i + 1), {}, hint);
      std::vector<std::int64_t> v;
      for (std::size_t e = 0; e < shapes[i].size(); ++e) {
        auto r = json_int(shapes[i][e], fmt::format("{}: shape {} expert {}", origin, i + 1, e), 0, k_max_rows);
        if (!r)
          return Error{ExitCode::bad_input, r.error().what, r.error().why,
                       "row counts are integers from 0 (no tokens) upward"};
        v.push_back(*r);
      }
      vectors.push_back(std::move(v));
      if (vectors.size() > k_max_shapes)
        return input_error(fmt::format("{} has more than {} shapes", origin, k_max_shapes));
    }
  } else {
    auto lines = split(text, '\n');
    for (std::size_t ln = 0; ln < lines.size(); ++ln) {
      std::string_view line = lines[ln];
      if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
      std::string normalized(trim(line));
      if (normalized.empty()) continue;
      for (char& ch : normalized)
        if (ch == ',' || ch == '\t' || ch == '\r') ch = ' ';
      std::vector<std::int64_t> v;
      for (std::string_view tok : split(normalized, ' ')) {
        if (tok.empty()) continue;
        auto r = parse_int(tok, "row count");
        if (!r || *r < 0 || *r > k_max_rows)
          return input_error(fmt::format("{} line {}: '{}' is not a row count", origin, ln + 1, tok),
                             fmt::format("row counts are integers from 0 to {}", k_max_rows), hint);
        v.push_back(*r);
      }
      vectors.push_back(std::move(v));
      if (vectors.size() > k_max_shapes)
        return input_error(fmt::format("{} has more than {} shapes", origin, k_max_shapes));
    }
  }
  if (vectors.empty()) return input_error(fmt::format("{} has no row vectors", origin), {}, hint);
  RowVectors out;
  out.experts = experts ? *experts : static_cast<std::int64_t>(vectors.front().size());
  if (out.experts < 1 || out.experts > k_max_experts)
    return input_error(fmt::format("{}: vectors have {} entries", origin, out.experts),
                       fmt::format("a kernel serves 1 to {} experts", k_max_experts), hint);
  std::set<std::vector<std::int64_t>> seen;
  for (std::size_t i = 0; i < vectors.size(); ++i) {
    const auto& v = vectors[i];
    if (static_cast<std::int64_t>(v.size()) != out.experts)
      return input_error(fmt::format("{}: shape {} has {} row counts but the kernel serves {} experts", origin, i + 1,
                                     v.size(), out.experts),
                         "every vector has one row count per expert",
                         experts ? "fix the file or --experts" : "fix the file");
    if (std::all_of(v.begin(), v.end(), [](std::int64_t r) { return r == 0; }))
      return input_error(fmt::format("{}: shape {} has no rows for any expert", origin, i + 1),
                         "a shape without work has nothing to replay", "drop it from the file");
    if (!seen.insert(v).second) {
      ++out.duplicates;
      continue;
    }
    out.values.insert(out.values.end(), v.begin(), v.end());
  }
  return out;
}

Result<KernelConfig> kernel_config_from_json(const nlohmann::json& j, std::string_view what) {
  if (!j.is_object()) return input_error(fmt::format("{}: \"kernel\" is not an object", what));
  auto field = [&](const char* key) -> const nlohmann::json* { return j.contains(key) ? &j[key] : nullptr; };
  KernelConfig c;
  if (const auto* name = field("name"); !name || !name->is_string() || name->get<std::string>() != k_kernel_name)
    return input_error(fmt::format("{}: the kernel is not '{}'", what, k_kernel_name),
                       "this scout models only that kernel");
  if (const auto* mv = field("model_version");
      !mv || !mv->is_number_integer() || mv->get<std::int64_t>() != k_model_version)
    return input_error(fmt::format("{}: the execution-path model version is not {}", what, k_model_version),
                       "it was made by another model");
  const auto* tile = field("tile");
  if (!tile || !tile->is_object()) return input_error(fmt::format("{}: the kernel has no tile object", what));
  struct F {
    const nlohmann::json* j;
    const char* key;
    std::int64_t* dst;
    std::int64_t lo, hi;
  };
  const F fields[] = {
      {tile, "m", &c.tile_m, 1, k_max_tile},        {tile, "n", &c.tile_n, 1, k_max_tile},
      {tile, "k", &c.tile_k, 1, k_max_tile},        {&j, "sms", &c.sms, 1, k_max_sms},
      {&j, "hidden", &c.hidden, 1, k_max_features}, {&j, "output_dim", &c.output_dim, 1, k_max_features},
      {&j, "experts", &c.experts, 1, k_max_experts}};
  for (const F& f : fields) {
    if (!f.j->contains(f.key)) return input_error(fmt::format("{}: the kernel has no '{}'", what, f.key));
    auto v = json_int((*f.j)[f.key], fmt::format("{}: kernel {}", what, f.key), f.lo, f.hi);
    if (!v) return v.error();
    *f.dst = *v;
  }
  return c;
}

nlohmann::ordered_json kernel_config_json(const KernelConfig& c) {
  nlohmann::ordered_json j;
  j["name"] = k_kernel_name;
  j["model_version"] = k_model_version;
  j["tile"] = {{"m", c.tile_m}, {"n", c.tile_n}, {"k", c.tile_k}};
  j["sms"] = c.sms;
  j["hidden"] = c.hidden;
  j["output_dim"] = c.output_dim;
  j["experts"] = c.experts;
  return j;
}

nlohmann::ordered_json kernel_counts_json(const CountVector& counts, Kernel kernel) {
  nlohmann::ordered_json j;
  j["work_items"] = work_items(counts, kernel);
  nlohmann::ordered_json roles = nlohmann::ordered_json::object();
  for (int r = 0; r < role_count(kernel); ++r) {
    const auto n = counts[static_cast<std::size_t>(count_index(kernel, r))];
    if (n) roles[role_name(kernel, r)] = n;
  }
  j["roles"] = std::move(roles);
  return j;
}

Result<Observations> parse_observations(std::string_view text, const KernelConfig& config, std::string_view origin) {
  const std::string hint =
      "give the JSON an instrumented run wrote (schema scout.catalog.observations, see scout-catalog(1))";
  auto j = parse_json(text, origin, hint);
  if (!j) return j.error();
  if (auto s = check_schema(*j, k_observations_schema, 1, origin, hint); !s) return s.error();
  if (!j->contains("kernel")) return input_error(fmt::format("{} has no kernel configuration", origin), {}, hint);
  auto kc = kernel_config_from_json((*j)["kernel"], origin);
  if (!kc) return kc.error();
  const KernelConfig& o = *kc;
  if (o.tile_m != config.tile_m || o.tile_n != config.tile_n || o.tile_k != config.tile_k || o.sms != config.sms ||
      o.hidden != config.hidden || o.output_dim != config.output_dim || o.experts != config.experts)
    return input_error(
        fmt::format("{} was measured with another kernel configuration", origin),
        fmt::format(
            "observed tile {}x{}x{}, {} SMs, H={}, O={}, E={}; building for tile {}x{}x{}, {} SMs, H={}, O={}, E={}",
            o.tile_m, o.tile_n, o.tile_k, o.sms, o.hidden, o.output_dim, o.experts, config.tile_m, config.tile_n,
            config.tile_k, config.sms, config.hidden, config.output_dim, config.experts),
        "measure with the configuration of the catalog, or change the build flags to match");
  if (!j->contains("observations") || !(*j)["observations"].is_array())
    return input_error(fmt::format("{} has no \"observations\" array", origin), {}, hint);
  Observations out;
  const auto& arr = (*j)["observations"];
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string what = fmt::format("{}: observation {}", origin, i + 1);
    const auto& ob = arr[i];
    if (!ob.is_object() || !ob.contains("rows") || !ob["rows"].is_array())
      return input_error(fmt::format("{} has no \"rows\" array", what), {}, hint);
    std::vector<std::int64_t> rows;
    for (std::size_t e = 0; e < ob["rows"].size(); ++e) {
      auto r = json_int(ob["rows"][e], fmt::format("{} rows[{}]", what, e), 0, k_max_rows);
      if (!r) return r.error();
      rows.push_back(*r);
    }
    if (static_cast<std::int64_t>(rows.size()) != config.experts)
      return input_error(fmt::format("{} has {} row counts for {} experts", what, rows.size(), config.experts), {},
                         hint);
    if (!ob.contains("kernels")) return input_error(fmt::format("{} has no \"kernels\"", what), {}, hint);
    auto counts = kernel_counts_from_json(ob["kernels"], what);
    if (!counts) return counts.error();
    if (!out.emplace(std::move(rows), *counts).second)
      return input_error(fmt::format("{} repeats the rows of an earlier observation", what),
                         "each shape is observed once", "merge or drop it");
  }
  return out;
}

nlohmann::ordered_json observations_to_json(const KernelConfig& config, const Observations& observed) {
  nlohmann::ordered_json j;
  j["schema"] = k_observations_schema;
  j["schema_version"] = k_observations_schema_version;
  j["kernel"] = kernel_config_json(config);
  j["observations"] = nlohmann::ordered_json::array();
  for (const auto& [rows, counts] : observed) {
    nlohmann::ordered_json ob;
    ob["rows"] = rows;
    for (Kernel k : k_all_kernels) ob["kernels"][std::string(kernel_name(k))] = kernel_counts_json(counts, k);
    j["observations"].push_back(std::move(ob));
  }
  return j;
}

nlohmann::ordered_json catalog_to_json(const Environment& env, const KernelConfig& config, const ShapeSpace& space,
                                       const Compression& c, const CatalogProvenance& p) {
  nlohmann::ordered_json j;
  j["schema"] = k_catalog_schema;
  j["schema_version"] = k_catalog_schema_version;
  j["created_at"] = p.created_at;
  j["scout_version"] = SCOUT_VERSION;
  j["environment"] = to_json(env);
  j["kernel"] = kernel_config_json(config);
  j["shape_space"] = {{"kind", space.is_uniform() ? "uniform" : "heterogeneous"},
                      {"experts", space.experts()},
                      {"shapes", c.shapes},
                      {"source", p.rows_source},
                      {"duplicates_ignored", p.duplicates}};
  j["observations"] = {
      {"file",
       p.observations_file.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(p.observations_file)},
      {"given", p.observations_given},
      {"applied", c.observed_shapes},
      {"differ_from_model", c.observed_differ},
      {"outside_shape_space", p.observations_given - std::min<std::size_t>(p.observations_given, c.observed_shapes)}};
  j["regimes"] = nlohmann::ordered_json::array();
  std::vector<std::int64_t> scratch;
  for (const Regime& r : c.regimes) {
    nlohmann::ordered_json rj;
    nlohmann::ordered_json fp;
    for (Kernel k : k_all_kernels)
      fp[std::string(kernel_name(k))] = pressure_name(r.fingerprint.pressures[static_cast<std::size_t>(k)]);
    rj["fingerprint"] = fp;
    rj["label"] = fingerprint_label(r.fingerprint);
    rj["members"] = r.members;
    rj["obligations"] = r.obligations;
    rj["representatives"] = nlohmann::ordered_json::array();
    rj["replay"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < r.representatives.size(); ++i) {
      auto rows = space.rows(r.representatives[i], scratch);
      rj["representatives"].push_back(rows_json(rows, space.is_uniform()));
      nlohmann::ordered_json rep;
      rep["rows"] = rows_json(rows, space.is_uniform());
      rep["covers"] = r.representative_covers[i];
      for (Kernel k : k_all_kernels)
        rep["kernels"][std::string(kernel_name(k))] = kernel_counts_json(r.representative_counts[i], k);
      rj["replay"].push_back(std::move(rep));
    }
    j["regimes"].push_back(std::move(rj));
  }
  const double shapes = static_cast<double>(c.shapes), reps = static_cast<double>(c.representatives);
  j["totals"] = {{"shapes", c.shapes},
                 {"regimes", c.regimes.size()},
                 {"representatives", c.representatives},
                 {"obligations_covered", c.obligations},
                 {"replay_work_items", c.replay_work_items},
                 {"compression_ratio", reps > 0 ? shapes / reps : 0.0},
                 {"replay_reduction", shapes > 0 ? 1.0 - reps / shapes : 0.0}};
  return j;
}

Result<LoadedCatalog> parse_catalog(std::string_view text, std::string_view origin) {
  auto j = parse_json(text, origin, k_rebuild);
  if (!j) return j.error();
  if (auto s = check_schema(*j, k_catalog_schema, k_catalog_schema_major, origin, k_rebuild); !s) return s.error();
  LoadedCatalog out;
  out.schema_version = (*j)["schema_version"].get<std::string>();
  if (j->contains("created_at") && (*j)["created_at"].is_string())
    out.created_at = (*j)["created_at"].get<std::string>();
  if (!j->contains("environment")) return input_error(fmt::format("{} has no environment", origin), {}, k_rebuild);
  auto env = environment_from_json((*j)["environment"]);
  if (!env)
    return Error{ExitCode::bad_input, fmt::format("{}: {}", origin, env.error().what), env.error().why, k_rebuild};
  out.environment = *env;
  if (!j->contains("kernel")) return input_error(fmt::format("{} has no kernel configuration", origin), {}, k_rebuild);
  auto kc = kernel_config_from_json((*j)["kernel"], origin);
  if (!kc) return Error{ExitCode::bad_input, kc.error().what, kc.error().why, k_rebuild};
  out.config = *kc;
  if (!j->contains("totals") || !(*j)["totals"].is_object() || !j->contains("regimes") || !(*j)["regimes"].is_array())
    return input_error(fmt::format("{} has no totals or regimes", origin), {}, k_rebuild);
  const auto& t = (*j)["totals"];
  for (const char* key : {"shapes", "representatives"}) {
    if (!t.contains(key)) return input_error(fmt::format("{}: totals has no '{}'", origin, key), {}, k_rebuild);
    auto v = json_int(t[key], fmt::format("{}: totals.{}", origin, key), 0, std::int64_t{1} << 40);
    if (!v) return Error{ExitCode::bad_input, v.error().what, v.error().why, k_rebuild};
  }
  out.shapes = t["shapes"].get<std::uint64_t>();
  out.representatives = t["representatives"].get<std::uint64_t>();
  out.regimes = (*j)["regimes"].size();
  if (out.representatives > out.shapes || (out.shapes > 0 && out.representatives == 0))
    return input_error(fmt::format("{}: {} representatives for {} shapes", origin, out.representatives, out.shapes),
                       "the totals are inconsistent", k_rebuild);
  return out;
}

}  // namespace scout::catalog
