#include "lib/checkpoint/checkpoint_dir.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "lib/checkpoint/torch_file.hpp"

namespace scout::checkpoint {

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> index_files(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file(ec) && n.size() > 11 && n.compare(n.size() - 11, 11, ".index.json") == 0)
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

pickle::Policy make_dcp_policy() {
  pickle::Policy p = torch_pickle_policy();
  for (const char* c : {"Metadata", "TensorStorageMetadata", "ChunkStorageMetadata", "BytesStorageMetadata",
                        "MetadataIndex", "TensorProperties", "StorageMeta", "_MEM_FORMAT_ENCODING"})
    p.allowed_globals.insert(std::string("torch.distributed.checkpoint.metadata.") + c);
  p.allowed_globals.insert("torch.distributed.checkpoint.filesystem._StorageInfo");
  p.allowed_globals.insert("torch.distributed.checkpoint.planner.WriteItemType");
  p.allowed_globals.insert("torch.distributed.checkpoint._extension.ExtensionRegistry");
  for (const char* c : {"torch.strided", "torch.contiguous_format", "torch.preserve_format", "torch.channels_last"})
    p.allowed_globals.insert(c);
  return p;
}

// A dataclass field of a pickled object (NEWOBJ then BUILD with a dict, or (None, slots)).
const pickle::Value* field(const pickle::Value* obj, std::string_view name) {
  if (!obj || obj->kind != pickle::Kind::object || !obj->state) return nullptr;
  const pickle::Value* s = obj->state;
  if (s->kind == pickle::Kind::dict) return s->get(name);
  if (s->kind == pickle::Kind::tuple)
    for (const auto* part : s->items)
      if (const auto* v = part->get(name)) return v;
  return nullptr;
}

std::optional<std::vector<std::int64_t>> size_of(const pickle::Value* v) {
  if (!v) return std::nullopt;
  if (v->kind == pickle::Kind::object && v->class_name() == "torch.Size" && v->items.size() == 1) v = v->items[0];
  if (v->kind != pickle::Kind::tuple && v->kind != pickle::Kind::list) return std::nullopt;
  std::vector<std::int64_t> out;
  for (const auto* i : v->items) {
    if (i->kind != pickle::Kind::integer || i->integer < 0) return std::nullopt;
    out.push_back(i->integer);
  }
  return out;
}

bool is_class(const pickle::Value* v, std::string_view suffix) {
  return v && v->kind == pickle::Kind::object && v->class_name().size() >= suffix.size() &&
         v->class_name().compare(v->class_name().size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool safe_relative(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.find('\0') != std::string::npos) return false;
  for (const auto& part : fs::path(p))
    if (part == "..") return false;
  return true;
}

}  // namespace

std::optional<DirectoryFormat> detect_directory_format(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  if (fs::is_regular_file(fs::path(dir) / k_dcp_metadata_file, ec)) return DirectoryFormat::dcp;
  if (index_files(dir).size() == 1) return DirectoryFormat::hf_index;
  return std::nullopt;
}

const pickle::Policy& dcp_pickle_policy() {
  static const pickle::Policy p = make_dcp_policy();
  return p;
}

Result<std::vector<DcpItem>> parse_dcp_metadata(std::span<const std::byte> bytes, const std::string& label) {
  auto doc = pickle::parse(bytes, dcp_pickle_policy());
  if (!doc)
    return input_error(fmt::format("{}: {}", label, doc.error().what), "scout reads DCP metadata without running code",
                       "give a directory written by torch.distributed.checkpoint.save");
  auto bad = [&](const std::string& why) {
    return input_error(fmt::format("{}: not torch.distributed.checkpoint metadata: {}", label, why), {},
                       "the file is damaged or from an unsupported DCP version");
  };
  const pickle::Value* md = doc->root;
  if (!is_class(md, ".metadata.Metadata")) return bad("the root is not a Metadata object");
  const pickle::Value* sdm = field(md, "state_dict_metadata");
  const pickle::Value* storage = field(md, "storage_data");
  if (!sdm || sdm->kind != pickle::Kind::dict) return bad("state_dict_metadata is missing");
  if (!storage || storage->kind != pickle::Kind::dict) return bad("storage_data is missing (a custom storage writer?)");
  struct TensorMeta {
    DType dtype;
    std::vector<std::int64_t> size;
    std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> chunks;  // offsets, sizes
  };
  std::map<std::string, TensorMeta> tensors;
  std::set<std::string> byte_items;
  for (const auto& [k, v] : sdm->entries) {
    if (k->kind != pickle::Kind::string) return bad("a state_dict_metadata key is not a string");
    if (is_class(v, ".BytesStorageMetadata")) {
      byte_items.insert(k->text);
      continue;
    }
    if (!is_class(v, ".TensorStorageMetadata"))
      return bad(fmt::format("'{}' has metadata of kind {}", k->text, pickle::render(*v, 60)));
    TensorMeta t;
    const pickle::Value* props = field(v, "properties");
    const pickle::Value* dt = field(props, "dtype");
    // TensorProperties pickles its state as a tuple (dtype, layout, requires_grad, memory_format, pin_memory).
    if (!dt && props && props->state && props->state->kind == pickle::Kind::tuple && !props->state->items.empty() &&
        props->state->items[0]->kind == pickle::Kind::global)
      dt = props->state->items[0];
    if (!dt || dt->kind != pickle::Kind::global || dt->text.rfind("torch.", 0) != 0)
      return bad(fmt::format("'{}' has no dtype", k->text));
    auto d = torch_dtype(std::string_view(dt->text).substr(6));
    if (!d) return bad(fmt::format("'{}' has dtype {}, which scout does not hash", k->text, dt->text));
    t.dtype = *d;
    auto size = size_of(field(v, "size"));
    if (!size) return bad(fmt::format("'{}' has no size", k->text));
    t.size = *size;
    const pickle::Value* chunks = field(v, "chunks");
    if (!chunks || chunks->kind != pickle::Kind::list) return bad(fmt::format("'{}' has no chunk list", k->text));
    for (const auto* c : chunks->items) {
      auto off = size_of(field(c, "offsets"));
      auto sz = size_of(field(c, "sizes"));
      if (!off || !sz || off->size() != t.size.size() || sz->size() != t.size.size())
        return bad(fmt::format("'{}' has a malformed chunk", k->text));
      for (std::size_t i = 0; i < t.size.size(); ++i)
        if ((*off)[i] > t.size[i] || (*sz)[i] > t.size[i] - (*off)[i])
          return bad(fmt::format("'{}' has a chunk outside the tensor", k->text));
      t.chunks.emplace_back(*off, *sz);
    }
    tensors.emplace(k->text, std::move(t));
  }
  std::vector<DcpItem> out;
  std::set<std::string> names;
  for (const auto& [k, v] : storage->entries) {
    const pickle::Value* fqn = field(k, "fqn");
    if (!is_class(k, ".MetadataIndex") || !fqn || fqn->kind != pickle::Kind::string)
      return bad("a storage_data key is not a MetadataIndex");
    const pickle::Value* path = field(v, "relative_path");
    const pickle::Value* off = field(v, "offset");
    const pickle::Value* len = field(v, "length");
    if (!is_class(v, "._StorageInfo") || !path || path->kind != pickle::Kind::string || !off ||
        off->kind != pickle::Kind::integer || !len || len->kind != pickle::Kind::integer || off->integer < 0 ||
        len->integer < 0)
      return bad(fmt::format("storage entry of '{}' is malformed", fqn->text));
    if (!safe_relative(path->text))
      return bad(fmt::format("storage file '{}' leaves the checkpoint directory", path->text));
    const pickle::Value* tf = field(v, "transform_descriptors");
    if (tf && tf->kind == pickle::Kind::list && !tf->items.empty()) {
      // Descriptors are "name[@domain]/version" strings, e.g. "stream.zstd/1" for torch's ZStandard extension.
      std::vector<std::string> names;
      for (const auto* d : tf->items)
        names.push_back(d->kind == pickle::Kind::string ? d->text : pickle::render(*d, 40));
      const bool zstd =
          std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.rfind("stream.zstd", 0) == 0; });
      return input_error(
          fmt::format("{}: '{}' is stored through the DCP stream transform{} {}{}", label, fqn->text,
                      names.size() == 1 ? "" : "s", fmt::join(names, ", "),
                      zstd ? " (ZStandard compression, FileSystemWriter(_extensions=[ZStandard()]))" : ""),
          "scout hashes each chunk's stored bytes as torch.save wrote them and does not undo stream transforms; "
          "torch.distributed.checkpoint.save applies none by default",
          "re-save without _extensions (dcp.load the checkpoint and dcp.save it with the default FileSystemWriter), "
          "or compare the replicas' files byte for byte with 'scout hash --raw'");
    }
    DcpItem item;
    item.fqn = fqn->text;
    item.file = path->text;
    item.offset = static_cast<std::uint64_t>(off->integer);
    item.length = static_cast<std::uint64_t>(len->integer);
    if (byte_items.count(item.fqn)) {
      item.tensor = false;
      item.name = item.fqn;
    } else {
      auto it = tensors.find(item.fqn);
      if (it == tensors.end())
        return bad(fmt::format("storage entry for '{}', which the state dict does not list", item.fqn));
      auto offsets = size_of(field(k, "offset"));
      if (!offsets) return bad(fmt::format("storage entry of tensor '{}' has no chunk offset", item.fqn));
      const auto& chunks = it->second.chunks;
      auto c = std::find_if(chunks.begin(), chunks.end(), [&](const auto& ch) { return ch.first == *offsets; });
      if (c == chunks.end())
        return bad(
            fmt::format("storage entry of '{}' at offset [{}] matches no chunk", item.fqn, fmt::join(*offsets, ",")));
      item.dtype = it->second.dtype;
      item.sizes = c->second;
      const bool whole = chunks.size() == 1 && c->second == it->second.size;
      item.name = whole ? item.fqn : fmt::format("{}@[{}]", item.fqn, fmt::join(*offsets, ","));
    }
    if (!names.insert(item.name).second) return bad(fmt::format("'{}' is stored twice", item.name));
    out.push_back(std::move(item));
  }
  for (const auto& [name, t] : tensors)
    for (const auto& c : t.chunks) {
      const std::string n =
          t.chunks.size() == 1 && c.second == t.size ? name : fmt::format("{}@[{}]", name, fmt::join(c.first, ","));
      if (!names.count(n)) return bad(fmt::format("chunk '{}' has no storage entry", n));
    }
  std::sort(out.begin(), out.end(), [](const DcpItem& a, const DcpItem& b) {
    return a.file != b.file ? a.file < b.file : a.offset < b.offset;
  });
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> parse_hf_index(const std::string& text,
                                                                        const std::string& label) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  auto bad = [&](const std::string& why) {
    return input_error(fmt::format("{}: not a sharded checkpoint index: {}", label, why), {},
                       "give the model.safetensors.index.json that save_pretrained wrote");
  };
  if (j.is_discarded() || !j.is_object()) return bad("invalid JSON");
  if (!j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty())
    return bad("no \"weight_map\" object");
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) return bad(fmt::format("weight_map['{}'] is not a file name", name));
    const std::string f = file.get<std::string>();
    if (!safe_relative(f)) return bad(fmt::format("shard '{}' leaves the checkpoint directory", f));
    out.emplace_back(name, f);
  }
  return out;
}

namespace {

Result<FileDigest> digest_dcp(const std::string& dir, const ProgressFn& progress, unsigned threads) {
  const std::string meta_path = (fs::path(dir) / k_dcp_metadata_file).string();
  int fd = ::open(meta_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return input_error(fmt::format("cannot open {}", meta_path), std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  if (static_cast<std::uint64_t>(st.st_size) > dcp_pickle_policy().max_bytes) {
    ::close(fd);
    return input_error(fmt::format("{}: {} bytes is too large for DCP metadata", meta_path, st.st_size));
  }
  std::vector<std::byte> bytes(static_cast<std::size_t>(st.st_size));
  const bool ok = read_exact(fd, bytes.data(), bytes.size(), 0);
  ::close(fd);
  if (!ok) return input_error(fmt::format("cannot read {}", meta_path));
  auto items = parse_dcp_metadata(bytes, meta_path);
  if (!items) return items.error();

  FileDigest out;
  out.path = dir;
  out.format = FileFormat::dcp;
  out.size = bytes.size();
  std::uint64_t done = 0;
  // One hashing job per .distcp file (its items sorted by offset), so reading never waits between items.
  for (std::size_t first = 0; first < items->size();) {
    std::size_t last = first;
    while (last < items->size() && (*items)[last].file == (*items)[first].file) ++last;
    const std::string file = (*items)[first].file;
    const std::string p = (fs::path(dir) / file).string();
    const int data_fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (data_fd < 0)
      return input_error(fmt::format("{}: {} is missing", dir, file), std::strerror(errno),
                         "a DCP checkpoint needs every .distcp file its .metadata lists; re-copy it");
    struct stat ds {};
    ::fstat(data_fd, &ds);
    const auto data_size = static_cast<std::uint64_t>(ds.st_size);
    out.size += data_size;
    ::posix_fadvise(data_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    std::vector<std::pair<const DcpItem*, PendingArchive>> pending;
    Status status = Ok{};
    {
      // Each chunk's zip directory lies at its end, ahead of the stream of the file's data (read as the chunks are
      // queued): read apart from it.
      AsideReads aside(data_fd);
      const std::uint64_t before = done;
      RangeHashJob job(data_fd, fmt::format("{}/{}", dir, file),
                       progress ? ProgressFn([&](std::uint64_t d) { progress(before + d); }) : ProgressFn{},
                       threads == 0 ? 0 : threads + 2);
      for (std::size_t i = first; i < last && status; ++i) {
        const DcpItem& item = (*items)[i];
        const std::string label = fmt::format("{}/{} ('{}' at {})", dir, item.file, item.fqn, item.offset);
        if (item.offset > data_size || item.length > data_size - item.offset) {
          status = input_error(
              fmt::format("{}: {} bytes run past the end of the file ({} bytes)", label, item.length, data_size), {},
              "the file is truncated; re-copy it or use another replica");
          break;
        }
        auto queued = queue_torch_archive(data_fd, item.offset, item.length, label, job, threads);
        if (!queued) {
          status = queued.error();
          break;
        }
        if (item.tensor) {
          const auto& ds = queued->digests;
          auto tensor = std::find_if(ds.begin(), ds.end(), [](const TensorDigest& d) { return !d.value; });
          if (ds.size() != 1 || tensor == ds.end()) {
            status = input_error(fmt::format("{}: a tensor chunk holds {} values", label, ds.size()), {},
                                 "the checkpoint is damaged");
            break;
          }
          if (tensor->dtype != item.dtype || tensor->shape != item.sizes) {
            status = input_error(
                fmt::format("{}: chunk is {}[{}] but the metadata says {}[{}]", label, dtype_name(tensor->dtype),
                            fmt::join(tensor->shape, ","), dtype_name(item.dtype), fmt::join(item.sizes, ",")),
                {}, "the checkpoint is damaged or mixed from two saves");
            break;
          }
        }
        done += item.length;
        pending.emplace_back(&item, std::move(*queued));
      }
      Status hashed = job.wait();
      if (status && !hashed) status = hashed;
      if (status) {
        for (auto& entry : pending) {
          const DcpItem* item = entry.first;
          PendingArchive& archive = entry.second;
          // Values inside an item are named after it: a tensor chunk by the item, other values by item.name.
          auto rename = [item](const std::string& n) {
            return item->tensor || n == "value" ? item->name : item->name + "." + n;
          };
          std::vector<CrcFailure> failures;
          auto digests = complete_torch_archive(std::move(archive), job, &failures);
          for (auto& f : failures) {
            f.source = file;
            for (auto& n : f.tensors) n = rename(n);
            out.crc_failures.push_back(std::move(f));
          }
          for (auto& d : digests) {
            d.name = rename(d.name);
            d.source = file;
            out.tensors.push_back(std::move(d));
          }
        }
      }
    }
    ::close(data_fd);
    if (!status) return status.error();
    first = last;
  }
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const TensorDigest& a, const TensorDigest& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < out.tensors.size(); ++i)
    if (out.tensors[i].name == out.tensors[i - 1].name)
      return input_error(fmt::format("{}: two values are named '{}'", dir, out.tensors[i].name));
  return out;
}

Result<FileDigest> digest_hf(const std::string& dir, const ProgressFn& progress, unsigned threads) {
  const auto idx = index_files(dir).at(0);
  std::error_code ec;
  const auto size = fs::file_size(idx, ec);
  if (ec || size > (std::uint64_t{64} << 20))
    return input_error(fmt::format("cannot read {}", idx.string()), ec ? ec.message() : "larger than 64 MiB");
  std::string text(static_cast<std::size_t>(size), '\0');
  int fd = ::open(idx.c_str(), O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && read_exact(fd, text.data(), text.size(), 0);
  if (fd >= 0) ::close(fd);
  if (!ok) return input_error(fmt::format("cannot read {}", idx.string()));
  auto map = parse_hf_index(text, idx.string());
  if (!map) return map.error();
  std::map<std::string, std::set<std::string>> by_file;
  for (const auto& [name, file] : *map) by_file[file].insert(name);
  FileDigest out;
  out.path = dir;
  out.format = FileFormat::hf_sharded;
  out.size = size;
  std::uint64_t done = 0;
  for (const auto& [file, names] : by_file) {
    const std::string p = (fs::path(dir) / file).string();
    if (!fs::is_regular_file(p, ec))
      return input_error(fmt::format("{}: shard {} is missing", dir, file),
                         fmt::format("{} lists it", idx.filename().string()),
                         "re-copy the checkpoint; every shard is needed");
    auto d =
        digest_file(p, progress ? ProgressFn([&](std::uint64_t x) { progress(done + x); }) : ProgressFn{}, threads);
    if (!d) return d.error();
    done += d->size;
    out.size += d->size;
    for (auto& f : d->crc_failures) {
      f.source = file;
      out.crc_failures.push_back(std::move(f));
    }
    std::set<std::string> seen;
    for (auto& t : d->tensors) {
      if (t.value) continue;
      if (!names.count(t.name))
        return input_error(fmt::format("{}: shard {} holds tensor '{}', which {} does not map to it", dir, file, t.name,
                                       idx.filename().string()),
                           {}, "the index and the shards come from different saves");
      seen.insert(t.name);
      t.source = file;
      out.tensors.push_back(std::move(t));
    }
    for (const auto& n : names)
      if (!seen.count(n))
        return input_error(fmt::format("{}: tensor '{}' is mapped to {} but that shard does not hold it", dir, n, file),
                           {}, "the index and the shards come from different saves");
  }
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const TensorDigest& a, const TensorDigest& b) { return a.name < b.name; });
  return out;
}

}  // namespace

Result<FileDigest> digest_directory(const std::string& dir, const ProgressFn& progress, unsigned threads) {
  auto format = detect_directory_format(dir);
  if (!format)
    return input_error(
        fmt::format("{} is a directory but neither a torch.distributed.checkpoint (.metadata) nor a sharded "
                    "checkpoint (one *.index.json)",
                    dir),
        {}, "give checkpoint files, a DCP directory or a Hugging Face sharded checkpoint directory");
  return *format == DirectoryFormat::dcp ? digest_dcp(dir, progress, threads) : digest_hf(dir, progress, threads);
}

}  // namespace scout::checkpoint
