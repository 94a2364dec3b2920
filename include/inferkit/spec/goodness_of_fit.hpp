// SPDX-License-Identifier: Apache-2.0
// Pearson's chi-square goodness-of-fit test with an exact p-value (regularized incomplete gamma).
// inferkit proves its samplers and verifiers exact with it: the tokens a speculative decoder emits
// must follow the target's distribution. Public so users can hold their own samplers to the same
// standard; it is not part of the serving step flow.
// Threads: pure functions of their arguments; safe from any number of threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <span>

namespace inferkit {

/// Upper tail P(X >= x) of a chi-square variable with `df` > 0 degrees of freedom, accurate to
/// ~1e-12 relative down to the smallest doubles (series below a + 1, continued fraction above).
inline double chi_square_survival(double x, double df) {
  check_arg(df > 0.0, ErrorCode::kInvalidArgument, "df", df, "must be >", 0);
  if (!(x > 0.0)) {
    return 1.0;
  }
  const double a = 0.5 * df;
  const double z = 0.5 * x;
  const double log_prefix = -z + a * std::log(z) - std::lgamma(a);
  constexpr double kEps = 1e-15;
  constexpr int kMaxIter = 100000;
  if (z < a + 1.0) {  // lower series: P(a, z) = prefix * sum z^n / (a (a+1) ... (a+n))
    double term = 1.0 / a;
    double sum = term;
    for (int n = 1; n < kMaxIter && std::abs(term) > std::abs(sum) * kEps; ++n) {
      term *= z / (a + n);
      sum += term;
    }
    return std::max(0.0, 1.0 - std::exp(log_prefix) * sum);
  }
  // Continued fraction for Q(a, z) (modified Lentz).
  constexpr double kTiny = 1e-300;
  double b = z + 1.0 - a;
  double c = 1.0 / kTiny;
  double d = 1.0 / b;
  double h = d;
  for (int i = 1; i < kMaxIter; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    d = std::abs(d) < kTiny ? kTiny : d;
    c = b + an / c;
    c = std::abs(c) < kTiny ? kTiny : c;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1.0) < kEps) {
      break;
    }
  }
  return std::exp(log_prefix) * h;
}

/// The outcome of `chi_square_test`.
struct ChiSquareResult {
  double statistic = 0.0;              ///< Pearson's sum (O - E)^2 / E over the pooled cells
  std::size_t degrees_of_freedom = 0;  ///< pooled cells - 1
  double p_value = 1.0;              ///< P(chi-square >= statistic); 0 if an impossible cell fired
  bool impossible_observed = false;  ///< a category of probability 0 was observed
};

/// Tests whether the counts `observed` [categories] follow the probabilities `expected`
/// [categories] (normalized here). Categories expecting fewer than `min_expected` counts are
/// pooled into one cell, as the chi-square approximation needs. Throws `Error` on mismatched
/// sizes, negative or all-zero expectations. O(categories).
inline ChiSquareResult chi_square_test(std::span<const std::uint64_t> observed,
                                       std::span<const double> expected,
                                       double min_expected = 5.0) {
  check_arg(observed.size() == expected.size(), ErrorCode::kInvalidArgument, "observed.size()",
            observed.size(), "must equal expected.size() =", expected.size());
  double total_p = 0.0;
  double n = 0.0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    check_arg(expected[i] >= 0.0, ErrorCode::kInvalidArgument, "expected[i]", expected[i],
              "must be >=", 0);
    total_p += expected[i];
    n += static_cast<double>(observed[i]);
  }
  check_arg(total_p > 0.0, ErrorCode::kInvalidArgument, "sum(expected)", total_p, "must be >", 0);
  ChiSquareResult result;
  double pooled_e = 0.0;
  double pooled_o = 0.0;
  std::size_t cells = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double e = n * expected[i] / total_p;
    const auto o = static_cast<double>(observed[i]);
    if (expected[i] == 0.0) {
      result.impossible_observed = result.impossible_observed || o > 0.0;
    } else if (e < min_expected) {
      pooled_e += e;
      pooled_o += o;
    } else {
      result.statistic += (o - e) * (o - e) / e;
      ++cells;
    }
  }
  if (pooled_e > 0.0) {
    result.statistic += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
    ++cells;
  }
  result.degrees_of_freedom = cells > 0 ? cells - 1 : 0;
  if (result.impossible_observed) {
    result.p_value = 0.0;
  } else if (result.degrees_of_freedom > 0) {
    result.p_value =
        chi_square_survival(result.statistic, static_cast<double>(result.degrees_of_freedom));
  }
  return result;
}

}  // namespace inferkit
