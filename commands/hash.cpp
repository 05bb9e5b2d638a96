#include "commands/hash.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/checkpoint/checkpoint_file.hpp"
#include "lib/checkpoint/safetensors.hpp"
#include "lib/hash/tensor_hash.hpp"

namespace scout {

CommandRunner register_hash(CLI::App& cmd, const GlobalOptions& globals) {
  auto opts = std::make_shared<HashOptions>();
  cmd.add_option("files", opts->files, "safetensors files (any files with --raw)")->required();
  cmd.add_flag("--raw", opts->raw, "Hash each file's bytes as one tensor of dtype U8 and shape [size]");
  cmd.add_option("--threads", opts->threads, "Hashing threads (0 = all cores; the value does not depend on it)");
  cmd.footer("Example: scout hash --format text replica0/model.safetensors replica1/model.safetensors");
  return make_runner(opts, globals, run_hash);
}

namespace {

std::string hex16(std::uint64_t h) { return fmt::format("{:016x}", h); }

struct FileDigest {
  std::string path;
  std::string kind;  // "safetensors" | "raw"
  std::uint64_t bytes = 0;
  std::vector<checkpoint::TensorDigest> tensors;
};

// The raw file at `path` as one U8 tensor, hashed zero-copy from a read-only
// mapping with `threads` threads.
FileDigest hash_raw(const std::string& path, unsigned threads) {
  auto fail = [&](const char* what) {
    return FatalError(input_error(fmt::format("cannot read {}", path), fmt::format("{}: {}", what, std::strerror(errno)),
                                  "check the path and permissions"));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw fail("open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw fail("fstat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw FatalError(input_error(fmt::format("cannot hash {}", path), "not a regular file", "give a file"));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  FileDigest out{path, "raw", size, {}};
  const std::int64_t shape[] = {static_cast<std::int64_t>(size)};
  std::uint64_t h = 0;
  if (size == 0) {
    h = hash::hash_tensor(DType::u8, shape, {}, threads);
  } else {
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      throw fail("mmap");
    }
    ::madvise(map, size, MADV_SEQUENTIAL);
    h = hash::hash_tensor(DType::u8, shape, std::span(static_cast<const std::byte*>(map), size), threads);
    ::munmap(map, size);
  }
  ::close(fd);
  out.tensors.push_back({path, DType::u8, {static_cast<std::int64_t>(size)}, size, h, {}, false});
  return out;
}

FileDigest hash_safetensors_file(const std::string& path) {
  auto header = value_or_throw(checkpoint::read_safetensors_header(path));
  FileDigest out{path, "safetensors", header.file_size, {}};
  out.tensors = value_or_throw(checkpoint::hash_safetensors_pipelined(header));  // reads ahead while it hashes
  return out;
}

}  // namespace

int run_hash(const HashOptions& o) {
  std::vector<FileDigest> files;
  std::size_t tensor_count = 0;
  for (const auto& path : o.files) {
    files.push_back(o.raw ? hash_raw(path, o.threads) : hash_safetensors_file(path));
    tensor_count += files.back().tensors.size();
  }

  if (o.format == OutputFormat::text) {
    std::string out;
    for (const auto& f : files) {
      out += fmt::format("# {} ({}, {} bytes, {} tensor{})\n", f.path, f.kind, f.bytes, f.tensors.size(),
                         f.tensors.size() == 1 ? "" : "s");
      std::size_t width = 4;
      for (const auto& t : f.tensors) width = std::max(width, t.name.size());
      for (const auto& t : f.tensors)
        out += fmt::format("{:<{}}  {:<7}  {:<20}  {}\n", t.name, width, dtype_name(t.dtype),
                           fmt::format("[{}]", fmt::join(t.shape, ", ")), hex16(t.hash));
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return to_int(ExitCode::healthy);
  }

  Verdict v;
  v.command = "hash";
  v.summary = fmt::format("hashed {} tensor{} in {} file{}", tensor_count, tensor_count == 1 ? "" : "s", files.size(),
                          files.size() == 1 ? "" : "s");
  nlohmann::json d;
  d["hash"] = {{"spec", "scout.tensor-hash"}, {"spec_version", hash::k_hash_spec_version}};
  d["files"] = nlohmann::json::array();
  for (const auto& f : files) {
    nlohmann::json fj = {{"path", f.path}, {"kind", f.kind}, {"bytes", f.bytes}, {"tensors", nlohmann::json::array()}};
    for (const auto& t : f.tensors)
      fj["tensors"].push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"bytes", t.bytes},
                               {"hash", hex16(t.hash)}});
    d["files"].push_back(std::move(fj));
  }
  v.details = std::move(d);
  return emit_verdict(v, o.format);
}

}  // namespace scout
