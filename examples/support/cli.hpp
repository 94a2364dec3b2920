// SPDX-License-Identifier: Apache-2.0
// Command-line plumbing shared by the example programs (examples/*.cpp), not part of the library:
// `UsageError` for a bad command line, `ArgParser` to walk argv and read typed flag values,
// `require` for range checks whose message names the flag, and `run_main`, which turns any error
// into one "<program>: error: ..." line on stderr and exit code 2. Each example keeps its own
// flags, defaults and wording; only the mechanics live here.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace inferkit::examples {

/// A bad command line. `run_main` prints `message` on one line and exits with 2.
struct UsageError {
  std::string message;
};

/// Throws `UsageError{message}` unless `ok`.
inline void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError{message};
}

/// Throws `UsageError` "<flag> = <value> must be <limit>" unless `ok`.
inline void require(bool ok, std::string_view flag, const std::string& value,
                    std::string_view limit) {
  if (!ok) {
    throw UsageError{std::string(flag) + " = " + value + " must be " + std::string(limit)};
  }
}

/// Same, with an integer value.
inline void require(bool ok, std::string_view flag, long long value, std::string_view limit) {
  require(ok, flag, std::to_string(value), limit);
}

/// `value` as printf's "%g" writes it ("80", "0.1", "-80"), for messages.
inline std::string format_g(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// Walks argv one flag at a time: `next()` moves to the next flag, `flag()` names it, and the
/// value readers consume the argument after it. Every reader throws `UsageError` naming the flag.
///
///     ArgParser args(argc, argv);
///     while (args.next()) {
///       if (args.flag() == "--gpus") gpus = args.integer();
///       else args.unknown_flag();
///     }
class ArgParser {
 public:
  ArgParser(int argc, char** argv) : args_(argv + 1, argv + argc) {}

  /// Moves to the next flag; false once every argument is consumed.
  bool next() {
    if (next_ >= args_.size()) return false;
    flag_ = next_++;
    return true;
  }

  /// The current flag as typed ("--gpus").
  const std::string& flag() const { return args_[flag_]; }

  /// True if the current flag is "--help" or "-h".
  bool help() const { return flag() == "--help" || flag() == "-h"; }

  /// True if an argument follows the current flag (its value, if it takes one).
  bool has_value() const { return next_ < args_.size(); }

  /// Consumes the argument after the flag. Throws "<flag> needs a value" if there is none.
  const std::string& value() {
    if (!has_value()) throw UsageError{flag() + " needs a value"};
    return args_[next_++];
  }

  /// The value as a base-10 integer. Throws "<flag> expects an integer, got '<text>'".
  long long integer() {
    const std::string& text = value();
    char* end = nullptr;
    const long long result = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') {
      throw UsageError{flag() + " expects an integer, got '" + text + "'"};
    }
    return result;
  }

  /// The value as a finite number. Throws "<flag> expects a number, got '<text>'".
  double number() {
    const std::string& text = value();
    char* end = nullptr;
    const double result = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(result)) {
      throw UsageError{flag() + " expects a number, got '" + text + "'"};
    }
    return result;
  }

  /// The value as a number in [lo, hi]. A malformed or out-of-range value throws
  /// "<flag> = '<text>' must be a number in [<lo>, <hi>]" (bounds as std::to_string writes them).
  double number_in(double lo, double hi) {
    const std::string& text = value();
    char* end = nullptr;
    const double result = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !(result >= lo && result <= hi)) {
      throw UsageError{flag() + " = '" + text + "' must be a number in [" + std::to_string(lo) +
                       ", " + std::to_string(hi) + "]"};
    }
    return result;
  }

  /// Throws "unknown flag '<flag>' (see --help)".
  [[noreturn]] void unknown_flag() const {
    throw UsageError{"unknown flag '" + flag() + "' (see --help)"};
  }

 private:
  std::vector<std::string> args_;  // argv without the program name
  std::size_t flag_ = 0;           // index of the current flag
  std::size_t next_ = 0;           // index of the next unread argument
};

/// Runs `body()` (main's work, returning its exit code). A `UsageError` or any exception,
/// `inferkit::Error` included, becomes one "<program>: error: <message>" line on stderr and
/// exit code 2.
template <typename Body>
int run_main(const char* program, Body&& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.message.c_str());
  } catch (const std::exception& e) {  // inferkit::Error is a std::runtime_error
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
  }
  return 2;
}

}  // namespace inferkit::examples
