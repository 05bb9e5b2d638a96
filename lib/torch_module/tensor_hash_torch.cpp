// scout_torch_hash_tensor: the tensor hash of an at::Tensor (declared in
// lib/hash/torch_hash.hpp). Only ATen's Tensor header is included, not
// torch/torch.h (compile cost, glog macros).
#include <ATen/ATen.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "lib/hash/gpu_hash.hpp"
#include "lib/hash/tensor_hash.hpp"
#include "lib/hash/torch_hash.hpp"

namespace {

std::optional<scout::DType> scout_dtype(c10::ScalarType t) {
  using scout::DType;
  switch (t) {
    case c10::ScalarType::Double:
      return DType::f64;
    case c10::ScalarType::Float:
      return DType::f32;
    case c10::ScalarType::Half:
      return DType::f16;
    case c10::ScalarType::BFloat16:
      return DType::bf16;
    case c10::ScalarType::Long:
      return DType::i64;
    case c10::ScalarType::Int:
      return DType::i32;
    case c10::ScalarType::Short:
      return DType::i16;
    case c10::ScalarType::Char:
      return DType::i8;
    case c10::ScalarType::Byte:
      return DType::u8;
    case c10::ScalarType::Bool:
      return DType::boolean;
    default:
      return std::nullopt;
  }
}

void put(char* message, std::size_t size, const std::string& text) {
  if (message && size) std::snprintf(message, size, "%s", text.c_str());
}

std::uint64_t hash_or_throw(const at::Tensor& t, unsigned threads) {
  if (!t.defined()) throw std::invalid_argument("undefined tensor");
  const auto dtype = scout_dtype(t.scalar_type());
  if (!dtype)
    throw std::invalid_argument(std::string("dtype ") + c10::toString(t.scalar_type()) + " has no tensor-hash code");
  const std::vector<std::int64_t> shape(t.sizes().begin(), t.sizes().end());
  if (t.is_cuda()) {
    const at::Tensor c = t.contiguous();
    auto h = scout::hash::gpu_hash_tensor(*dtype, shape, c.data_ptr(), c.nbytes());
    if (!h) throw std::runtime_error(h.error().message());
    return *h;
  }
  if (!t.is_cpu())
    throw std::invalid_argument(std::string("tensors on ") + c10::DeviceTypeName(t.device().type()) +
                                " are not supported");
  const auto* base = static_cast<const std::byte*>(t.data_ptr());
  if (t.is_contiguous()) return scout::hash::hash_tensor(*dtype, shape, std::span(base, t.nbytes()), threads);
  const std::vector<std::int64_t> strides(t.strides().begin(), t.strides().end());
  return scout::hash::hash_strided(*dtype, shape, strides, base, threads);
}

}  // namespace

extern "C" int scout_torch_hash_tensor(const void* tensor, unsigned threads, std::uint64_t* hash, char* message,
                                       std::size_t message_size) {
  try {
    if (!tensor || !hash) throw std::invalid_argument("null tensor or result pointer");
    *hash = hash_or_throw(*static_cast<const at::Tensor*>(tensor), threads);
    return 0;
  } catch (const std::exception& e) {
    put(message, message_size, e.what());
  } catch (...) {
    put(message, message_size, "unknown exception while hashing a tensor");
  }
  return 1;
}

extern "C" int scout_torch_hash_selftest(char* message, std::size_t message_size) {
  int failures = 0;
  auto check = [&](const at::Tensor& view, const std::string& what) {
    std::uint64_t a = 0, b = 0;
    char why[256] = {};
    const at::Tensor copy = view.contiguous();
    if (scout_torch_hash_tensor(&view, 0, &a, why, sizeof why) != 0 ||
        scout_torch_hash_tensor(&copy, 1, &b, why, sizeof why) != 0) {
      if (failures++ == 0) put(message, message_size, what + ": " + why);
      return;
    }
    if (a != b && failures++ == 0) put(message, message_size, what + ": view and contiguous copy hash differently");
  };
  try {
    at::manual_seed(7);
    const at::Tensor base = at::randn({37, 53, 5});
    for (auto type : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong, at::kInt, at::kShort, at::kChar,
                      at::kByte, at::kBool}) {
      const at::Tensor t = (base * 100).to(type);
      const std::string name = c10::toString(type);
      check(t, name + " contiguous");
      check(t.transpose(0, 1), name + " transpose(0,1)");
      check(t.permute({2, 0, 1}), name + " permute(2,0,1)");
      check(t.slice(0, 1, 30, 3), name + " slice step 3");
      check(t.select(2, 4), name + " select");
      check(t.select(1, 0).unsqueeze(1).expand({37, 9, 5}), name + " expand");
    }
    // A view with a storage offset hashes like a copy, and unlike its base.
    const at::Tensor m = at::arange(1000, at::kFloat).reshape({10, 100});
    check(m.narrow(0, 3, 4), "narrow (storage offset)");
    std::uint64_t whole = 0, part = 0;
    const at::Tensor sub = m.narrow(0, 3, 4);
    scout_torch_hash_tensor(&m, 0, &whole, nullptr, 0);
    scout_torch_hash_tensor(&sub, 0, &part, nullptr, 0);
    if (whole == part && failures++ == 0) put(message, message_size, "a slice hashed like its base");
    // Unsupported dtypes fail cleanly.
    const at::Tensor cplx = at::zeros({2}, at::kComplexFloat);
    std::uint64_t h = 0;
    char why[256] = {};
    if (scout_torch_hash_tensor(&cplx, 0, &h, why, sizeof why) == 0 && failures++ == 0)
      put(message, message_size, "complex tensor was accepted");
  } catch (const std::exception& e) {
    put(message, message_size, e.what());
    return failures + 1;
  }
  return failures;
}
