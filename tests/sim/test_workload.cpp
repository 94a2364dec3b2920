// SPDX-License-Identifier: Apache-2.0
// Tests for sim/workload.hpp: every length distribution against its exact probability mass
// (from the CDF, with the rounding applied) by a chi-square test, arrival gaps against the
// exponential CDF and the gamma moments, determinism in the seed, shared-prefix prompts, and
// parameter validation.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <inferkit/core/rng.hpp>
#include <inferkit/sim/workload.hpp>
#include <inferkit/spec/goodness_of_fit.hpp>
#include <tests/support/error_code.hpp>
#include <vector>

using namespace inferkit;
using inferkit::test::code_of;

namespace {

#ifdef INFERKIT_TEST_SANITIZED
constexpr int kDraws = 40000;
#else
constexpr int kDraws = 200000;
#endif

// Chi-square p-value of draws of `d` against P(k) = cdf(k + 0.5) - cdf(k - 0.5) on
// [lo, hi] (the tails folded into the end cells, as the clamp does).
double length_fit(const LengthDistribution& d, const std::function<double(double)>& cdf,
                  std::int64_t lo, std::int64_t hi, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::uint64_t> observed(static_cast<std::size_t>(hi - lo + 1), 0);
  for (int i = 0; i < kDraws; ++i) {
    const std::int64_t x = sample_length(d, rng);
    REQUIRE(x >= lo);
    REQUIRE(x <= hi);
    ++observed[static_cast<std::size_t>(x - lo)];
  }
  std::vector<double> expected(observed.size());
  for (std::int64_t k = lo; k <= hi; ++k) {
    const double below = k == lo ? 0.0 : cdf(static_cast<double>(k) - 0.5);
    const double upto = k == hi ? 1.0 : cdf(static_cast<double>(k) + 0.5);
    expected[static_cast<std::size_t>(k - lo)] = upto - below;
  }
  return chi_square_test(observed, expected).p_value;
}

}  // namespace

TEST_CASE("sample_length: each distribution matches its probability mass", "[sim][workload]") {
  SECTION("Pareto(1.5, 20), the batching exercise's output lengths") {
    const auto d = LengthDistribution::pareto(1.5, 20.0).clamped(1, 400);
    const auto cdf = [](double x) { return x < 20.0 ? 0.0 : 1.0 - std::pow(20.0 / x, 1.5); };
    CHECK(length_fit(d, cdf, 1, 400, 1) > 1e-3);
  }
  SECTION("uniform") {
    const auto d = LengthDistribution::uniform(5, 29);
    const auto cdf = [](double x) { return std::clamp((std::floor(x) - 4.0) / 25.0, 0.0, 1.0); };
    CHECK(length_fit(d, cdf, 5, 29, 2) > 1e-3);
  }
  SECTION("lognormal with mean 100") {
    const auto d = LengthDistribution::lognormal_with_mean(100.0, 0.6).clamped(1, 600);
    const double mu = std::log(100.0) - 0.18;
    const auto cdf = [mu](double x) {
      return x <= 0.0 ? 0.0 : 0.5 * std::erfc(-(std::log(x) - mu) / (0.6 * std::sqrt(2.0)));
    };
    CHECK(length_fit(d, cdf, 1, 600, 3) > 1e-3);
  }
  SECTION("Zipf(1.8) on 1..200") {
    const auto d = LengthDistribution::zipf(1.8, 200);
    std::vector<double> cum(202, 0.0);
    for (int k = 1; k <= 200; ++k)
      cum[static_cast<std::size_t>(k)] = cum[static_cast<std::size_t>(k - 1)] + std::pow(k, -1.8);
    const auto cdf = [&](double x) {
      const auto k = static_cast<std::size_t>(std::clamp(std::floor(x), 0.0, 200.0));
      return cum[k] / cum[200];
    };
    CHECK(length_fit(d, cdf, 1, 200, 4) > 1e-3);
  }
  SECTION("fixed") {
    Rng rng(1);
    CHECK(sample_length(LengthDistribution::fixed(77), rng) == 77);
  }
}

TEST_CASE("sample_gap: Poisson gaps are exponential, gamma gaps have the asked CV",
          "[sim][workload]") {
  Rng rng(9);
  const ArrivalProcess poisson = ArrivalProcess::poisson(4.0);
  std::vector<std::uint64_t> observed(20, 0);
  std::vector<double> expected(20);
  for (int i = 0; i < kDraws; ++i) {
    const double g = sample_gap(poisson, rng);
    ++observed[std::min<std::size_t>(19, static_cast<std::size_t>(g / 0.05))];
  }
  for (std::size_t b = 0; b < 20; ++b) {
    const double lo = std::exp(-4.0 * 0.05 * static_cast<double>(b));
    expected[b] = b == 19 ? lo : lo - std::exp(-4.0 * 0.05 * static_cast<double>(b + 1));
  }
  CHECK(chi_square_test(observed, expected).p_value > 1e-3);
  for (double cv : {0.5, 1.0, 3.0}) {
    const ArrivalProcess gamma = ArrivalProcess::gamma(2.0, cv);
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < kDraws; ++i) {
      const double g = sample_gap(gamma, rng);
      sum += g;
      sq += g * g;
    }
    const double mean = sum / kDraws;
    const double sd = std::sqrt(sq / kDraws - mean * mean);
    INFO("cv " << cv);
    CHECK(mean == Approx(0.5).epsilon(0.03));
    CHECK(sd / mean == Approx(cv).epsilon(0.05));
  }
  CHECK(sample_gap(ArrivalProcess::all_at_once(), rng) == 0.0);
}

TEST_CASE("generate_workload: deterministic, shared prefixes, ordered arrivals",
          "[sim][workload]") {
  WorkloadOptions o;
  o.num_requests = 500;
  o.arrivals = ArrivalProcess::poisson(10.0);
  o.prompt = LengthDistribution::uniform(10, 50);
  o.output = LengthDistribution::pareto(1.5, 20.0).clamped(1, 500);
  o.num_prefix_groups = 4;
  o.shared_fraction = 0.6;
  o.prefix_tokens = 100;
  o.seed = 11;
  const auto a = generate_workload(o);
  const auto b = generate_workload(o);
  REQUIRE(a.size() == 500);
  int shared = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].arrival_s == b[i].arrival_s);
    CHECK(a[i].prompt_tokens == b[i].prompt_tokens);
    if (i > 0) CHECK(a[i].arrival_s >= a[i - 1].arrival_s);
    if (a[i].prefix_group >= 0) {
      ++shared;
      CHECK(a[i].prompt_tokens >= 110);
    }
  }
  CHECK(shared > 250);
  CHECK(shared < 350);
  CHECK(a.back().arrival_s == Approx(50.0).epsilon(0.15));  // 500 at 10/s
  // Same group: identical first 100 tokens; different requests differ after them.
  std::vector<std::size_t> g0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].prefix_group == 0) g0.push_back(i);
  }
  REQUIRE(g0.size() >= 2);
  const auto p = make_prompt_tokens(a[g0[0]], static_cast<std::int64_t>(g0[0]), 1000, 5);
  const auto q = make_prompt_tokens(a[g0[1]], static_cast<std::int64_t>(g0[1]), 1000, 5);
  CHECK(std::equal(p.begin(), p.begin() + 100, q.begin()));
  CHECK_FALSE(std::equal(p.begin() + 100, p.begin() + 110, q.begin() + 100));
  for (TokenId t : p) CHECK((t >= 0 && t < 1000));
}

TEST_CASE("workload parameters are validated", "[sim][workload]") {
  CHECK(code_of([] { validate(LengthDistribution::pareto(0.0, 1.0)); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(code_of([] { validate(LengthDistribution::zipf(1.0, 10)); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(code_of([] { validate(LengthDistribution::uniform(5, 4)); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(code_of([] { validate(LengthDistribution::fixed(0)); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { validate(ArrivalProcess::poisson(-1.0)); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { validate(ArrivalProcess::gamma(1.0, 0.0)); }) == ErrorCode::kInvalidArgument);
  WorkloadOptions o;
  o.shared_fraction = 2.0;
  CHECK(code_of([&] { (void)generate_workload(o); }) == ErrorCode::kInvalidArgument);
  SimRequestSpec r;
  CHECK(code_of([&] { (void)make_prompt_tokens(r, 0, 1, 0); }) == ErrorCode::kInvalidArgument);
}
