// SPDX-License-Identifier: Apache-2.0
// The arithmetic of attention that needs no GPU, shared by the CPU and CUDA backends and tested
// on the CPU against the double reference: the online-softmax state of one query row (running
// max and sum, base-2 domain, with the rescale factor for the accumulators), the merge of
// partial states by their natural-log LSE (split-KV, cascade), and the logit transform (scale,
// soft cap, base-2). Plain C++ with INFERKIT_HOST_DEVICE, so nvcc compiles it for device code.
#pragma once

#include <cmath>
#include <cstdint>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <limits>
#include <span>
#include <string>
#include <string_view>

namespace inferkit::detail {

/// log2(e) and ln(2) in float.
inline constexpr float kLog2OfE = 1.4426950408889634f;
inline constexpr float kLnOf2 = 0.6931471805599453f;

/// The logit of one (query, key) pair in the base-2 domain the kernels run their softmax in:
/// `s = dot * scale`, then the soft cap `cap * tanh(s / cap)` when `cap > 0`, then `* log2(e)`.
/// `dot_scale` is the softmax scale times any dequantization scale of K (fp8 block scales and
/// storage offsets are folded into it once per page, not applied per element).
INFERKIT_HOST_DEVICE inline float logit_log2(float dot, float dot_scale, float cap) noexcept {
  float s = dot * dot_scale;
  if (cap > 0.0f) s = cap * std::tanh(s / cap);
  return s * kLog2OfE;
}

/// The running state of one query row's online softmax, in the base-2 domain: `max` is the
/// largest logit seen (-inf before any), `sum` = sum_j 2^(s_j - max). The accumulator of
/// sum_j 2^(s_j - max) v_j lives with the caller (registers on the GPU); `rescale` says by
/// how much to multiply it when the max grows.
struct SoftmaxState {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;

  /// Raises the max to cover a group of logits whose largest is `group_max`, and returns the
  /// factor (<= 1) by which `sum` has been, and the caller's accumulator must be, multiplied.
  /// A group of -inf logits (all masked) changes nothing and returns 1.
  INFERKIT_HOST_DEVICE float rescale(float group_max) noexcept {
    const float new_max = group_max > max ? group_max : max;
    if (new_max == -std::numeric_limits<float>::infinity()) return 1.0f;
    const float alpha = std::exp2(max - new_max);  // max = -inf: exp2(-inf) = 0
    max = new_max;
    sum *= alpha;
    return alpha;
  }

  /// The weight 2^(s - max) of a logit after `rescale` (0 for a masked, -inf logit), added to
  /// `sum`.
  INFERKIT_HOST_DEVICE float weight(float s) noexcept {
    const float p = s == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp2(s - max);
    sum += p;
    return p;
  }

  /// Folds another state of the same row into this one (disjoint key sets, both in base 2).
  /// Returns {factor for this state's accumulator, factor for the other's}: the merged
  /// accumulator is `acc * first + other_acc * second`.
  struct Factors {
    float self;
    float other;
  };
  INFERKIT_HOST_DEVICE Factors merge(const SoftmaxState& other) noexcept {
    const float new_max = other.max > max ? other.max : max;
    if (new_max == -std::numeric_limits<float>::infinity()) return {1.0f, 0.0f};
    const float a = std::exp2(max - new_max);
    const float b = std::exp2(other.max - new_max);
    max = new_max;
    sum = sum * a + other.sum * b;
    return {a, b};
  }

  /// 1 / sum, the factor that normalizes the accumulator into the output (0 when no key was
  /// seen, so that the output is 0).
  [[nodiscard]] INFERKIT_HOST_DEVICE float inverse_sum() const noexcept {
    return sum > 0.0f ? 1.0f / sum : 0.0f;
  }

  /// The natural-log log-sum-exp of the row's logits (-inf when no key was seen).
  [[nodiscard]] INFERKIT_HOST_DEVICE float lse() const noexcept {
    if (!(sum > 0.0f)) return -std::numeric_limits<float>::infinity();
    return (max + std::log2(sum)) * kLnOf2;
  }
};

/// Merges the partial states i < num_states of one row: output `head_dim` floats at
/// `v + i * v_state_stride` with natural-log LSE `lse[i * lse_state_stride]`. States with LSE
/// -inf (nothing attended) get weight 0 and their values are never read; if every state is
/// empty the row is 0 with LSE -inf. `v_out` may alias the first state; `lse_out` may be null.
/// Only elements `d = first, first + step, ...` below `head_dim` are touched, so that `step`
/// GPU threads can share a row (the CPU passes 0 and 1); each writes `lse_out` alike.
INFERKIT_HOST_DEVICE INFERKIT_FORCEINLINE void merge_row(
    std::int32_t num_states, const float* v, std::int64_t v_state_stride, const float* lse,
    std::int64_t lse_state_stride, std::int32_t head_dim, float* v_out, float* lse_out,
    std::int32_t first = 0, std::int32_t step = 1) noexcept {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float max_lse = kNegInf;
  for (std::int32_t i = 0; i < num_states; ++i) {
    const float l = lse[i * lse_state_stride];
    if (l > max_lse || l != l) max_lse = l;  // l != l: a NaN propagates
  }
  if (max_lse == kNegInf) {
    for (std::int32_t d = first; d < head_dim; d += step) v_out[d] = 0.0f;
    if (lse_out != nullptr) *lse_out = kNegInf;
    return;
  }
  // First contributing state initializes the accumulator (lets v_out alias state 0).
  float total = 0.0f;
  bool initialized = false;
  for (std::int32_t i = 0; i < num_states; ++i) {
    const float l = lse[i * lse_state_stride];
    if (l == kNegInf) continue;
    const float w = std::exp(l - max_lse);
    const float* vi = v + i * v_state_stride;
    if (!initialized) {
      for (std::int32_t d = first; d < head_dim; d += step) v_out[d] = w * vi[d];
      initialized = true;
    } else {
      for (std::int32_t d = first; d < head_dim; d += step) v_out[d] += w * vi[d];
    }
    total += w;
  }
  const float inv = 1.0f / total;
  for (std::int32_t d = first; d < head_dim; d += step) v_out[d] *= inv;
  if (lse_out != nullptr) *lse_out = max_lse + std::log(total);
}

inline void check_merge_size(std::string_view name, std::size_t actual, std::int64_t expected) {
  check_arg(
      static_cast<std::int64_t>(actual) == expected, ErrorCode::kInvalidArgument,
      [&] {
        return detail::concat({name, ".size()"});
      },
      actual, "must equal", expected);
}

/// Checks the arguments of merge_states (any backend; sizes only) and returns the row count.
inline std::int64_t check_merge_args(std::span<const float> v, std::span<const float> lse,
                                     std::int32_t num_states, std::int32_t head_dim,
                                     std::span<float> v_out, std::span<float> lse_out) {
  check_arg(num_states >= 1, ErrorCode::kInvalidArgument, "num_states", num_states,
            "must be >=", 1);
  check_arg(head_dim >= 1, ErrorCode::kInvalidArgument, "head_dim", head_dim, "must be >=", 1);
  check_arg(lse.size() % static_cast<std::size_t>(num_states) == 0, ErrorCode::kInvalidArgument,
            "lse.size()", lse.size(), "must be a multiple of num_states =", num_states);
  const auto rows = static_cast<std::int64_t>(lse.size()) / num_states;
  check_merge_size("v", v.size(), std::int64_t{num_states} * rows * head_dim);
  check_merge_size("v_out", v_out.size(), rows * head_dim);
  if (!lse_out.empty()) check_merge_size("lse_out", lse_out.size(), rows);
  return rows;
}

}  // namespace inferkit::detail
