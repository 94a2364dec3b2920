// SPDX-License-Identifier: Apache-2.0
// Tests for core/bfloat16.hpp: every bfloat16 code against a double-precision decoder, exact
// round trips, nearest-even rounding at every midpoint and on 1M random floats, and the edges
// (signed zero, subnormals, the overflow boundary, Inf, NaN).
#include <catch2/catch.hpp>
#include <cmath>
#include <inferkit/core/bfloat16.hpp>
#include <limits>
#include <tests/support/float_reference.hpp>
#include <type_traits>

using inferkit::bfloat16;
using inferkit::to_float;
namespace test = inferkit::test;

namespace {
std::uint16_t encode(float value) { return bfloat16(value).bits; }
}  // namespace

TEST_CASE("bfloat16: is a two-byte trivially copyable storage type", "[core][bfloat16]") {
  STATIC_REQUIRE(sizeof(bfloat16) == 2);
  STATIC_REQUIRE(std::is_trivially_copyable_v<bfloat16>);
  STATIC_REQUIRE(std::is_trivially_default_constructible_v<bfloat16>);
  STATIC_REQUIRE(bfloat16(1.0f).bits == 0x3F80);
  STATIC_REQUIRE(to_float(bfloat16::from_bits(0xC000)) == -2.0f);
  STATIC_REQUIRE(static_cast<float>(bfloat16(0.333333343f)) == 0.333984375f);
}

TEST_CASE("bfloat16: to_float of every code matches a double-precision decoder",
          "[core][bfloat16][exhaustive]") {
  CHECK(test::decode_mismatches<bfloat16>(test::kBFloat16Spec) == "");
}

TEST_CASE("bfloat16: every finite code round-trips exactly through float", "[core][bfloat16]") {
  CHECK(test::round_trip_mismatches<bfloat16>(test::kBFloat16Spec) == "");
}

TEST_CASE("bfloat16: every midpoint rounds to nearest with ties to even", "[core][bfloat16]") {
  CHECK(test::midpoint_mismatches<bfloat16>(test::kBFloat16Spec) == "");
}

TEST_CASE("bfloat16: random floats round like the double-precision reference", "[core][bfloat16]") {
  CHECK(test::random_mismatches<bfloat16>(test::kBFloat16Spec, 0xBF16,
                                          test::scaled_trials(1 << 20)) == "");
}

TEST_CASE("bfloat16: edge cases convert as the top half of binary32", "[core][bfloat16]") {
  const float inf = std::numeric_limits<float>::infinity();
  SECTION("signed zero") {
    CHECK(encode(0.0f) == 0x0000);
    CHECK(encode(-0.0f) == 0x8000);
    CHECK(std::signbit(to_float(bfloat16::from_bits(0x8000))));
  }
  SECTION("subnormals") {
    CHECK(to_float(bfloat16::from_bits(0x0001)) == 0x1p-133f);  // smallest subnormal
    CHECK(encode(0x1p-133f) == 0x0001);
    CHECK(encode(0x1p-134f) == 0x0000);  // tie rounds to even zero
    CHECK(encode(std::nextafter(0x1p-134f, 1.0f)) == 0x0001);
    CHECK(encode(0x1.8p-133f) == 0x0002);                          // tie 1.5 units rounds to even 2
    CHECK(to_float(bfloat16::from_bits(0x007F)) == 0x1.FCp-127f);  // largest subnormal
    CHECK(encode(0x1.FEp-127f) == 0x0080);  // rounds up into the smallest normal
    CHECK(encode(std::numeric_limits<float>::denorm_min()) == 0x0000);
    CHECK(encode(-std::numeric_limits<float>::denorm_min()) == 0x8000);
  }
  SECTION("largest finite and the overflow boundary") {
    CHECK(to_float(bfloat16::from_bits(0x7F7F)) == 0x1.FEp127f);
    CHECK(encode(0x1.FEp127f) == 0x7F7F);
    CHECK(encode(std::nextafter(0x1.FFp127f, 0.0f)) == 0x7F7F);
    CHECK(encode(0x1.FFp127f) == 0x7F80);  // the tie goes to Inf
    CHECK(encode(std::numeric_limits<float>::max()) == 0x7F80);
    CHECK(encode(-std::numeric_limits<float>::max()) == 0xFF80);
  }
  SECTION("infinities") {
    CHECK(encode(inf) == 0x7F80);
    CHECK(encode(-inf) == 0xFF80);
    CHECK(to_float(bfloat16::from_bits(0x7F80)) == inf);
    CHECK(to_float(bfloat16::from_bits(0xFF80)) == -inf);
  }
  SECTION("NaN stays a quiet NaN with its sign") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(encode(nan) == 0x7FC0);
    CHECK(encode(-nan) == 0xFFC0);
    CHECK(encode(std::bit_cast<float>(0x7F800001u)) == 0x7FC0);  // low payload: still NaN
    CHECK(encode(std::bit_cast<float>(0x7F810000u)) == 0x7FC1);  // signaling, payload kept
    CHECK(encode(std::bit_cast<float>(0x7FFFFFFFu)) == 0x7FFF);  // no carry into the sign
    CHECK(test::float_bits(to_float(bfloat16::from_bits(0x7FC1))) == 0x7FC10000u);
  }
}
