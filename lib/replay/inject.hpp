// Fault injection for replay drills and tests (man scout-replay, INJECTION):
//   sdc:peer=P,tensor=output|input_grad|param_grad|param,word=W,bit=B[,recipe=R]
//   sdc:random[,seed=S]        one flip at a random peer/recipe/quantity/word/bit
//   slow:peer=P,factor=F[,recipe=R]   peer P's module call takes F times as long
//   contract:peer=P            peer P reports a different thread count (a drill
//                              for the contract check; its numbers are unchanged)
// A flip is applied after the computation, before hashing, to the quantity's
// tensors taken as one sequence of 64-bit little-endian words (each tensor's
// words in order); W is taken modulo that sequence's word count and the
// verdict records the word actually flipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"

namespace scout::replay {

// The compared quantities of a recipe, in verdict order.
enum class Quantity { output, input_grad, param_grad, param };
inline constexpr Quantity k_quantities[] = {Quantity::output, Quantity::input_grad, Quantity::param_grad,
                                            Quantity::param};
std::string_view quantity_name(Quantity q);
std::optional<Quantity> parse_quantity(std::string_view name);

struct Injection {
  enum class Kind { sdc, sdc_random, slow, contract };
  Kind kind = Kind::sdc;
  std::int64_t peer = -1;              // sdc, slow, contract
  Quantity tensor = Quantity::output;  // sdc
  std::uint64_t word = 0;              // sdc
  int bit = 0;                         // sdc: 0..63
  double factor = 1;                   // slow: > 1
  std::string recipe;                  // empty: every recipe (sdc: every recipe holding the quantity)
  std::uint64_t seed = 0;              // sdc:random; 0 = from the clock (printed in the verdict)
  std::string text;                    // as written
};

// Parses one --inject value; usage errors name the field and the form.
Result<Injection> parse_injection(const std::string& text);

// Checks peer indices against the number of peers (usage error otherwise).
Status validate_injections(const std::vector<Injection>& injections, std::int64_t peers);

// Resolves sdc:random into a concrete sdc injection over `peers`, `recipes`
// (each with the quantities it has) from `seed` (deterministic).
struct RecipeQuantities {
  std::string recipe;
  std::vector<Quantity> quantities;
};
Injection resolve_random(const Injection& random, std::int64_t peers, const std::vector<RecipeQuantities>& recipes);

// Flips bit `bit` of word `word` (mod the word count) of the sequence of
// byte buffers `tensors` (each padded to whole words). Returns the word index
// flipped, or nullopt when the sequence holds no bytes.
struct FlipPosition {
  std::uint64_t word = 0;         // in the whole sequence
  std::size_t tensor = 0;         // which buffer
  std::uint64_t tensor_word = 0;  // word within it
  int bit = 0;
};
std::optional<FlipPosition> flip_bit(std::vector<std::vector<std::uint8_t>*>& tensors, std::uint64_t word, int bit);

}  // namespace scout::replay
