// Errors are values inside lib/: a Result<T> holds either a T or an Error.
// Commands turn an unrecoverable Error into a FatalError, caught only in main.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include "lib/common/exit_code.hpp"

namespace scout {

// What went wrong, why, and what the user should do about it. `code` is the
// exit code the process ends with when this error is fatal.
struct Error {
  ExitCode code = ExitCode::internal;
  std::string what;
  std::string why;
  std::string hint;

  // One line: "what; why; hint" (empty parts omitted).
  std::string message() const;
};

// Shorthands for the common kinds of error.
Error usage_error(std::string what, std::string why = {}, std::string hint = {});
Error input_error(std::string what, std::string why = {}, std::string hint = {});
Error unavailable_error(std::string what, std::string why = {}, std::string hint = {});
Error internal_error(std::string what, std::string why = {}, std::string hint = {});

// Either a value or an Error. Minimal on purpose (std::expected is C++23).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : m_state(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : m_state(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(m_state); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(m_state); }
  const T& value() const& { return std::get<T>(m_state); }
  T&& value() && { return std::get<T>(std::move(m_state)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<Error>(m_state); }

 private:
  std::variant<T, Error> m_state;
};

// Result for operations that produce nothing but may fail.
struct Ok {};
using Status = Result<Ok>;

// The one exception type of scout: thrown by commands, caught in main.
class FatalError : public std::runtime_error {
 public:
  explicit FatalError(Error error) : std::runtime_error(error.message()), m_error(std::move(error)) {}
  const Error& error() const { return m_error; }

 private:
  Error m_error;
};

// Returns the value of `result` or throws its error as a FatalError.
template <typename T>
T value_or_throw(Result<T> result) {
  if (!result.ok()) throw FatalError(result.error());
  return std::move(result).value();
}

}  // namespace scout
