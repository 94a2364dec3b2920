// SPDX-License-Identifier: Apache-2.0
// Tests for sim/linear_cost_model.hpp: the fit recovers known prices from noiseless and noisy
// synthetic steps, drops a feature whose price would be negative, prices work as its formula
// says, and rejects bad samples.
#include <catch2/catch.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/sim/cost_model.hpp>
#include <inferkit/sim/linear_cost_model.hpp>
#include <tests/support/error_code.hpp>
#include <vector>

using namespace inferkit;

namespace {

std::vector<StepSample> synthetic(const LinearStepCostModel& truth, double noise, Rng& rng) {
  std::vector<StepSample> s;
  for (int i = 0; i < 400; ++i) {
    StepSample x;
    x.sequences = 1 + rng.below(32);
    x.new_tokens = x.sequences + (rng.below(4) == 0 ? rng.below(2048) : 0);
    x.context_tokens = static_cast<std::int64_t>(rng.below(100000));
    x.seconds = truth.fixed_s + truth.per_token_s * static_cast<double>(x.new_tokens) +
                truth.per_sequence_s * static_cast<double>(x.sequences) +
                truth.per_context_token_s * static_cast<double>(x.context_tokens);
    x.seconds *= 1.0 + noise * (rng.uniform_double() - 0.5);
    s.push_back(x);
  }
  return s;
}

}  // namespace

static_assert(StepCostModel<LinearStepCostModel>);

TEST_CASE("fit_linear_cost_model: recovers the prices of synthetic steps",
          "[sim][linear_cost_model]") {
  Rng rng(4);
  const LinearStepCostModel truth{3e-3, 2e-5, 1e-4, 5e-8};
  const LinearStepCostModel exact = fit_linear_cost_model(synthetic(truth, 0.0, rng));
  CHECK(exact.fixed_s == Approx(truth.fixed_s).epsilon(1e-6));
  CHECK(exact.per_token_s == Approx(truth.per_token_s).epsilon(1e-6));
  CHECK(exact.per_sequence_s == Approx(truth.per_sequence_s).epsilon(1e-6));
  CHECK(exact.per_context_token_s == Approx(truth.per_context_token_s).epsilon(1e-6));
  const LinearStepCostModel noisy = fit_linear_cost_model(synthetic(truth, 0.1, rng));
  CHECK(noisy.per_token_s == Approx(truth.per_token_s).epsilon(0.05));
  CHECK(noisy.per_context_token_s == Approx(truth.per_context_token_s).epsilon(0.1));
  const std::vector<SequenceWork> work = {{10, 100}, {1, 500}};
  CHECK(exact.step_seconds(work) == Approx(3e-3 + 11 * 2e-5 + 2 * 1e-4 + 600 * 5e-8));
  CHECK(exact.step_seconds({}) == 0.0);
}

TEST_CASE("fit_linear_cost_model: prices stay non-negative", "[sim][linear_cost_model]") {
  Rng rng(5);
  // Time falls with context: a negative price would fit; the feature is dropped instead.
  std::vector<StepSample> s = synthetic({1e-3, 1e-5, 0.0, 0.0}, 0.0, rng);
  for (StepSample& x : s) x.seconds -= 1e-9 * static_cast<double>(x.context_tokens);
  const LinearStepCostModel m = fit_linear_cost_model(s);
  CHECK(m.per_context_token_s == 0.0);
  CHECK(m.fixed_s >= 0.0);
  CHECK(m.per_token_s >= 0.0);
  CHECK(m.per_sequence_s >= 0.0);
  // Every step alike: only the fixed price can be told.
  const std::vector<StepSample> same(10, StepSample{4, 4, 100, 0.01});
  const LinearStepCostModel flat = fit_linear_cost_model(same);
  CHECK(flat.step_seconds(std::vector<SequenceWork>(4, {1, 25})) == Approx(0.01));
}

TEST_CASE("fit_linear_cost_model: bad samples are rejected", "[sim][linear_cost_model]") {
  CHECK(test::code_of([] { (void)fit_linear_cost_model({}); }) == ErrorCode::kInvalidArgument);
  const std::vector<StepSample> bad = {{1, 1, 0, -1.0}};
  CHECK(test::code_of([&] { (void)fit_linear_cost_model(bad); }) == ErrorCode::kInvalidArgument);
  const std::vector<StepSample> neg = {{-1, 1, 0, 1.0}};
  CHECK(test::code_of([&] { (void)fit_linear_cost_model(neg); }) == ErrorCode::kInvalidArgument);
}
