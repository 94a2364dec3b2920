// SPDX-License-Identifier: Apache-2.0
// Workloads for the serving simulator: arrival processes (all at once, Poisson, gamma with a
// burstiness parameter), length distributions (fixed, uniform, lognormal, Pareto, Zipf), the
// generated request list, and the prompt tokens a simulated request carries (shared prefixes
// become identical token runs, so the prefix cache sees them). Traces replay from CSV
// (sim/trace_csv.hpp). Every draw comes from an explicit seed.
// Threads: pure functions of their arguments (generators seed their own Rng); sample_length and
// sample_gap advance the Rng they are given: one thread at a time per Rng.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/core/token_id.hpp>
#include <limits>
#include <numbers>
#include <string_view>
#include <vector>

namespace inferkit {

/// One simulated request: when it arrives and how long its prompt and output are.
struct SimRequestSpec {
  double arrival_s = 0.0;          ///< seconds since the start
  std::int64_t prompt_tokens = 1;  ///< >= 1
  std::int64_t output_tokens = 1;  ///< >= 1, generated exactly (no stop token)
  std::int32_t prefix_group = -1;  ///< >= 0: the prompt starts with this group's shared prefix
  std::int64_t prefix_tokens = 0;  ///< length of that shared prefix (capped at prompt - 1)
  std::int32_t priority = 0;       ///< Request::priority
};

/// The shape of a length distribution.
enum class LengthKind : std::uint8_t { kFixed, kUniform, kLognormal, kPareto, kZipf };

/// A distribution of token counts, rounded to integers and clamped to [min_tokens, max_tokens].
/// Parameters by kind: fixed(a); uniform integers in [a, b]; lognormal with log-mean a and
/// log-sd b; Pareto with shape a and scale (minimum) b; Zipf over 1..max_tokens with exponent
/// a > 1 (P(k) proportional to k^-a).
struct LengthDistribution {
  LengthKind kind = LengthKind::kFixed;             ///< the shape
  double a = 1.0;                                   ///< first parameter (see above)
  double b = 0.0;                                   ///< second parameter (see above)
  std::int64_t min_tokens = 1;                      ///< draws below are raised to this
  std::int64_t max_tokens = std::int64_t{1} << 40;  ///< draws above are cut to this

  /// Always `tokens`.
  static LengthDistribution fixed(std::int64_t tokens) {
    return {LengthKind::kFixed, static_cast<double>(tokens), 0.0, 1, std::int64_t{1} << 40};
  }
  /// Uniform integers in [lo, hi].
  static LengthDistribution uniform(std::int64_t lo, std::int64_t hi) {
    return {LengthKind::kUniform, static_cast<double>(lo), static_cast<double>(hi), 1,
            std::int64_t{1} << 40};
  }
  /// Lognormal with the given mean (in tokens) and log-standard-deviation sigma.
  static LengthDistribution lognormal_with_mean(double mean_tokens, double sigma) {
    return {LengthKind::kLognormal, std::log(mean_tokens) - sigma * sigma / 2.0, sigma, 1,
            std::int64_t{1} << 40};
  }
  /// Pareto type I: P(X > x) = (scale / x)^shape for x >= scale.
  static LengthDistribution pareto(double shape, double scale) {
    return {LengthKind::kPareto, shape, scale, 1, std::int64_t{1} << 40};
  }
  /// Zipf over 1..n with exponent s > 1.
  static LengthDistribution zipf(double s, std::int64_t n) {
    return {LengthKind::kZipf, s, 0.0, 1, n};
  }
  /// The same distribution clamped to [lo, hi].
  [[nodiscard]] LengthDistribution clamped(std::int64_t lo, std::int64_t hi) const {
    LengthDistribution d = *this;
    d.min_tokens = lo;
    d.max_tokens = hi;
    return d;
  }
};

/// Throws `Error{kInvalidArgument}` naming the parameter when it is out of its domain.
inline void validate(const LengthDistribution& d) {
  check_arg(d.min_tokens >= 1 && d.min_tokens <= d.max_tokens, ErrorCode::kInvalidArgument,
            "min_tokens", d.min_tokens, "must be >= 1 and <= max_tokens =", d.max_tokens);
  const bool finite = std::isfinite(d.a) && std::isfinite(d.b);
  check_arg(finite, ErrorCode::kInvalidArgument, "distribution parameter a", d.a, "must be",
            "finite (and b too)");
  switch (d.kind) {
    case LengthKind::kFixed:
      check_arg(d.a >= 1.0, ErrorCode::kInvalidArgument, "fixed tokens", d.a, "must be >=", 1);
      break;
    case LengthKind::kUniform:
      check_arg(d.a >= 1.0 && d.b >= d.a, ErrorCode::kInvalidArgument, "uniform [lo, hi] hi", d.b,
                "must be >= lo >= 1, lo =", d.a);
      break;
    case LengthKind::kLognormal:
      check_arg(d.b >= 0.0, ErrorCode::kInvalidArgument, "lognormal sigma", d.b, "must be >=", 0);
      break;
    case LengthKind::kPareto:
      check_arg(d.a > 0.0 && d.b > 0.0, ErrorCode::kInvalidArgument, "pareto shape and scale", d.a,
                "must both be >", 0);
      break;
    case LengthKind::kZipf:
      check_arg(d.a > 1.0, ErrorCode::kInvalidArgument, "zipf exponent", d.a, "must be >", 1);
      break;
  }
}

namespace detail {

/// A standard normal draw (Box-Muller).
inline double normal_draw(Rng& rng) {
  const double u = 1.0 - rng.uniform_double();  // (0, 1]: log(u) is finite
  const double v = rng.uniform_double();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
}

/// A Gamma(shape, 1) draw (Marsaglia and Tsang 2000; shape < 1 through the boost
/// Gamma(shape + 1) * U^(1 / shape)).
inline double gamma_draw(Rng& rng, double shape) {
  if (shape < 1.0) {
    const double u = 1.0 - rng.uniform_double();
    return gamma_draw(rng, shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = 0.0;
    double v = 0.0;
    do {
      x = normal_draw(rng);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - rng.uniform_double();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

/// A Zipf(s) draw on 1, 2, … (Devroye 1986, X.6.1), s > 1; values above `n` are redrawn.
inline std::int64_t zipf_draw(Rng& rng, double s, std::int64_t n) {
  const double b = std::pow(2.0, s - 1.0);
  for (;;) {
    const double u = 1.0 - rng.uniform_double();
    const double v = rng.uniform_double();
    const double x = std::floor(std::pow(u, -1.0 / (s - 1.0)));
    if (!(x >= 1.0) || x > static_cast<double>(n)) continue;
    const double t = std::pow(1.0 + 1.0 / x, s - 1.0);
    if (v * x * (t - 1.0) / (b - 1.0) <= t / b) return static_cast<std::int64_t>(x);
  }
}

}  // namespace detail

/// One draw of `d`, rounded to the nearest integer and clamped. Throws as `validate`.
inline std::int64_t sample_length(const LengthDistribution& d, Rng& rng) {
  double x = 0.0;
  switch (d.kind) {
    case LengthKind::kFixed:
      x = d.a;
      break;
    case LengthKind::kUniform: {
      const double span = d.b - d.a + 1.0;
      x = d.a + std::floor(rng.uniform_double() * span);
      break;
    }
    case LengthKind::kLognormal:
      x = std::exp(d.a + d.b * detail::normal_draw(rng));
      break;
    case LengthKind::kPareto:
      x = d.b / std::pow(1.0 - rng.uniform_double(), 1.0 / d.a);
      break;
    case LengthKind::kZipf:
      x = static_cast<double>(detail::zipf_draw(rng, d.a, d.max_tokens));
      break;
  }
  const auto lo = static_cast<double>(d.min_tokens);
  const auto hi = static_cast<double>(d.max_tokens);
  return static_cast<std::int64_t>(std::clamp(std::round(x), lo, hi));
}

/// How requests arrive.
enum class ArrivalKind : std::uint8_t {
  kAllAtOnce,  ///< every request at t = 0
  kPoisson,    ///< exponential gaps at `rate_per_s`
  kGamma,      ///< gamma gaps with mean 1 / rate and coefficient of variation `cv` (burstiness)
};

/// An arrival process. Gamma with cv = 1 is Poisson; cv > 1 is burstier, cv < 1 more regular.
struct ArrivalProcess {
  ArrivalKind kind = ArrivalKind::kAllAtOnce;  ///< the process
  double rate_per_s = 1.0;                     ///< mean arrivals per second
  double cv = 1.0;                             ///< gamma: gap standard deviation / mean

  /// Every request at time 0.
  static ArrivalProcess all_at_once() { return {ArrivalKind::kAllAtOnce, 1.0, 1.0}; }
  /// Poisson arrivals at `rate` requests per second.
  static ArrivalProcess poisson(double rate) { return {ArrivalKind::kPoisson, rate, 1.0}; }
  /// Gamma-renewal arrivals at `rate` per second with gap coefficient of variation `cv`.
  static ArrivalProcess gamma(double rate, double cv) { return {ArrivalKind::kGamma, rate, cv}; }
};

/// Throws `Error{kInvalidArgument}` unless rate_per_s > 0 and cv > 0 (both finite).
inline void validate(const ArrivalProcess& p) {
  check_arg(std::isfinite(p.rate_per_s) && p.rate_per_s > 0.0, ErrorCode::kInvalidArgument,
            "rate_per_s", p.rate_per_s, "must be finite and >", 0);
  check_arg(std::isfinite(p.cv) && p.cv > 0.0, ErrorCode::kInvalidArgument, "cv", p.cv,
            "must be finite and >", 0);
}

/// The next inter-arrival gap in seconds (0 for all-at-once).
inline double sample_gap(const ArrivalProcess& p, Rng& rng) {
  switch (p.kind) {
    case ArrivalKind::kAllAtOnce:
      return 0.0;
    case ArrivalKind::kPoisson:
      return -std::log(1.0 - rng.uniform_double()) / p.rate_per_s;
    case ArrivalKind::kGamma: {
      const double shape = 1.0 / (p.cv * p.cv);
      return detail::gamma_draw(rng, shape) / (shape * p.rate_per_s);
    }
  }
  return 0.0;
}

/// A generated workload.
struct WorkloadOptions {
  std::int64_t num_requests = 100;                             ///< requests drawn, >= 0
  ArrivalProcess arrivals = ArrivalProcess::all_at_once();     ///< when they arrive
  LengthDistribution prompt = LengthDistribution::fixed(128);  ///< prompt tokens
  LengthDistribution output = LengthDistribution::fixed(128);  ///< output tokens
  std::int32_t num_prefix_groups = 0;  ///< shared prefixes (system prompts, few-shot examples)
  double shared_fraction = 0.0;        ///< share of requests that start with one, in [0, 1]
  std::int64_t prefix_tokens = 0;      ///< tokens of each shared prefix (added to the prompt)
  std::uint64_t seed = 0;              ///< the same seed draws the same workload
};

/// Draws `options.num_requests` requests: arrival times from the process, prompt and output
/// lengths from their distributions; a `shared_fraction` of them get one of the prefix groups
/// (uniformly), whose `prefix_tokens` precede their drawn prompt. Deterministic in the seed.
/// Throws `Error{kInvalidArgument}` for a negative count, an invalid distribution or process,
/// shared_fraction outside [0, 1], or prefix settings < 0.
inline std::vector<SimRequestSpec> generate_workload(const WorkloadOptions& options) {
  check_arg(options.num_requests >= 0, ErrorCode::kInvalidArgument, "num_requests",
            options.num_requests, "must be >=", 0);
  validate(options.arrivals);
  validate(options.prompt);
  validate(options.output);
  check_arg(options.shared_fraction >= 0.0 && options.shared_fraction <= 1.0,
            ErrorCode::kInvalidArgument, "shared_fraction", options.shared_fraction, "must be in",
            "[0, 1]");
  check_arg(options.num_prefix_groups >= 0, ErrorCode::kInvalidArgument, "num_prefix_groups",
            options.num_prefix_groups, "must be >=", 0);
  check_arg(options.prefix_tokens >= 0, ErrorCode::kInvalidArgument, "prefix_tokens",
            options.prefix_tokens, "must be >=", 0);
  Rng rng(options.seed, 0x5eedull);
  std::vector<SimRequestSpec> out;
  out.reserve(static_cast<std::size_t>(options.num_requests));
  double t = 0.0;
  for (std::int64_t i = 0; i < options.num_requests; ++i) {
    SimRequestSpec r;
    if (i > 0) t += sample_gap(options.arrivals, rng);
    r.arrival_s = t;
    r.prompt_tokens = sample_length(options.prompt, rng);
    r.output_tokens = sample_length(options.output, rng);
    if (options.num_prefix_groups > 0 && rng.uniform_double() < options.shared_fraction) {
      r.prefix_group = static_cast<std::int32_t>(
          rng.below(static_cast<std::uint32_t>(options.num_prefix_groups)));
      r.prefix_tokens = options.prefix_tokens;
      r.prompt_tokens += options.prefix_tokens;
    }
    out.push_back(r);
  }
  return out;
}

/// The prompt of simulated request `index`: its group's shared prefix (the same tokens for every
/// request of the group, min(prefix_tokens, prompt_tokens - 1) of them) followed by tokens of its
/// own, all in [0, vocab_size). Throws `Error{kInvalidArgument}` for vocab_size < 2.
inline std::vector<TokenId> make_prompt_tokens(const SimRequestSpec& r, std::int64_t index,
                                               std::int32_t vocab_size, std::uint64_t seed) {
  check_arg(vocab_size >= 2, ErrorCode::kInvalidArgument, "vocab_size", vocab_size,
            "must be >=", 2);
  std::vector<TokenId> tokens(static_cast<std::size_t>(r.prompt_tokens));
  const std::int64_t shared =
      r.prefix_group >= 0 ? std::min(r.prefix_tokens, r.prompt_tokens - 1) : 0;
  const auto vocab = static_cast<std::uint32_t>(vocab_size);
  Rng group(seed, 0x9f00'0000'0000ull + static_cast<std::uint64_t>(r.prefix_group + 1));
  Rng own(seed, 0x1000'0000'0000ull + static_cast<std::uint64_t>(index));
  for (std::int64_t i = 0; i < r.prompt_tokens; ++i) {
    Rng& src = i < shared ? group : own;
    tokens[static_cast<std::size_t>(i)] = static_cast<TokenId>(src.below(vocab));
  }
  return tokens;
}

}  // namespace inferkit
