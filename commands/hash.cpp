#include "commands/hash.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>

#include "lib/checkpoint/checkpoint_file.hpp"
#include "lib/checkpoint/safetensors.hpp"
#include "lib/common/hex.hpp"
#include "lib/hash/file_hash.hpp"
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

// One file's digest and how it was read ("safetensors" or "raw").
struct HashedFile {
  std::string kind;
  checkpoint::FileDigest digest;
};

HashedFile hash_raw(const std::string& path, unsigned threads) {
  auto h = value_or_throw(hash::hash_raw_file(path, threads));
  checkpoint::FileDigest d{path, checkpoint::FileFormat::unknown, h.size, {}, {}};
  d.tensors.push_back({path, DType::u8, {static_cast<std::int64_t>(h.size)}, h.size, h.hash, {}, false});
  return {"raw", std::move(d)};
}

HashedFile hash_safetensors_file(const std::string& path) {
  auto header = value_or_throw(checkpoint::read_safetensors_header(path));
  checkpoint::FileDigest d{path, checkpoint::FileFormat::safetensors, header.file_size, {}, {}};
  d.tensors = value_or_throw(checkpoint::hash_safetensors_pipelined(header));  // reads ahead while it hashes
  return {"safetensors", std::move(d)};
}

}  // namespace

int run_hash(const HashOptions& o) {
  std::vector<HashedFile> files;
  std::size_t tensor_count = 0;
  for (const auto& path : o.files) {
    files.push_back(o.raw ? hash_raw(path, o.threads) : hash_safetensors_file(path));
    tensor_count += files.back().digest.tensors.size();
  }

  if (o.format == OutputFormat::text) {
    std::string out;
    for (const auto& [kind, f] : files) {
      out += fmt::format("# {} ({}, {} bytes, {} tensor{})\n", f.path, kind, f.size, f.tensors.size(),
                         f.tensors.size() == 1 ? "" : "s");
      std::size_t width = 4;
      for (const auto& t : f.tensors) width = std::max(width, t.name.size());
      for (const auto& t : f.tensors)
        out += fmt::format("{:<{}}  {:<7}  {:<20}  {}\n", t.name, width, dtype_name(t.dtype),
                           fmt::format("[{}]", fmt::join(t.shape, ", ")), hex64(t.hash));
    }
    write_stdout(out);
    return to_int(ExitCode::healthy);
  }

  Verdict v;
  v.command = "hash";
  v.summary = fmt::format("hashed {} tensor{} in {} file{}", tensor_count, tensor_count == 1 ? "" : "s", files.size(),
                          files.size() == 1 ? "" : "s");
  nlohmann::json d;
  d["hash"] = {{"spec", "scout.tensor-hash"}, {"spec_version", hash::k_hash_spec_version}};
  d["files"] = nlohmann::json::array();
  for (const auto& [kind, f] : files) {
    nlohmann::json fj = {{"path", f.path}, {"kind", kind}, {"bytes", f.size}, {"tensors", nlohmann::json::array()}};
    for (const auto& t : f.tensors)
      fj["tensors"].push_back({{"name", t.name},
                               {"dtype", dtype_name(t.dtype)},
                               {"shape", t.shape},
                               {"bytes", t.bytes},
                               {"hash", hex64(t.hash)}});
    d["files"].push_back(std::move(fj));
  }
  v.details = std::move(d);
  return emit_verdict(v, o.format);
}

}  // namespace scout
