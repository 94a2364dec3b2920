// SPDX-License-Identifier: Apache-2.0
// Tests for core/detail/exp_nonpositive.hpp: the scalar expf polynomial against exp in double
// over its whole range (every 2^-10 step of [-87.3, 0] and random points), and its edges: 0,
// -0, below the normal range, -inf and NaN.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/core/detail/exp_nonpositive.hpp>
#include <inferkit/core/rng.hpp>
#include <limits>

using inferkit::detail::exp_nonpositive;

namespace {

// Relative error of exp_nonpositive(z) against exp in double.
double relative_error(float z) {
  const double exact = std::exp(static_cast<double>(z));
  return std::abs(static_cast<double>(exp_nonpositive(z)) - exact) / exact;
}

}  // namespace

TEST_CASE("exp_nonpositive: within 2 ulp of exp over [-87.3, 0]", "[core][exp]") {
  double worst = 0.0;
  for (float z = 0.0f; z >= -87.3f; z -= 1.0f / 1024.0f) worst = std::max(worst, relative_error(z));
  inferkit::Rng rng(17);
  for (int i = 0; i < 100000; ++i) {
    worst = std::max(worst, relative_error(static_cast<float>(-87.3 * rng.uniform_double())));
  }
  CHECK(worst <= 2.0 * std::numeric_limits<float>::epsilon());
}

TEST_CASE("exp_nonpositive: edges", "[core][exp]") {
  CHECK(exp_nonpositive(0.0f) == 1.0f);
  CHECK(exp_nonpositive(-0.0f) == 1.0f);
  CHECK(exp_nonpositive(-87.31f) == 0.0f);  // below the normal range: 0, not a denormal
  CHECK(exp_nonpositive(-1000.0f) == 0.0f);
  CHECK(exp_nonpositive(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(exp_nonpositive(std::numeric_limits<float>::quiet_NaN()) == 0.0f);
  CHECK(exp_nonpositive(-87.3f) > 0.0f);
  CHECK(std::isnormal(exp_nonpositive(-87.3f)));
}
