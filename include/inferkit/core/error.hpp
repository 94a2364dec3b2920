// SPDX-License-Identifier: Apache-2.0
// Errors: `inferkit::Error` for bad arguments at public entry points (message names the argument,
// the value and the limit), `INFERKIT_CHECK` to raise it, and `INFERKIT_ASSERT` for internal
// invariants (debug only). Expected outcomes such as "out of KV blocks" are values, not errors.
// Threads: no shared state (Error is a value type, the checks are pure); safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace inferkit {

/// What kind of failure an `Error` reports, so callers and tests can match on it.
enum class ErrorCode : std::uint8_t {
  kInvalidArgument,  ///< an argument is malformed (zero size, mismatched shapes, unknown name)
  kOutOfRange,       ///< an index or size is past a limit (capacity, block id, vocabulary)
  kUnsupported,      ///< a valid request this build or backend cannot serve
  kInvalidState,     ///< the call is not allowed in the object's current state (double free)
  kCuda,             ///< a CUDA runtime call failed
};

/// A short name for an error code ("invalid argument", …).
constexpr std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kOutOfRange:
      return "out of range";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kInvalidState:
      return "invalid state";
    case ErrorCode::kCuda:
      return "cuda error";
  }
  return "unknown error";
}

namespace detail {

/// Concatenates message parts.
inline std::string concat(std::initializer_list<std::string_view> parts) {
  std::size_t size = 0;
  for (std::string_view part : parts) size += part.size();
  std::string text;
  text.reserve(size);
  for (std::string_view part : parts) text.append(part);
  return text;
}

}  // namespace detail

/// The one exception type inferkit throws. `what()` reads "inferkit: <code>: <message>".
class Error : public std::runtime_error {
 public:
  /// An error of kind `code`; `message` names the argument, its value and the limit.
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(detail::concat({"inferkit: ", to_string(code), ": ", message})),
        code_(code) {}

  /// The kind of failure.
  [[nodiscard]] ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

namespace detail {

/// Every throw goes through here (fmt's report_error, Abseil's throw delegate), so a
/// no-exceptions mode would be one switch.
[[noreturn]] inline void throw_error(ErrorCode code, const std::string& message) {
  throw Error(code, message);
}

/// Formats a value for an error message: text is quoted, numbers are printed as is. Strings are
/// built with append, not operator+ chains, which GCC 12 at -O3 flags with a false -Wrestrict.
template <class T>
std::string to_message(const T& value) {
  std::string text;
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    const std::string_view view(value);
    text.reserve(view.size() + 2);
    text.push_back('\'');
    text.append(view);
    text.push_back('\'');
  } else {
    text = std::to_string(value);
  }
  return text;
}

/// The name of an argument for a message: text as is, or what a callable returns (a name built
/// from an index, formatted only when a check fails).
template <class A>
std::string argument_name(const A& argument) {
  if constexpr (std::is_invocable_v<const A&>) {
    return std::string(argument());
  } else {
    return std::string(std::string_view(argument));
  }
}

/// check_arg's failure path, out of line and marked cold, so a passing check costs one branch.
template <class A, class V, class L>
[[noreturn, gnu::cold, gnu::noinline]] void fail_arg(ErrorCode code, const A& argument,
                                                     const V& value, std::string_view relation,
                                                     const L& limit) {
  throw_error(code, concat({argument_name(argument), " = ", to_message(value), " ", relation, " ",
                            to_message(limit)}));
}

}  // namespace detail

/// Throws `Error{code}` with "<argument> = <value> <relation> <limit>" style messages:
/// `check_arg(n <= cap, ErrorCode::kOutOfRange, "n", n, "must be <= capacity", cap)`.
/// Nothing is formatted unless the check fails. `argument` is text, or a callable returning the
/// name when it depends on an index, so that a passing check in a loop builds no string:
/// `check_arg(p[i] >= 0, code, [&] { return "p[" + std::to_string(i) + "]"; }, p[i], …)`.
template <class A, class V, class L>
inline void check_arg(bool ok, ErrorCode code, const A& argument, const V& value,
                      std::string_view relation, const L& limit) {
  if (!ok) [[unlikely]] {
    detail::fail_arg(code, argument, value, relation, limit);
  }
}

}  // namespace inferkit

/// Throws `inferkit::Error(code, message + " (check `cond` failed at file:line)")` when `cond` is
/// false. Use at public entry points; `message` should name the argument, its value and the limit.
#define INFERKIT_CHECK(cond, code, message)                                                     \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      ::inferkit::detail::throw_error(                                                          \
          (code),                                                                               \
          ::inferkit::detail::concat({(message), " (check `" #cond "` failed at " __FILE__ ":", \
                                      std::to_string(__LINE__), ")"}));                         \
    }                                                                                           \
  } while (false)

/// Internal invariant: checked when INFERKIT_DEBUG_ASSERTS is 1 (not NDEBUG), free otherwise.
/// A user may define INFERKIT_ASSERT before including inferkit to route it elsewhere.
#ifndef INFERKIT_ASSERT
#  if INFERKIT_DEBUG_ASSERTS && !INFERKIT_DEVICE_PASS
#    define INFERKIT_ASSERT(cond)                                                                  \
      do {                                                                                         \
        if (!(cond)) {                                                                             \
          ::inferkit::detail::throw_error(::inferkit::ErrorCode::kInvalidState,                    \
                                          ::inferkit::detail::concat({"internal invariant `" #cond \
                                                                      "` failed at " __FILE__ ":", \
                                                                      std::to_string(__LINE__)})); \
        }                                                                                          \
      } while (false)
#  else
#    define INFERKIT_ASSERT(cond) ((void)0)
#  endif
#endif
