#include "lib/checkpoint/torch_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "lib/checkpoint/safetensors.hpp"
#include "lib/checkpoint/zip_archive.hpp"
#include "lib/hash/crc32.hpp"

namespace scout::checkpoint {

std::uint64_t TorchTensor::numel() const {
  std::uint64_t n = 1;
  for (auto d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

bool TorchTensor::contiguous() const {
  std::int64_t expect = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) return numel() == 0;
    expect *= shape[i];
  }
  return true;
}

namespace {

struct StorageClass {
  const char* name;
  DType dtype;
};
constexpr StorageClass k_storages[] = {
    {"FloatStorage", DType::f32},     {"DoubleStorage", DType::f64},       {"HalfStorage", DType::f16},
    {"BFloat16Storage", DType::bf16}, {"LongStorage", DType::i64},         {"IntStorage", DType::i32},
    {"ShortStorage", DType::i16},     {"CharStorage", DType::i8},          {"ByteStorage", DType::u8},
    {"BoolStorage", DType::boolean},  {"ComplexFloatStorage", DType::c64}, {"ComplexDoubleStorage", DType::c128},
};

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName k_dtypes[] = {
    {"float32", DType::f32},
    {"float", DType::f32},
    {"float64", DType::f64},
    {"double", DType::f64},
    {"float16", DType::f16},
    {"half", DType::f16},
    {"bfloat16", DType::bf16},
    {"int64", DType::i64},
    {"long", DType::i64},
    {"int32", DType::i32},
    {"int", DType::i32},
    {"int16", DType::i16},
    {"short", DType::i16},
    {"int8", DType::i8},
    {"uint8", DType::u8},
    {"bool", DType::boolean},
    {"uint16", DType::u16},
    {"uint32", DType::u32},
    {"uint64", DType::u64},
    {"complex64", DType::c64},
    {"cfloat", DType::c64},
    {"complex128", DType::c128},
    {"cdouble", DType::c128},
    {"float8_e4m3fn", DType::f8_e4m3},
    {"float8_e5m2", DType::f8_e5m2},
    {"float8_e4m3fnuz", DType::f8_e4m3fnuz},
    {"float8_e5m2fnuz", DType::f8_e5m2fnuz},
    {"float8_e8m0fnu", DType::f8_e8m0},
};

pickle::Policy make_policy() {
  pickle::Policy p;
  for (const char* g : {"collections.OrderedDict",
                        "builtins.set",
                        "builtins.frozenset",
                        "_codecs.encode",
                        "torch._utils._rebuild_tensor_v2",
                        "torch._utils._rebuild_tensor_v3",
                        "torch._utils._rebuild_parameter",
                        "torch._utils._rebuild_parameter_with_state",
                        "torch._tensor._rebuild_from_type_v2",
                        "torch.Tensor",
                        "torch.nn.parameter.Parameter",
                        "torch.storage.UntypedStorage",
                        "torch.Size",
                        "torch.device",
                        "argparse.Namespace",
                        "builtins.slice",
                        "builtins.complex",
                        "builtins.bytearray",
                        "numpy.core.multiarray.scalar",
                        "numpy._core.multiarray.scalar",
                        "numpy.dtype",
                        "torch.serialization._get_layout",
                        "builtins.getattr",
                        "pathlib.PosixPath"})
    p.allowed_globals.insert(g);
  for (const auto& s : k_storages) p.allowed_globals.insert(std::string("torch.") + s.name);
  for (const auto& d : k_dtypes) p.allowed_globals.insert(std::string("torch.") + d.name);
  return p;
}

bool is_int(const pickle::Value* v) {
  return v && v->kind == pickle::Kind::integer;
}

Result<std::vector<std::int64_t>> int_tuple(const pickle::Value* v, const std::string& what) {
  if (!v) return input_error(what + " is missing");
  const pickle::Value* t = v;
  if (t->kind == pickle::Kind::object && t->class_name() == "torch.Size" && !t->items.empty()) t = t->items[0];
  if (t->kind != pickle::Kind::tuple && t->kind != pickle::Kind::list)
    return input_error(what + " is not a tuple of ints");
  std::vector<std::int64_t> out;
  for (const auto* i : t->items) {
    if (!is_int(i) || i->integer < 0) return input_error(what + " holds a value that is not a non-negative int");
    out.push_back(i->integer);
  }
  return out;
}

std::string key_text(const pickle::Value& k) {
  switch (k.kind) {
    case pickle::Kind::string:
      return k.text;
    case pickle::Kind::integer:
      return std::to_string(k.integer);
    default:
      return pickle::render(k, 80);
  }
}

class Flattener {
 public:
  using Resolve = std::function<Result<std::pair<std::uint64_t, std::uint64_t>>(const std::string& key)>;
  Flattener(const std::string& label, TorchArchive& out, const Resolve& resolve)
      : m_label(label), m_out(out), m_resolve(resolve) {}

  Status walk(const pickle::Value& v, const std::string& name, int depth) {
    if (depth > 64) return bad(name, "nesting deeper than 64 levels");
    using pickle::Kind;
    switch (v.kind) {
      case Kind::dict:
        for (const auto& [k, item] : v.entries) {
          const std::string key = key_text(*k);
          auto st = walk(*item, name.empty() ? key : name + "." + key, depth + 1);
          if (!st) return st;
        }
        return Ok{};
      case Kind::list:
      case Kind::tuple:
        for (std::size_t i = 0; i < v.items.size(); ++i) {
          auto st = walk(*v.items[i], name.empty() ? std::to_string(i) : name + "." + std::to_string(i), depth + 1);
          if (!st) return st;
        }
        return Ok{};
      case Kind::object:
        if (is_tensor_class(v.class_name())) return tensor(v, name.empty() ? "tensor" : name, depth);
        [[fallthrough]];
      default:
        m_out.leaves.push_back({name.empty() ? "value" : name, pickle::render(v, 4096)});
        return Ok{};
    }
  }

 private:
  const std::string& m_label;
  TorchArchive& m_out;
  const Resolve& m_resolve;

  static bool is_tensor_class(const std::string& c) {
    return c == "torch._utils._rebuild_tensor_v2" || c == "torch._utils._rebuild_tensor_v3" ||
           c == "torch._utils._rebuild_parameter" || c == "torch._utils._rebuild_parameter_with_state" ||
           c == "torch._tensor._rebuild_from_type_v2";
  }
  Error bad(const std::string& name, const std::string& why) const {
    return input_error(fmt::format("{}: '{}': {}", m_label, name, why), {},
                       "the file is damaged or was not written by torch.save");
  }

  Status tensor(const pickle::Value& v, const std::string& name, int depth) {
    const std::string& c = v.class_name();
    const auto& a = v.items;
    if (c == "torch._utils._rebuild_parameter" || c == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty() || a[0]->kind != pickle::Kind::object || !is_tensor_class(a[0]->class_name()) || depth > 8)
        return bad(name, "parameter without tensor data");
      return tensor(*a[0], name, depth + 1);
    }
    if (c == "torch._tensor._rebuild_from_type_v2") {
      // (func, new_type, args, state): func(*args) is the tensor; new_type is a subclass such as Parameter.
      if (a.size() < 3 || a[0]->kind != pickle::Kind::global || a[2]->kind != pickle::Kind::tuple || depth > 8)
        return bad(name, "malformed _rebuild_from_type_v2");
      pickle::Value inner;
      inner.kind = pickle::Kind::object;
      inner.text = a[0]->text;
      inner.items = a[2]->items;
      if (!is_tensor_class(inner.text))
        return bad(name, fmt::format("tensor rebuilt by {}, which scout does not read", inner.text));
      return tensor(inner, name, depth + 1);
    }
    const bool v3 = c == "torch._utils._rebuild_tensor_v3";
    if (a.size() < (v3 ? 7u : 6u)) return bad(name, "tensor rebuild with too few arguments");
    const pickle::Value* storage = a[0];
    if (storage->kind != pickle::Kind::persistent || !storage->state || storage->state->kind != pickle::Kind::tuple ||
        storage->state->items.size() < 5)
      return bad(name, "tensor without a storage reference");
    const auto& pid = storage->state->items;
    if (pid[0]->kind != pickle::Kind::string || pid[0]->text != "storage" || pid[1]->kind != pickle::Kind::global ||
        pid[2]->kind != pickle::Kind::string || !is_int(pid[4]) || pid[4]->integer < 0)
      return bad(name, "malformed storage reference");
    TorchTensor t;
    t.name = name;
    const std::string& cls = pid[1]->text;
    std::uint64_t storage_elem_bytes = 1;
    if (v3) {
      if (a[6]->kind != pickle::Kind::global || a[6]->text.rfind("torch.", 0) != 0)
        return bad(name, "tensor dtype is not a torch dtype");
      auto dt = torch_dtype(std::string_view(a[6]->text).substr(6));
      if (!dt) return bad(name, fmt::format("dtype {} is not one scout hashes", a[6]->text));
      t.dtype = *dt;
      if (cls != "torch.storage.UntypedStorage") {
        bool typed = false;
        for (const auto& s : k_storages)
          if (cls == std::string("torch.") + s.name) typed = true, storage_elem_bytes = dtype_size(s.dtype);
        if (!typed) return bad(name, fmt::format("storage class {} is not one torch.save writes", cls));
      }
    } else {
      bool found = false;
      for (const auto& s : k_storages)
        if (cls == std::string("torch.") + s.name) found = true, t.dtype = s.dtype;
      if (!found) return bad(name, fmt::format("storage class {} is not one scout reads", cls));
      storage_elem_bytes = dtype_size(t.dtype);
    }
    if (!is_int(a[1]) || a[1]->integer < 0) return bad(name, "storage offset is not a non-negative int");
    t.storage_offset = static_cast<std::uint64_t>(a[1]->integer);
    auto shape = int_tuple(a[2], "size");
    if (!shape) return bad(name, shape.error().what);
    auto strides = int_tuple(a[3], "stride");
    if (!strides) return bad(name, strides.error().what);
    if (shape->size() != strides->size()) return bad(name, "size and stride differ in rank");
    t.shape = std::move(*shape);
    t.strides = std::move(*strides);
    t.storage_key = pid[2]->text;
    auto where = m_resolve(t.storage_key);
    if (!where) return bad(name, where.error().what);
    t.storage_data = where->first;
    t.storage_bytes = where->second;
    const std::uint64_t declared = static_cast<std::uint64_t>(pid[4]->integer);
    if (declared > t.storage_bytes / storage_elem_bytes)
      return bad(name, fmt::format("storage {} declares {} elements but its entry holds {} bytes", t.storage_key,
                                   declared, t.storage_bytes));
    // Extent of the view, overflow-checked: (offset + sum (size-1)*stride + 1) * element size.
    const std::uint64_t es = dtype_size(t.dtype);
    std::uint64_t numel = 1, last = t.storage_offset;
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      std::uint64_t d = static_cast<std::uint64_t>(t.shape[i]), s = static_cast<std::uint64_t>(t.strides[i]), step = 0;
      if (__builtin_mul_overflow(numel, d, &numel)) return bad(name, "size overflows");
      if (d > 0 && (__builtin_mul_overflow(d - 1, s, &step) || __builtin_add_overflow(last, step, &last)))
        return bad(name, "stride overflows");
    }
    std::uint64_t need = 0;
    if (numel > 0 && (__builtin_add_overflow(last, std::uint64_t{1}, &need) || __builtin_mul_overflow(need, es, &need)))
      return bad(name, "view overflows");
    if (numel > 0 && need > t.storage_bytes)
      return bad(
          name, fmt::format("view needs {} bytes of storage {} but it holds {}", need, t.storage_key, t.storage_bytes));
    std::uint64_t total = 0;
    if (__builtin_mul_overflow(numel, es, &total)) return bad(name, "size overflows");
    m_out.tensors.push_back(std::move(t));
    return Ok{};
  }
};

}  // namespace

std::optional<DType> torch_dtype(std::string_view name) {
  for (const auto& d : k_dtypes)
    if (name == d.name) return d.dtype;
  return std::nullopt;
}

const pickle::Policy& torch_pickle_policy() {
  static const pickle::Policy p = make_policy();
  return p;
}

Status flatten_torch_value(const pickle::Value& root, const std::string& label, TorchArchive& out,
                           const Flattener::Resolve& resolve) {
  Flattener f(label, out, resolve);
  auto st = f.walk(root, "", 0);
  if (!st) return st;
  std::vector<std::string> names;
  for (const auto& t : out.tensors) names.push_back(t.name);
  for (const auto& l : out.leaves) names.push_back(l.name);
  std::sort(names.begin(), names.end());
  for (std::size_t i = 1; i < names.size(); ++i)
    if (names[i] == names[i - 1])
      return input_error(fmt::format("{}: two values are named '{}'", label, names[i]),
                         "nested keys flattened with dots collide", "use keys without dots, or unique keys");
  return Ok{};
}

Result<TorchArchive> read_torch_archive(int fd, std::uint64_t base, std::uint64_t length, const std::string& label) {
  auto zip = read_zip_directory(fd, base, length, label);
  if (!zip) return zip.error();
  const ZipEntry* pkl = nullptr;
  for (const auto& e : zip->entries) {
    const auto slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      pkl = &e;
      break;
    }
  }
  if (!pkl)
    return input_error(fmt::format("{}: zip archive without <name>/data.pkl", label),
                       "it is a zip file but not a torch.save checkpoint",
                       "give files written by torch.save or safetensors");
  TorchArchive out;
  out.prefix = pkl->name.substr(0, pkl->name.find('/'));
  if (pkl->method != 0)
    return input_error(fmt::format("{}: data.pkl is compressed (method {})", label, pkl->method),
                       "torch.save stores entries uncompressed");
  if (pkl->size > torch_pickle_policy().max_bytes)
    return input_error(fmt::format("{}: data.pkl of {} bytes is too large", label, pkl->size));
  std::vector<std::byte> bytes(static_cast<std::size_t>(pkl->size));
  if (!read_aside(fd, bytes.data(), bytes.size(), pkl->data_offset))
    return input_error(fmt::format("{}: cannot read data.pkl", label));
  out.pickle_entry = pkl->name;
  out.pickle_crc_expected = pkl->crc32;
  out.pickle_crc_actual = hash::crc32(bytes);
  auto doc = pickle::parse(bytes, torch_pickle_policy());
  if (!doc) {
    const Error& e = doc.error();
    return input_error(
        fmt::format("{}: {}", label, e.what), "scout reads torch.save files without running their code",
        "save tensors, containers and plain values; convert other objects (e.g. with .state_dict() or vars())");
  }
  std::map<std::string, const ZipEntry*> storages;
  const std::string data_prefix = out.prefix + "/data/";
  for (const auto& e : zip->entries)
    if (e.name.rfind(data_prefix, 0) == 0) storages[e.name.substr(data_prefix.size())] = &e;
  std::set<const ZipEntry*> used;
  auto resolve = [&](const std::string& key) -> Result<std::pair<std::uint64_t, std::uint64_t>> {
    auto it = storages.find(key);
    if (it == storages.end()) return input_error(fmt::format("storage entry data/{} is missing", key));
    if (it->second->method != 0) return input_error(fmt::format("storage entry data/{} is compressed", key));
    used.insert(it->second);
    return std::make_pair(it->second->data_offset, it->second->size);
  };
  auto st = flatten_torch_value(*doc->root, label, out, resolve);
  if (!st) return st.error();
  for (const ZipEntry* e : used) out.storages.push_back({e->name, e->data_offset, e->size, e->crc32});
  for (const auto& e : zip->entries) {
    if (&e == pkl || used.count(&e) || e.method != 0 || e.size > (std::uint64_t{1} << 20)) continue;
    std::vector<std::byte> small(static_cast<std::size_t>(e.size));
    if (!read_aside(fd, small.data(), small.size(), e.data_offset))
      return input_error(fmt::format("{}: cannot read {}", label, e.name));
    const std::uint32_t crc = hash::crc32(small);
    if (crc != e.crc32) out.other_crc_failures.push_back({e.name, e.crc32, crc});
  }
  std::sort(out.storages.begin(), out.storages.end(),
            [](const TorchStorage& a, const TorchStorage& b) { return a.data < b.data; });
  return out;
}

}  // namespace scout::checkpoint
