// The seed of a randomized unit test: SCOUT_TEST_SEED when it is set (to
// repeat a run whose seed a failure printed), else a fresh random one. Every
// test that draws from it prints or traces the value.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>

namespace scout::test_support {

inline std::uint64_t test_seed() {
  if (const char* env = std::getenv("SCOUT_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) | rd();
}

// The same, for tests that seed a 32-bit generator: a printed value repeats the run.
inline unsigned test_seed32() {
  return static_cast<unsigned>(test_seed());
}

}  // namespace scout::test_support
