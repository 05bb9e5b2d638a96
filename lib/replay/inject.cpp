#include "lib/replay/inject.hpp"

#include <fmt/format.h>

#include <random>

#include "lib/common/parse.hpp"

namespace scout::replay {

std::string_view quantity_name(Quantity q) {
  switch (q) {
    case Quantity::output:
      return "output";
    case Quantity::input_grad:
      return "input_grad";
    case Quantity::param_grad:
      return "param_grad";
    case Quantity::param:
      return "param";
  }
  return "output";
}

std::optional<Quantity> parse_quantity(std::string_view name) {
  for (auto q : k_quantities)
    if (quantity_name(q) == name) return q;
  return std::nullopt;
}

namespace {

const char* k_forms =
    "use sdc:peer=P,tensor=output|input_grad|param_grad|param,word=W,bit=B[,recipe=R], sdc:random[,seed=S], "
    "slow:peer=P,factor=F[,recipe=R] or contract:peer=P";

Error bad(const std::string& text, const std::string& what) {
  return usage_error(fmt::format("--inject '{}': {}", text, what), {}, k_forms);
}

}  // namespace

Result<Injection> parse_injection(const std::string& text) {
  Injection in;
  in.text = text;
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string rest = colon == std::string::npos ? std::string() : text.substr(colon + 1);
  std::vector<std::pair<std::string, std::string>> fields;
  bool random = false;
  if (!rest.empty()) {
    for (auto f : split(rest, ',')) {
      const std::string field(trim(f));
      if (field.empty()) return bad(text, "empty field");
      if (field == "random") {
        random = true;
        continue;
      }
      const auto eq = field.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == field.size())
        return bad(text, fmt::format("field '{}' is not KEY=VALUE", field));
      const std::string key = field.substr(0, eq);
      for (const auto& [k, v] : fields)
        if (k == key) return bad(text, fmt::format("'{}' is given twice", key));
      fields.emplace_back(key, field.substr(eq + 1));
    }
  }
  auto allowed = [&](std::initializer_list<const char*> keys) -> Status {
    for (const auto& [k, v] : fields) {
      bool ok = false;
      for (const char* a : keys) ok = ok || k == a;
      if (!ok) return bad(text, fmt::format("'{}' is not a field of {}{}", k, kind, random ? ":random" : ""));
    }
    return Ok{};
  };
  auto get = [&](const char* key) -> std::optional<std::string> {
    for (const auto& [k, v] : fields)
      if (k == key) return v;
    return std::nullopt;
  };
  auto need_int = [&](const char* key, std::int64_t lo, std::int64_t hi) -> Result<std::int64_t> {
    auto v = get(key);
    if (!v) return bad(text, fmt::format("'{}' is missing", key));
    auto n = parse_int(*v, key);
    if (!n) return bad(text, fmt::format("{}={} is not an integer", key, *v));
    if (*n < lo || *n > hi) return bad(text, fmt::format("{}={} is out of range [{}, {}]", key, *n, lo, hi));
    return *n;
  };
  if (kind == "sdc" && random) {
    in.kind = Injection::Kind::sdc_random;
    if (auto s = allowed({"seed"}); !s) return s.error();
    if (auto v = get("seed")) {
      auto n = parse_int(*v, "seed");
      if (!n || *n < 0) return bad(text, fmt::format("seed={} is not a non-negative integer", *v));
      in.seed = static_cast<std::uint64_t>(*n);
    }
    return in;
  }
  if (random) return bad(text, "'random' applies to sdc only");
  if (kind == "sdc") {
    in.kind = Injection::Kind::sdc;
    if (auto s = allowed({"peer", "tensor", "word", "bit", "recipe"}); !s) return s.error();
    auto peer = need_int("peer", 0, 1 << 20);
    if (!peer) return peer.error();
    in.peer = *peer;
    auto t = get("tensor");
    if (!t) return bad(text, "'tensor' is missing");
    auto q = parse_quantity(*t);
    if (!q) return bad(text, fmt::format("tensor={} is not output, input_grad, param_grad or param", *t));
    in.tensor = *q;
    auto w = need_int("word", 0, std::numeric_limits<std::int64_t>::max());
    if (!w) return w.error();
    in.word = static_cast<std::uint64_t>(*w);
    auto b = need_int("bit", 0, 63);
    if (!b) return b.error();
    in.bit = static_cast<int>(*b);
    in.recipe = get("recipe").value_or("");
    return in;
  }
  if (kind == "slow") {
    in.kind = Injection::Kind::slow;
    if (auto s = allowed({"peer", "factor", "recipe"}); !s) return s.error();
    auto peer = need_int("peer", 0, 1 << 20);
    if (!peer) return peer.error();
    in.peer = *peer;
    auto f = get("factor");
    if (!f) return bad(text, "'factor' is missing");
    auto x = parse_double(*f, "factor");
    if (!x || *x <= 1 || *x > 1000)
      return bad(text, fmt::format("factor={} must be a number above 1 and at most 1000", *f));
    in.factor = *x;
    in.recipe = get("recipe").value_or("");
    return in;
  }
  if (kind == "contract") {
    in.kind = Injection::Kind::contract;
    if (auto s = allowed({"peer"}); !s) return s.error();
    auto peer = need_int("peer", 0, 1 << 20);
    if (!peer) return peer.error();
    in.peer = *peer;
    return in;
  }
  return bad(text, fmt::format("'{}' is not an injection kind", kind));
}

Status validate_injections(const std::vector<Injection>& injections, std::int64_t peers) {
  for (const auto& in : injections)
    if (in.kind != Injection::Kind::sdc_random && in.peer >= peers)
      return usage_error(fmt::format("--inject '{}': peer {} does not exist", in.text, in.peer),
                         fmt::format("peers are numbered 0..{}", peers - 1), "name a peer below --peers");
  return Ok{};
}

Injection resolve_random(const Injection& r, std::int64_t peers, const std::vector<RecipeQuantities>& recipes) {
  std::mt19937_64 rng(r.seed);
  Injection in;
  in.kind = Injection::Kind::sdc;
  in.text = r.text;
  in.seed = r.seed;
  in.peer = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(std::max<std::int64_t>(peers, 1)));
  std::vector<std::pair<std::string, Quantity>> cells;
  for (const auto& rq : recipes)
    for (auto q : rq.quantities) cells.emplace_back(rq.recipe, q);
  if (!cells.empty()) {
    const auto& c = cells[rng() % cells.size()];
    in.recipe = c.first;
    in.tensor = c.second;
  }
  in.word = rng();  // taken modulo the word count when applied
  in.bit = static_cast<int>(rng() % 64);
  return in;
}

std::optional<FlipPosition> flip_bit(std::vector<std::vector<std::uint8_t>*>& tensors, std::uint64_t word, int bit) {
  std::uint64_t total = 0;
  for (auto* t : tensors) total += (t->size() + 7) / 8;
  if (total == 0) return std::nullopt;
  FlipPosition p;
  p.word = word % total;
  p.bit = bit & 63;
  std::uint64_t w = p.word;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::uint64_t words = (tensors[i]->size() + 7) / 8;
    if (w < words) {
      p.tensor = i;
      p.tensor_word = w;
      auto& bytes = *tensors[i];
      std::size_t byte = static_cast<std::size_t>(w * 8 + static_cast<std::uint64_t>(p.bit / 8));
      int b = p.bit % 8;
      if (byte >= bytes.size()) {  // padding of a partial last word: flip within the real bytes
        const std::size_t valid_bits = (bytes.size() - static_cast<std::size_t>(w * 8)) * 8;
        p.bit = static_cast<int>(static_cast<std::size_t>(p.bit) % valid_bits);
        byte = static_cast<std::size_t>(w * 8 + static_cast<std::uint64_t>(p.bit / 8));
        b = p.bit % 8;
      }
      bytes[byte] ^= static_cast<std::uint8_t>(1u << b);
      return p;
    }
    w -= words;
  }
  return std::nullopt;
}

}  // namespace scout::replay
