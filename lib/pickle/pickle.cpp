#include "lib/pickle/pickle.hpp"

#include <fmt/format.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_map>

namespace scout::pickle {

const Value* Value::get(std::string_view key) const {
  if (kind != Kind::dict) return nullptr;
  for (const auto& [k, v] : entries)
    if (k->kind == Kind::string && k->text == key) return v;
  return nullptr;
}

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::none:
      return "None";
    case Kind::boolean:
      return "bool";
    case Kind::integer:
      return "int";
    case Kind::big_integer:
      return "int";
    case Kind::floating:
      return "float";
    case Kind::string:
      return "str";
    case Kind::bytes:
      return "bytes";
    case Kind::list:
      return "list";
    case Kind::tuple:
      return "tuple";
    case Kind::dict:
      return "dict";
    case Kind::global:
      return "global";
    case Kind::object:
      return "object";
    case Kind::persistent:
      return "persistent id";
  }
  return "?";
}

namespace {

// Opcodes (CPython Lib/pickle.py names).
enum Op : unsigned char {
  MARK = '(',
  STOP = '.',
  POP = '0',
  POP_MARK = '1',
  DUP = '2',
  FLOAT = 'F',
  INT = 'I',
  BININT = 'J',
  BININT1 = 'K',
  LONG = 'L',
  BININT2 = 'M',
  NONE = 'N',
  PERSID = 'P',
  BINPERSID = 'Q',
  REDUCE = 'R',
  STRING = 'S',
  BINSTRING = 'T',
  SHORT_BINSTRING = 'U',
  UNICODE = 'V',
  BINUNICODE = 'X',
  APPEND = 'a',
  BUILD = 'b',
  GLOBAL = 'c',
  DICT = 'd',
  EMPTY_DICT = '}',
  APPENDS = 'e',
  GET = 'g',
  BINGET = 'h',
  LONG_BINGET = 'j',
  LIST = 'l',
  EMPTY_LIST = ']',
  PUT = 'p',
  BINPUT = 'q',
  LONG_BINPUT = 'r',
  SETITEM = 's',
  TUPLE = 't',
  EMPTY_TUPLE = ')',
  SETITEMS = 'u',
  BINFLOAT = 'G',
  PROTO = 0x80,
  NEWOBJ = 0x81,
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  LONG1 = 0x8a,
  LONG4 = 0x8b,
  SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d,
  BINBYTES8 = 0x8e,
  EMPTY_SET = 0x8f,
  ADDITEMS = 0x90,
  FROZENSET = 0x91,
  NEWOBJ_EX = 0x92,
  STACK_GLOBAL = 0x93,
  MEMOIZE = 0x94,
  FRAME = 0x95,
  BYTEARRAY8 = 0x96,
  BINBYTES = 'B',
  SHORT_BINBYTES = 'C',
};

class Parser {
 public:
  Parser(std::span<const std::byte> in, const Policy& policy) : m_in(in), m_policy(policy) {}

  Result<Document> run() {
    if (m_in.size() > m_policy.max_bytes)
      return input_error(
          fmt::format("pickle of {} bytes exceeds the limit of {} bytes", m_in.size(), m_policy.max_bytes));
    while (true) {
      if (m_pos >= m_in.size()) return fail("pickle ends without STOP");
      m_op_pos = m_pos;
      const auto op = static_cast<unsigned char>(m_in[m_pos++]);
      if (op == STOP) {
        if (m_stack.size() != 1 || !m_marks.empty())
          return fail("STOP with a stack of " + std::to_string(m_stack.size()) + " values");
        m_doc.root = m_stack.back();
        return std::move(m_doc);
      }
      if (!step(op)) return std::move(*m_error);
    }
  }

 private:
  std::span<const std::byte> m_in;
  const Policy& m_policy;
  std::size_t m_pos = 0;
  std::size_t m_op_pos = 0;
  Document m_doc;
  std::vector<Value*> m_stack;
  std::vector<std::size_t> m_marks;
  std::unordered_map<std::uint64_t, Value*> m_memo;
  std::optional<Error> m_error;

  Error fail(const std::string& why) {
    return input_error(fmt::format("malformed pickle at byte {}: {}", m_op_pos, why));
  }
  bool error(const std::string& why) {
    m_error = fail(why);
    return false;
  }

  Value* make(Kind k) {
    if (m_doc.nodes.size() >= m_policy.max_items) return nullptr;
    m_doc.nodes.emplace_back();
    m_doc.nodes.back().kind = k;
    return &m_doc.nodes.back();
  }
  bool push(Value* v) {
    if (!v) return error(fmt::format("more than {} values", m_policy.max_items));
    if (m_stack.size() >= m_policy.max_items) return error("stack too deep");
    m_stack.push_back(v);
    return true;
  }
  bool need(std::size_t n) {
    const std::size_t floor = m_marks.empty() ? 0 : m_marks.back();
    if (m_stack.size() < floor + n) return error("stack underflow");
    return true;
  }
  Value* pop() {
    Value* v = m_stack.back();
    m_stack.pop_back();
    return v;
  }
  bool take(std::size_t n, const std::byte*& out) {
    if (m_in.size() - m_pos < n) return error("truncated argument");
    out = m_in.data() + m_pos;
    m_pos += n;
    return true;
  }
  template <typename T>
  bool le(T& out) {
    const std::byte* p = nullptr;
    if (!take(sizeof(T), p)) return false;
    std::make_unsigned_t<T> u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i)
      u |= static_cast<std::make_unsigned_t<T>>(std::to_integer<unsigned>(p[i])) << (8 * i);
    out = static_cast<T>(u);
    return true;
  }
  bool line(std::string_view& out) {
    const std::size_t limit = std::min(m_in.size(), m_pos + std::min<std::size_t>(m_policy.max_string, 1 << 20));
    for (std::size_t i = m_pos; i < limit; ++i)
      if (m_in[i] == std::byte{'\n'}) {
        out = std::string_view(reinterpret_cast<const char*>(m_in.data() + m_pos), i - m_pos);
        m_pos = i + 1;
        return true;
      }
    return error("text argument without newline");
  }
  // Items from the topmost MARK to the top of the stack; removes them and the mark.
  bool pop_mark(std::vector<Value*>& out) {
    if (m_marks.empty()) return error("no MARK");
    const std::size_t at = m_marks.back();
    m_marks.pop_back();
    out.assign(m_stack.begin() + static_cast<std::ptrdiff_t>(at), m_stack.end());
    m_stack.resize(at);
    return true;
  }
  bool memo_put(std::uint64_t index) {
    if (m_stack.empty()) return error("memo put on an empty stack");
    if (m_memo.size() >= m_policy.max_memo && !m_memo.count(index))
      return error(fmt::format("more than {} memo entries", m_policy.max_memo));
    m_memo[index] = m_stack.back();
    return true;
  }
  bool memo_get(std::uint64_t index) {
    auto it = m_memo.find(index);
    if (it == m_memo.end()) return error(fmt::format("memo entry {} was never stored", index));
    return push(it->second);
  }
  bool push_text(Kind k, const std::byte* p, std::uint64_t n) {
    if (n > m_policy.max_string) return error(fmt::format("string of {} bytes exceeds the limit", n));
    Value* v = make(k);
    if (v) v->text.assign(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
    return push(v);
  }
  bool counted_text(Kind k, std::uint64_t n) {
    const std::byte* p = nullptr;
    if (n > m_in.size() - m_pos) return error("truncated string");
    if (!take(static_cast<std::size_t>(n), p)) return false;
    return push_text(k, p, n);
  }
  bool push_int(std::int64_t i) {
    Value* v = make(Kind::integer);
    if (v) v->integer = i;
    return push(v);
  }
  bool push_long(const std::byte* p, std::size_t n) {
    if (n <= 8) {
      std::uint64_t u = 0;
      for (std::size_t i = 0; i < n; ++i) u |= static_cast<std::uint64_t>(std::to_integer<unsigned>(p[i])) << (8 * i);
      if (n > 0 && n < 8 && (std::to_integer<unsigned>(p[n - 1]) & 0x80))
        u |= ~std::uint64_t{0} << (8 * n);  // sign-extend
      return push_int(static_cast<std::int64_t>(u));
    }
    return push_text(Kind::big_integer, p, n);
  }
  bool push_bool(bool b) {
    Value* v = make(Kind::boolean);
    if (v) v->boolean = b;
    return push(v);
  }
  bool push_float(double d) {
    Value* v = make(Kind::floating);
    if (v) v->floating = d;
    return push(v);
  }
  static std::string canonical_module(std::string_view m) {
    if (m == "__builtin__") return "builtins";
    if (m == "copy_reg") return "copyreg";
    return std::string(m);
  }
  bool push_global(std::string_view module, std::string_view name) {
    std::string full = canonical_module(module) + "." + std::string(name);
    if (!m_policy.allowed_globals.count(full))
      return error(
          fmt::format("class '{}' is not allowed (scout reads data, never code; only tensors, containers and "
                      "a fixed list of plain classes are accepted)",
                      full));
    Value* v = make(Kind::global);
    if (v) v->text = std::move(full);
    return push(v);
  }
  bool depth_ok() {
    if (m_marks.size() >= m_policy.max_depth) return error(fmt::format("nesting deeper than {}", m_policy.max_depth));
    return true;
  }
  static bool add_entry(Value* target, const Value* k, const Value* v) {
    target->entries.emplace_back(k, v);
    return true;
  }
  // `callable(*args)` without running it.
  bool call(Value* callable, Value* args, Value* kwargs) {
    if (callable->kind != Kind::global)
      return error(fmt::format("call of a {} (only classes and functions can be called)", kind_name(callable->kind)));
    if (args->kind != Kind::tuple) return error("call arguments are not a tuple");
    const std::string& name = callable->text;
    if (name == "collections.OrderedDict") {
      Value* d = make(Kind::dict);
      if (!d) return push(d);
      if (!args->items.empty()) {
        const Value* src = args->items[0];
        if (src->kind != Kind::list && src->kind != Kind::tuple)
          return error("OrderedDict argument is not a list of pairs");
        for (const Value* pair : src->items) {
          if ((pair->kind != Kind::list && pair->kind != Kind::tuple) || pair->items.size() != 2)
            return error("OrderedDict item is not a pair");
          d->entries.emplace_back(pair->items[0], pair->items[1]);
        }
      }
      return push(d);
    }
    if (name == "builtins.set" || name == "builtins.frozenset") {
      Value* l = make(Kind::list);
      if (!l) return push(l);
      if (!args->items.empty()) {
        const Value* src = args->items[0];
        if (src->kind != Kind::list && src->kind != Kind::tuple) return error("set argument is not a list");
        l->items = src->items;
      }
      return push(l);
    }
    if (name == "_codecs.encode" && args->items.size() == 2 && args->items[0]->kind == Kind::string) {
      // Protocol 2's spelling of bytes: encode(latin-1 text of the bytes, 'latin1').
      std::string out;
      const std::string& s = args->items[0]->text;
      for (std::size_t i = 0; i < s.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80)
          out += static_cast<char>(c);
        else if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) {
          out += static_cast<char>(((c & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F));
          ++i;
        } else
          return error("_codecs.encode of characters outside latin-1");
      }
      Value* b = make(Kind::bytes);
      if (b) b->text = std::move(out);
      return push(b);
    }
    Value* o = make(Kind::object);
    if (!o) return push(o);
    o->text = name;
    o->items = std::vector<const Value*>(args->items.begin(), args->items.end());
    if (kwargs && kwargs->kind == Kind::dict && !kwargs->entries.empty()) o->entries = kwargs->entries;
    return push(o);
  }

  bool step(unsigned char op) {
    switch (op) {
      case PROTO: {
        std::uint8_t p;
        if (!le(p)) return false;
        if (p > 5) return error(fmt::format("protocol {} is newer than 5", p));
        m_doc.protocol = p;
        return true;
      }
      case FRAME: {
        std::uint64_t n;
        return le(n);  // frames only group bytes; the data follows in line
      }
      case MARK:
        if (!depth_ok()) return false;
        m_marks.push_back(m_stack.size());
        return true;
      case POP:
        if (!m_marks.empty() && m_marks.back() == m_stack.size()) {  // CPython: POP of an empty mark pops the mark
          m_marks.pop_back();
          return true;
        }
        if (!need(1)) return false;
        pop();
        return true;
      case POP_MARK: {
        std::vector<Value*> items;
        return pop_mark(items);
      }
      case DUP:
        if (!need(1)) return false;
        return push(m_stack.back());
      case NONE:
        return push(make(Kind::none));
      case NEWTRUE:
        return push_bool(true);
      case NEWFALSE:
        return push_bool(false);
      case BININT: {
        std::int32_t i;
        return le(i) && push_int(i);
      }
      case BININT1: {
        std::uint8_t i;
        return le(i) && push_int(i);
      }
      case BININT2: {
        std::uint16_t i;
        return le(i) && push_int(i);
      }
      case LONG1: {
        std::uint8_t n;
        const std::byte* p = nullptr;
        return le(n) && take(n, p) && push_long(p, n);
      }
      case LONG4: {
        std::int32_t n;
        const std::byte* p = nullptr;
        if (!le(n)) return false;
        if (n < 0 || static_cast<std::size_t>(n) > m_policy.max_string) return error("bad LONG4 length");
        return take(static_cast<std::size_t>(n), p) && push_long(p, static_cast<std::size_t>(n));
      }
      case INT: {
        std::string_view t;
        if (!line(t)) return false;
        if (t == "00") return push_bool(false);
        if (t == "01") return push_bool(true);
        std::int64_t i = 0;
        auto r = std::from_chars(t.data(), t.data() + t.size(), i);
        if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return error("bad INT text");
        return push_int(i);
      }
      case LONG: {
        std::string_view t;
        if (!line(t)) return false;
        if (!t.empty() && t.back() == 'L') t.remove_suffix(1);
        std::int64_t i = 0;
        auto r = std::from_chars(t.data(), t.data() + t.size(), i);
        if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return error("bad or too large LONG text");
        return push_int(i);
      }
      case FLOAT: {
        std::string_view t;
        if (!line(t)) return false;
        std::string s(t);
        char* end = nullptr;
        double d = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size()) return error("bad FLOAT text");
        return push_float(d);
      }
      case BINFLOAT: {
        const std::byte* p = nullptr;
        if (!take(8, p)) return false;
        std::uint64_t u = 0;
        for (int i = 0; i < 8; ++i) u = (u << 8) | std::to_integer<unsigned>(p[i]);  // big-endian
        return push_float(std::bit_cast<double>(u));
      }
      case SHORT_BINUNICODE: {
        std::uint8_t n;
        return le(n) && counted_text(Kind::string, n);
      }
      case BINUNICODE: {
        std::uint32_t n;
        return le(n) && counted_text(Kind::string, n);
      }
      case BINUNICODE8: {
        std::uint64_t n;
        return le(n) && counted_text(Kind::string, n);
      }
      case SHORT_BINSTRING: {  // Python 2 str: bytes
        std::uint8_t n;
        return le(n) && counted_text(Kind::string, n);
      }
      case BINSTRING: {
        std::int32_t n;
        if (!le(n)) return false;
        if (n < 0) return error("negative BINSTRING length");
        return counted_text(Kind::string, static_cast<std::uint64_t>(n));
      }
      case SHORT_BINBYTES: {
        std::uint8_t n;
        return le(n) && counted_text(Kind::bytes, n);
      }
      case BINBYTES: {
        std::uint32_t n;
        return le(n) && counted_text(Kind::bytes, n);
      }
      case BINBYTES8:
      case BYTEARRAY8: {
        std::uint64_t n;
        return le(n) && counted_text(Kind::bytes, n);
      }
      case STRING:
      case UNICODE: {
        std::string_view t;
        if (!line(t)) return false;
        if (t.find('\\') != std::string_view::npos) return error("escaped protocol-0 strings are not supported");
        if (op == STRING) {
          if (t.size() < 2 || (t.front() != '\'' && t.front() != '"') || t.back() != t.front())
            return error("bad STRING quoting");
          t = t.substr(1, t.size() - 2);
        }
        return push_text(Kind::string, reinterpret_cast<const std::byte*>(t.data()), t.size());
      }
      case EMPTY_LIST:
        return push(make(Kind::list));
      case EMPTY_TUPLE:
        return push(make(Kind::tuple));
      case EMPTY_DICT:
        return push(make(Kind::dict));
      case EMPTY_SET:
        return push(make(Kind::list));
      case LIST:
      case TUPLE:
      case FROZENSET: {
        std::vector<Value*> items;
        if (!pop_mark(items)) return false;
        Value* v = make(op == TUPLE ? Kind::tuple : Kind::list);
        if (v) v->items.assign(items.begin(), items.end());
        return push(v);
      }
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        const std::size_t n = op - TUPLE1 + 1;
        if (!need(n)) return false;
        Value* v = make(Kind::tuple);
        if (!v) return push(v);
        v->items.assign(m_stack.end() - static_cast<std::ptrdiff_t>(n), m_stack.end());
        m_stack.resize(m_stack.size() - n);
        return push(v);
      }
      case DICT: {
        std::vector<Value*> items;
        if (!pop_mark(items)) return false;
        if (items.size() % 2) return error("DICT with an odd number of items");
        Value* v = make(Kind::dict);
        if (!v) return push(v);
        for (std::size_t i = 0; i < items.size(); i += 2) v->entries.emplace_back(items[i], items[i + 1]);
        return push(v);
      }
      case APPEND: {
        if (!need(2)) return false;
        Value* item = pop();
        Value* list = m_stack.back();
        if (list->kind != Kind::list) return error(fmt::format("APPEND to a {}", kind_name(list->kind)));
        list->items.push_back(item);
        return true;
      }
      case APPENDS:
      case ADDITEMS: {
        std::vector<Value*> items;
        if (!pop_mark(items)) return false;
        if (!need(1)) return false;
        Value* list = m_stack.back();
        if (list->kind != Kind::list) return error(fmt::format("APPENDS to a {}", kind_name(list->kind)));
        list->items.insert(list->items.end(), items.begin(), items.end());
        return true;
      }
      case SETITEM: {
        if (!need(3)) return false;
        Value* v = pop();
        Value* k = pop();
        Value* d = m_stack.back();
        if (d->kind != Kind::dict && d->kind != Kind::object)
          return error(fmt::format("SETITEM on a {}", kind_name(d->kind)));
        return add_entry(d, k, v);
      }
      case SETITEMS: {
        std::vector<Value*> items;
        if (!pop_mark(items)) return false;
        if (items.size() % 2) return error("SETITEMS with an odd number of items");
        if (!need(1)) return false;
        Value* d = m_stack.back();
        if (d->kind != Kind::dict && d->kind != Kind::object)
          return error(fmt::format("SETITEMS on a {}", kind_name(d->kind)));
        for (std::size_t i = 0; i < items.size(); i += 2) add_entry(d, items[i], items[i + 1]);
        return true;
      }
      case GET: {
        std::string_view t;
        if (!line(t)) return false;
        std::uint64_t i = 0;
        auto r = std::from_chars(t.data(), t.data() + t.size(), i);
        if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return error("bad GET index");
        return memo_get(i);
      }
      case BINGET: {
        std::uint8_t i;
        return le(i) && memo_get(i);
      }
      case LONG_BINGET: {
        std::uint32_t i;
        return le(i) && memo_get(i);
      }
      case PUT: {
        std::string_view t;
        if (!line(t)) return false;
        std::uint64_t i = 0;
        auto r = std::from_chars(t.data(), t.data() + t.size(), i);
        if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return error("bad PUT index");
        return memo_put(i);
      }
      case BINPUT: {
        std::uint8_t i;
        return le(i) && memo_put(i);
      }
      case LONG_BINPUT: {
        std::uint32_t i;
        return le(i) && memo_put(i);
      }
      case MEMOIZE:
        return memo_put(m_memo.size());
      case GLOBAL: {
        std::string_view module, name;
        if (!line(module)) return false;
        std::string mod(module);
        if (!line(name)) return false;
        return push_global(mod, name);
      }
      case STACK_GLOBAL: {
        if (!need(2)) return false;
        Value* name = pop();
        Value* module = pop();
        if (module->kind != Kind::string || name->kind != Kind::string) return error("STACK_GLOBAL of non-strings");
        return push_global(module->text, name->text);
      }
      case REDUCE: {
        if (!need(2)) return false;
        Value* args = pop();
        Value* callable = pop();
        return call(callable, args, nullptr);
      }
      case NEWOBJ: {
        if (!need(2)) return false;
        Value* args = pop();
        Value* cls = pop();
        return call(cls, args, nullptr);
      }
      case NEWOBJ_EX: {
        if (!need(3)) return false;
        Value* kwargs = pop();
        Value* args = pop();
        Value* cls = pop();
        return call(cls, args, kwargs);
      }
      case BUILD: {
        if (!need(2)) return false;
        Value* state = pop();
        Value* target = m_stack.back();
        if (target->kind == Kind::object) {
          target->state = state;
          return true;
        }
        // A dict or list subclass with instance attributes (an OrderedDict state_dict carries `_metadata`): the
        // items are the data; the attributes are dropped.
        if (target->kind == Kind::dict || target->kind == Kind::list || state->kind == Kind::none) return true;
        return error(fmt::format("BUILD on a {}", kind_name(target->kind)));
      }
      case BINPERSID: {
        if (!need(1)) return false;
        Value* id = pop();
        Value* v = make(Kind::persistent);
        if (v) v->state = id;
        return push(v);
      }
      case PERSID: {
        std::string_view t;
        if (!line(t)) return false;
        Value* id = make(Kind::string);
        if (!id) return push(id);
        id->text = std::string(t);
        Value* v = make(Kind::persistent);
        if (v) v->state = id;
        return push(v);
      }
      default:
        return error(
            fmt::format("opcode 0x{:02x} is not supported (extension registry, out-of-band buffers or instance "
                        "opcodes are never written by torch.save)",
                        op));
    }
  }
};

void render_into(const Value& v, std::string& out, std::size_t max, int depth) {
  if (out.size() >= max) return;
  if (depth > 8) {
    out += "...";
    return;
  }
  switch (v.kind) {
    case Kind::none:
      out += "None";
      break;
    case Kind::boolean:
      out += v.boolean ? "True" : "False";
      break;
    case Kind::integer:
      out += std::to_string(v.integer);
      break;
    case Kind::big_integer:
      out += "<int of " + std::to_string(v.text.size()) + " bytes>";
      break;
    case Kind::floating:
      out += fmt::format("{}", v.floating);
      break;
    case Kind::string:
      out += "'" + v.text.substr(0, max) + "'";
      break;
    case Kind::bytes:
      out += "<" + std::to_string(v.text.size()) + " bytes>";
      break;
    case Kind::list:
    case Kind::tuple:
      out += v.kind == Kind::list ? "[" : "(";
      for (std::size_t i = 0; i < v.items.size() && out.size() < max; ++i) {
        if (i) out += ", ";
        render_into(*v.items[i], out, max, depth + 1);
      }
      out += v.kind == Kind::list ? "]" : ")";
      break;
    case Kind::dict:
      out += "{";
      for (std::size_t i = 0; i < v.entries.size() && out.size() < max; ++i) {
        if (i) out += ", ";
        render_into(*v.entries[i].first, out, max, depth + 1);
        out += ": ";
        render_into(*v.entries[i].second, out, max, depth + 1);
      }
      out += "}";
      break;
    case Kind::global:
      out += "<" + v.text + ">";
      break;
    case Kind::object:
      out += v.text + "(";
      for (std::size_t i = 0; i < v.items.size() && out.size() < max; ++i) {
        if (i) out += ", ";
        render_into(*v.items[i], out, max, depth + 1);
      }
      out += ")";
      if (v.state && v.state->kind != Kind::none) {
        out += "+";
        render_into(*v.state, out, max, depth + 1);
      }
      break;
    case Kind::persistent:
      out += "<persistent>";
      break;
  }
}

}  // namespace

Result<Document> parse(std::span<const std::byte> bytes, const Policy& policy) {
  return Parser(bytes, policy).run();
}

std::string render(const Value& value, std::size_t max_chars) {
  std::string out;
  render_into(value, out, max_chars, 0);
  if (out.size() > max_chars) out = out.substr(0, max_chars - 3) + "...";
  return out;
}

}  // namespace scout::pickle
