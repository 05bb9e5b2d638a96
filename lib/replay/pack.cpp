#include "lib/replay/pack.hpp"

#include <fmt/format.h>

#include <cstring>

#include "lib/hash/tensor_hash.hpp"

namespace scout::replay {

namespace {

template <typename T>
void put(std::vector<std::uint8_t>& out, T v) {
  // resize and copy rather than insert a byte range: GCC 12 at -O1 (the demo's build) warns on the insert of a
  // vector built from a list (-Warray-bounds, a false positive).
  const std::size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

struct Reader {
  std::span<const std::uint8_t> b;
  std::size_t off = 0;
  bool take(void* dst, std::size_t n) {
    if (b.size() - off < n) return false;
    std::memcpy(dst, b.data() + off, n);
    off += n;
    return true;
  }
};

bool known_dtype(std::uint8_t code) {
  return code >= 1 && code <= 15;
}

}  // namespace

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<std::uint8_t> encode_pack(const std::vector<PackedTensor>& tensors) {
  std::vector<std::uint8_t> out = {'S', 'R', 'P', '1'};
  put<std::uint32_t>(out, static_cast<std::uint32_t>(tensors.size()));
  for (const auto& t : tensors) {
    put<std::uint16_t>(out, static_cast<std::uint16_t>(t.name.size()));
    out.insert(out.end(), t.name.begin(), t.name.end());
    put<std::uint8_t>(out, static_cast<std::uint8_t>(t.dtype));
    put<std::uint8_t>(out, static_cast<std::uint8_t>(t.shape.size()));
    for (auto d : t.shape) put<std::int64_t>(out, d);
    put<std::uint64_t>(out, t.data.size());
    out.insert(out.end(), t.data.begin(), t.data.end());
  }
  return out;
}

Result<std::vector<PackedTensor>> decode_pack(std::span<const std::uint8_t> bytes) {
  auto bad = [](const std::string& what) {
    return input_error(fmt::format("tensor pack: {}", what), "the replay data is damaged or of another version",
                       "re-export or rerun the source peer");
  };
  Reader r{bytes};
  char magic[4];
  if (!r.take(magic, 4) || std::memcmp(magic, "SRP1", 4) != 0) return bad("no SRP1 magic");
  std::uint32_t count = 0;
  if (!r.take(&count, 4) || count > 100000) return bad("bad tensor count");
  std::vector<PackedTensor> out;
  out.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    PackedTensor t;
    std::uint16_t nlen = 0;
    if (!r.take(&nlen, 2) || bytes.size() - r.off < nlen) return bad(fmt::format("tensor {}: truncated name", i));
    t.name.assign(reinterpret_cast<const char*>(bytes.data() + r.off), nlen);
    r.off += nlen;
    std::uint8_t code = 0, rank = 0;
    if (!r.take(&code, 1) || !known_dtype(code)) return bad(fmt::format("tensor {}: unknown dtype", t.name));
    t.dtype = static_cast<DType>(code);
    if (!r.take(&rank, 1) || rank > 16) return bad(fmt::format("tensor {}: bad rank", t.name));
    std::int64_t elements = 1;
    for (int d = 0; d < rank; ++d) {
      std::int64_t dim = 0;
      if (!r.take(&dim, 8) || dim < 0 || dim > (std::int64_t{1} << 40))
        return bad(fmt::format("tensor {}: bad dimension", t.name));
      t.shape.push_back(dim);
      if (dim != 0 && elements > (std::int64_t{1} << 40) / dim)
        return bad(fmt::format("tensor {}: too many elements", t.name));
      elements *= dim;
    }
    std::uint64_t n = 0;
    if (!r.take(&n, 8) || n != static_cast<std::uint64_t>(elements) * dtype_size(t.dtype))
      return bad(fmt::format("tensor {}: byte length disagrees with its shape", t.name));
    if (bytes.size() - r.off < n) return bad(fmt::format("tensor {}: truncated data", t.name));
    t.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(r.off),
                  bytes.begin() + static_cast<std::ptrdiff_t>(r.off + n));
    r.off += n;
    out.push_back(std::move(t));
  }
  if (r.off != bytes.size()) return bad("trailing bytes");
  return out;
}

std::uint64_t hash_packed(const PackedTensor& t) {
  return hash::hash_tensor(t.dtype, t.shape, std::as_bytes(std::span(t.data)), 1);
}

std::uint64_t hash_list(const std::vector<const PackedTensor*>& tensors) {
  std::vector<std::uint64_t> hs;
  for (const auto* t : tensors) hs.push_back(hash_packed(*t));
  const std::vector<std::int64_t> shape = {static_cast<std::int64_t>(hs.size())};
  return hash::hash_tensor(DType::u64, shape, std::as_bytes(std::span(hs)), 1);
}

}  // namespace scout::replay
