// SPDX-License-Identifier: Apache-2.0
// Tests for sched/serving_metrics.hpp: quantiles against numpy's linear interpolation computed
// here by brute force (every order statistic), latency summaries on random sets, and
// `summarize` on outcomes whose figures are recomputed independently.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <inferkit/core/rng.hpp>
#include <inferkit/sched/serving_metrics.hpp>
#include <numeric>
#include <tests/support/error_code.hpp>
#include <vector>

using namespace inferkit;
using inferkit::test::code_of;

namespace {

// numpy.percentile(values, 100 q) with the default 'linear' method, from its definition:
// the order statistic at (n - 1) q, interpolated.
double numpy_quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double h = (static_cast<double>(v.size()) - 1.0) * q;
  const double lo = std::floor(h);
  const double hi = std::ceil(h);
  return v[static_cast<std::size_t>(lo)] +
         (h - lo) * (v[static_cast<std::size_t>(hi)] - v[static_cast<std::size_t>(lo)]);
}

}  // namespace

TEST_CASE("quantile_sorted: matches numpy's linear interpolation", "[sched][serving_metrics]") {
  Rng rng(3);
  for (std::size_t n : {1u, 2u, 3u, 10u, 101u, 1000u}) {
    std::vector<double> v(n);
    for (double& x : v) x = rng.uniform_double() * 10.0;
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    for (double q : {0.0, 0.25, 0.5, 0.9, 0.99, 1.0}) {
      INFO("n " << n << " q " << q);
      CHECK(quantile_sorted(sorted, q) == Approx(numpy_quantile(v, q)).epsilon(1e-12));
    }
    const LatencySummary s = summarize_latencies(v);
    CHECK(s.count == static_cast<std::int64_t>(n));
    CHECK(s.mean == Approx(std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(n)));
    CHECK(s.p99 == Approx(numpy_quantile(v, 0.99)));
    CHECK(s.max == sorted.back());
  }
  CHECK(code_of([] { (void)quantile_sorted({}, 0.5); }) == ErrorCode::kInvalidArgument);
  const std::vector<double> one = {1.0};
  CHECK(code_of([&] { (void)quantile_sorted(one, 1.5); }) == ErrorCode::kInvalidArgument);
  CHECK(summarize_latencies({}).count == 0);
}

TEST_CASE("summarize: throughput and latency figures of finished requests",
          "[sched][serving_metrics]") {
  std::vector<RequestOutcome> outcomes(4);
  // Request 0: arrives 0, tokens at 1, 2, 4 -> TTFT 1, TPOT 1.5, ITL {1, 2}, e2e 4.
  outcomes[0].reason = FinishReason::kLength;
  outcomes[0].output = {1, 2, 3};
  outcomes[0].metrics.arrival_s = 0.0;
  outcomes[0].metrics.first_token_s = 1.0;
  outcomes[0].metrics.token_times_s = {1.0, 2.0, 4.0};
  outcomes[0].metrics.finish_s = 4.0;
  outcomes[0].metrics.prompt_tokens = 10;
  outcomes[0].metrics.cached_prompt_tokens = 4;
  // Request 1: arrives 1, one token at 3 -> TTFT 2, e2e 2.
  outcomes[1].reason = FinishReason::kStopToken;
  outcomes[1].output = {7};
  outcomes[1].metrics.arrival_s = 1.0;
  outcomes[1].metrics.first_token_s = 3.0;
  outcomes[1].metrics.token_times_s = {3.0};
  outcomes[1].metrics.finish_s = 3.0;
  outcomes[1].metrics.prompt_tokens = 6;
  outcomes[1].metrics.num_preemptions = 2;
  // Aborted and rejected requests count, but not in latencies.
  outcomes[2].reason = FinishReason::kAborted;
  outcomes[2].metrics.arrival_s = 0.5;
  outcomes[2].metrics.finish_s = 5.0;
  outcomes[3].reason = FinishReason::kExceedsCapacity;
  outcomes[3].metrics.arrival_s = 0.5;
  outcomes[3].metrics.finish_s = 0.5;
  const ServingSummary s = summarize(outcomes);
  CHECK(s.num_requests == 4);
  CHECK(s.num_completed == 2);
  CHECK(s.num_aborted == 1);
  CHECK(s.num_rejected == 1);
  CHECK(s.output_tokens == 4);
  CHECK(s.preemptions == 2);
  CHECK(s.duration_s == 5.0);
  CHECK(s.requests_per_s == Approx(0.4));
  CHECK(s.output_tokens_per_s == Approx(0.8));
  CHECK(s.ttft.mean == Approx(1.5));
  CHECK(s.tpot.count == 1);
  CHECK(s.tpot.mean == Approx(1.5));
  CHECK(s.itl.count == 2);
  CHECK(s.itl.max == 2.0);
  CHECK(s.e2e.p50 == Approx(3.0));
  CHECK(s.normalized.mean == Approx((4.0 / 3.0 + 2.0) / 2.0));
  CHECK(s.prefix_hit_rate() == Approx(4.0 / 16.0));
}
