// The one check of a document's "schema" and "schema_version" fields, used by
// every reader of a scout document (catalogs, observations, ledgers,
// manifests, verdicts). Versions are "MAJOR.MINOR": a reader accepts its own
// major version and any minor one (docs/contracts.md "JSON conventions").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "lib/common/error.hpp"

namespace scout {

// Checks that `doc` is an object whose "schema" is `schema` and whose
// "schema_version" is MAJOR.MINOR with MAJOR == `major`. `origin` names the
// document in the error (a path, "standard input"); `hint` says what to do.
// Errors are bad input.
Status check_schema(const nlohmann::json& doc, std::string_view schema, int major, std::string_view origin,
                    std::string_view hint);

}  // namespace scout
