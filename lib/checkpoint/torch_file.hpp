// A native reader of torch.save zip archives (torch >= 1.6, written by
// torch 1.13 and 2.x alike), without LibTorch and without running any code:
// the archive's central directory (lib/checkpoint/zip_archive.hpp), its
// data.pkl read by the restricted pickle reader (lib/pickle/pickle.hpp) under
// an allow-list of the classes torch.save writes, and the tensors it
// describes located in their storage entries, so their bytes can be streamed.
//
// Any container nesting is flattened with dots: {'model': OrderedDict(...),
// 'optimizer': {'state': {3: {'exp_avg': t}}}} gives 'model.fc.weight' and
// 'optimizer.state.3.exp_avg'. Non-tensor leaves (ints, floats, strings,
// None, torch.Size, argparse.Namespace, ...) are kept as leaves with a
// canonical text, so they can be compared too.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/pickle/pickle.hpp"
#include "lib/tensor/dtype.hpp"

namespace scout::checkpoint {

// One tensor of the archive: a view (shape, strides and offset in elements)
// over a storage entry.
struct TorchTensor {
  std::string name;
  DType dtype = DType::u8;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  std::uint64_t storage_offset = 0;  // elements
  std::string storage_key;           // data/<key> entry
  std::uint64_t storage_data = 0;    // absolute file offset of the storage bytes
  std::uint64_t storage_bytes = 0;
  std::uint64_t numel() const;
  // True when the view's elements are the storage bytes in row-major order
  // (dims of size 1 may have any stride).
  bool contiguous() const;
};

// A non-tensor value: its dotted name and a canonical text of it.
struct TorchLeaf {
  std::string name;
  std::string text;
};

// A storage entry that tensors of the archive use.
struct TorchStorage {
  std::string entry;       // e.g. "archive/data/0"
  std::uint64_t data = 0;  // absolute file offset of its bytes
  std::uint64_t bytes = 0;
  std::uint32_t crc32 = 0;  // from the central directory
};

struct TorchArchive {
  std::string prefix;                // the archive's top folder, e.g. "archive"
  std::vector<TorchTensor> tensors;  // in pickle order
  std::vector<TorchLeaf> leaves;
  std::vector<TorchStorage> storages;  // those the tensors use, in file order
  // data.pkl's entry name, its CRC-32 in the directory and of the bytes read.
  std::string pickle_entry;
  std::uint32_t pickle_crc_expected = 0;
  std::uint32_t pickle_crc_actual = 0;
  // The archive's other small entries (version, byteorder, .data/serialization_id, ...: stored, at most
  // 1 MiB each) whose CRC-32 differs from the central directory's: corruption torch.load may trip on.
  struct EntryCrc {
    std::string entry;
    std::uint32_t expected = 0;
    std::uint32_t actual = 0;
  };
  std::vector<EntryCrc> other_crc_failures;
};

// The allow-list of globals a torch.save file may name (tensor rebuilds,
// storage classes, dtypes, OrderedDict, and plain leaf classes).
const pickle::Policy& torch_pickle_policy();

// Reads the archive in bytes [base, base + length) of `fd`; `label` names it
// in errors. Bad input (exit 4): not a zip, no data.pkl, a compressed
// data.pkl, a class outside the allow-list (named), a tensor whose storage
// entry is missing or too small for its view, duplicate names, unsupported
// (sparse, quantized) tensors.
Result<TorchArchive> read_torch_archive(int fd, std::uint64_t base, std::uint64_t length, const std::string& label);

// Flattens a parsed pickle value (a torch.save payload) into tensors and
// leaves; `resolve` maps a storage key to (absolute data offset, bytes).
// Exposed for torch.distributed.checkpoint, whose chunks are torch.save payloads.
Status flatten_torch_value(
    const pickle::Value& root, const std::string& label, TorchArchive& out,
    const std::function<Result<std::pair<std::uint64_t, std::uint64_t>>(const std::string& key)>& resolve);

// torch dtype name ("float32", "bfloat16", "float8_e4m3fn"...) to DType.
std::optional<DType> torch_dtype(std::string_view name);

}  // namespace scout::checkpoint
