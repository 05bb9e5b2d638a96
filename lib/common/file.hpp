// The one home of whole-file I/O: crash-safe replacement of a file and
// bounded reading of a small one. Every document scout writes (ledgers,
// manifests, catalogs, observe verdicts) goes through atomic_write_file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "lib/common/error.hpp"

namespace scout {

// Replaces `path` with `content` atomically and durably: a temporary file in
// the same directory, fsync, rename over the target, fsync of the directory.
// A reader (or a process restarted after SIGKILL or power loss) sees the old
// content or the new, never a mix. `mode` is the new file's permission bits.
// On failure the old file is untouched and the temporary removed; the error
// is `unavailable` (disk full, permissions, missing directory) and names the path.
Status atomic_write_file(const std::string& path, std::string_view content, unsigned mode = 0644);

// Reads a whole file of at most `limit` bytes. A missing, unreadable or
// too large file, or a directory, is bad input naming the path.
Result<std::string> read_small_file(const std::string& path, std::size_t limit = std::size_t{64} << 20);

}  // namespace scout
