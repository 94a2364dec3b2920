// SPDX-License-Identifier: Apache-2.0
// Tests for model/detail/utf8.hpp against the definition of UTF-8 (RFC 3629, Unicode table 3-7):
// every code point round-trips; overlongs, surrogates, values past U+10FFFF and stray bytes are
// invalid; a sequence cut short is an incomplete prefix, not an invalid one.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/model/detail/utf8.hpp>
#include <string>

using namespace inferkit::detail;

namespace {

Utf8Decoded decode(const std::string& s) {
  return utf8_decode(reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

std::size_t prefix(const std::string& s, bool* complete) {
  return utf8_valid_prefix(reinterpret_cast<const unsigned char*>(s.data()), s.size(), complete);
}

}  // namespace

TEST_CASE("utf8: every scalar value encodes and decodes back", "[model][utf8]") {
  for (std::uint32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x20000 ? 1 : 97)) {
    if (cp >= 0xD800 && cp < 0xE000) continue;
    std::string s;
    utf8_append(s, cp);
    const std::size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    REQUIRE(s.size() == want);
    const Utf8Decoded d = decode(s);
    REQUIRE(d.length == want);
    REQUIRE(d.cp == cp);
  }
}

TEST_CASE("utf8: ill-formed sequences are invalid, cut ones incomplete", "[model][utf8]") {
  bool complete = true;
  CHECK(decode("\xc0\xaf").length == 0);          // overlong '/'
  CHECK(decode("\xe0\x80\xaf").length == 0);      // overlong 3-byte
  CHECK(decode("\xf0\x80\x80\xaf").length == 0);  // overlong 4-byte
  CHECK(decode("\xed\xa0\x80").length == 0);      // surrogate U+D800
  CHECK(decode("\xf4\x90\x80\x80").length == 0);  // U+110000
  CHECK(decode("\xf5\x80\x80\x80").length == 0);
  CHECK(decode("\x80").length == 0);  // stray continuation
  CHECK(decode("\xff").length == 0);
  CHECK(prefix("\xe4\xb8", &complete) == 2);  // 中 without its last byte
  CHECK_FALSE(complete);
  CHECK(prefix("\xe4\xb8\xad", &complete) == 3);
  CHECK(complete);
  CHECK(prefix("\xe4x", &complete) == 1);  // broken at the second byte
  CHECK_FALSE(complete);
  CHECK(prefix("\xed\xa0", &complete) == 1);  // a surrogate fails at its second byte
  CHECK(prefix("\x80", &complete) == 0);
  CHECK(utf8_sequence_length(0xF4) == 4);
  CHECK(utf8_sequence_length(0xC1) == 0);
}
