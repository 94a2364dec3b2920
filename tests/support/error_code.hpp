// SPDX-License-Identifier: Apache-2.0
// Test helper: run a callable that must throw inferkit::Error and return its ErrorCode (and,
// optionally, its message), so bad-argument tests can assert the code and the wording.
#pragma once

#include <catch2/catch.hpp>
#include <inferkit/core/error.hpp>
#include <string>

namespace inferkit::test {

/// The `ErrorCode` of the `inferkit::Error` that `fn()` throws; fails the test if it does not.
template <class Fn>
ErrorCode code_of(Fn&& fn, std::string* message = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  FAIL("expected inferkit::Error");
  return ErrorCode::kCuda;  // not reached: FAIL throws
}

}  // namespace inferkit::test
