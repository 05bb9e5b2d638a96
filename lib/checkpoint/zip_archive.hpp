// A validated reader of a zip archive's central directory, for torch.save
// files (which store every entry uncompressed, "STORED"). It reads only the
// directory and the local headers; entry bytes are then read (streamed) by
// the caller at `data_offset`. The archive may sit inside a larger file (a
// torch.distributed.checkpoint .distcp file holds one per tensor chunk):
// offsets in the archive count from `base`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/common/error.hpp"

namespace scout::checkpoint {

struct ZipEntry {
  std::string name;
  std::uint16_t method = 0;  // 0 stored, 8 deflated
  std::uint64_t size = 0;    // uncompressed bytes
  std::uint64_t compressed_size = 0;
  std::uint32_t crc32 = 0;
  std::uint64_t data_offset = 0;  // absolute offset of the entry's bytes in the file
};

struct ZipArchive {
  std::vector<ZipEntry> entries;  // in central-directory order
  // The entry named `name`, or nullptr.
  const ZipEntry* find(const std::string& name) const;
};

// Most entries accepted in one archive.
inline constexpr std::uint64_t k_max_zip_entries = 4'000'000;

// Reads the central directory of the archive occupying bytes [base, base +
// length) of the open file `fd` (zip64 included). Bad input, naming `label`,
// when the directory is missing, truncated, out of bounds, inconsistent with
// a local header, or names an entry twice.
Result<ZipArchive> read_zip_directory(int fd, std::uint64_t base, std::uint64_t length, const std::string& label);

}  // namespace scout::checkpoint
