// `scout catalog build` and `scout catalog check`: the MoE shape catalog
// (lib/catalog) from the command line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "commands/common.hpp"
#include "lib/catalog/environment.hpp"

namespace scout {

// Environment flags shared by build and check; nullopt: detect.
struct CatalogEnvFlags {
  catalog::EnvOverrides values;
};

struct CatalogBuildOptions {
  std::optional<std::string> rows;       // --rows "1-3457" or "31,32,63"
  std::optional<std::string> rows_file;  // --rows-file PATH (per-expert vectors)
  std::optional<std::int64_t> experts;   // --experts E (default 1, or the rows file's vector length)
  std::int64_t hidden = 128;
  std::int64_t output_dim = 128;
  std::string tile = "64x64x32";
  std::optional<std::int64_t> sms;  // default: the detected SM count
  std::optional<std::string> observations;
  std::optional<std::string> output;  // -o FILE; stdout when absent
  CatalogEnvFlags env;
  OutputFormat format = OutputFormat::json;
};

struct CatalogCheckOptions {
  std::string catalog;  // path of the catalog document
  CatalogEnvFlags env;
  OutputFormat format = OutputFormat::json;
};

// Adds `build` and `check` under the `catalog` command and returns the runner
// that dispatches to the one chosen.
CommandRunner register_catalog(CLI::App& command, const GlobalOptions& globals);

// Builds the catalog and writes it to options.output or stdout; returns the exit code.
int run_catalog_build(const CatalogBuildOptions& options);

// Compares the catalog's recorded environment with this one; prints a verdict
// and returns 0 when they match, 4 (bad_input) when they differ.
int run_catalog_check(const CatalogCheckOptions& options);

}  // namespace scout
