// SPDX-License-Identifier: Apache-2.0
// Command-line plumbing shared by the example programs (examples/*.cpp), not part of the library:
// `UsageError` for a bad command line, `ArgParser` to walk argv strictly (every argument is a
// known flag; integers and numbers are read whole and checked against an explicit range, so the
// message names the flag, the value and the range), `--help`/`-h` for every example, `require`
// for checks across flags, and `run_main`, which turns any error into one
// "<program>: error: ..." line on stderr and exit code 2. Each example keeps its own flags,
// defaults and wording; only the mechanics live here.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace inferkit::examples {

/// A bad command line. `run_main` prints `message` on one line and exits with 2.
struct UsageError {
  std::string message;
};

/// `--help` or `-h` was given: `run_main` prints `usage` on stdout and exits with 0.
struct HelpRequest {
  std::string usage;
};

/// Throws `UsageError{message}` unless `ok`.
inline void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError{message};
}

/// `value` as printf's "%g" writes it ("80", "0.1", "-80"), for messages.
inline std::string format_g(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// Walks argv one flag at a time: `next()` moves to the next flag, `flag()` names it, and the
/// value readers consume the argument after it. Every argument must be a flag ("--name"), so a
/// stray word is an error, not a silently ignored value; `--help` and `-h` print the usage given
/// at construction and exit with 0 (through `run_main`). Every reader throws `UsageError` naming
/// the flag, the text it read and the range it needs.
///
///     ArgParser args(argc, argv, kUsage);
///     while (args.next()) {
///       if (args.flag() == "--gpus") gpus = args.integer<int>(1, 1'000'000);
///       else args.unknown_flag();
///     }
class ArgParser {
 public:
  ArgParser(int argc, char** argv, std::string usage)
      : args_(argv + 1, argv + argc), usage_(std::move(usage)) {}

  /// Moves to the next flag; false once every argument is consumed. Throws `HelpRequest` for
  /// `--help` / `-h`, and `UsageError` for an argument that is not a flag.
  bool next() {
    if (next_ >= args_.size()) return false;
    flag_ = next_++;
    const std::string& arg = args_[flag_];
    if (arg == "--help" || arg == "-h") throw HelpRequest{usage_};
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      throw UsageError{"unexpected argument '" + arg +
                       "': every argument is a --flag, and values follow their flag (see --help)"};
    }
    return true;
  }

  /// The current flag as typed ("--gpus").
  [[nodiscard]] const std::string& flag() const { return args_[flag_]; }

  /// Consumes the argument after the flag. Throws "<flag> needs a value" if there is none.
  const std::string& value() {
    if (next_ >= args_.size()) throw UsageError{flag() + " needs a value (see --help)"};
    return args_[next_++];
  }

  /// The value as a base-10 integer in [lo, hi]: digits with an optional leading '-', nothing
  /// else ("12.7", "1e3", " 5" and "99999999999999999999" are rejected, never truncated or
  /// clamped). Throws "<flag> = '<text>' must be an integer in [<lo>, <hi>]".
  template <class Int>
  Int integer(Int lo, Int hi) {
    static_assert(std::is_integral_v<Int>, "integer<Int>() reads integer types");
    const std::string& text = value();
    Int result{};
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, result);
    if (text.empty() || ec != std::errc() || ptr != end || result < lo || result > hi) {
      throw UsageError{flag() + " = '" + text + "' must be an integer in [" + std::to_string(lo) +
                       ", " + std::to_string(hi) + "]"};
    }
    return result;
  }

  /// The value as a finite number in [lo, hi] (strtod syntax, the whole text). Throws
  /// "<flag> = '<text>' must be a number in [<lo>, <hi>]".
  double number(double lo, double hi) {
    const std::string& text = value();
    char* end = nullptr;
    const double result = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(result) ||
        !(result >= lo && result <= hi)) {
      throw UsageError{flag() + " = '" + text + "' must be a number in [" + format_g(lo) + ", " +
                       format_g(hi) + "]"};
    }
    return result;
  }

  /// The value, which must be one of `choices`. Throws "<flag> = '<text>' must be one of …".
  const std::string& choice(const std::vector<std::string_view>& choices) {
    const std::string& text = value();
    std::string list;
    for (std::string_view c : choices) {
      if (c == text) return text;
      list += (list.empty() ? "" : ", ") + std::string(c);
    }
    throw UsageError{flag() + " = '" + text + "' must be one of " + list};
  }

  /// Throws "unknown flag '<flag>' (see --help)".
  [[noreturn]] void unknown_flag() const {
    throw UsageError{"unknown flag '" + flag() + "' (see --help)"};
  }

 private:
  std::vector<std::string> args_;  // argv without the program name
  std::string usage_;              // printed for --help / -h
  std::size_t flag_ = 0;           // index of the current flag
  std::size_t next_ = 0;           // index of the next unread argument
};

/// Runs `body()` (main's work, returning its exit code). A `HelpRequest` prints the usage on
/// stdout and returns 0; a `UsageError` or any exception, `inferkit::Error` included, becomes
/// one "<program>: error: <message>" line on stderr and exit code 2.
template <class Body>
int run_main(const char* program, Body&& body) {
  try {
    return body();
  } catch (const HelpRequest& help) {
    std::fputs(help.usage.c_str(), stdout);
    return 0;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.message.c_str());
  } catch (const std::exception& e) {  // inferkit::Error is a std::runtime_error
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
  } catch (...) {  // nothing here throws other types, but main must never let one escape
    std::fprintf(stderr, "%s: error: an exception of unknown type\n", program);
  }
  return 2;
}

}  // namespace inferkit::examples
