// SPDX-License-Identifier: Apache-2.0
// The arguments every GPU attention kernel of one launch shares (decode, prefill and the merge
// of split-KV chunks), passed by value next to the AttentionPlan: device pointers, the
// query-row layout (uniform q_per_seq for decode, q_indptr for prefill) and the split buffers.
#pragma once

#if !defined(__CUDACC__)
#  error "inferkit/attention/cuda/detail/kernel_args.cuh is CUDA code: compile it with nvcc"
#endif

#include <cstdint>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/attention/attention_plan.hpp>
#include <inferkit/kv/paged_kv_view.hpp>

namespace inferkit::detail::cuda {

/// Device-side arguments of one attention launch. Query row r of sequence s is token
/// t = r / group, query head kv_head * group + r % group (GQA groups packed into rows).
template <class KV, class QO>
struct AttentionKernelArgs {
  const QO* q = nullptr;                   ///< [query tokens][num_qo_heads][head_dim], strided
  std::int64_t q_row_stride = 0;           ///< elements between query tokens of q (resolved)
  std::int64_t q_head_stride = 0;          ///< elements between heads of a token in q (resolved)
  QO* out = nullptr;                       ///< [query tokens][num_qo_heads][head_dim], packed
  float* lse = nullptr;                    ///< optional [query tokens][num_qo_heads]
  const std::int32_t* q_indptr = nullptr;  ///< prefill: [num_seqs + 1]; decode: nullptr
  std::int32_t q_per_seq = 1;              ///< decode: query tokens per sequence
  PagedKVView<const KV> kv;
  PageTableView pages;
  std::int32_t num_qo_heads = 0;
  std::int32_t group = 1;                     ///< num_qo_heads / kv.num_kv_heads
  const std::uint8_t* custom_mask = nullptr;  ///< prefill only (see PagedPrefillArgs)
  AttentionParams params;
  float sm_scale = 1.0f;         ///< params.resolved_scale(head_dim)
  float* partial_out = nullptr;  ///< [kv heads][items][rows_per_block][head_dim] split chunks
  float* partial_lse = nullptr;  ///< [kv heads][items][rows_per_block]

  /// First query token (row of q) of sequence s and its token count.
  [[nodiscard]] __device__ std::int64_t q_begin(std::int32_t s) const {
    return q_indptr != nullptr ? q_indptr[s] : std::int64_t{s} * q_per_seq;
  }
  [[nodiscard]] __device__ std::int32_t q_count(std::int32_t s) const {
    return q_indptr != nullptr ? q_indptr[s + 1] - q_indptr[s] : q_per_seq;
  }
  /// Element offset of query row `row` of sequence s (KV head `kv_head`) in out (packed).
  [[nodiscard]] __device__ std::int64_t row_offset(std::int32_t s, std::int32_t kv_head,
                                                   std::int32_t row) const {
    const std::int64_t token = q_begin(s) + row / group;
    const std::int32_t head = kv_head * group + row % group;
    return (token * num_qo_heads + head) * kv.head_dim;
  }
  /// Element offset of query row `row` of sequence s (KV head `kv_head`) in q (strided).
  [[nodiscard]] __device__ std::int64_t q_offset(std::int32_t s, std::int32_t kv_head,
                                                 std::int32_t row) const {
    const std::int64_t token = q_begin(s) + row / group;
    const std::int32_t head = kv_head * group + row % group;
    return token * q_row_stride + head * q_head_stride;
  }
  /// Index of row `row`'s LSE.
  [[nodiscard]] __device__ std::int64_t lse_index(std::int32_t s, std::int32_t kv_head,
                                                  std::int32_t row) const {
    return row_offset(s, kv_head, row) / kv.head_dim;
  }
};

/// What the CTA of one work item (`find_item`) attends: sequence, its block of query rows, and
/// the keys [lo, hi) of its chunk that those rows can see.
struct ItemRange {
  WorkItem item;
  std::int32_t seq = 0;   ///< sequence of the batch (plan.seq_begin + item.seq)
  std::int32_t n_q = 0;   ///< query tokens of the sequence
  std::int32_t row0 = 0;  ///< first row of the block (row r: token r / group)
  std::int32_t rows = 0;  ///< rows in the block
  std::int64_t kv_len = 0;
  std::int64_t pos0 = 0;  ///< position of query token 0: kv_len - n_q
  std::int64_t lo = 0;
  std::int64_t hi = 0;
};
template <class KV, class QO>
__device__ ItemRange resolve_item(const AttentionKernelArgs<KV, QO>& a, const AttentionPlan& plan,
                                  std::int32_t item) {
  ItemRange r;
  r.item = find_item(plan, item);
  r.seq = plan.seq_begin + r.item.seq;
  r.n_q = a.q_count(r.seq);
  r.row0 = r.item.row_block * plan.rows_per_block;
  r.rows = min(plan.rows_per_block, r.n_q * a.group - r.row0);
  r.kv_len = a.pages.seq_len(r.seq, a.kv.block_size);
  r.pos0 = r.kv_len - r.n_q;
  const KeyRange chunk = chunk_bounds(r.kv_len, plan.chunk_tokens[r.item.seq], r.item.chunk);
  const KeyRange seen = visible_keys(a.params, r.pos0 + r.row0 / a.group,
                                     r.pos0 + (r.row0 + r.rows - 1) / a.group, r.kv_len);
  r.lo = max(chunk.begin, seen.begin);
  r.hi = max(r.lo, min(chunk.end, seen.end));
  return r;
}

/// The first custom-mask byte of each sequence of a prefill launch (a kernel argument, as the
/// plan: sum over earlier sequences r of n_r * kv_len(r)).
struct MaskPlan {
  std::int64_t begin[kMaxPlanSeqs] = {};
};

}  // namespace inferkit::detail::cuda
