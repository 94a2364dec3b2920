// SPDX-License-Identifier: Apache-2.0
// A simulated draft model for studies: given the target's distribution p at a position, the draft's
// q = alpha * p + (1 - alpha) * r, where r is a seeded perturbation of p (noisy logits that also
// reach tokens p rules out). Acceptance rates then come from the real verification math on real
// distributions, not from a coin with a fixed rate. Used by examples/speculative.cpp and tests.
// Threads: a SimulatedDrafter is immutable (draft_distribution seeds its own Rng) and
// calibrate_alpha is pure: safe from any number of threads writing distinct outputs.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/chain_verifier.hpp>
#include <inferkit/spec/detail/row_math.hpp>
#include <numbers>
#include <optional>
#include <span>
#include <vector>

namespace inferkit {

/// Draft distributions mixed from the target's and a seeded perturbation of it.
class SimulatedDrafter {
 public:
  /// `alpha` in [0, 1] is the weight of p in q (1: q = p, every draft accepted); `noise` >= 0 is
  /// the standard deviation of the log-space noise in the perturbation; `seed` picks the noise.
  /// Throws `Error{kInvalidArgument}` when alpha or noise is out of range.
  SimulatedDrafter(float alpha, std::uint64_t seed, float noise = 2.0f)
      : alpha_(alpha), noise_(noise), seed_(seed) {
    check_arg(alpha >= 0.0f && alpha <= 1.0f, ErrorCode::kInvalidArgument, "alpha", alpha,
              "must be in [0, limit] with limit =", 1);
    check_arg(std::isfinite(noise) && noise >= 0.0f, ErrorCode::kInvalidArgument, "noise", noise,
              "must be finite and >=", 0);
  }

  /// The weight of p in q, in [0, 1].
  [[nodiscard]] float alpha() const noexcept { return alpha_; }
  /// The standard deviation of the log-space noise of the perturbation.
  [[nodiscard]] float noise() const noexcept { return noise_; }

  /// Writes the draft distribution q for target row `p` at the position identified by `context`
  /// (any id of the prefix, such as a hash): the same (seed, context, p) always gives the same q.
  /// r(x) is proportional to (p(x) + 1 / vocab) * exp(noise * e_x) with e_x standard normal.
  /// Throws `Error` if the sizes differ or are 0. O(vocab).
  void draft_distribution(std::span<const float> p, std::uint64_t context,
                          std::span<float> q) const {
    check_arg(!p.empty() && q.size() == p.size(), ErrorCode::kInvalidArgument, "q.size()", q.size(),
              "must equal p.size() (nonzero) =", p.size());
    Rng rng(seed_, context);
    const float floor = 1.0f / static_cast<float>(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      // Box-Muller: one standard normal from two uniforms.
      const double u1 = 1.0 - rng.uniform_double();  // (0, 1]: log(u1) is finite
      const double u2 = rng.uniform_double();
      const double e = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
      q[i] = (p[i] + floor) * static_cast<float>(std::exp(static_cast<double>(noise_) * e));
    }
    const double r_total = detail::weight_sum([&](std::size_t i) { return q[i]; }, q.size());
    const auto r_scale = static_cast<float>((1.0 - static_cast<double>(alpha_)) / r_total);
    for (std::size_t i = 0; i < p.size(); ++i) {
      q[i] = alpha_ * p[i] + r_scale * q[i];
    }
  }

 private:
  float alpha_;
  float noise_;
  std::uint64_t seed_;
};

/// Finds the drafter alpha whose mean acceptance overlap sum_x min(p, q) over the target rows
/// `p_rows` [rows][vocab] equals `target_acceptance` (bisection; the overlap grows with alpha).
/// Row r uses context id r. Returns std::nullopt when the target lies below the overlap at
/// alpha = 0 (the perturbation alone already agrees more). Throws `Error` on bad sizes or a target
/// outside [0, 1]. O(iterations * rows * vocab).
inline std::optional<float> calibrate_alpha(std::span<const float> p_rows, std::size_t vocab,
                                            double target_acceptance, std::uint64_t seed,
                                            float noise = 2.0f) {
  check_arg(vocab >= 1 && !p_rows.empty() && p_rows.size() % vocab == 0,
            ErrorCode::kInvalidArgument, "p_rows.size()", p_rows.size(),
            "must be a nonzero multiple of vocab =", vocab);
  check_arg(target_acceptance >= 0.0 && target_acceptance <= 1.0, ErrorCode::kInvalidArgument,
            "target_acceptance", target_acceptance, "must be in [0, limit] with limit =", 1);
  const std::size_t rows = p_rows.size() / vocab;
  std::vector<float> q(vocab);
  const auto mean_overlap = [&](float alpha) {
    const SimulatedDrafter drafter(alpha, seed, noise);
    double sum = 0.0;
    for (std::size_t r = 0; r < rows; ++r) {
      const auto p = p_rows.subspan(r * vocab, vocab);
      drafter.draft_distribution(p, r, q);
      sum += acceptance_overlap(p, q);
    }
    return sum / static_cast<double>(rows);
  };
  if (mean_overlap(0.0f) > target_acceptance) {
    return std::nullopt;
  }
  float lo = 0.0f;
  float hi = 1.0f;
  for (int iter = 0; iter < 30; ++iter) {
    const float mid = 0.5f * (lo + hi);
    (mean_overlap(mid) < target_acceptance ? lo : hi) = mid;
  }
  return 0.5f * (lo + hi);
}

}  // namespace inferkit
