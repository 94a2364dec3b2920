// SPDX-License-Identifier: Apache-2.0
// Tests for model/detail/byte_level.hpp against GPT-2's bytes_to_unicode: printable Latin-1 bytes
// stand for themselves, the 68 others for U+0100.. in byte order (space 'Ġ', newline 'Ċ').
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/model/detail/byte_level.hpp>
#include <set>

using namespace inferkit::detail;

TEST_CASE("byte_level: GPT-2's alphabet and its inverse", "[model][byte_level]") {
  const auto& cps = byte_level_code_points();
  CHECK(cps['!'] == '!');
  CHECK(cps['~'] == '~');
  CHECK(cps[0xA1] == 0xA1);
  CHECK(cps[0xAD] == 0x143);  // the soft hyphen is the last of the remapped bytes
  CHECK(cps[0] == 0x100);
  CHECK(cps['\n'] == 0x10A);  // 'Ċ'
  CHECK(cps[' '] == 0x120);   // 'Ġ'
  CHECK(cps[0x7F] == 0x121);
  std::set<std::uint32_t> distinct(cps.begin(), cps.end());
  CHECK(distinct.size() == 256);
  for (int b = 0; b < 256; ++b) CHECK(byte_level_byte(cps[static_cast<std::size_t>(b)]) == b);
  CHECK(byte_level_byte(0x144) == -1);
  CHECK(byte_level_byte(' ') == -1);  // the space itself stands for no byte
}
