// SPDX-License-Identifier: Apache-2.0
// The double-precision attention oracle: a plain, readable softmax(Q K^T) V over contiguous
// tensors, with GQA, causal/window masks, soft-capping, an optional custom mask and the
// log-sum-exp. Every CPU and CUDA kernel is tested against it on the same seeds; it is slow on
// purpose. Host-only C++ (no Eigen, no OpenMP), so .cu tests can include it too.
// Threads: pure functions of their arguments (serial); safe from any number of threads writing
// distinct outputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/core/error.hpp>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace inferkit {

/// Sizes of one attention call (all counts in tokens, heads, elements), and the layout of q:
/// packed unless the strides say otherwise (k, v and out are always packed).
struct AttentionShape {
  std::int32_t num_q_tokens = 0;   ///< n_q new query tokens
  std::int32_t num_kv_tokens = 0;  ///< n_kv keys (cached + new); n_kv >= n_q when causal
  std::int32_t num_qo_heads = 0;   ///< query (and output) heads
  std::int32_t num_kv_heads = 0;   ///< K/V heads; divides num_qo_heads (GQA group = qo / kv)
  std::int32_t head_dim = 0;       ///< elements per head
  /// Elements between consecutive query tokens of q; 0 means packed (num_qo_heads * head_dim),
  /// else at least (num_qo_heads - 1) * q_head_stride + head_dim (as `PagedDecodeArgs`).
  std::int64_t q_row_stride = 0;
  /// Elements between consecutive heads of one query token; 0 means head_dim, else >= head_dim.
  std::int64_t q_head_stride = 0;

  /// Elements between query tokens of q, 0 resolved.
  [[nodiscard]] std::int64_t resolved_q_row_stride() const noexcept {
    return q_row_stride != 0 ? q_row_stride : std::int64_t{num_qo_heads} * head_dim;
  }
  /// Elements between heads of a query token in q, 0 resolved.
  [[nodiscard]] std::int64_t resolved_q_head_stride() const noexcept {
    return q_head_stride != 0 ? q_head_stride : std::int64_t{head_dim};
  }
};

namespace detail {

inline void check_span_size(std::string_view name, std::size_t actual, std::int64_t expected) {
  check_arg(
      static_cast<std::int64_t>(actual) == expected, ErrorCode::kInvalidArgument,
      [&] {
        return detail::concat({name, ".size()"});
      },
      actual, "must equal", expected);
}

}  // namespace detail

/// Checks `shape` and `params` for an attention call. Throws `Error{kInvalidArgument}` naming the
/// field: negative token counts, heads < 1, `num_qo_heads % num_kv_heads != 0`,
/// `num_kv_tokens < num_q_tokens` when causal, or a bad `params` (see `validate`).
inline void validate(const AttentionShape& shape, const AttentionParams& params) {
  check_arg(shape.num_q_tokens >= 0, ErrorCode::kInvalidArgument, "shape.num_q_tokens",
            shape.num_q_tokens, "must be >=", 0);
  check_arg(shape.num_kv_tokens >= 0, ErrorCode::kInvalidArgument, "shape.num_kv_tokens",
            shape.num_kv_tokens, "must be >=", 0);
  check_arg(shape.num_qo_heads >= 1, ErrorCode::kInvalidArgument, "shape.num_qo_heads",
            shape.num_qo_heads, "must be >=", 1);
  check_arg(shape.num_kv_heads >= 1, ErrorCode::kInvalidArgument, "shape.num_kv_heads",
            shape.num_kv_heads, "must be >=", 1);
  check_arg(shape.num_qo_heads % shape.num_kv_heads == 0, ErrorCode::kInvalidArgument,
            "shape.num_qo_heads", shape.num_qo_heads,
            "must be a multiple of num_kv_heads =", shape.num_kv_heads);
  validate(params, shape.head_dim);
  check_arg(!params.causal || shape.num_kv_tokens >= shape.num_q_tokens,
            ErrorCode::kInvalidArgument, "shape.num_kv_tokens", shape.num_kv_tokens,
            "must be >= num_q_tokens when causal, num_q_tokens =", shape.num_q_tokens);
  const std::int64_t dim = shape.head_dim;
  check_arg(shape.q_head_stride == 0 || shape.q_head_stride >= dim, ErrorCode::kInvalidArgument,
            "shape.q_head_stride", shape.q_head_stride, "must be 0 (packed) or >= head_dim =", dim);
  const std::int64_t head = shape.resolved_q_head_stride();
  const std::int64_t gaps = std::int64_t{shape.num_qo_heads} - 1;
  const std::int64_t extent =
      gaps > 0 && head > (std::numeric_limits<std::int64_t>::max() - dim) / gaps
          ? std::numeric_limits<std::int64_t>::max()
          : gaps * head + dim;
  check_arg(shape.q_row_stride == 0 || shape.q_row_stride >= extent, ErrorCode::kInvalidArgument,
            "shape.q_row_stride", shape.q_row_stride,
            "must be 0 (packed) or >= (num_qo_heads - 1) * q_head_stride + head_dim =", extent);
}

/// Reference attention in double precision (the oracle kernels are tested against).
///
/// - `q`: [num_q_tokens][num_qo_heads][head_dim], or strided as `shape` says: element d of
///   head h of token i at q[i * q_row_stride + h * q_head_stride + d]; a strided q must hold
///   at least (num_q_tokens - 1) * q_row_stride + its last row's extent elements
/// - `k`, `v`: [num_kv_tokens][num_kv_heads][head_dim]; query head `h` reads KV head
///   `h / (num_qo_heads / num_kv_heads)`
/// - `out`: [num_q_tokens][num_qo_heads][head_dim], written
/// - `lse` (optional, may be empty): [num_q_tokens][num_qo_heads], natural-log log-sum-exp of
///   the scaled, capped logits of the visible keys
/// - `custom_mask` (optional, may be empty): [num_q_tokens][num_kv_tokens], nonzero = may attend,
///   ANDed with the causal and window rules of `params` (see `AttentionParams`).
///
/// A query row that sees no key gets out = 0 and lse = -inf. Accumulates in double with the
/// row maximum subtracted before exponentiation. O(n_q * n_kv * num_qo_heads * head_dim) time,
/// O(n_kv) scratch. Throws `Error{kInvalidArgument}` for a bad shape or params (see
/// `validate(shape, params)`: bad q strides included) or a span of the wrong size (message names
/// the span, the expected and the actual size); nothing is written then.
template <class T>
void reference_attention(std::span<const T> q, std::span<const T> k, std::span<const T> v,
                         const AttentionShape& shape, const AttentionParams& params,
                         std::span<double> out, std::span<double> lse = {},
                         std::span<const std::uint8_t> custom_mask = {}) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "reference_attention takes float or double inputs; convert other dtypes first");
  validate(shape, params);
  const std::int64_t n_q = shape.num_q_tokens;
  const std::int64_t n_kv = shape.num_kv_tokens;
  const std::int64_t qo_heads = shape.num_qo_heads;
  const std::int64_t kv_heads = shape.num_kv_heads;
  const std::int64_t dim = shape.head_dim;
  const std::int64_t q_row_stride = shape.resolved_q_row_stride();
  const std::int64_t q_head_stride = shape.resolved_q_head_stride();
  if (shape.q_row_stride == 0 && shape.q_head_stride == 0) {
    detail::check_span_size("q", q.size(), n_q * qo_heads * dim);
  } else {
    // A strided q is a window into a larger buffer: it must reach the last element read.
    const std::int64_t needed =
        n_q > 0 ? (n_q - 1) * q_row_stride + (qo_heads - 1) * q_head_stride + dim : 0;
    check_arg(static_cast<std::int64_t>(q.size()) >= needed, ErrorCode::kInvalidArgument,
              "q.size()", q.size(), "must be >= the strided extent =", needed);
  }
  detail::check_span_size("k", k.size(), n_kv * kv_heads * dim);
  detail::check_span_size("v", v.size(), n_kv * kv_heads * dim);
  detail::check_span_size("out", out.size(), n_q * qo_heads * dim);
  if (!lse.empty()) detail::check_span_size("lse", lse.size(), n_q * qo_heads);
  if (!custom_mask.empty()) detail::check_span_size("custom_mask", custom_mask.size(), n_q * n_kv);

  // The mathematical scale, in double (kernels use the float `resolved_scale`; they agree to
  // float rounding).
  const double scale = params.sm_scale > 0.0f ? static_cast<double>(params.sm_scale)
                                              : 1.0 / std::sqrt(static_cast<double>(dim));
  const auto cap = static_cast<double>(params.logit_soft_cap);
  const std::int64_t group = qo_heads / kv_heads;
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };

  std::vector<double> logits(at(n_kv));
  std::vector<char> seen(at(n_kv));
  for (std::int64_t i = 0; i < n_q; ++i) {
    const std::int64_t pos = query_position(i, n_q, n_kv);
    for (std::int64_t h = 0; h < qo_heads; ++h) {
      const std::int64_t kvh = h / group;
      const T* q_row = q.data() + i * q_row_stride + h * q_head_stride;
      double* o_row = out.data() + (i * qo_heads + h) * dim;
      double max_logit = -std::numeric_limits<double>::infinity();
      bool any = false;
      for (std::int64_t j = 0; j < n_kv; ++j) {
        seen[at(j)] =
            params.visible(pos, j) && (custom_mask.empty() || custom_mask[at(i * n_kv + j)] != 0);
        if (!seen[at(j)]) continue;
        const T* k_row = k.data() + (j * kv_heads + kvh) * dim;
        double dot = 0.0;
        for (std::int64_t d = 0; d < dim; ++d) {
          dot += static_cast<double>(q_row[d]) * static_cast<double>(k_row[d]);
        }
        double s = dot * scale;
        if (cap > 0.0) s = cap * std::tanh(s / cap);
        logits[at(j)] = s;
        max_logit = any ? std::max(max_logit, s) : s;
        any = true;
      }
      for (std::int64_t d = 0; d < dim; ++d) o_row[d] = 0.0;
      if (!any) {
        if (!lse.empty()) lse[at(i * qo_heads + h)] = -std::numeric_limits<double>::infinity();
        continue;
      }
      double sum = 0.0;
      for (std::int64_t j = 0; j < n_kv; ++j) {
        if (!seen[at(j)]) continue;
        const double p = std::exp(logits[at(j)] - max_logit);
        sum += p;
        const T* v_row = v.data() + (j * kv_heads + kvh) * dim;
        for (std::int64_t d = 0; d < dim; ++d) o_row[d] += p * static_cast<double>(v_row[d]);
      }
      for (std::int64_t d = 0; d < dim; ++d) o_row[d] /= sum;
      if (!lse.empty()) lse[at(i * qo_heads + h)] = max_logit + std::log(sum);
    }
  }
}

}  // namespace inferkit
