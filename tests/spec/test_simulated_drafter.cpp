// SPDX-License-Identifier: Apache-2.0
// Tests for spec/simulated_drafter.hpp: q is a distribution, deterministic per (seed, context),
// equals p at alpha = 1, its acceptance overlap grows with alpha, and calibration hits a target.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/chain_verifier.hpp>
#include <inferkit/spec/sampling.hpp>
#include <inferkit/spec/simulated_drafter.hpp>
#include <numeric>
#include <vector>

using inferkit::SimulatedDrafter;

namespace {

std::vector<float> target_rows(std::size_t rows, std::size_t vocab, std::uint64_t seed) {
  inferkit::Rng rng(seed);
  std::vector<float> logits(rows * vocab);
  for (float& x : logits) x = 8.0f * rng.uniform();
  std::vector<float> probs(logits.size());
  for (std::size_t r = 0; r < rows; ++r) {
    inferkit::softmax(std::span<const float>(logits).subspan(r * vocab, vocab),
                      std::span<float>(probs).subspan(r * vocab, vocab));
  }
  return probs;
}

}  // namespace

TEST_CASE("SimulatedDrafter: q is a deterministic distribution and alpha 1 gives p",
          "[spec][simulated_drafter]") {
  const auto p = target_rows(1, 300, 1);
  std::vector<float> q(300);
  std::vector<float> again(300);
  const SimulatedDrafter drafter(0.4f, 9);
  drafter.draft_distribution(p, 5, q);
  drafter.draft_distribution(p, 5, again);
  CHECK(q == again);
  CHECK(std::accumulate(q.begin(), q.end(), 0.0) == Approx(1.0).epsilon(1e-5));
  CHECK(std::all_of(q.begin(), q.end(), [](float x) { return x > 0.0f; }));
  drafter.draft_distribution(p, 6, again);
  CHECK(q != again);  // another context, another perturbation
  SimulatedDrafter(1.0f, 9).draft_distribution(p, 5, q);
  for (std::size_t i = 0; i < p.size(); ++i) CHECK(q[i] == Approx(p[i]).margin(1e-7));
  CHECK_THROWS_AS(SimulatedDrafter(1.5f, 0), inferkit::Error);
  CHECK_THROWS_AS(SimulatedDrafter(0.5f, 0, -1.0f), inferkit::Error);
  std::vector<float> wrong(299);
  CHECK_THROWS_AS(drafter.draft_distribution(p, 0, wrong), inferkit::Error);
}

TEST_CASE("SimulatedDrafter: acceptance grows with alpha and calibration hits the target",
          "[spec][simulated_drafter]") {
  constexpr std::size_t kVocab = 200;
  const auto p = target_rows(64, kVocab, 2);
  std::vector<float> q(kVocab);
  double previous = -1.0;
  for (float alpha : {0.0f, 0.25f, 0.5f, 0.75f, 1.0f}) {
    const SimulatedDrafter drafter(alpha, 3);
    double mean = 0.0;
    for (std::size_t r = 0; r < 64; ++r) {
      const auto row = std::span<const float>(p).subspan(r * kVocab, kVocab);
      drafter.draft_distribution(row, r, q);
      const double overlap = inferkit::acceptance_overlap(row, q);
      CHECK(overlap >= alpha - 1e-5);  // q keeps alpha of p's mass where p is
      mean += overlap / 64.0;
    }
    CHECK(mean > previous);
    previous = mean;
  }
  CHECK(previous == Approx(1.0).epsilon(1e-5));
  for (double target : {0.5, 0.775, 0.9}) {
    const auto alpha = inferkit::calibrate_alpha(p, kVocab, target, 3);
    REQUIRE(alpha.has_value());
    const SimulatedDrafter drafter(*alpha, 3);
    double mean = 0.0;
    for (std::size_t r = 0; r < 64; ++r) {
      const auto row = std::span<const float>(p).subspan(r * kVocab, kVocab);
      drafter.draft_distribution(row, r, q);
      mean += inferkit::acceptance_overlap(row, q) / 64.0;
    }
    CHECK(mean == Approx(target).margin(1e-4));
  }
  CHECK_FALSE(inferkit::calibrate_alpha(p, kVocab, 0.0, 3).has_value());
  CHECK_THROWS_AS(inferkit::calibrate_alpha(p, kVocab, 1.5, 3), inferkit::Error);
  CHECK_THROWS_AS(inferkit::calibrate_alpha(p, kVocab + 1, 0.5, 3), inferkit::Error);
}
