// SPDX-License-Identifier: Apache-2.0
// GPT-2's byte-level alphabet: each of the 256 byte values is written as one printable code
// point in the vocabulary (the printable Latin-1 bytes as themselves, the other 68 as
// U+0100..U+0143, so a space is 'Ġ' U+0120 and a newline 'Ċ' U+010A). Vocabulary strings are
// decoded back to bytes with the inverse map.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace inferkit::detail {

/// The code point that stands for each byte.
inline const std::array<std::uint32_t, 256>& byte_level_code_points() {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    std::uint32_t next = 256;
    for (std::uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

/// The byte a code point stands for, or -1 when it stands for none.
inline int byte_level_byte(std::uint32_t cp) {
  static const std::array<std::int16_t, 324> inverse = [] {
    std::array<std::int16_t, 324> t{};
    t.fill(-1);
    const std::array<std::uint32_t, 256>& cps = byte_level_code_points();
    for (std::uint32_t b = 0; b < 256; ++b) t[cps[b]] = static_cast<std::int16_t>(b);
    return t;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

}  // namespace inferkit::detail
