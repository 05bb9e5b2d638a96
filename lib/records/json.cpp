#include "lib/records/json.hpp"

#include <fmt/format.h>

#include "lib/common/hex.hpp"
#include "lib/tensor/dtype.hpp"

namespace scout::records {

std::string dtype_text(std::uint8_t code) {
  if (code == 0) return "none";
  std::string_view n = dtype_name(static_cast<DType>(code));
  return n == "UNKNOWN" ? fmt::format("dtype{}", code) : std::string(n);
}

nlohmann::json fingerprint_json(const Fingerprint& f) {
  return {{"group", hex64(f.group)}, {"type", collective_type_name(f.type)}, {"dtype", dtype_text(f.dtype)},
          {"count", f.count},        {"root_or_op", f.root_or_op},           {"group_seq", f.group_seq}};
}

}  // namespace scout::records
