// SPDX-License-Identifier: Apache-2.0
// Tests for core/float8.hpp: all 256 codes of float8_e4m3 and float8_e5m2 against a
// double-precision decoder, exact round trips, nearest-even rounding at every midpoint and on
// 1M random floats, e4m3 saturation and NaN, e5m2 overflow to Inf.
#include <catch2/catch.hpp>
#include <cmath>
#include <inferkit/core/float8.hpp>
#include <limits>
#include <tests/support/float_reference.hpp>
#include <type_traits>

using inferkit::float8_e4m3;
using inferkit::float8_e5m2;
using inferkit::to_float;
namespace test = inferkit::test;

namespace {
std::uint8_t e4m3(float value) { return float8_e4m3(value).bits; }
std::uint8_t e5m2(float value) { return float8_e5m2(value).bits; }
}  // namespace

TEST_CASE("float8: both formats are one-byte trivially copyable storage types", "[core][float8]") {
  STATIC_REQUIRE(sizeof(float8_e4m3) == 1);
  STATIC_REQUIRE(sizeof(float8_e5m2) == 1);
  STATIC_REQUIRE(std::is_trivially_copyable_v<float8_e4m3>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<float8_e5m2>);
  STATIC_REQUIRE(float8_e4m3(1.0f).bits == 0x38);
  STATIC_REQUIRE(float8_e5m2(1.0f).bits == 0x3C);
  STATIC_REQUIRE(to_float(float8_e4m3::from_bits(0x7E)) == 448.0f);
  STATIC_REQUIRE(to_float(float8_e5m2::from_bits(0x7B)) == 57344.0f);
}

TEST_CASE("float8_e4m3: to_float of every code matches a double-precision decoder",
          "[core][float8][exhaustive]") {
  CHECK(test::decode_mismatches<float8_e4m3>(test::kFloat8E4M3Spec) == "");
}

TEST_CASE("float8_e5m2: to_float of every code matches a double-precision decoder",
          "[core][float8][exhaustive]") {
  CHECK(test::decode_mismatches<float8_e5m2>(test::kFloat8E5M2Spec) == "");
}

TEST_CASE("float8: every finite code round-trips exactly through float", "[core][float8]") {
  CHECK(test::round_trip_mismatches<float8_e4m3>(test::kFloat8E4M3Spec) == "");
  CHECK(test::round_trip_mismatches<float8_e5m2>(test::kFloat8E5M2Spec) == "");
}

TEST_CASE("float8: every midpoint rounds to nearest with ties to even", "[core][float8]") {
  CHECK(test::midpoint_mismatches<float8_e4m3>(test::kFloat8E4M3Spec) == "");
  CHECK(test::midpoint_mismatches<float8_e5m2>(test::kFloat8E5M2Spec) == "");
}

TEST_CASE("float8: random floats round like the double-precision reference", "[core][float8]") {
  const int trials = test::scaled_trials(1 << 20);
  CHECK(test::random_mismatches<float8_e4m3>(test::kFloat8E4M3Spec, 0xE4, trials) == "");
  CHECK(test::random_mismatches<float8_e5m2>(test::kFloat8E5M2Spec, 0xE5, trials) == "");
}

TEST_CASE("float8_e4m3: edge cases saturate and keep a signed NaN", "[core][float8]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SECTION("signed zero and subnormals") {
    CHECK(e4m3(0.0f) == 0x00);
    CHECK(e4m3(-0.0f) == 0x80);
    CHECK(e4m3(0x1p-9f) == 0x01);   // smallest subnormal
    CHECK(e4m3(0x1p-10f) == 0x00);  // tie rounds to even zero
    CHECK(e4m3(std::nextafter(0x1p-10f, 1.0f)) == 0x01);
    CHECK(to_float(float8_e4m3::from_bits(0x07)) == 0x1.Cp-7f);  // largest subnormal 7 * 2^-9
    CHECK(e4m3(0x1.Ep-7f) == 0x08);  // 7.5 units: tie rounds to the even smallest normal
    CHECK(to_float(float8_e4m3::from_bits(0x08)) == 0x1p-6f);
  }
  SECTION("the all-ones exponent is finite and 448 is the largest value") {
    CHECK(to_float(float8_e4m3::from_bits(0x78)) == 256.0f);
    CHECK(to_float(float8_e4m3::from_bits(0x7E)) == 448.0f);
    CHECK(e4m3(448.0f) == 0x7E);
    CHECK(e4m3(-448.0f) == 0xFE);
  }
  SECTION("out-of-range values saturate to 448") {
    CHECK(e4m3(464.0f) == 0x7E);  // the would-be tie with 480
    CHECK(e4m3(500.0f) == 0x7E);
    CHECK(e4m3(-500.0f) == 0xFE);
    CHECK(e4m3(std::numeric_limits<float>::max()) == 0x7E);
    CHECK(e4m3(inf) == 0x7E);
    CHECK(e4m3(-inf) == 0xFE);
  }
  SECTION("NaN is 0x7F with the input's sign") {
    CHECK(e4m3(nan) == 0x7F);
    CHECK(e4m3(-nan) == 0xFF);
    CHECK(e4m3(std::numeric_limits<float>::signaling_NaN()) == 0x7F);
    CHECK(std::isnan(to_float(float8_e4m3::from_bits(0x7F))));
    CHECK(std::isnan(to_float(float8_e4m3::from_bits(0xFF))));
    CHECK(std::signbit(to_float(float8_e4m3::from_bits(0xFF))));
  }
}

TEST_CASE("float8_e5m2: edge cases follow IEEE with Inf and quiet NaN", "[core][float8]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SECTION("signed zero and subnormals") {
    CHECK(e5m2(0.0f) == 0x00);
    CHECK(e5m2(-0.0f) == 0x80);
    CHECK(e5m2(0x1p-16f) == 0x01);                                // smallest subnormal
    CHECK(e5m2(0x1p-17f) == 0x00);                                // tie rounds to even zero
    CHECK(e5m2(0x1.8p-16f) == 0x02);                              // tie 1.5 units rounds to even 2
    CHECK(to_float(float8_e5m2::from_bits(0x03)) == 0x1.8p-15f);  // largest subnormal
    CHECK(e5m2(0x1.Cp-15f) == 0x04);  // 3.5 units: tie rounds to the even smallest normal
    CHECK(to_float(float8_e5m2::from_bits(0x04)) == 0x1p-14f);
  }
  SECTION("largest finite and the overflow boundary") {
    CHECK(to_float(float8_e5m2::from_bits(0x7B)) == 57344.0f);
    CHECK(e5m2(57344.0f) == 0x7B);
    CHECK(e5m2(std::nextafter(61440.0f, 0.0f)) == 0x7B);
    CHECK(e5m2(61440.0f) == 0x7C);  // the tie goes to Inf
    CHECK(e5m2(-61440.0f) == 0xFC);
  }
  SECTION("infinities and NaN") {
    CHECK(e5m2(inf) == 0x7C);
    CHECK(e5m2(-inf) == 0xFC);
    CHECK(to_float(float8_e5m2::from_bits(0x7C)) == inf);
    CHECK(to_float(float8_e5m2::from_bits(0xFC)) == -inf);
    CHECK(e5m2(nan) == 0x7E);
    CHECK(e5m2(-nan) == 0xFE);
    CHECK(e5m2(std::bit_cast<float>(0x7F800001u)) == 0x7E);     // signaling: quieted
    CHECK(e5m2(std::bit_cast<float>(0x7FA00000u)) == 0x7F);     // top payload bit kept
    CHECK(std::isnan(to_float(float8_e5m2::from_bits(0x7D))));  // signaling code
  }
}
