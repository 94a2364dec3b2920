// SPDX-License-Identifier: Apache-2.0
// The CUDA backend of merge_states: partial attention states over disjoint key sets (split-KV
// chunks, or a shared prefix and per-request suffixes in cascade attention) merged on the device
// with the natural-log LSE, by the same detail::merge_row the CPU backend runs.
// Threads: a launcher without host state, callable from any host thread; launches whose outputs
// overlap another launch's inputs or outputs must be ordered by the caller (stream or events).
#pragma once

#if !defined(__CUDACC__)
#  error "inferkit/attention/cuda/merge_states.cuh is CUDA code: compile this file with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstdint>
#include <inferkit/attention/cuda/detail/merge_kernel.cuh>
#include <inferkit/attention/detail/softmax_state.hpp>
#include <inferkit/attention/merge_states.hpp>
#include <inferkit/core/backend.hpp>
#include <inferkit/core/cuda/cuda_check.cuh>
#include <inferkit/core/error.hpp>
#include <span>

namespace inferkit {

/// Merges `num_states` partial states per row on the GPU; the spans hold device memory (see
/// merge_states(cpu, ...) for shapes and rules: v [num_states][num_rows][head_dim], lse
/// [num_states][num_rows] natural log, -inf = empty state, v_out [num_rows][head_dim], lse_out
/// optional [num_rows]). Asynchronous on `backend.stream`. Throws `Error{kInvalidArgument}` for
/// bad sizes (checked on the host from the span sizes), `Error{kCuda}` if the launch fails.
inline void merge_states(cuda backend, std::span<const float> v, std::span<const float> lse,
                         std::int32_t num_states, std::int32_t head_dim, std::span<float> v_out,
                         std::span<float> lse_out = {}) {
  const std::int64_t rows = detail::check_merge_args(v, lse, num_states, head_dim, v_out, lse_out);
  if (rows == 0) return;
  const auto blocks =
      static_cast<unsigned>((rows + detail::cuda::kMergeWarps - 1) / detail::cuda::kMergeWarps);
  detail::cuda::merge_states_kernel<<<blocks, 32 * detail::cuda::kMergeWarps, 0, backend.stream>>>(
      v.data(), lse.data(), num_states, rows, head_dim, v_out.data(),
      lse_out.empty() ? nullptr : lse_out.data());
  detail::check_launch("merge_states_kernel");
}

}  // namespace inferkit
