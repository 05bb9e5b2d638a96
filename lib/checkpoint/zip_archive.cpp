#include "lib/checkpoint/zip_archive.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "lib/checkpoint/safetensors.hpp"

namespace scout::checkpoint {

const ZipEntry* ZipArchive::find(const std::string& name) const {
  for (const auto& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

namespace {

constexpr std::uint32_t k_eocd_sig = 0x06054b50;
constexpr std::uint32_t k_eocd64_sig = 0x06064b50;
constexpr std::uint32_t k_locator_sig = 0x07064b50;
constexpr std::uint32_t k_central_sig = 0x02014b50;
constexpr std::uint32_t k_local_sig = 0x04034b50;
constexpr std::uint64_t k_max_directory = std::uint64_t{512} << 20;

std::uint64_t rd(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

Error bad(const std::string& label, const std::string& why) {
  return input_error(fmt::format("{}: not a readable torch.save zip archive", label), why,
                     "the file is truncated or damaged; re-copy it or use another replica");
}

}  // namespace

Result<ZipArchive> read_zip_directory(int fd, std::uint64_t base, std::uint64_t length, const std::string& label) {
  if (length < 22) return bad(label, fmt::format("{} bytes is shorter than an end-of-directory record", length));
  // The end-of-central-directory record is in the last 22 + 65535 bytes.
  const std::uint64_t tail = std::min<std::uint64_t>(length, 22 + 65535 + 20);
  std::vector<unsigned char> buf(static_cast<std::size_t>(tail));
  if (!read_aside(fd, buf.data(), buf.size(), base + length - tail)) return bad(label, "cannot read its end");
  std::int64_t at = -1;
  for (std::int64_t i = static_cast<std::int64_t>(tail) - 22; i >= 0; --i)
    if (rd(&buf[static_cast<std::size_t>(i)], 4) == k_eocd_sig &&
        static_cast<std::uint64_t>(i) + 22 + rd(&buf[static_cast<std::size_t>(i) + 20], 2) == tail) {
      at = i;
      break;
    }
  if (at < 0) return bad(label, "no end-of-central-directory record");
  const unsigned char* e = &buf[static_cast<std::size_t>(at)];
  std::uint64_t count = rd(e + 10, 2), cd_size = rd(e + 12, 4), cd_offset = rd(e + 16, 4);
  if (rd(e + 4, 2) != 0 || rd(e + 6, 2) != 0) return bad(label, "multi-disk archives are not supported");
  if (count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
    if (at < 20 || rd(&buf[static_cast<std::size_t>(at) - 20], 4) != k_locator_sig)
      return bad(label, "zip64 locator missing");
    const std::uint64_t z64 = rd(&buf[static_cast<std::size_t>(at) - 20 + 8], 8);
    unsigned char r[56];
    if (z64 > length - 56 || !read_aside(fd, r, sizeof r, base + z64) || rd(r, 4) != k_eocd64_sig)
      return bad(label, "zip64 end record missing");
    count = rd(r + 32, 8);
    cd_size = rd(r + 40, 8);
    cd_offset = rd(r + 48, 8);
  }
  if (count > k_max_zip_entries) return bad(label, fmt::format("{} entries (limit {})", count, k_max_zip_entries));
  if (cd_size > k_max_directory || cd_offset > length || cd_size > length - cd_offset)
    return bad(label, fmt::format("central directory ({} bytes at {}) outside the {} bytes of the archive", cd_size,
                                  cd_offset, length));
  std::vector<unsigned char> cd(static_cast<std::size_t>(cd_size));
  if (!read_aside(fd, cd.data(), cd.size(), base + cd_offset)) return bad(label, "cannot read the central directory");

  ZipArchive out;
  out.entries.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(count, 1 << 16)));
  std::unordered_set<std::string> names;
  std::size_t p = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (cd.size() - p < 46 || rd(&cd[p], 4) != k_central_sig)
      return bad(label, fmt::format("central directory entry {} is damaged", i));
    const unsigned char* h = &cd[p];
    ZipEntry z;
    z.method = static_cast<std::uint16_t>(rd(h + 10, 2));
    z.crc32 = static_cast<std::uint32_t>(rd(h + 16, 4));
    z.compressed_size = rd(h + 20, 4);
    z.size = rd(h + 24, 4);
    const std::size_t name_len = rd(h + 28, 2), extra_len = rd(h + 30, 2), comment_len = rd(h + 32, 2);
    std::uint64_t local = rd(h + 42, 4);
    if (cd.size() - p - 46 < name_len + extra_len + comment_len)
      return bad(label, fmt::format("central directory entry {} is truncated", i));
    z.name.assign(reinterpret_cast<const char*>(h + 46), name_len);
    // zip64 extra field: the 64-bit values of the fields saturated above, in this order.
    const unsigned char* x = h + 46 + name_len;
    for (std::size_t q = 0; q + 4 <= extra_len;) {
      const std::size_t id = rd(x + q, 2), n = rd(x + q + 2, 2);
      if (q + 4 + n > extra_len) return bad(label, fmt::format("entry '{}': extra field overruns", z.name));
      if (id == 1) {
        std::size_t f = q + 4;
        auto take = [&](std::uint64_t& v) -> bool {
          if (v != 0xFFFFFFFF) return true;
          if (f + 8 > q + 4 + n) return false;
          v = rd(x + f, 8);
          f += 8;
          return true;
        };
        if (!take(z.size) || !take(z.compressed_size) || !take(local))
          return bad(label, fmt::format("entry '{}': zip64 field truncated", z.name));
      }
      q += 4 + n;
    }
    p += 46 + name_len + extra_len + comment_len;
    if (!names.insert(z.name).second) return bad(label, fmt::format("entry '{}' appears twice", z.name));
    // The local header gives the data's position (its name and extra lengths may differ from the directory's).
    unsigned char l[30];
    if (local > length - std::min<std::uint64_t>(length, 30) || !read_aside(fd, l, sizeof l, base + local) ||
        rd(l, 4) != k_local_sig)
      return bad(label, fmt::format("entry '{}': local header at {} is missing", z.name, local));
    if (rd(l + 26, 2) != name_len)
      return bad(label, fmt::format("entry '{}': local header disagrees with the directory", z.name));
    const std::uint64_t data = local + 30 + rd(l + 26, 2) + rd(l + 28, 2);
    if (data > length || z.compressed_size > length - data)
      return bad(label, fmt::format("entry '{}': {} bytes at {} run past the end ({} bytes)", z.name, z.compressed_size,
                                    data, length));
    if (z.method == 0 && z.compressed_size != z.size)
      return bad(label, fmt::format("entry '{}': stored entry with two sizes", z.name));
    z.data_offset = base + data;
    out.entries.push_back(std::move(z));
  }
  return out;
}

}  // namespace scout::checkpoint
