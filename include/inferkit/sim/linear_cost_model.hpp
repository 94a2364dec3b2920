// SPDX-License-Identifier: Apache-2.0
// LinearStepCostModel: a step cost fitted to steps measured on real hardware, the measured
// counterpart of RooflineCostModel. A step costs a fixed overhead plus a price per computed token,
// per sequence and per cached token its attention reads; `fit_linear_cost_model` finds the prices
// by least squares (non-negative) from an engine's step records, so the simulator can predict the
// same engine on other workloads.
// Threads: value types and pure functions; safe from any number of threads.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/perf/roofline.hpp>
#include <span>

namespace inferkit {

/// One measured step: what it computed and how long it took.
struct StepSample {
  std::int64_t new_tokens = 0;      ///< tokens computed (prefill chunks, decodes, drafts)
  std::int64_t sequences = 0;       ///< sequences in the step
  std::int64_t context_tokens = 0;  ///< cached tokens attention read, summed over sequences
  double seconds = 0.0;             ///< wall time of the step
};

/// seconds = fixed_s + per_token_s * new tokens + per_sequence_s * sequences
///         + per_context_token_s * cached tokens read. Satisfies `StepCostModel`.
struct LinearStepCostModel {
  double fixed_s = 0.0;              ///< per step
  double per_token_s = 0.0;          ///< per computed token
  double per_sequence_s = 0.0;       ///< per sequence
  double per_context_token_s = 0.0;  ///< per cached token read

  /// The price of `work` (0 for an empty step).
  [[nodiscard]] double step_seconds(std::span<const SequenceWork> work) const noexcept {
    if (work.empty()) return 0.0;
    double tokens = 0.0;
    double context = 0.0;
    for (const SequenceWork& w : work) {
      tokens += static_cast<double>(w.new_tokens);
      context += static_cast<double>(w.context_tokens);
    }
    return fixed_s + per_token_s * tokens + per_sequence_s * static_cast<double>(work.size()) +
           per_context_token_s * context;
  }
};

namespace detail {

// Solves the k x k system a x = b (row-major, k <= 4) by Gaussian elimination with partial
// pivoting; false when it is singular.
inline bool solve_small(std::array<std::array<double, 4>, 4> a, std::array<double, 4> b,
                        std::size_t k, std::array<double, 4>& x) {
  for (std::size_t c = 0; c < k; ++c) {
    std::size_t pivot = c;
    for (std::size_t r = c + 1; r < k; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-300) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (std::size_t r = c + 1; r < k; ++r) {
      const double f = a[r][c] / a[c][c];
      for (std::size_t j = c; j < k; ++j) a[r][j] -= f * a[c][j];
      b[r] -= f * b[c];
    }
  }
  for (std::size_t c = k; c-- > 0;) {
    double s = b[c];
    for (std::size_t j = c + 1; j < k; ++j) s -= a[c][j] * x[j];
    x[c] = s / a[c][c];
  }
  return true;
}

}  // namespace detail

/// Least-squares fit of a LinearStepCostModel to `samples`, every price >= 0: a feature whose
/// price comes out negative (or that the samples cannot tell apart from the others) is dropped
/// and the rest refitted. Throws `Error{kInvalidArgument}` for an empty span or a sample with a
/// negative count or a non-finite or negative time.
inline LinearStepCostModel fit_linear_cost_model(std::span<const StepSample> samples) {
  check_arg(!samples.empty(), ErrorCode::kInvalidArgument, "samples.size()", samples.size(),
            "must be >=", 1);
  for (const StepSample& s : samples) {
    check_arg(s.new_tokens >= 0 && s.sequences >= 0 && s.context_tokens >= 0,
              ErrorCode::kInvalidArgument, "sample new_tokens", s.new_tokens,
              "and its other counts must be >=", 0);
    check_arg(std::isfinite(s.seconds) && s.seconds >= 0.0, ErrorCode::kInvalidArgument,
              "sample seconds", s.seconds, "must be finite and >=", 0);
  }
  std::array<bool, 4> used = {true, true, true, true};  // fixed, token, sequence, context
  std::array<double, 4> price{};
  for (int round = 0; round < 4; ++round) {
    std::array<std::size_t, 4> idx{};
    std::size_t k = 0;
    for (std::size_t f = 0; f < 4; ++f) {
      if (used[f]) idx[k++] = f;
    }
    if (k == 0) break;
    std::array<std::array<double, 4>, 4> ata{};
    std::array<double, 4> atb{};
    for (const StepSample& s : samples) {
      const std::array<double, 4> row = {1.0, static_cast<double>(s.new_tokens),
                                         static_cast<double>(s.sequences),
                                         static_cast<double>(s.context_tokens)};
      for (std::size_t i = 0; i < k; ++i) {
        for (std::size_t j = 0; j < k; ++j) ata[i][j] += row[idx[i]] * row[idx[j]];
        atb[i] += row[idx[i]] * s.seconds;
      }
    }
    std::array<double, 4> x{};
    if (!detail::solve_small(ata, atb, k, x)) {
      used[idx[k - 1]] = false;  // collinear: drop the last feature
      continue;
    }
    price = {};
    std::size_t worst = k;  // k: no negative price
    for (std::size_t i = 0; i < k; ++i) {
      price[idx[i]] = x[i];
      if (x[i] < 0.0 && (worst == k || x[i] < x[worst])) worst = i;
    }
    if (worst == k) break;
    used[idx[worst]] = false;
    price = {};
  }
  return LinearStepCostModel{price[0], price[1], price[2], price[3]};
}

}  // namespace inferkit
