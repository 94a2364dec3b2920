// SPDX-License-Identifier: Apache-2.0
// Sampling from logits: temperature, top-k, top-p, min-p and greedy filters that turn a logits row
// into the probability row a sampler draws from, plus a categorical sampler driven by the Philox
// `Rng`. The verifiers (chain_verifier.hpp, tree_verifier.hpp) consume these same filtered rows, so
// speculative decoding reproduces exactly the distribution plain sampling would use.
// Threads: calls from several threads are safe when each has its own SamplingWorkspace, Rngs and
// output rows (sample_categorical keeps a thread_local scratch); sample_batch uses OpenMP inside.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/detail/row_math.hpp>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace inferkit {

/// The largest vocabulary the sampler accepts (tokens are int32; rows are walked in one pass).
inline constexpr std::size_t kMaxVocab = std::size_t{1} << 24;

/// How a logits row becomes a distribution. Applied in this order: temperature, top-k (on logits),
/// softmax, top-p (on the top-k distribution), min-p (relative to the largest probability), and a
/// final renormalization. `temperature == 0` means greedy: a one-hot row at the argmax.
struct SamplingParams {
  float temperature = 1.0f;  ///< >= 0; 0 selects greedy decoding
  std::int32_t top_k = 0;    ///< keep the k largest logits (ties at the k-th value kept); 0 = off
  float top_p = 1.0f;        ///< keep the smallest top set holding this mass, in (0, 1]; 1 = off
  float min_p = 0.0f;        ///< drop tokens below min_p * max probability, in [0, 1]; 0 = off

  /// True when the filters reduce to the argmax.
  [[nodiscard]] bool is_greedy() const noexcept { return temperature == 0.0f; }
};

/// Throws `Error{kInvalidArgument}` when a field of `params` is out of its range.
inline void validate(const SamplingParams& params) {
  check_arg(std::isfinite(params.temperature) && params.temperature >= 0.0f,
            ErrorCode::kInvalidArgument, "temperature", params.temperature,
            "must be finite and >=", 0);
  check_arg(params.top_k >= 0, ErrorCode::kInvalidArgument, "top_k", params.top_k, "must be >=", 0);
  check_arg(params.top_p > 0.0f && params.top_p <= 1.0f, ErrorCode::kInvalidArgument, "top_p",
            params.top_p, "must be in (0, limit] with limit =", 1);
  check_arg(params.min_p >= 0.0f && params.min_p <= 1.0f, ErrorCode::kInvalidArgument, "min_p",
            params.min_p, "must be in [0, limit] with limit =", 1);
}

/// Index of the largest value, the lowest index among ties; NaN entries are skipped. Returns 0
/// for an all-NaN or empty row. O(n).
inline std::int32_t argmax(std::span<const float> values) noexcept {
  // Two passes that vectorize (the maximum in lanes, then the first 16-value block holding it)
  // instead of one compare-and-branch per value: 4x faster on a 49,152-entry row (44 -> 11 us,
  // -O2 without -march), which a 32-sequence greedy decode step runs 32 times.
  const float best = detail::max_value(values);  // skips NaN; -inf when there is no number
  const float* x = values.data();
  const std::size_t n = values.size();
  constexpr std::size_t kBlock = 16;
  const std::size_t full = n / kBlock * kBlock;
  std::size_t i = 0;
  for (; i < full; i += kBlock) {
    int hit = 0;  // (| rather than ||: no branch per value)
    for (std::size_t l = 0; l < kBlock; ++l) hit |= static_cast<int>(x[i + l] == best);
    if (hit != 0) break;
  }
  for (; i < n; ++i) {
    if (x[i] == best) return static_cast<std::int32_t>(i);  // NaN never equals
  }
  return 0;  // empty or all NaN
}

/// Numerically safe softmax of `logits / temperature` into `probs` (same size, may alias).
/// NaN logits get probability 0; if any logit is +inf, the +inf entries share the mass equally;
/// a row with no finite or +inf entry (all -inf / NaN) becomes uniform, so no NaN ever leaves.
/// `temperature` must be > 0 (greedy rows are one-hot and handled by `logits_to_probs`).
/// Throws `Error{kInvalidArgument}` on a size mismatch or a bad temperature. O(n).
inline void softmax(std::span<const float> logits, std::span<float> probs,
                    float temperature = 1.0f) {
  check_arg(probs.size() == logits.size(), ErrorCode::kInvalidArgument, "probs.size()",
            probs.size(), "must equal logits.size() =", logits.size());
  check_arg(std::isfinite(temperature) && temperature > 0.0f, ErrorCode::kInvalidArgument,
            "temperature", temperature, "must be finite and >", 0);
  const std::size_t n = logits.size();
  const float max_logit = detail::max_value(logits);
  if (n == 0) {
    return;
  }
  const auto fill = [&](auto&& weight_of) {
    const double total = detail::weight_sum([&](std::size_t i) { return weight_of(i); }, n);
    const auto inv = static_cast<float>(1.0 / total);
    for (std::size_t i = 0; i < n; ++i) {
      probs[i] = weight_of(i) * inv;
    }
  };
  if (max_logit == std::numeric_limits<float>::infinity()) {
    const float inf = max_logit;
    fill([&](std::size_t i) { return logits[i] == inf ? 1.0f : 0.0f; });
  } else if (max_logit == -std::numeric_limits<float>::infinity()) {
    std::fill(probs.begin(), probs.end(), 1.0f / static_cast<float>(n));
  } else {
    const float inv_t = 1.0f / temperature;
    // exp((x - max) / T) <= 1 never overflows; -inf and NaN map to 0; the max maps to 1 even
    // when 1 / T overflows. Raw pointers let the loop vectorize.
    const float* in = logits.data();
    float* out = probs.data();
    for (std::size_t i = 0; i < n; ++i) {
      const float z = in[i] - max_logit;
      out[i] = detail::exp_nonpositive(z == 0.0f ? 0.0f : z * inv_t);
    }
    fill([&](std::size_t i) { return probs[i]; });
  }
}

/// Reusable scratch for `logits_to_probs` (one per thread), so hot loops do not allocate.
class SamplingWorkspace {
 public:
  std::vector<float> scratch;  ///< [vocab] copy for top-k selection, candidates for top-p
};

namespace detail {

/// Sum of every positive entry in `values` (double).
inline double positive_mass(std::span<const float> values) {
  return weight_sum([&](std::size_t i) { return values[i] > 0.0f ? values[i] : 0.0f; },
                    values.size());
}

/// The top-p cut: the largest value t such that the entries >= t hold at least `target` mass.
/// A radix select on the float bit patterns (monotonic for nonnegative floats): three histogram
/// passes over shrinking candidate sets instead of a full sort. Entries <= 0 are ignored.
inline float mass_threshold(std::span<const float> values, double target,
                            std::vector<float>& candidates) {
  struct Level {
    int shift;
    std::uint32_t mask;
  };
  // Level 1 buckets by exponent (a full pass, so it is cheap: 256 buckets, four interleaved
  // histograms to break store-to-load chains); levels 2 and 3 split the surviving mantissas.
  constexpr std::array<Level, 3> kLevels{{{23, 0xFFu}, {12, 0x7FFu}, {0, 0xFFFu}}};
  constexpr std::size_t kBuckets = 4096;
  std::array<double, kBuckets> mass{};
  std::uint32_t prefix_bits = 0;  // bits fixed by earlier levels
  std::uint32_t prefix_mask = 0;
  bool from_candidates = false;
  for (const Level& level : kLevels) {
    mass.fill(0.0);
    if (!from_candidates) {
      std::array<std::array<double, 256>, 4> part{};
      const float* v = values.data();
      const std::size_t n = values.size();
      std::size_t i = 0;
      for (; i + 4 <= n; i += 4) {
        for (std::size_t l = 0; l < 4; ++l) {
          if (v[i + l] > 0.0f) {
            part[l][std::bit_cast<std::uint32_t>(v[i + l]) >> 23] += static_cast<double>(v[i + l]);
          }
        }
      }
      for (; i < n; ++i) {
        if (v[i] > 0.0f) {
          part[0][std::bit_cast<std::uint32_t>(v[i]) >> 23] += static_cast<double>(v[i]);
        }
      }
      for (std::size_t b = 0; b < 256; ++b) {
        mass[b] = (part[0][b] + part[1][b]) + (part[2][b] + part[3][b]);
      }
    } else {
      for (float v : candidates) {
        const auto bits = std::bit_cast<std::uint32_t>(v);
        if ((bits & prefix_mask) == prefix_bits) {
          mass[(bits >> level.shift) & level.mask] += static_cast<double>(v);
        }
      }
    }
    // Walk buckets from the largest values down until the mass reaches the target.
    std::uint32_t chosen = 0;
    bool found = false;
    bool crossed = false;
    double above = 0.0;
    for (std::uint32_t b = level.mask + 1; b-- > 0;) {
      if (mass[b] > 0.0) {
        chosen = b;
        found = true;
        if (above + mass[b] >= target) {
          crossed = true;
          break;
        }
        above += mass[b];
      }
    }
    if (!found) {
      return 0.0f;
    }
    // Rounding can leave the target just out of reach: then keep everything (lowest buckets).
    target = crossed ? target - above : std::numeric_limits<double>::infinity();
    prefix_bits |= chosen << level.shift;
    prefix_mask |= level.mask << level.shift;
    if (level.shift == 0) {
      break;
    }
    // Keep only the candidates inside the chosen bucket for the next, finer level.
    std::size_t kept = 0;
    if (!from_candidates) {
      // Branch-free compaction: ~10% of a row matches, which a branch would mispredict.
      candidates.resize(values.size());
      float* out = candidates.data();
      for (float v : values) {
        out[kept] = v;
        kept +=
            (v > 0.0f && (std::bit_cast<std::uint32_t>(v) & prefix_mask) == prefix_bits) ? 1 : 0;
      }
      candidates.resize(kept);
      from_candidates = true;
    } else {
      for (float v : candidates) {
        if ((std::bit_cast<std::uint32_t>(v) & prefix_mask) == prefix_bits) {
          candidates[kept++] = v;
        }
      }
      candidates.resize(kept);
    }
  }
  return std::bit_cast<float>(prefix_bits);
}

}  // namespace detail

/// Turns one logits row into the filtered, normalized distribution the sampler draws from
/// (`probs[i] == 0` for every filtered-out token). Greedy params give a one-hot row at
/// `argmax(logits)`. `probs` must have `logits.size()` entries and must not alias `logits`.
/// Throws `Error` on bad params or sizes (nothing is written then). O(vocab) expected: top-k uses
/// selection, top-p a radix select on probability mass, never a full sort.
inline void logits_to_probs(std::span<const float> logits, const SamplingParams& params,
                            std::span<float> probs, SamplingWorkspace& workspace) {
  validate(params);
  check_arg(!logits.empty() && logits.size() <= kMaxVocab, ErrorCode::kOutOfRange, "logits.size()",
            logits.size(), "must be in [1, kMaxVocab] with kMaxVocab =", kMaxVocab);
  check_arg(probs.size() == logits.size(), ErrorCode::kInvalidArgument, "probs.size()",
            probs.size(), "must equal logits.size() =", logits.size());
  const std::size_t n = logits.size();
  if (params.is_greedy()) {
    std::fill(probs.begin(), probs.end(), 0.0f);
    probs[static_cast<std::size_t>(argmax(logits))] = 1.0f;
    return;
  }
  softmax(logits, probs, params.temperature);
  bool filtered = false;
  if (params.top_k > 0 && static_cast<std::size_t>(params.top_k) < n) {
    // Select on the logits, not on the probabilities: float softmax maps logits closer than about
    // 3e-8 * temperature to one probability, which would tie tokens the logits tell apart.
    // Dividing by the temperature keeps the order, so the raw logits rank the same. NaN ranks
    // below every number (its probability is 0 anyway; an all-NaN row stays uniform).
    const auto rank = [](float logit) {
      return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : logit;
    };
    auto& scratch = workspace.scratch;
    scratch.resize(n);
    std::transform(logits.begin(), logits.end(), scratch.begin(), rank);
    const auto kth = scratch.begin() + (params.top_k - 1);
    std::nth_element(scratch.begin(), kth, scratch.end(), std::greater<>());
    const float cut = *kth;
    for (std::size_t i = 0; i < n; ++i) {
      probs[i] = rank(logits[i]) >= cut ? probs[i] : 0.0f;
    }
    filtered = true;
  }
  if (params.top_p < 1.0f) {
    const double total = detail::positive_mass(probs);
    const float cut =
        detail::mass_threshold(probs, static_cast<double>(params.top_p) * total, workspace.scratch);
    for (float& p : probs) {
      p = p >= cut ? p : 0.0f;
    }
    filtered = true;
  }
  if (params.min_p > 0.0f) {
    const float cut = params.min_p * probs[static_cast<std::size_t>(argmax(probs))];
    for (float& p : probs) {
      p = p >= cut ? p : 0.0f;
    }
    filtered = true;
  }
  if (filtered) {
    const auto inv = static_cast<float>(1.0 / detail::positive_mass(probs));
    for (float& p : probs) {
      p *= inv;
    }
  }
}

/// Draws index i with probability probs[i] / sum(probs) using the uniform `u` in [0, 1)
/// (inverse CDF; probs need not be normalized). A token of probability 0 is never returned.
/// Every entry must be a finite weight >= 0: a NaN, negative or infinite entry (or a sum that
/// overflows float) throws `Error{kInvalidArgument}` naming the first such entry, as does a row
/// with no positive entry; an empty row or one longer than kMaxVocab throws `Error{kOutOfRange}`.
/// O(vocab).
inline std::int32_t sample_categorical(std::span<const float> probs, double u) {
  check_arg(!probs.empty() && probs.size() <= kMaxVocab, ErrorCode::kOutOfRange, "probs.size()",
            probs.size(), "must be in [1, kMaxVocab] with kMaxVocab =", kMaxVocab);
  // A weight that is not >= 0 (NaN included) becomes NaN, so it poisons the sum the walk makes
  // anyway and costs no extra pass; +inf makes the sum infinite.
  const std::int64_t token = detail::sample_weights(
      [&](std::size_t i) {
        return probs[i] >= 0.0f ? probs[i] : std::numeric_limits<float>::quiet_NaN();
      },
      probs.size(), u);
  if (token == detail::kNonFiniteWeights) {
    const auto bad = std::find_if(probs.begin(), probs.end(),
                                  [](float p) { return !(p >= 0.0f) || std::isinf(p); });
    if (bad == probs.end()) {
      detail::throw_error(ErrorCode::kInvalidArgument,
                          "sum(probs) overflows float: weights must sum to a finite value");
    }
    check_arg(false, ErrorCode::kInvalidArgument,
              detail::concat({"probs[", std::to_string(bad - probs.begin()), "]"}), *bad,
              "must be finite and >=", 0);
  }
  check_arg(token >= 0, ErrorCode::kInvalidArgument, "sum(probs)", 0, "must be >", 0);
  return static_cast<std::int32_t>(token);
}

/// Draws one token from `probs` with the next uniform of `rng`. See `sample_categorical`.
inline std::int32_t sample_categorical(std::span<const float> probs, Rng& rng) {
  return sample_categorical(probs, rng.uniform_double());
}

/// Samples one token per row of `logits` [rows][vocab]. Row r uses `params[r]` (or `params[0]`
/// when one set is given for all rows) and `rngs[r]`, so the tokens depend only on the seeds and
/// never on the thread count. If `probs` is non-empty ([rows][vocab]) the filtered rows are kept
/// there, for a verifier to reuse. Throws `Error` on mismatched sizes or bad params (nothing is
/// written then). O(rows * vocab), rows in parallel under OpenMP.
inline void sample_batch(std::span<const float> logits, std::size_t vocab,
                         std::span<const SamplingParams> params, std::span<Rng> rngs,
                         std::span<std::int32_t> tokens, std::span<float> probs = {}) {
  check_arg(vocab >= 1 && vocab <= kMaxVocab, ErrorCode::kOutOfRange, "vocab", vocab,
            "must be in [1, kMaxVocab] with kMaxVocab =", kMaxVocab);
  check_arg(logits.size() % vocab == 0, ErrorCode::kInvalidArgument, "logits.size()", logits.size(),
            "must be a multiple of vocab =", vocab);
  const std::size_t rows = logits.size() / vocab;
  check_arg(params.size() == 1 || params.size() == rows, ErrorCode::kInvalidArgument,
            "params.size()", params.size(), "must be 1 or rows =", rows);
  check_arg(rngs.size() == rows, ErrorCode::kInvalidArgument, "rngs.size()", rngs.size(),
            "must equal rows =", rows);
  check_arg(tokens.size() == rows, ErrorCode::kInvalidArgument, "tokens.size()", tokens.size(),
            "must equal rows =", rows);
  check_arg(probs.empty() || probs.size() == logits.size(), ErrorCode::kInvalidArgument,
            "probs.size()", probs.size(), "must be 0 or logits.size() =", logits.size());
  for (const SamplingParams& p : params) {
    validate(p);
  }
  const auto num_rows = static_cast<std::int64_t>(rows);
  [[maybe_unused]] const bool parallel = rows > 1 && logits.size() >= (1u << 16);
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel if (parallel)
#endif
  {
    SamplingWorkspace workspace;
    std::vector<float> own_row(probs.empty() ? vocab : 0);
#if INFERKIT_HAS_OPENMP
#  pragma omp for schedule(dynamic)
#endif
    for (std::int64_t r = 0; r < num_rows; ++r) {
      const auto row = static_cast<std::size_t>(r);
      const std::span<float> out =
          probs.empty() ? std::span<float>(own_row) : probs.subspan(row * vocab, vocab);
      logits_to_probs(logits.subspan(row * vocab, vocab), params[params.size() == 1 ? 0 : row], out,
                      workspace);
      tokens[row] = sample_categorical(out, rngs[row]);
    }
  }
}

}  // namespace inferkit
