// SPDX-License-Identifier: Apache-2.0
// Tests for core/error.hpp: Error carries its code and a message naming argument, value and limit.
#include <catch2/catch.hpp>
#include <inferkit/core/error.hpp>
#include <string>

using inferkit::Error;
using inferkit::ErrorCode;

TEST_CASE("check_arg: names the argument and the value and the limit", "[core][error]") {
  try {
    inferkit::check_arg(5 <= 3, ErrorCode::kOutOfRange, "num_tokens", 5, "must be <=", 3);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kOutOfRange);
    const std::string what = e.what();
    CHECK(what == "inferkit: out of range: num_tokens = 5 must be <= 3");
  }
  CHECK_NOTHROW(inferkit::check_arg(true, ErrorCode::kOutOfRange, "x", 1, "<", 2));
  CHECK_THROWS_WITH(inferkit::check_arg(false, ErrorCode::kInvalidArgument, "model", "gpt-5",
                                        "is not one of", "the presets"),
                    "inferkit: invalid argument: model = 'gpt-5' is not one of 'the presets'");
}

TEST_CASE("check_arg: a callable argument name is built only when the check fails",
          "[core][error]") {
  int built = 0;
  const auto name = [&] {
    ++built;
    return "drafts[" + std::to_string(7) + "]";
  };
  for (int i = 0; i < 100; ++i) {
    inferkit::check_arg(i >= 0, ErrorCode::kInvalidArgument, name, i, "must be >=", 0);
  }
  CHECK(built == 0);  // passing checks format nothing
  CHECK_THROWS_WITH(
      inferkit::check_arg(-3 >= 0, ErrorCode::kInvalidArgument, name, -3, "must be >=", 0),
      "inferkit: invalid argument: drafts[7] = -3 must be >= 0");
  CHECK(built == 1);
  // A std::string name (built by the caller) still works.
  CHECK_THROWS_WITH(
      inferkit::check_arg(false, ErrorCode::kOutOfRange, std::string("n"), 2, "must be <", 1),
      "inferkit: out of range: n = 2 must be < 1");
}

TEST_CASE("INFERKIT_CHECK: throws with the condition text and location", "[core][error]") {
  const int block = 9;
  try {
    INFERKIT_CHECK(block < 4, ErrorCode::kInvalidArgument, "block 9 out of 4");
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    const std::string what = e.what();
    CHECK(what.find("block 9 out of 4") != std::string::npos);
    CHECK(what.find("block < 4") != std::string::npos);
    CHECK(what.find("test_error.cpp") != std::string::npos);
  }
  CHECK(inferkit::to_string(ErrorCode::kCuda) == "cuda error");
}

TEST_CASE("INFERKIT_ASSERT: active in test builds", "[core][error]") {
#if INFERKIT_DEBUG_ASSERTS
  CHECK_THROWS_AS([] { INFERKIT_ASSERT(1 + 1 == 3); }(), Error);
#endif
  CHECK_NOTHROW([] { INFERKIT_ASSERT(1 + 1 == 2); }());
}
