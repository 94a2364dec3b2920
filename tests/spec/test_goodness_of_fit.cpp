// SPDX-License-Identifier: Apache-2.0
// Tests for spec/goodness_of_fit.hpp: the chi-square tail against closed forms and table values,
// pooling of sparse cells, impossible categories, and argument errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/goodness_of_fit.hpp>
#include <vector>

using inferkit::chi_square_survival;
using inferkit::chi_square_test;

TEST_CASE("chi_square_survival: matches closed forms and table quantiles",
          "[spec][goodness_of_fit]") {
  // df = 2 is exponential: Q = exp(-x / 2), in both the series and the continued-fraction range.
  for (double x : {0.1, 0.5, 1.0, 2.9, 3.1, 10.0, 100.0, 1000.0}) {
    CHECK(chi_square_survival(x, 2.0) == Approx(std::exp(-x / 2.0)).epsilon(1e-10));
  }
  // df = 1: Q = erfc(sqrt(x / 2)).
  for (double x : {0.01, 0.7, 1.0, 1.6, 5.0, 23.93, 60.0}) {
    CHECK(chi_square_survival(x, 1.0) == Approx(std::erfc(std::sqrt(x / 2.0))).epsilon(1e-9));
  }
  // Table 95% quantiles.
  CHECK(chi_square_survival(3.841459, 1.0) == Approx(0.05).epsilon(1e-5));
  CHECK(chi_square_survival(18.307038, 10.0) == Approx(0.05).epsilon(1e-5));
  CHECK(chi_square_survival(124.342113, 100.0) == Approx(0.05).epsilon(1e-5));
  CHECK(chi_square_survival(0.0, 3.0) == 1.0);
  CHECK_THROWS_AS(chi_square_survival(1.0, 0.0), inferkit::Error);
}

TEST_CASE("chi_square_test: accepts true samples and rejects a shifted distribution",
          "[spec][goodness_of_fit]") {
  const std::vector<double> probs{0.5, 0.25, 0.125, 0.0625, 0.0625};
  inferkit::Rng rng(11);
  std::vector<std::uint64_t> counts(probs.size(), 0);
  std::vector<std::uint64_t> shifted(probs.size(), 0);
  for (int i = 0; i < 50000; ++i) {
    double u = rng.uniform_double();
    std::size_t k = 0;
    while (k + 1 < probs.size() && u >= probs[k]) {
      u -= probs[k++];
    }
    ++counts[k];
    ++shifted[(k + 1) % probs.size()];
  }
  const auto good = chi_square_test(counts, probs);
  CHECK(good.degrees_of_freedom == 4);
  CHECK(good.p_value > 1e-6);
  CHECK(chi_square_test(shifted, probs).p_value < 1e-12);
}

TEST_CASE("chi_square_test: pools sparse cells and flags impossible categories",
          "[spec][goodness_of_fit]") {
  // 100 draws: cells expecting < 5 are pooled into one.
  const std::vector<double> probs{0.9, 0.02, 0.02, 0.02, 0.04, 0.0};
  const std::vector<std::uint64_t> counts{90, 2, 2, 2, 4, 0};
  const auto r = chi_square_test(counts, probs);
  CHECK(r.degrees_of_freedom == 1);
  CHECK(r.statistic == Approx(0.0).margin(1e-12));
  CHECK(r.p_value == 1.0);
  const std::vector<std::uint64_t> impossible{90, 2, 2, 2, 3, 1};
  const auto bad = chi_square_test(impossible, probs);
  CHECK(bad.impossible_observed);
  CHECK(bad.p_value == 0.0);
}

TEST_CASE("chi_square_test: rejects bad arguments", "[spec][goodness_of_fit]") {
  const std::vector<std::uint64_t> counts{1, 2};
  const std::vector<double> three{0.2, 0.3, 0.5};
  const std::vector<double> negative{-0.5, 1.5};
  const std::vector<double> zero{0.0, 0.0};
  CHECK_THROWS_AS(chi_square_test(counts, three), inferkit::Error);
  CHECK_THROWS_AS(chi_square_test(counts, negative), inferkit::Error);
  CHECK_THROWS_AS(chi_square_test(counts, zero), inferkit::Error);
}
