// SPDX-License-Identifier: Apache-2.0
// Tests for core/float16.hpp: every binary16 code against a double-precision decoder, exact
// round trips, nearest-even rounding at every midpoint and on 1M random floats, and the edges
// (signed zero, subnormals, the overflow boundary, Inf, NaN).
#include <catch2/catch.hpp>
#include <cmath>
#include <inferkit/core/float16.hpp>
#include <limits>
#include <tests/support/float_reference.hpp>
#include <type_traits>

using inferkit::float16;
using inferkit::to_float;
namespace test = inferkit::test;

namespace {
std::uint16_t encode(float value) { return float16(value).bits; }
}  // namespace

TEST_CASE("float16: is a two-byte trivially copyable storage type", "[core][float16]") {
  STATIC_REQUIRE(sizeof(float16) == 2);
  STATIC_REQUIRE(std::is_trivially_copyable_v<float16>);
  STATIC_REQUIRE(std::is_trivially_default_constructible_v<float16>);
  STATIC_REQUIRE(float16(1.0f).bits == 0x3C00);
  STATIC_REQUIRE(to_float(float16::from_bits(0xC000)) == -2.0f);
  STATIC_REQUIRE(static_cast<float>(float16(0.333333343f)) == 0.333251953125f);
}

TEST_CASE("float16: to_float of every code matches a double-precision decoder",
          "[core][float16][exhaustive]") {
  CHECK(test::decode_mismatches<float16>(test::kFloat16Spec) == "");
}

TEST_CASE("float16: every finite code round-trips exactly through float", "[core][float16]") {
  CHECK(test::round_trip_mismatches<float16>(test::kFloat16Spec) == "");
}

TEST_CASE("float16: every midpoint rounds to nearest with ties to even", "[core][float16]") {
  CHECK(test::midpoint_mismatches<float16>(test::kFloat16Spec) == "");
}

TEST_CASE("float16: random floats round like the double-precision reference", "[core][float16]") {
  CHECK(test::random_mismatches<float16>(test::kFloat16Spec, 0xF16, test::scaled_trials(1 << 20)) ==
        "");
}

TEST_CASE("float16: edge cases convert as IEEE binary16 specifies", "[core][float16]") {
  const float inf = std::numeric_limits<float>::infinity();
  SECTION("signed zero") {
    CHECK(encode(0.0f) == 0x0000);
    CHECK(encode(-0.0f) == 0x8000);
    CHECK(std::signbit(to_float(float16::from_bits(0x8000))));
  }
  SECTION("subnormals") {
    CHECK(encode(0x1p-24f) == 0x0001);                            // smallest subnormal
    CHECK(encode(0x1p-25f) == 0x0000);                            // tie rounds to even zero
    CHECK(encode(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);      // just above the tie
    CHECK(encode(0x1.8p-24f) == 0x0002);                          // tie 1.5 units rounds to even 2
    CHECK(encode(-0x1p-26f) == 0x8000);                           // underflow keeps the sign
    CHECK(to_float(float16::from_bits(0x03FF)) == 0x1.FF8p-15f);  // largest subnormal
    CHECK(encode(0x1.FF8p-15f) == 0x03FF);
    CHECK(encode(0x1.FFCp-15f) == 0x0400);  // rounds up into the smallest normal
    CHECK(to_float(float16::from_bits(0x0400)) == 0x1p-14f);
    CHECK(encode(std::numeric_limits<float>::denorm_min()) == 0x0000);
  }
  SECTION("largest finite and the overflow boundary") {
    CHECK(to_float(float16::from_bits(0x7BFF)) == 65504.0f);
    CHECK(encode(65504.0f) == 0x7BFF);
    CHECK(encode(std::nextafter(65520.0f, 0.0f)) == 0x7BFF);  // 65519.996
    CHECK(encode(65520.0f) == 0x7C00);                        // the tie goes to Inf
    CHECK(encode(-65520.0f) == 0xFC00);
    CHECK(encode(1e10f) == 0x7C00);
    CHECK(encode(std::numeric_limits<float>::max()) == 0x7C00);
  }
  SECTION("infinities") {
    CHECK(encode(inf) == 0x7C00);
    CHECK(encode(-inf) == 0xFC00);
    CHECK(to_float(float16::from_bits(0x7C00)) == inf);
    CHECK(to_float(float16::from_bits(0xFC00)) == -inf);
  }
  SECTION("NaN stays a quiet NaN with its sign") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(encode(nan) == 0x7E00);
    CHECK(encode(-nan) == 0xFE00);
    CHECK(encode(std::bit_cast<float>(0x7F800001u)) == 0x7E00);  // signaling, low payload lost
    CHECK(encode(std::bit_cast<float>(0xFFFFFFFFu)) == 0xFFFF);  // top payload bits kept
    CHECK(encode(std::bit_cast<float>(0x7F802000u)) == 0x7E01);  // signaling, payload kept
    const float decoded = to_float(float16::from_bits(0x7C01));  // signaling half NaN
    CHECK(std::isnan(decoded));
    CHECK(test::float_bits(decoded) == 0x7FC02000u);  // quieted, payload kept
  }
}
