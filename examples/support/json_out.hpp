// SPDX-License-Identifier: Apache-2.0
// What the example programs (examples/*.cpp) add to nlohmann/json for their --json output, not
// part of the library: rounding, so a figure reads as the text prints it (0.8125, not
// 0.81249999999999; 37 steps, not 37.0), and one printer. The documents are
// `nlohmann::ordered_json`, so the keys come out in the order the text gives its figures; NaN and
// infinities come out as null.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

namespace inferkit::examples {

namespace detail {

/// `text` (a number printf wrote) as a JSON number: a whole number that a double holds exactly
/// as an integer (8, as "%g" writes it, not 8.0), anything else as the double it reads as.
inline nlohmann::ordered_json number_from(const char* text) {
  const double value = std::strtod(text, nullptr);
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 0x1p53) {
    return static_cast<std::int64_t>(value);
  }
  return value;  // NaN and infinities: nlohmann/json writes null
}

}  // namespace detail

/// `value` as printf's "%.<decimals>f" writes it, as a JSON number: rounded to `decimals`
/// places, and an integer when `decimals` is 0 (nlohmann/json writes the double in the fewest
/// digits that read back the same: 0.93 for "%.4f"'s 0.9300).
inline nlohmann::ordered_json fixed(double value, int decimals) {
  char text[512];  // "%.Nf" of 1e308 has 309 digits before the point
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  if (decimals > 0) return std::strtod(text, nullptr);
  return detail::number_from(text);
}

/// `value` as printf's "%.<digits>g" writes it, as a JSON number: rounded to `digits`
/// significant digits, and an integer when that is whole ("%g" writes 8, not 8.0).
inline nlohmann::ordered_json significant(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return detail::number_from(text);
}

/// Prints `document` on one line of stdout. Text that is not valid UTF-8 (a token cut in the
/// middle of a character) is written with U+FFFD instead of throwing.
inline void print_json(const nlohmann::ordered_json& document) {
  const std::string text =
      document.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::puts(text.c_str());
}

}  // namespace inferkit::examples
