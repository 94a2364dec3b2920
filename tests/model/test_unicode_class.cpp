// SPDX-License-Identifier: Apache-2.0
// Tests for model/detail/unicode_class.hpp and its generated table (unicode_tables.hpp): code
// points whose general category and White_Space property the Unicode Character Database states
// get the class the pre-tokenizer needs; the table is sorted and complete.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/model/detail/unicode_class.hpp>
#include <iterator>
#include <string_view>

using namespace inferkit::detail;

TEST_CASE("unicode_class: letters, numbers, whitespace and the rest", "[model][unicode_class]") {
  CHECK(std::string_view(kUnicodeTablesVersion) == "15.1.0");
  for (const std::uint32_t cp : {0x61u, 0x5Au, 0xAAu, 0xB5u, 0xE9u, 0x3B1u, 0x4E2Du, 0xAC00u,
                                 0x2EBF0u /* CJK Ext. I, new in 15.1 */, 0x10400u}) {
    CHECK(unicode_class(cp) == CharClass::kLetter);
  }
  for (const std::uint32_t cp : {0x30u, 0x39u, 0xB2u /* ² */, 0xBDu /* ½ */, 0x663u /* ٣ */,
                                 0x216Bu /* Ⅻ */, 0x2460u /* ① */, 0x1D7CEu}) {
    CHECK(unicode_class(cp) == CharClass::kNumber);
  }
  for (const std::uint32_t cp : {0x9u, 0xAu, 0xBu, 0xCu, 0xDu, 0x20u, 0x85u, 0xA0u, 0x1680u,
                                 0x2000u, 0x200Au, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u}) {
    CHECK(unicode_class(cp) == CharClass::kWhitespace);
  }
  for (const std::uint32_t cp :
       {0x0u, 0x1Cu /* not White_Space */, 0x21u, 0x24u, 0x5Fu, 0x200Bu,
        0x301u /* a combining mark */, 0x1F600u, 0xE000u, 0x378u, 0x10FFFFu, 0x110000u}) {
    CHECK(unicode_class(cp) == CharClass::kOther);
  }
}

TEST_CASE("unicode_class: the range table is sorted, starts at 0, alternates",
          "[model][unicode_class]") {
  CHECK(kUnicodeClassStarts[0] >> 2 == 0);
  for (std::size_t i = 1; i < std::size(kUnicodeClassStarts); ++i) {
    REQUIRE((kUnicodeClassStarts[i] >> 2) > (kUnicodeClassStarts[i - 1] >> 2));
    REQUIRE((kUnicodeClassStarts[i] & 3) != (kUnicodeClassStarts[i - 1] & 3));
  }
  for (std::uint32_t cp = 0; cp < 128; ++cp) CHECK(unicode_class(cp) == unicode_class_slow(cp));
}
