// SPDX-License-Identifier: Apache-2.0
// Tests of the CPU attention kernels' vector vocabulary (cpu/detail/simd.hpp), for the portable
// and the native (AVX-512 where built) policies alike.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <inferkit/attention/cpu/detail/simd.hpp>
#include <inferkit/core/rng.hpp>
#include <iterator>
#include <limits>

namespace {

using namespace inferkit;

}  // namespace

TEMPLATE_TEST_CASE("Simd: any_greater agrees with a scalar scan", "[attention]",
                   detail::SimdPortable, detail::SimdNative) {
  Rng rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    float lanes[detail::kSimdLanes];
    for (float& x : lanes) x = static_cast<float>(rng.next_u32() % 200) - 100.0f;
    if (trial % 3 == 0) lanes[rng.next_u32() % detail::kSimdLanes] = std::nanf("");
    const float m = static_cast<float>(rng.next_u32() % 240) - 120.0f;
    bool want = false;
    for (const float x : lanes) want = want || x > m;  // NaN > m is false
    CHECK(TestType::any_greater(TestType::load(lanes), m) == want);
  }
  float all_nan[detail::kSimdLanes];
  std::fill(std::begin(all_nan), std::end(all_nan), std::nanf(""));
  CHECK_FALSE(TestType::any_greater(TestType::load(all_nan), -1e30f));
  float neg_inf[detail::kSimdLanes];
  std::fill(std::begin(neg_inf), std::end(neg_inf), -std::numeric_limits<float>::infinity());
  CHECK_FALSE(
      TestType::any_greater(TestType::load(neg_inf), -std::numeric_limits<float>::infinity()));
}
