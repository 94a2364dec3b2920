// SPDX-License-Identifier: Apache-2.0
// CPU implementation of merge_states: combines partial attention outputs computed over disjoint
// key sets (split-KV chunks, or a shared prefix and a per-request suffix in cascade attention)
// using their natural-log log-sum-exp. Also used internally by the split-KV decode path.
// Threads: stateless (merge_states splits rows over OpenMP threads inside); calls from several
// threads are safe when each writes its own v_out / lse_out, which no other call reads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <inferkit/attention/detail/softmax_state.hpp>
#include <inferkit/core/backend.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <limits>
#include <span>
#include <string>
#include <string_view>

namespace inferkit {
// In the ISA-named inline namespace (core/config.hpp), as every CPU kernel.
inline namespace INFERKIT_ISA_ABI {

/// Merges `num_states` partial attention states per row into one (CPU backend).
///
/// - `v`: [num_states][num_rows][head_dim] partial outputs, each normalized over its own keys
/// - `lse`: [num_states][num_rows] their log-sum-exp of the scaled logits, **natural log**
///   (-inf marks a state that attended no key; its `v` row is ignored, even if NaN)
/// - `v_out`: [num_rows][head_dim], `lse_out` (optional): [num_rows]
///
/// Result: v = sum_i exp(lse_i - M) v_i / sum_i exp(lse_i - M), lse = M + log(sum_i
/// exp(lse_i - M)) with M = max_i lse_i; a row with no contributing state gets 0 and -inf.
/// States are merged in index order, so results do not depend on the thread count.
/// O(num_states * num_rows * head_dim). Throws `Error{kInvalidArgument}` for num_states < 1,
/// head_dim < 1, or spans whose sizes disagree (nothing is written then).
inline void merge_states(cpu, std::span<const float> v, std::span<const float> lse,
                         std::int32_t num_states, std::int32_t head_dim, std::span<float> v_out,
                         std::span<float> lse_out = {}) {
  const std::int64_t rows = detail::check_merge_args(v, lse, num_states, head_dim, v_out, lse_out);
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static) if (rows * num_states * head_dim > (1 << 16))
#endif
  for (std::int64_t r = 0; r < rows; ++r) {
    detail::merge_row(num_states, v.data() + r * head_dim, rows * head_dim, lse.data() + r, rows,
                      head_dim, v_out.data() + r * head_dim,
                      lse_out.empty() ? nullptr : lse_out.data() + r);
  }
}

/// Merges two partial states per row (CPU backend): `v_a`, `v_b`, `v_out` are
/// [num_rows][head_dim], `lse_a`, `lse_b`, `lse_out` (optional) [num_rows], natural log. Same
/// rules as `merge_states`; `v_out` may alias `v_a` (but not `v_b`). Throws
/// `Error{kInvalidArgument}` for head_dim < 1 or mismatched span sizes.
inline void merge_state_pair(cpu, std::span<const float> v_a, std::span<const float> lse_a,
                             std::span<const float> v_b, std::span<const float> lse_b,
                             std::int32_t head_dim, std::span<float> v_out,
                             std::span<float> lse_out = {}) {
  check_arg(head_dim >= 1, ErrorCode::kInvalidArgument, "head_dim", head_dim, "must be >=", 1);
  const auto rows = static_cast<std::int64_t>(lse_a.size());
  detail::check_merge_size("lse_b", lse_b.size(), rows);
  detail::check_merge_size("v_a", v_a.size(), rows * head_dim);
  detail::check_merge_size("v_b", v_b.size(), rows * head_dim);
  detail::check_merge_size("v_out", v_out.size(), rows * head_dim);
  if (!lse_out.empty()) detail::check_merge_size("lse_out", lse_out.size(), rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* a = v_a.data() + r * head_dim;
    const float* b = v_b.data() + r * head_dim;
    const float la = lse_a[static_cast<std::size_t>(r)];
    const float lb = lse_b[static_cast<std::size_t>(r)];
    float* o = v_out.data() + r * head_dim;
    float* l_out = lse_out.empty() ? nullptr : lse_out.data() + r;
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    if (lb == kNegInf) {  // b empty: a as is (never read b, it may hold garbage)
      detail::merge_row(1, a, 0, &la, 0, head_dim, o, l_out);
    } else if (la == kNegInf) {
      detail::merge_row(1, b, 0, &lb, 0, head_dim, o, l_out);
    } else {
      const float m = std::max(la, lb);
      const float wa = std::exp(la - m);
      const float wb = std::exp(lb - m);
      const float inv = 1.0f / (wa + wb);
      for (std::int32_t d = 0; d < head_dim; ++d) o[d] = (wa * a[d] + wb * b[d]) * inv;
      if (l_out != nullptr) *l_out = m + std::log(wa + wb);
    }
  }
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit
