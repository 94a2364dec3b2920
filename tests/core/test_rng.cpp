// SPDX-License-Identifier: Apache-2.0
// Tests for core/rng.hpp: Philox-4x32-10 against Random123's published known-answer vectors, and
// the stream/uniform helpers built on it.
#include <catch2/catch.hpp>
#include <cmath>
#include <inferkit/core/rng.hpp>
#include <vector>

using inferkit::Philox4x32;
using inferkit::Rng;

TEST_CASE("Philox4x32: matches the Random123 known-answer vectors", "[core][rng]") {
  struct Kat {
    Philox4x32::Counter ctr;
    Philox4x32::Key key;
    Philox4x32::Counter expected;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& kat : kats) {
    CHECK(Philox4x32::generate(kat.ctr, kat.key) == kat.expected);
  }
  // The block function is constexpr: the first vector also holds at compile time.
  static_assert(Philox4x32::generate({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5u);
}

TEST_CASE("Rng: same seed and stream give the same numbers and streams differ", "[core][rng]") {
  Rng a(42, 7);
  Rng b(42, 7);
  Rng c(42, 8);
  int equal_to_other_stream = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::uint32_t x = a.next_u32();
    REQUIRE(x == b.next_u32());
    equal_to_other_stream += x == c.next_u32() ? 1 : 0;
  }
  CHECK(equal_to_other_stream < 3);
}

TEST_CASE("Rng: seek repositions at a block boundary", "[core][rng]") {
  Rng a(5);
  std::vector<std::uint32_t> first(12);
  for (auto& x : first) x = a.next_u32();
  Rng b(5);
  b.seek(2);
  for (int i = 8; i < 12; ++i) {
    CHECK(b.next_u32() == first[static_cast<std::size_t>(i)]);
  }
}

TEST_CASE("Rng: uniforms lie in [0 1) with the right mean and variance", "[core][rng]") {
  Rng rng(1234);
  const int n = 200000;
  double sum = 0.0;
  double sum_sq = 0.0;
  double dsum = 0.0;
  for (int i = 0; i < n; ++i) {
    const float u = rng.uniform();
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    sum += u;
    sum_sq += double{u} * u;
    const double d = rng.uniform_double();
    REQUIRE(d >= 0.0);
    REQUIRE(d < 1.0);
    dsum += d;
  }
  const double mean = sum / n;
  // Standard error of the mean is sqrt(1/12 / n) ~ 6.5e-4: allow 5 sigma.
  CHECK(std::abs(mean - 0.5) < 5 * 6.5e-4);
  CHECK(std::abs(dsum / n - 0.5) < 5 * 6.5e-4);
  CHECK(std::abs(sum_sq / n - mean * mean - 1.0 / 12.0) < 2e-3);
  CHECK(inferkit::uniform_float(0xffffffffu) < 1.0f);
  CHECK(inferkit::uniform_double(0xffffffffu, 0xffffffffu) < 1.0);
}

TEST_CASE("Rng: below(n) covers [0 n) uniformly", "[core][rng]") {
  Rng rng(99);
  const std::uint32_t n = 7;
  std::vector<int> counts(n, 0);
  const int draws = 70000;
  for (int i = 0; i < draws; ++i) {
    const std::uint32_t x = rng.below(n);
    REQUIRE(x < n);
    ++counts[x];
  }
  // Chi-square with 6 degrees of freedom: 22.46 is the 0.001 critical value.
  double chi2 = 0.0;
  const double expected = double(draws) / n;
  for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
  CHECK(chi2 < 22.46);
}
