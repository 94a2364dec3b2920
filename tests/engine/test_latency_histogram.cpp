// SPDX-License-Identifier: Apache-2.0
// Tests for engine/latency_histogram.hpp: bucket counts, count and sum against a brute-force
// count over random durations (seed fixed), values on the bounds (Prometheus' "le": a value
// equal to a bound is in that bucket), and the values it must ignore.
#include <catch2/catch.hpp>
#include <cmath>
#include <inferkit/core/rng.hpp>
#include <inferkit/engine/latency_histogram.hpp>
#include <limits>
#include <vector>

using inferkit::LatencyHistogram;

TEST_CASE("LatencyHistogram: counts equal a brute-force bucketing", "[engine][latency_histogram]") {
  inferkit::Rng rng(3, 0);
  LatencyHistogram h;
  std::vector<double> values;
  for (int i = 0; i < 20000; ++i) {
    // Log-uniform over 1e-4 .. 1e3 s, so every bucket and the +Inf one are hit.
    values.push_back(std::pow(10.0, -4.0 + 7.0 * rng.uniform_double()));
  }
  for (double b : LatencyHistogram::bounds()) values.push_back(b);  // on the bounds
  double sum = 0.0;
  for (double v : values) {
    h.observe(v);
    sum += v;
  }
  const auto bounds = LatencyHistogram::bounds();
  for (std::size_t b = 0; b <= bounds.size(); ++b) {
    std::uint64_t expected = 0;
    for (double v : values) {
      const bool above_lower = b == 0 || v > bounds[b - 1];
      const bool below_upper = b == bounds.size() || v <= bounds[b];
      expected += above_lower && below_upper ? 1 : 0;
    }
    CHECK(h.counts()[b] == expected);
  }
  CHECK(h.count() == values.size());
  CHECK(h.sum() == Approx(sum).epsilon(1e-12));
}

TEST_CASE("LatencyHistogram: negative and NaN values are not observed",
          "[engine][latency_histogram]") {
  LatencyHistogram h;
  h.observe(-1.0);
  h.observe(std::numeric_limits<double>::quiet_NaN());
  CHECK(h.count() == 0);
  h.observe(0.0);
  h.observe(std::numeric_limits<double>::infinity());
  CHECK(h.counts().front() == 1);
  CHECK(h.counts().back() == 1);
}
