// SPDX-License-Identifier: Apache-2.0
// Tests for core/int4.hpp: packing and unpacking of every byte, two's-complement sign extension
// of every nibble, and the packed size helper.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/int4.hpp>

using inferkit::high_nibble;
using inferkit::int4_to_nibble;
using inferkit::low_nibble;
using inferkit::pack_nibbles;
using inferkit::sign_extend_int4;

TEST_CASE("pack_nibbles: every byte unpacks and repacks to itself", "[core][int4]") {
  for (unsigned byte = 0; byte < 256; ++byte) {
    const auto b = static_cast<std::uint8_t>(byte);
    REQUIRE(low_nibble(b) == byte % 16);
    REQUIRE(high_nibble(b) == byte / 16);
    REQUIRE(pack_nibbles(low_nibble(b), high_nibble(b)) == b);
  }
  STATIC_REQUIRE(pack_nibbles(0x3, 0xA) == 0xA3);
}

TEST_CASE("pack_nibbles: the even element goes in the low nibble", "[core][int4]") {
  for (unsigned lo = 0; lo < 16; ++lo) {
    for (unsigned hi = 0; hi < 16; ++hi) {
      const std::uint8_t byte =
          pack_nibbles(static_cast<std::uint8_t>(lo), static_cast<std::uint8_t>(hi));
      REQUIRE(byte == lo + 16 * hi);
      REQUIRE(low_nibble(byte) == lo);
      REQUIRE(high_nibble(byte) == hi);
    }
  }
  // Only the low 4 bits of each argument are used.
  CHECK(pack_nibbles(0xF3, 0x1A) == 0xA3);
}

TEST_CASE("sign_extend_int4: nibbles read as two's complement int4", "[core][int4]") {
  for (int nibble = 0; nibble < 16; ++nibble) {
    const int expected = nibble < 8 ? nibble : nibble - 16;
    REQUIRE(sign_extend_int4(static_cast<std::uint8_t>(nibble)) == expected);
    REQUIRE(sign_extend_int4(static_cast<std::uint8_t>(nibble | 0xF0)) == expected);
  }
  STATIC_REQUIRE(sign_extend_int4(0x8) == -8);
  STATIC_REQUIRE(sign_extend_int4(0x7) == 7);
  STATIC_REQUIRE(sign_extend_int4(0xF) == -1);
}

TEST_CASE("int4_to_nibble: inverts sign_extend_int4 over [-8 7]", "[core][int4]") {
  for (int value = -8; value <= 7; ++value) {
    const std::uint8_t nibble = int4_to_nibble(static_cast<std::int8_t>(value));
    REQUIRE(nibble < 16);
    REQUIRE(sign_extend_int4(nibble) == value);
  }
  // A packed pair of signed values survives the byte.
  const std::uint8_t byte = pack_nibbles(int4_to_nibble(-3), int4_to_nibble(5));
  CHECK(sign_extend_int4(low_nibble(byte)) == -3);
  CHECK(sign_extend_int4(high_nibble(byte)) == 5);
}

TEST_CASE("packed_int4_bytes: rounds an odd count up to whole bytes", "[core][int4]") {
  CHECK(inferkit::packed_int4_bytes(0) == 0);
  CHECK(inferkit::packed_int4_bytes(1) == 1);
  CHECK(inferkit::packed_int4_bytes(2) == 1);
  CHECK(inferkit::packed_int4_bytes(7) == 4);
  CHECK(inferkit::packed_int4_bytes(128) == 64);
}
