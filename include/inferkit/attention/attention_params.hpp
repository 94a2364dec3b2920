// SPDX-License-Identifier: Apache-2.0
// Attention parameters shared by every backend and by the double-precision reference: softmax
// scale, Gemma-2 style logit soft-capping, a left sliding window and causal masking. The engine
// builds one `AttentionParams` per layer and passes it, with the K/V views, to the attention call
// of each step. Plain C++ (no Eigen, no CUDA headers), so nvcc compiles it for device code too.
// Threads: value types and pure functions; safe from any number of threads.
#pragma once

#include <cmath>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>

namespace inferkit {

/// How the logits of one attention call are formed and masked.
///
/// Logit of query `q` and key `k` (Gemma-2 order: scale first, then cap):
/// `s = dot(q, k) * resolved_scale(head_dim)`; if `logit_soft_cap > 0`:
/// `s = logit_soft_cap * tanh(s / logit_soft_cap)`. The softmax runs over the visible keys.
///
/// Positions: with `n_q` new query tokens and `n_kv` keys (cached + new), query `i` sits at
/// position `p = n_kv - n_q + i` (see `query_position`) and key `j` at position `j`. Key `j` is
/// visible to query `i` when (causal ? j <= p : true) and (window_left < 0 or j >= p -
/// window_left), ANDed with a custom mask where one is given. A query that sees no key yields
/// out = 0 and lse = -inf.
struct AttentionParams {
  float sm_scale = 0.0f;          ///< softmax scale; <= 0 means 1 / sqrt(head_dim)
  float logit_soft_cap = 0.0f;    ///< > 0: s = cap * tanh(s / cap) after scaling; 0 = off
  std::int32_t window_left = -1;  ///< >= 0: keys in [p - window_left, p] only; -1 = unlimited
  bool causal = true;             ///< a query sees keys at positions <= its own

  /// The scale actually applied: `sm_scale` if > 0, else `1 / sqrt(head_dim)`.
  [[nodiscard]] INFERKIT_HOST_DEVICE float resolved_scale(int head_dim) const noexcept {
    return sm_scale > 0.0f ? sm_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }

  /// Whether the key at position `key_pos` is visible to the query at position `query_pos`
  /// under the causal and window rules (a custom mask, if any, is ANDed on top).
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr bool visible(std::int64_t query_pos,
                                                            std::int64_t key_pos) const noexcept {
    if (causal && key_pos > query_pos) return false;
    if (window_left >= 0 && key_pos < query_pos - window_left) return false;
    return true;
  }
};

/// Position of query token `i` of `num_q_tokens` new tokens when `num_kv_tokens` keys (cached +
/// new) are attended: the new tokens are the last ones, `num_kv_tokens - num_q_tokens + i`.
INFERKIT_HOST_DEVICE constexpr std::int64_t query_position(std::int64_t i,
                                                           std::int64_t num_q_tokens,
                                                           std::int64_t num_kv_tokens) noexcept {
  return num_kv_tokens - num_q_tokens + i;
}

/// Checks `params` for a head size of `head_dim` elements.
/// Throws `Error{kInvalidArgument}` naming the field: `head_dim` < 1, `sm_scale` not finite,
/// `logit_soft_cap` negative or not finite, `window_left` < -1.
inline void validate(const AttentionParams& params, int head_dim) {
  check_arg(head_dim >= 1, ErrorCode::kInvalidArgument, "head_dim", head_dim, "must be >=", 1);
  check_arg(std::isfinite(params.sm_scale), ErrorCode::kInvalidArgument, "params.sm_scale",
            params.sm_scale, "must be", "finite");
  check_arg(std::isfinite(params.logit_soft_cap) && params.logit_soft_cap >= 0.0f,
            ErrorCode::kInvalidArgument, "params.logit_soft_cap", params.logit_soft_cap,
            "must be finite and >=", 0.0f);
  check_arg(params.window_left >= -1, ErrorCode::kInvalidArgument, "params.window_left",
            params.window_left, "must be >=", -1);
}

}  // namespace inferkit
