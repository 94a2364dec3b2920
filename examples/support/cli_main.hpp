// SPDX-License-Identifier: Apache-2.0
// The glue between the example programs (examples/*.cpp) and CLI11, not part of the library: the
// value checks every example's options share, `UsageError` and `require` for checks across flags,
// and `run_main`, which gives main a `CLI::App` and turns any error into one
// "<program>: error: ..." line on stderr and exit code 2. CLI11 does the parsing; each example
// keeps its own flags, defaults and usage text.
//
// Why our own checks instead of CLI::Range: CLI11 2.1.2 (Debian 12) reads an integer with
// strtoll(…, 0), so "010" is 8 and "0x10" is 16, and it never looks at errno, so an overflowing
// value becomes the type's maximum and passes a range that reaches it (a uint64 seed took
// "99999999999999999999" and "-1" silently). Its floating-point range lets NaN through and
// prints its bounds as "0.010000". These checks read the text whole, in base 10, reject what
// does not fit, and hand CLI11 the value back in a form it reads the same way.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace inferkit::examples {

/// A bad command line found after parsing (a check across flags): `run_main` prints `message`
/// on one line and exits with 2.
struct UsageError {
  std::string message;
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

namespace detail {

// Messages are built by appending, never by a chain of std::string operator+: g++ 12 at -O3
// with some -march values reports a false -Werror=restrict inside such chains.

/// "[<lo>, <hi>]".
inline std::string bracketed(const std::string& lo, const std::string& hi) {
  std::string range = "[";
  range += lo;
  range += ", ";
  range += hi;
  range += ']';
  return range;
}

/// "'<text>' must be <what>".
inline std::string rejected(const std::string& text, const std::string& what) {
  std::string message = "'";
  message += text;
  message += "' must be ";
  message += what;
  return message;
}

}  // namespace detail

/// For `option->transform(…)`: the value must be a base-10 integer in [lo, hi], digits with an
/// optional leading '-' and nothing else ("12.7", "1e3", " 5", "0x10" and
/// "99999999999999999999" are rejected, never truncated, clamped or read in another base). The
/// error reads "<flag>: '<text>' must be an integer in [<lo>, <hi>]". A transform, not a check,
/// because it rewrites the text ("010" → "10") so that CLI11's own base-0 read agrees with ours.
template <class Int>
CLI::Validator integer_in(Int lo, Int hi) {
  static_assert(std::is_integral_v<Int> && !std::is_same_v<Int, bool>,
                "integer_in<Int>() checks integer options");
  std::string what = "an integer in ";
  what += detail::bracketed(std::to_string(lo), std::to_string(hi));
  return CLI::Validator(
      [lo, hi, what = std::move(what)](std::string& text) {
        Int value{};
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc() || ptr != end || value < lo || value > hi) {
          return detail::rejected(text, what);
        }
        text = std::to_string(value);
        return std::string();
      },
      // An empty description keeps CLI11's missing-value message to "<flag>: 1 required INT
      // missing"; the usage text already gives the range.
      std::string());
}

/// For `option->transform(…)`: the value must be a finite number in [lo, hi] (strtod syntax,
/// the whole text). The error reads "<flag>: '<text>' must be a number in [<lo>, <hi>]", the
/// bounds as "%g" writes them. The value goes back to CLI11 with 17 significant digits, which it
/// reads as the same double.
inline CLI::Validator number_in(double lo, double hi) {
  std::string what = "a number in ";
  what += detail::bracketed(format_g(lo), format_g(hi));
  return CLI::Validator(
      [lo, hi, what = std::move(what)](std::string& text) {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) ||
            !(value >= lo && value <= hi)) {
          return detail::rejected(text, what);
        }
        char canonical[32];
        std::snprintf(canonical, sizeof canonical, "%.17g", value);
        text = canonical;
        return std::string();
      },
      std::string());
}

/// For `option->check(…)`: the value must be one of `choices`. The error reads
/// "<flag>: '<text>' must be one of <choices, comma-separated>" (CLI::IsMember would print
/// "<text> not in {a,b}").
inline CLI::Validator one_of(const std::vector<std::string>& choices) {
  std::string what = "one of ";
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) what += ", ";
    what += choices[i];
  }
  return CLI::Validator(
      [choices, what = std::move(what)](std::string& text) {
        for (const std::string& choice : choices) {
          if (choice == text) return std::string();
        }
        return detail::rejected(text, what);
      },
      std::string());
}

/// Runs `body(app)`, main's work, returning its exit code, with `app` a `CLI::App` named
/// `program`: the body adds its options, calls `app.parse(argc, argv)` and runs.
///
///     return run_main("serve_sim", kUsage, [&](CLI::App& app) {
///       Flags f;
///       add_flags(app, f);
///       app.parse(argc, argv);
///       return simulate(f);
///     });
///
/// `--help` and `-h` print `usage` on stdout and return 0: the hand-written usage says what the
/// defaults mean, which CLI11's generated option list cannot. A parse error (an unknown flag, a
/// stray word, a missing value, a value a check rejects), a `UsageError` or any other
/// exception, `inferkit::Error` included, becomes one "<program>: error: <message>" line on
/// stderr and exit code 2. The app lives inside the body's call so that nothing main does can
/// throw past it (CLI11 throws from its constructor and `add_option` too).
template <class Body>
int run_main(const char* program, const char* usage, Body&& body) {
  try {
    CLI::App app{"", program};
    return body(app);
  } catch (const CLI::Success&) {  // --help or -h
    std::fputs(usage, stdout);
    return 0;
  } catch (const CLI::ValidationError& e) {  // "<flag>: '<text>' must be …" names it all
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
  } catch (const CLI::ParseError& e) {  // the shape of the command line: point at the usage
    std::fprintf(stderr, "%s: error: %s (see --help)\n", program, e.what());
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
