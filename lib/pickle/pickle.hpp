// A restricted reader of Python pickles (protocols 0..5 as CPython and
// torch.save write them) that never executes anything: it builds a tree of
// plain values. Classes appear only by name: a GLOBAL/STACK_GLOBAL must be on
// the policy's allow-list, and calling or instantiating it (REDUCE, NEWOBJ,
// BUILD) yields an opaque `object` node holding the class name, its
// arguments and its state. `collections.OrderedDict` becomes a dict and
// `builtins.set`/`frozenset` a list, so that containers read naturally.
// Hard limits (depth, items, memo, input bytes) bound memory and time on any
// input; anything outside them, or any opcode outside the supported set, is
// an error naming the offset and the reason.
//
// Used for torch.save's data.pkl, torch.distributed.checkpoint's .metadata
// and (later) torch Flight Recorder dumps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/common/error.hpp"

namespace scout::pickle {

enum class Kind : std::uint8_t {
  none,
  boolean,
  integer,
  big_integer,
  floating,
  string,
  bytes,
  list,
  tuple,
  dict,
  global,      // a class or function reference: `text` = "module.name"
  object,      // result of REDUCE/NEWOBJ on a global: `text` = class name, `items` = args, `state` = BUILD state
  persistent,  // BINPERSID/PERSID: `state` = the persistent id value
};

// One node of the tree. Nodes live in their Document and point to each other
// (a pickle's memo can share a node, or even make a cycle: walkers bound their depth).
struct Value {
  Kind kind = Kind::none;
  bool boolean = false;
  std::int64_t integer = 0;
  double floating = 0;
  std::string text;  // string, bytes, big_integer (little-endian two's complement bytes), global / object class name
  std::vector<const Value*> items;                             // list, tuple, object args
  std::vector<std::pair<const Value*, const Value*>> entries;  // dict, in insertion order
  const Value* state = nullptr;                                // object: BUILD state; persistent: the id

  bool is(Kind k) const { return kind == k; }
  // Dict lookup by string key (linear); nullptr when absent or not a dict.
  const Value* get(std::string_view key) const;
  // For objects: the class name, e.g. "torch._utils._rebuild_tensor_v2".
  const std::string& class_name() const { return text; }
};

// Name of a kind, for messages ("dict", "object", ...).
std::string_view kind_name(Kind kind);

// What a parse may do and how much it may use.
struct Policy {
  std::size_t max_depth = 256;                     // nesting of MARKs / containers under construction
  std::size_t max_items = 10'000'000;              // nodes created in all
  std::size_t max_memo = 10'000'000;               // memo entries
  std::size_t max_bytes = std::size_t{1} << 30;    // input size
  std::size_t max_string = std::size_t{64} << 20;  // one string or bytes value
  // "module.name" globals allowed (after __builtin__ -> builtins, copy_reg ->
  // copyreg). Empty means none.
  std::set<std::string, std::less<>> allowed_globals;
};

// A parsed pickle: the nodes and the root.
struct Document {
  std::deque<Value> nodes;
  const Value* root = nullptr;
  int protocol = 0;
};

// Parses `bytes` (one pickle, up to its STOP) under `policy`. Errors are bad
// input naming the byte offset, the opcode and the reason; a global outside
// the allow-list is named ("class 'os.system' is not allowed ...").
Result<Document> parse(std::span<const std::byte> bytes, const Policy& policy);

// A short, bounded rendering of a value for reports ("[1, 2, 'a']", "<argparse.Namespace>").
std::string render(const Value& value, std::size_t max_chars = 120);

}  // namespace scout::pickle
