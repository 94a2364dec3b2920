// SPDX-License-Identifier: Apache-2.0
// The class of a code point for the pre-tokenizer's regex (letter \p{L}, number \p{N},
// whitespace \s, other), from the generated range table: a direct table for ASCII, a binary
// search over 1.5k ranges for the rest.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <inferkit/model/detail/unicode_tables.hpp>
#include <iterator>

namespace inferkit::detail {

/// A code point's class. `kNone` marks "past the end of the piece" in the splitter.
enum class CharClass : std::uint8_t {
  kOther = 0,
  kLetter = 1,
  kNumber = 2,
  kWhitespace = 3,
  kNone = 4
};

/// The class from the table (any code point; past U+10FFFF is other).
inline CharClass unicode_class_slow(std::uint32_t cp) noexcept {
  if (cp > 0x10FFFF) return CharClass::kOther;
  const std::uint32_t key = (cp << 2) | 3u;
  const std::uint32_t* it =
      std::upper_bound(std::begin(kUnicodeClassStarts), std::end(kUnicodeClassStarts), key);
  return static_cast<CharClass>(*(it - 1) & 3u);
}

/// The class of `cp`, with ASCII answered from a table.
inline CharClass unicode_class(std::uint32_t cp) noexcept {
  static const std::array<CharClass, 128> ascii = [] {
    std::array<CharClass, 128> t{};
    for (std::uint32_t c = 0; c < 128; ++c) t[c] = unicode_class_slow(c);
    return t;
  }();
  return cp < 128 ? ascii[cp] : unicode_class_slow(cp);
}

}  // namespace inferkit::detail
