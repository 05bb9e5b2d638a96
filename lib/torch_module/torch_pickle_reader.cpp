// Reads torch.save(dict_of_tensors) zip files for scout verify-ckpt through
// torch::jit::pickle_load and hands each tensor to scout through the C ABI in
// lib/checkpoint/torch_reader.hpp. Every exception is caught here.
//
// pickle_load needs the whole archive in memory, so a .pt file is held in
// memory while it is read (scout reads one file at a time); safetensors files
// are streamed by scout itself.
#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "lib/checkpoint/torch_reader.hpp"

namespace {

const char* dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Double: return "F64";
    case c10::ScalarType::Float: return "F32";
    case c10::ScalarType::Half: return "F16";
    case c10::ScalarType::BFloat16: return "BF16";
    case c10::ScalarType::Long: return "I64";
    case c10::ScalarType::Int: return "I32";
    case c10::ScalarType::Short: return "I16";
    case c10::ScalarType::Char: return "I8";
    case c10::ScalarType::Byte: return "U8";
    case c10::ScalarType::Bool: return "BOOL";
    default: return nullptr;
  }
}

void set_error(char* error, std::size_t len, const std::string& text) {
  if (!error || len == 0) return;
  std::snprintf(error, len, "%s", text.c_str());
}

struct Walk {
  ScoutTorchTensorFn fn;
  void* ctx;
  std::string error;
  int rc = 0;
};

// Visits `value` under `prefix`: tensors go to the callback, dicts recurse,
// other values (ints, strings, lists) are skipped: they are not tensor state.
bool walk_value(Walk& w, const std::string& name, const c10::IValue& value) {
  if (value.isTensor()) {
    at::Tensor t = value.toTensor();
    if (t.is_sparse() || t.is_quantized()) {
      w.error = "tensor '" + name + "' is sparse or quantized; verify-ckpt compares dense tensors only";
      w.rc = 4;
      return false;
    }
    const char* dt = dtype_name(t.scalar_type());
    if (!dt) {
      w.error = "tensor '" + name + "' has dtype " + std::string(c10::toString(t.scalar_type())) + ", which scout does not hash";
      w.rc = 4;
      return false;
    }
    at::Tensor c = t.contiguous();
    std::vector<std::int64_t> shape(c.sizes().begin(), c.sizes().end());
    const std::uint64_t bytes = static_cast<std::uint64_t>(c.numel()) * c.element_size();
    int rc = w.fn(w.ctx, name.c_str(), dt, shape.data(), shape.size(), bytes ? c.data_ptr() : nullptr, bytes);
    if (rc != 0) {
      w.rc = rc;
      return false;
    }
    return true;
  }
  if (value.isGenericDict()) {
    for (const auto& item : value.toGenericDict()) {
      const c10::IValue& key = item.key();
      std::string k = key.isString() ? key.toStringRef() : key.isInt() ? std::to_string(key.toInt()) : std::string("?");
      if (!walk_value(w, name.empty() ? k : name + "." + k, item.value())) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int scout_torch_read_tensors(const char* path, ScoutTorchTensorFn fn, void* ctx,
                                                                                char* error, std::size_t error_len) {
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      set_error(error, error_len, std::string("cannot open ") + path + ": " + std::strerror(errno));
      return 4;
    }
    std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    c10::IValue root;
    try {
      root = torch::jit::pickle_load(data);
    } catch (const std::exception& e) {
      std::string what = e.what();
      std::string first = what.substr(0, what.find('\n'));
      // torch.save(model.state_dict()) pickles a collections.OrderedDict, whose
      // GLOBAL opcode names it in the archive's (uncompressed) data.pkl.
      static const std::string k_ordered = "collections\nOrderedDict";
      const bool ordered = what.find("OrderedDict") != std::string::npos ||
                           std::search(data.begin(), data.end(), k_ordered.begin(), k_ordered.end()) != data.end();
      if (ordered) {
        set_error(error, error_len,
                  std::string(path) + ": holds an OrderedDict (torch.save(model.state_dict())), which LibTorch 1.13 cannot read; "
                                      "save a plain dict instead: torch.save(dict(model.state_dict()), f)");
      } else {
        set_error(error, error_len,
                  std::string(path) + ": LibTorch cannot read it as torch.save(dict of tensors) (" + first +
                      "); save a plain dict of tensors with torch.save(dict(model.state_dict()), f), or use safetensors");
      }
      return 4;
    }
    if (!root.isGenericDict()) {
      set_error(error, error_len,
                std::string(path) + ": the saved object is a " + root.tagKind() +
                    ", not a dict of tensors; save it with torch.save(dict(model.state_dict()), f)");
      return 4;
    }
    Walk w{fn, ctx, {}, 0};
    walk_value(w, "", root);
    if (w.rc != 0) set_error(error, error_len, std::string(path) + ": " + w.error);
    return w.rc;
  } catch (const std::exception& e) {
    set_error(error, error_len, std::string(path) + ": internal error in the LibTorch module: " + e.what());
    return 70;
  } catch (...) {
    set_error(error, error_len, std::string(path) + ": unknown internal error in the LibTorch module");
    return 70;
  }
}
