// SPDX-License-Identifier: Apache-2.0
// Tests for core/dtype.hpp: element sizes agree with the storage types, names round-trip
// through parsing, aliases parse, and an unknown name throws an Error that names it.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <set>
#include <string>

using inferkit::DType;

TEST_CASE("bits_per_element: matches the storage types", "[core][dtype]") {
  CHECK(inferkit::bits_per_element(DType::kFloat32) == 8 * sizeof(float));
  CHECK(inferkit::bits_per_element(DType::kFloat16) == 8 * sizeof(inferkit::float16));
  CHECK(inferkit::bits_per_element(DType::kBFloat16) == 8 * sizeof(inferkit::bfloat16));
  CHECK(inferkit::bits_per_element(DType::kFloat8E4M3) == 8 * sizeof(inferkit::float8_e4m3));
  CHECK(inferkit::bits_per_element(DType::kFloat8E5M2) == 8 * sizeof(inferkit::float8_e5m2));
  CHECK(inferkit::bits_per_element(DType::kInt8) == 8 * sizeof(std::int8_t));
  CHECK(inferkit::bits_per_element(DType::kInt4) == 4);
  STATIC_REQUIRE(inferkit::bits_per_element(DType::kInt4) == 4);
}

TEST_CASE("parse_dtype: every name round-trips and names are distinct", "[core][dtype]") {
  std::set<std::string> names;
  for (const DType dtype : inferkit::kAllDTypes) {
    const std::string name(inferkit::to_string(dtype));
    CAPTURE(name);
    CHECK(names.insert(name).second);
    CHECK(inferkit::parse_dtype(name) == dtype);
    CHECK(inferkit::try_parse_dtype(name) == dtype);
  }
  CHECK(names.size() == inferkit::kAllDTypes.size());
  STATIC_REQUIRE(inferkit::try_parse_dtype("bf16") == DType::kBFloat16);
}

TEST_CASE("parse_dtype: aliases map to their dtype", "[core][dtype]") {
  CHECK(inferkit::parse_dtype("fp8") == DType::kFloat8E4M3);
  CHECK(inferkit::parse_dtype("float32") == DType::kFloat32);
  CHECK(inferkit::parse_dtype("float16") == DType::kFloat16);
  CHECK(inferkit::parse_dtype("bfloat16") == DType::kBFloat16);
}

TEST_CASE("parse_dtype: an unknown name throws invalid argument naming it", "[core][dtype]") {
  CHECK_FALSE(inferkit::try_parse_dtype("fp5").has_value());
  CHECK_FALSE(inferkit::try_parse_dtype("").has_value());
  CHECK_FALSE(inferkit::try_parse_dtype("FP16").has_value());  // names are case-sensitive
  try {
    (void)inferkit::parse_dtype("fp5");
    FAIL("parse_dtype(\"fp5\") did not throw");
  } catch (const inferkit::Error& error) {
    CHECK(error.code() == inferkit::ErrorCode::kInvalidArgument);
    CHECK_THAT(error.what(), Catch::Matchers::Contains("'fp5'"));
    CHECK_THAT(error.what(), Catch::Matchers::Contains("dtype"));
  }
}
