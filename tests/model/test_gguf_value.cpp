// SPDX-License-Identifier: Apache-2.0
// Tests for model/gguf_value.hpp: accessors convert exactly when no information is lost, at the
// edges of every integer type, and otherwise throw naming the key, the type and the offset.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <inferkit/model/gguf_value.hpp>
#include <limits>
#include <string>
#include <tests/support/error_code.hpp>
#include <vector>

using namespace inferkit;
using inferkit::test::code_of;

namespace {

GgufValue scalar(GgufValueType type, std::uint64_t bits) { return GgufValue(type, "k", 40, bits); }

}  // namespace

TEST_CASE("GgufValue: integers convert when the value fits", "[model][gguf_value]") {
  // int8 -1 is stored as 0xff; sign extension must make it -1, not 255.
  const GgufValue minus_one = scalar(GgufValueType::kInt8, 0xff);
  CHECK(minus_one.as_i32() == -1);
  CHECK(minus_one.as_i64() == -1);
  CHECK(code_of([&] { (void)minus_one.as_u32(); }) == ErrorCode::kOutOfRange);
  CHECK(scalar(GgufValueType::kUint8, 0xff).as_u32() == 255);
  CHECK(scalar(GgufValueType::kInt16, 0x8000).as_i32() == -32768);
  CHECK(scalar(GgufValueType::kUint16, 0x8000).as_i32() == 32768);
  CHECK(scalar(GgufValueType::kInt32, 0x80000000u).as_i64() ==
        std::numeric_limits<std::int32_t>::min());
  CHECK(scalar(GgufValueType::kUint32, 0xffffffffu).as_u32() == 0xffffffffu);
  CHECK(code_of([] { (void)scalar(GgufValueType::kUint32, 0x80000000u).as_i32(); }) ==
        ErrorCode::kOutOfRange);
  const GgufValue u64_max = scalar(GgufValueType::kUint64, ~std::uint64_t{0});
  CHECK(u64_max.as_u64() == ~std::uint64_t{0});
  CHECK(code_of([&] { (void)u64_max.as_i64(); }) == ErrorCode::kOutOfRange);
  CHECK(code_of([&] { (void)u64_max.as_u32(); }) == ErrorCode::kOutOfRange);
  const GgufValue i64_min = scalar(GgufValueType::kInt64, std::uint64_t{1} << 63);
  CHECK(i64_min.as_i64() == std::numeric_limits<std::int64_t>::min());
  std::string msg;
  CHECK(code_of([&] { (void)i64_min.as_u64(); }, &msg) == ErrorCode::kOutOfRange);
  CHECK_THAT(msg, Catch::Contains("'k'") && Catch::Contains("int64 at byte offset 40") &&
                      Catch::Contains("-9223372036854775808"));
}

TEST_CASE("GgufValue: floats, bools and strings keep their types", "[model][gguf_value]") {
  float f = -0.375f;
  std::uint32_t fbits = 0;
  std::memcpy(&fbits, &f, 4);
  const GgufValue f32 = scalar(GgufValueType::kFloat32, fbits);
  CHECK(f32.as_f32() == -0.375f);
  CHECK(f32.as_f64() == -0.375);
  CHECK(code_of([&] { (void)f32.as_i32(); }) == ErrorCode::kInvalidArgument);
  double big = 1e300;
  std::uint64_t dbits = 0;
  std::memcpy(&dbits, &big, 8);
  const GgufValue f64 = scalar(GgufValueType::kFloat64, dbits);
  CHECK(f64.as_f64() == 1e300);
  CHECK(code_of([&] { (void)f64.as_f32(); }) == ErrorCode::kOutOfRange);
  double inf = std::numeric_limits<double>::infinity();
  std::memcpy(&dbits, &inf, 8);
  CHECK(std::isinf(scalar(GgufValueType::kFloat64, dbits).as_f32()));
  CHECK(scalar(GgufValueType::kBool, 1).as_bool());
  CHECK(code_of([] { (void)scalar(GgufValueType::kUint8, 1).as_bool(); }) ==
        ErrorCode::kInvalidArgument);
  const GgufValue s = GgufValue::of_string("name", 8, "text");
  CHECK(s.as_string() == "text");
  CHECK(s.key() == "name");
  CHECK(s.offset() == 8);
  std::string msg;
  CHECK(code_of([&] { (void)s.array_size(); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("'name'") && Catch::Contains("is not an array"));
}

TEST_CASE("GgufValue: arrays convert element by element", "[model][gguf_value]") {
  // int16 elements -2, 300 as little-endian bytes
  const std::vector<std::byte> raw = {std::byte{0xfe}, std::byte{0xff}, std::byte{0x2c},
                                      std::byte{0x01}};
  const GgufValue a = GgufValue::of_scalar_array("a", 0, GgufValueType::kInt16, 2, raw);
  CHECK(a.is_array());
  CHECK(a.array_type() == GgufValueType::kInt16);
  CHECK(a.array_size() == 2);
  CHECK(a.as_i32_array() == std::vector<std::int32_t>{-2, 300});
  CHECK(a.array_element(1).as_u32() == 300);
  CHECK(code_of([&] { (void)a.array_element(2); }) == ErrorCode::kOutOfRange);
  CHECK(code_of([&] { (void)a.as_f32_array(); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { (void)a.as_string_array(); }) == ErrorCode::kInvalidArgument);
  const std::vector<std::byte> big = {std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0x80}};
  const GgufValue u = GgufValue::of_scalar_array("u", 0, GgufValueType::kUint32, 1, big);
  CHECK(code_of([&] { (void)u.as_i32_array(); }) == ErrorCode::kOutOfRange);
  const GgufValue strs = GgufValue::of_string_array("s", 0, {"x", "yz"});
  CHECK(strs.as_string_array()[1] == "yz");
  CHECK(strs.array_element(0).as_string() == "x");
  const GgufValue nested = GgufValue::of_nested_array("n", 0, {strs, a});
  CHECK(nested.array_type() == GgufValueType::kArray);
  CHECK(nested.array_element(1).as_i32_array() == std::vector<std::int32_t>{-2, 300});
  CHECK(to_string(GgufValueType::kFloat64) == "float64");
  CHECK(to_string(static_cast<GgufValueType>(99)) == "unknown");
}
