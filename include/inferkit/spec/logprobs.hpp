// SPDX-License-Identifier: Apache-2.0
// Log-probabilities of a logits row, as an OpenAI-compatible server reports them: the chosen
// token's log-probability under the model's distribution (the raw logits' log-softmax, before
// temperature and filters, as vLLM and llama-server report it) and the N most likely tokens.
// Computed after sampling, for the requests that ask: O(vocab) per token, no sort.
// Threads: pure functions of their arguments; safe from any number of threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/core/token_id.hpp>
#include <limits>
#include <span>
#include <vector>

namespace inferkit {

/// A token and its log-probability (natural log).
struct TokenLogprob {
  TokenId token = 0;  ///< the token
  float logprob = 0;  ///< log p(token); -inf for a token of probability 0 (a NaN or -inf logit)
};

/// What a request that asks for log-probabilities receives with each output token.
struct TokenLogprobs {
  float logprob = 0;              ///< the chosen token's log-probability
  std::vector<TokenLogprob> top;  ///< the most likely tokens, most likely first (ties: lower id)
};

/// The most `top_logprobs` can ask for (OpenAI's limit for chat completions).
inline constexpr std::int32_t kMaxTopLogprobs = 20;

/// Log-probabilities of row `logits` [vocab]: `chosen`'s, and the `top_n` most likely tokens
/// (fewer when the row is shorter). NaN logits count as -inf. Sums in double, so the result is
/// within float rounding of an exact log-softmax. Throws `Error{kInvalidArgument}` for an empty
/// row, `chosen` outside it, or `top_n` outside [0, kMaxTopLogprobs]. O(vocab).
inline TokenLogprobs token_logprobs(std::span<const float> logits, TokenId chosen,
                                    std::int32_t top_n) {
  check_arg(!logits.empty(), ErrorCode::kInvalidArgument, "logits.size()", logits.size(),
            "must be >=", 1);
  check_arg(chosen >= 0 && static_cast<std::size_t>(chosen) < logits.size(),
            ErrorCode::kInvalidArgument, "chosen", chosen,
            "must be in [0, vocab) with vocab =", logits.size());
  check_arg(top_n >= 0 && top_n <= kMaxTopLogprobs, ErrorCode::kInvalidArgument, "top_n", top_n,
            "must be in [0, kMaxTopLogprobs] with kMaxTopLogprobs =", kMaxTopLogprobs);
  const auto value = [](float x) {
    return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x;
  };
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float x : logits) max_logit = std::max(max_logit, value(x));
  double sum = 0.0;
  if (max_logit == std::numeric_limits<float>::infinity()) {
    // +inf entries share the mass (as softmax does): each has log(1 / count), the rest -inf.
    for (float x : logits) sum += value(x) == max_logit ? 1.0 : 0.0;
  } else if (max_logit > -std::numeric_limits<float>::infinity()) {
    for (float x : logits) sum += std::exp(static_cast<double>(value(x)) - max_logit);
  }
  const auto logprob_of = [&](float x) -> float {
    const float v = value(x);
    if (max_logit == -std::numeric_limits<float>::infinity()) {  // no finite entry: uniform
      return static_cast<float>(-std::log(static_cast<double>(logits.size())));
    }
    if (max_logit == std::numeric_limits<float>::infinity()) {
      return v == max_logit ? static_cast<float>(-std::log(sum))
                            : -std::numeric_limits<float>::infinity();
    }
    return static_cast<float>(static_cast<double>(v) - max_logit - std::log(sum));
  };
  TokenLogprobs out;
  out.logprob = logprob_of(logits[static_cast<std::size_t>(chosen)]);
  const auto n = std::min(static_cast<std::size_t>(top_n), logits.size());
  if (n == 0) return out;
  // The n best by (value desc, id asc), kept sorted in a small buffer: n <= 20, one pass.
  const auto better = [&](std::size_t a, std::size_t b) {
    const float va = value(logits[a]);
    const float vb = value(logits[b]);
    return va > vb || (va == vb && a < b);
  };
  std::vector<std::size_t> best;
  best.reserve(n + 1);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (best.size() == n && !better(i, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
    if (best.size() > n) best.pop_back();
  }
  out.top.reserve(n);
  for (std::size_t i : best) {
    out.top.push_back({static_cast<TokenId>(i), logprob_of(logits[i])});
  }
  return out;
}

}  // namespace inferkit
