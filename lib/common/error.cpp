#include "lib/common/error.hpp"

namespace scout {

std::string Error::message() const {
  std::string out = what;
  for (const std::string* part : {&why, &hint}) {
    if (part->empty()) continue;
    if (!out.empty()) out += "; ";
    out += *part;
  }
  return out;
}

std::string_view exit_code_name(ExitCode code) {
  switch (code) {
    case ExitCode::healthy:
      return "healthy";
    case ExitCode::attributed:
      return "attributed";
    case ExitCode::usage:
      return "usage";
    case ExitCode::inconclusive:
      return "inconclusive";
    case ExitCode::bad_input:
      return "bad_input";
    case ExitCode::unavailable:
      return "unavailable";
    case ExitCode::internal:
      return "internal";
  }
  return "unknown";
}

namespace {
Error make(ExitCode code, std::string what, std::string why, std::string hint) {
  return Error{code, std::move(what), std::move(why), std::move(hint)};
}
}  // namespace

Error usage_error(std::string what, std::string why, std::string hint) {
  return make(ExitCode::usage, std::move(what), std::move(why), std::move(hint));
}
Error input_error(std::string what, std::string why, std::string hint) {
  return make(ExitCode::bad_input, std::move(what), std::move(why), std::move(hint));
}
Error unavailable_error(std::string what, std::string why, std::string hint) {
  return make(ExitCode::unavailable, std::move(what), std::move(why), std::move(hint));
}
Error internal_error(std::string what, std::string why, std::string hint) {
  return make(ExitCode::internal, std::move(what), std::move(why), std::move(hint));
}

}  // namespace scout
