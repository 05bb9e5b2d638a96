// Catalog files: the row specifications a catalog is built from, measured
// observations, and the catalog document itself (schemas/catalog.schema.json).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/catalog/compress.hpp"
#include "lib/catalog/environment.hpp"
#include "lib/catalog/model.hpp"

namespace scout::catalog {

inline constexpr std::string_view k_catalog_schema = "scout.catalog";
inline constexpr std::string_view k_catalog_schema_version = "1.0";
inline constexpr int k_catalog_schema_major = 1;
inline constexpr std::string_view k_observations_schema = "scout.catalog.observations";
inline constexpr std::string_view k_observations_schema_version = "1.0";
inline constexpr std::string_view k_rows_schema = "scout.catalog.rows";
// Identifies the execution-path model; a new model means a new catalog.
inline constexpr std::string_view k_kernel_name = "persistent_grouped_gemm";
inline constexpr int k_model_version = 1;
// Largest input file scout reads (rows files, observations, catalogs).
inline constexpr std::size_t k_max_file_bytes = std::size_t{1} << 30;

// Parses --rows: "1-3457", "31,32,63" or a mix; every value in 1..k_max_rows.
// Returns the values sorted ascending without duplicates. Errors are usage errors.
Result<std::vector<std::int64_t>> parse_rows_spec(std::string_view text);

// Per-expert row vectors read from a file.
struct RowVectors {
  std::int64_t experts = 0;
  std::vector<std::int64_t> values;  // shapes * experts, shape-major, duplicates removed
  std::size_t duplicates = 0;        // vectors dropped because they repeat an earlier one
};

// Parses a rows file: JSON (an array of arrays of integers, or an object
// {"schema": "scout.catalog.rows", "schema_version": "1.0", "shapes": [...]})
// or text (one vector per line, integers separated by commas or spaces, '#'
// comments, blank lines ignored). `experts`, when given, is the length every
// vector must have. `origin` names the file in errors (input errors, exit 4).
Result<RowVectors> parse_rows_file(std::string_view text, std::optional<std::int64_t> experts, std::string_view origin);

// Parses an observations document (scout.catalog.observations 1.x) whose
// kernel configuration must equal `config`. Every observation must name a
// row vector of config.experts entries, all three kernels, role names of each
// kernel, and work_items equal to the sum of its role counts.
Result<Observations> parse_observations(std::string_view text, const KernelConfig& config, std::string_view origin);

// An observations document for `config` holding `observed` (row vector -> counts).
nlohmann::ordered_json observations_to_json(const KernelConfig& config, const Observations& observed);

// {"work_items": N, "roles": {name: count}} for one kernel of a count vector
// (only roles that occur).
nlohmann::ordered_json kernel_counts_json(const CountVector& counts, Kernel kernel);

// {"name", "model_version", "tile": {"m","n","k"}, "sms", "hidden", "output_dim", "experts"}.
nlohmann::ordered_json kernel_config_json(const KernelConfig& config);
// Reads and validates a kernel configuration object (input errors).
Result<KernelConfig> kernel_config_from_json(const nlohmann::json& j, std::string_view what);

// What a catalog records about how it was built.
struct CatalogProvenance {
  std::string created_at;
  std::string rows_source;        // "--rows 1-3457" or the rows file's path
  std::size_t duplicates = 0;     // repeated vectors dropped from the rows file
  std::string observations_file;  // "" when none
  std::size_t observations_given = 0;
};

// The catalog document (schemas/catalog.schema.json).
nlohmann::ordered_json catalog_to_json(const Environment& env, const KernelConfig& config, const ShapeSpace& space,
                                       const Compression& compression, const CatalogProvenance& provenance);

// The parts of a catalog document `scout catalog check` needs.
struct LoadedCatalog {
  std::string schema_version;
  std::string created_at;
  Environment environment;
  KernelConfig config;
  std::uint64_t shapes = 0;
  std::uint64_t representatives = 0;
  std::uint64_t regimes = 0;
};

// Parses and validates a catalog document; input errors name what is wrong
// and say to rebuild the catalog.
Result<LoadedCatalog> parse_catalog(std::string_view text, std::string_view origin);

}  // namespace scout::catalog
