#include "commands/catalog.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>

#include "lib/catalog/catalog_io.hpp"
#include "lib/catalog/compress.hpp"
#include "lib/catalog/model.hpp"
#include "lib/common/file.hpp"

namespace scout {

namespace {

void add_env_flags(CLI::App& cmd, CatalogEnvFlags& env, std::string_view verb) {
  using catalog::EnvField;
  auto slot = [&](EnvField f) -> std::optional<std::string>& { return env.values[static_cast<std::size_t>(f)]; };
  const std::string v(verb);
  cmd.add_option("--gpu-model", slot(EnvField::gpu_model),
                 v + " this GPU model instead of the detected one (e.g. \"NVIDIA A100-SXM4-80GB\"; 'none')")
      ->group("Environment");
  cmd.add_option("--sm-count", slot(EnvField::sm_count), v + " this SM count instead of the detected one")
      ->group("Environment");
  cmd.add_option("--compute-capability", slot(EnvField::compute_capability), v + " this compute capability (e.g. 8.0)")
      ->group("Environment");
  cmd.add_option("--driver", slot(EnvField::driver), v + " this CUDA driver version (e.g. 12.4)")->group("Environment");
  cmd.add_option("--cuda", slot(EnvField::cuda), v + " this CUDA runtime version (e.g. 12.4)")->group("Environment");
  cmd.add_option("--nccl", slot(EnvField::nccl),
                 v + " this NCCL version (e.g. 2.21.5); detected: the nccl.h scout was built with")
      ->group("Environment");
  cmd.add_option("--torch", slot(EnvField::torch),
                 v + " this LibTorch/PyTorch version (e.g. 2.4.0); detected: the LibTorch scout was built with")
      ->group("Environment");
}

std::string env_line(const catalog::Environment& env) {
  std::string out;
  for (catalog::EnvField f : catalog::k_env_fields)
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", catalog::env_field_name(f), env.get(f));
  return out;
}

std::string rows_text(std::span<const std::int64_t> rows, bool uniform) {
  if (uniform) return std::to_string(rows[0]);
  std::string s = "[";
  for (std::size_t i = 0; i < rows.size(); ++i) s += fmt::format("{}{}", i ? "," : "", rows[i]);
  return s + "]";
}

std::string render_build_text(const catalog::Environment& env, const catalog::KernelConfig& cfg,
                              const catalog::ShapeSpace& space, const catalog::Compression& c) {
  std::string out = fmt::format(
      "scout catalog: {} shapes -> {} representatives in {} regimes ({:.2f}% fewer replays)\n", c.shapes,
      c.representatives, c.regimes.size(),
      c.shapes ? 100.0 * (1.0 - static_cast<double>(c.representatives) / static_cast<double>(c.shapes)) : 0.0);
  out += fmt::format("kernel: persistent grouped GEMM, tile {}x{}x{}, {} SMs, experts {}, hidden {}, output {}\n",
                     cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.sms, cfg.experts, cfg.hidden, cfg.output_dim);
  out += fmt::format("environment: {}\n\n", env_line(env));
  out += fmt::format("{:<40} {:>9} {:>14} {:>5}  {}\n", "regime (forward/input_grad/weight_grad)", "members",
                     "obligations", "reps", "representatives (rows)");
  std::vector<std::int64_t> scratch;
  for (const auto& r : c.regimes) {
    std::string reps;
    const std::size_t shown = std::min<std::size_t>(r.representatives.size(), 12);
    for (std::size_t i = 0; i < shown; ++i)
      reps += (i ? " " : "") + rows_text(space.rows(r.representatives[i], scratch), space.is_uniform());
    if (shown < r.representatives.size()) reps += fmt::format(" ... ({} more)", r.representatives.size() - shown);
    out += fmt::format("{:<40} {:>9} {:>14} {:>5}  {}\n", catalog::fingerprint_label(r.fingerprint), r.members,
                       r.obligations, r.representatives.size(), reps);
  }
  out += fmt::format("{:<40} {:>9} {:>14} {:>5}\n", "total", c.shapes, c.obligations, c.representatives);
  out += fmt::format("replay work per rotation: {} work items (of {} covered)\n", c.replay_work_items, c.obligations);
  if (c.observed_shapes)
    out += fmt::format("observed counts used for {} shapes ({} differ from the model)\n", c.observed_shapes,
                       c.observed_differ);
  return out;
}

}  // namespace

CommandRunner register_catalog(CLI::App& cmd, const GlobalOptions& globals) {
  cmd.require_subcommand(1);
  cmd.fallthrough();
  auto b = std::make_shared<CatalogBuildOptions>();
  CLI::App* build = cmd.add_subcommand(
      "build", "Model the expert kernels, compress the shape space to representatives, write the catalog");
  build->fallthrough();
  auto* rows = build->add_option(
      "--rows", b->rows,
      "Admitted rows per expert, the same for every expert: a range or list, e.g. 1-3457 or 31,32,63");
  auto* rows_file =
      build->add_option("--rows-file", b->rows_file,
                        "File of per-expert row vectors (heterogeneous): one vector per line, or JSON [[...], ...]");
  rows->excludes(rows_file);
  build->add_option("--experts", b->experts,
                    "Experts served by one kernel invocation (default 1, or the rows file's vector length)");
  build->add_option("--hidden", b->hidden, "Hidden size H (forward: rows x H -> rows x O)")->default_str("128");
  build->add_option("--output-dim", b->output_dim, "Output size O")->default_str("128");
  build->add_option("--tile", b->tile, "Tile M x N x K of the grouped GEMM")->default_str("64x64x32");
  build->add_option("--sms", b->sms, "Persistent CTAs (grid size); default: the detected GPU's SM count");
  build->add_option("--observations", b->observations,
                    "Measured counts (scout.catalog.observations JSON) replacing the model's for their shapes");
  build->add_option("-o,--output", b->output, "Write the catalog here (atomically); stdout when absent");
  add_env_flags(*build, b->env, "Record");
  build->footer(
      "Example: scout catalog build --rows 1-3457 --hidden 128 --output-dim 128 --tile 64x64x32 --sms 108 -o "
      "catalog.json");

  auto c = std::make_shared<CatalogCheckOptions>();
  CLI::App* check = cmd.add_subcommand(
      "check", "Check that a catalog was built for this machine's GPU, driver, CUDA, NCCL and LibTorch");
  check->fallthrough();
  check->add_option("catalog", c->catalog, "The catalog file (scout catalog build -o FILE)")->required();
  add_env_flags(*check, c->env, "Compare with");
  check->footer("Example (CI on a new image): scout catalog check catalog.json || rebuild the catalog");

  // require_subcommand(1): when build was not chosen, check was.
  return [b, c, build, &globals]() {
    const OutputFormat format = resolve_format(globals.format);
    if (build->parsed()) {
      b->format = format;
      return run_catalog_build(*b);
    }
    c->format = format;
    return run_catalog_check(*c);
  };
}

int run_catalog_build(const CatalogBuildOptions& o) {
  using namespace catalog;
  const auto started = std::chrono::steady_clock::now();
  value_or_throw(validate_overrides(o.env.values));
  if (!o.rows && !o.rows_file)
    throw FatalError(usage_error("no shape space was given", "give --rows or --rows-file",
                                 "e.g. scout catalog build --rows 1-3457 --sms 108"));

  KernelConfig cfg = value_or_throw(parse_tile(o.tile, KernelConfig{}));
  cfg.hidden = o.hidden;
  cfg.output_dim = o.output_dim;
  if (o.experts && (*o.experts < 1 || *o.experts > k_max_experts))
    throw FatalError(usage_error(fmt::format("--experts is {}", *o.experts),
                                 fmt::format("it must be between 1 and {}", k_max_experts)));

  // The shape space.
  ShapeSpace space = ShapeSpace::uniform(1, {});
  CatalogProvenance prov;
  if (o.rows) {
    cfg.experts = o.experts.value_or(1);
    space = ShapeSpace::uniform(cfg.experts, value_or_throw(parse_rows_spec(*o.rows)));
    prov.rows_source = "--rows " + *o.rows;
  } else {
    std::string text = value_or_throw(read_small_file(*o.rows_file, catalog::k_max_file_bytes));
    RowVectors rv = value_or_throw(parse_rows_file(text, o.experts, *o.rows_file));
    cfg.experts = rv.experts;
    prov.duplicates = rv.duplicates;
    space = ShapeSpace::heterogeneous(rv.experts, std::move(rv.values));
    prov.rows_source = *o.rows_file;
  }

  // The environment; the SM count defaults to the detected one.
  Environment env = detect_environment(o.env.values);
  if (o.sms) {
    cfg.sms = *o.sms;
  } else {
    const std::string& detected = env.get(EnvField::sm_count);
    if (detected == k_none)
      throw FatalError(usage_error("--sms was not given and no GPU was detected",
                                   env.detection_note.empty() ? std::string("no CUDA device") : env.detection_note,
                                   "give --sms (the persistent grid size, e.g. 108 for an A100)"));
    cfg.sms = std::stoll(detected);
  }
  if (env.get(EnvField::sm_count) != k_none && env.get(EnvField::sm_count) != std::to_string(cfg.sms))
    spdlog::warn("the kernel uses {} persistent CTAs but the GPU has {} SMs", cfg.sms, env.get(EnvField::sm_count));
  value_or_throw(validate(cfg));

  Observations observations;
  if (o.observations) {
    std::string text = value_or_throw(read_small_file(*o.observations, catalog::k_max_file_bytes));
    observations = value_or_throw(parse_observations(text, cfg, *o.observations));
    prov.observations_file = *o.observations;
    prov.observations_given = observations.size();
  }

  Compression comp = value_or_throw(compress(cfg, space, &observations));
  prov.created_at = now_rfc3339();
  spdlog::info("catalog: {} shapes -> {} representatives in {:.1f} ms", comp.shapes, comp.representatives,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());

  const std::string json = catalog_to_json(env, cfg, space, comp, prov).dump(2) + "\n";
  if (o.output) {
    // -o names a file the user chose: a path that cannot be written is a usage error.
    if (auto st = atomic_write_file(*o.output, json); !st) {
      Error e = st.error();
      e.code = ExitCode::usage;
      e.hint = "give -o a path in an existing, writable directory with free space";
      throw FatalError(e);
    }
  }
  if (o.format == OutputFormat::text) {
    std::string text = render_build_text(env, cfg, space, comp);
    if (o.output) text += fmt::format("catalog written to {}\n", *o.output);
    write_stdout(text);
  } else if (!o.output) {
    write_stdout(json);
  }
  std::fflush(stdout);
  return to_int(ExitCode::healthy);
}

int run_catalog_check(const CatalogCheckOptions& o) {
  using namespace catalog;
  value_or_throw(validate_overrides(o.env.values));
  const std::string text = value_or_throw(read_small_file(o.catalog, catalog::k_max_file_bytes));
  const LoadedCatalog cat = value_or_throw(parse_catalog(text, o.catalog));
  const Environment current = detect_environment(o.env.values);
  const std::vector<EnvDifference> diffs = compare(cat.environment, current);

  Verdict v;
  v.command = "catalog";
  v.scope = Scope::job;
  nlohmann::json d;
  d["subcommand"] = "check";
  d["catalog"] = o.catalog;
  d["catalog_schema_version"] = cat.schema_version;
  d["catalog_created_at"] = cat.created_at;
  d["match"] = diffs.empty();
  d["differences"] = nlohmann::json::array();
  std::string listed;
  for (const auto& diff : diffs) {
    d["differences"].push_back({{"field", env_field_name(diff.field)},
                                {"recorded", diff.recorded},
                                {"current", diff.current},
                                {"flag", env_field_flag(diff.field)}});
    listed += fmt::format("{}{} (catalog {}, here {})", listed.empty() ? "" : ", ", env_field_name(diff.field),
                          diff.recorded, diff.current);
  }
  d["recorded"] = to_json(cat.environment);
  d["current"] = to_json(current);
  d["kernel"] = kernel_config_json(cat.config);
  d["totals"] = {{"shapes", cat.shapes}, {"representatives", cat.representatives}, {"regimes", cat.regimes}};
  v.details = std::move(d);
  if (diffs.empty()) {
    v.status = VerdictStatus::healthy;
    v.action = "none";
    v.summary = fmt::format("the catalog matches this environment ({} representatives for {} shapes)",
                            cat.representatives, cat.shapes);
    return emit_verdict(v, o.format);
  }
  v.status = VerdictStatus::inconclusive;
  v.action = "rebuild_catalog";
  v.summary = fmt::format(
      "the catalog was built for another environment: {}: {}",
      diffs.size() == 1 ? std::string("1 field differs") : fmt::format("{} fields differ", diffs.size()), listed);
  if (o.format == OutputFormat::text) {
    std::string out = render_text(v);
    for (const auto& diff : diffs)
      out += fmt::format("  {:<20} catalog {:<24} here {:<24} ({})\n", env_field_name(diff.field), diff.recorded,
                         diff.current, env_field_flag(diff.field));
    write_stdout(out);
  } else {
    emit_verdict(v, o.format);
  }
  std::fprintf(stderr,
               "scout catalog: error: the catalog %s does not match this environment; %s; rebuild the catalog on this "
               "image with "
               "'scout catalog build' (or pass the environment flags if detection is wrong)\n",
               o.catalog.c_str(), listed.c_str());
  return to_int(exit_code_for(v));  // inconclusive: 3, as the status says (docs/contracts.md "Exit codes")
}

}  // namespace scout
