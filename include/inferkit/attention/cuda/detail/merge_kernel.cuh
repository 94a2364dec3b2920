// SPDX-License-Identifier: Apache-2.0
// Merge kernels on CUDA: the split-KV merge that follows decode/prefill (one CTA per split work
// item group, a warp per query row) and the row merge behind the public merge_states. Both run
// detail::merge_row from attention/detail/softmax_state.hpp, the function the CPU backend runs,
// with the 32 lanes of a warp sharing a row's elements.
#pragma once

#if !defined(__CUDACC__)
#  error "inferkit/attention/cuda/detail/merge_kernel.cuh is CUDA code: compile it with nvcc"
#endif

#include <cstdint>
#include <inferkit/attention/attention_plan.hpp>
#include <inferkit/attention/cuda/detail/device_ops.cuh>
#include <inferkit/attention/cuda/detail/kernel_args.cuh>
#include <inferkit/attention/detail/softmax_state.hpp>

namespace inferkit::detail::cuda {

inline constexpr int kMergeWarps = 4;

/// Grid: (plan.num_items, num_kv_heads); block: 32 * kMergeWarps. The CTA of chunk 0 of a split
/// (sequence, row block) merges its chunks' partial rows in chunk order (in place into chunk
/// 0's partial, then converted to `out`); every other CTA returns at once.
template <class KV, class QO>
__global__ void __launch_bounds__(32 * kMergeWarps, 1)
    merge_chunks_kernel(const __grid_constant__ AttentionKernelArgs<KV, QO> a,
                        const __grid_constant__ AttentionPlan plan) {
  const std::int32_t item = static_cast<std::int32_t>(blockIdx.x);
  const std::int32_t kv_head = static_cast<std::int32_t>(blockIdx.y);
  const WorkItem w = find_item(plan, item);
  const std::int32_t chunks = plan.chunks[w.seq];
  if (chunks == 1 || w.chunk != 0) return;
  const std::int32_t s = plan.seq_begin + w.seq;
  const std::int32_t row0 = w.row_block * plan.rows_per_block;
  const std::int32_t rows = min(plan.rows_per_block, a.q_count(s) * a.group - row0);
  const std::int32_t dim = a.kv.head_dim;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t state_rows = plan.rows_per_block;  // chunk c of this block: item + c
  for (std::int32_t r = static_cast<std::int32_t>(threadIdx.x / 32); r < rows; r += kMergeWarps) {
    const std::int64_t prow = (std::int64_t{kv_head} * plan.num_items + item) * state_rows + r;
    float* v = a.partial_out + prow * dim;
    float* lse =
        lane == 0 && a.lse != nullptr ? a.lse + a.lse_index(s, kv_head, row0 + r) : nullptr;
    merge_row(chunks, v, state_rows * dim, a.partial_lse + prow, state_rows, dim, v, lse, lane, 32);
    QO* out = a.out + a.row_offset(s, kv_head, row0 + r);
    // Each lane converts the elements merge_row gave it (d = lane, lane + 32, ...), so no
    // __syncwarp is needed between the merge and the store.
    for (std::int32_t d = lane; d < dim; d += 32) out[d] = from_f32<QO>(v[d]);
  }
}

/// Grid: ceil(num_rows / kMergeWarps); block: 32 * kMergeWarps; a warp per row (see
/// merge_states(cuda, ...)).
template <int kUnused = 0>
__global__ void __launch_bounds__(32 * kMergeWarps, 1)
    merge_states_kernel(const float* v, const float* lse, std::int32_t num_states,
                        std::int64_t num_rows, std::int32_t head_dim, float* v_out,
                        float* lse_out) {
  const std::int64_t r = std::int64_t{blockIdx.x} * kMergeWarps + threadIdx.x / 32;
  if (r >= num_rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  merge_row(num_states, v + r * head_dim, num_rows * head_dim, lse + r, num_rows, head_dim,
            v_out + r * head_dim, lane == 0 && lse_out != nullptr ? lse_out + r : nullptr, lane,
            32);
}

}  // namespace inferkit::detail::cuda
