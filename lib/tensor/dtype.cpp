#include "lib/tensor/dtype.hpp"

#include <array>
#include <utility>

namespace scout {

namespace {
struct Info {
  DType dtype;
  std::string_view name;
  std::size_t size;
};
constexpr std::array<Info, 20> k_infos = {{
    {DType::f64, "F64", 8},
    {DType::f32, "F32", 4},
    {DType::f16, "F16", 2},
    {DType::bf16, "BF16", 2},
    {DType::i64, "I64", 8},
    {DType::i32, "I32", 4},
    {DType::i16, "I16", 2},
    {DType::i8, "I8", 1},
    {DType::u8, "U8", 1},
    {DType::boolean, "BOOL", 1},
    {DType::f8_e4m3, "F8_E4M3", 1},
    {DType::f8_e5m2, "F8_E5M2", 1},
    {DType::u16, "U16", 2},
    {DType::u32, "U32", 4},
    {DType::u64, "U64", 8},
    {DType::c64, "C64", 8},
    {DType::c128, "C128", 16},
    {DType::f8_e4m3fnuz, "F8_E4M3FNUZ", 1},
    {DType::f8_e5m2fnuz, "F8_E5M2FNUZ", 1},
    {DType::f8_e8m0, "F8_E8M0", 1},
}};
const Info* find(DType d) {
  for (const auto& i : k_infos)
    if (i.dtype == d) return &i;
  return nullptr;
}
}  // namespace

std::size_t dtype_size(DType dtype) {
  const Info* i = find(dtype);
  return i ? i->size : 0;
}

std::string_view dtype_name(DType dtype) {
  const Info* i = find(dtype);
  return i ? i->name : "UNKNOWN";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& i : k_infos)
    if (i.name == name) return i.dtype;
  return std::nullopt;
}

}  // namespace scout
