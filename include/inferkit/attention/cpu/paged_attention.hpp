// SPDX-License-Identifier: Apache-2.0
// CPU backend of paged_decode and paged_prefill: cuts the batch into work items of (sequence,
// KV head, block of query tokens, fixed-size KV chunk), runs them on OpenMP threads through the
// tile kernel of cpu/detail/attention_tile.hpp, then merges split-KV chunks in a fixed order.
// Host only. The tile kernel exists once per instruction-set path (core/cpu_isa.hpp); this driver,
// OpenMP included, is plain C++ templated on the path, which it calls once per work item.
// Threads: each call runs its work items on OpenMP threads and keeps no state; calls from several
// threads are safe when each writes its own out / lse, which no other call reads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <inferkit/attention/attention.hpp>
#include <inferkit/attention/cpu/detail/attention_tile.hpp>
#include <inferkit/attention/cpu/detail/simd_common.hpp>
#include <inferkit/attention/cpu/merge_states.hpp>
#include <inferkit/core/backend.hpp>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/detail/dispatch_value.hpp>
#include <memory>
#include <type_traits>
#include <vector>

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// Target number of query rows (tokens x group heads) per work item in prefill.
inline constexpr std::int32_t kPrefillRowsPerItem = 64;
/// Software prefetch distance along the page table, in tokens: one 16-token tile, prefetched
/// while the tile before it computes. Measured for decode on the benchmark machine: 1 tile ahead
/// 0-4% above 2 tiles, 3 and 4 no better, 8 worse.
inline constexpr std::int32_t kPrefetchTokensAhead = 16;

/// Everything the CPU driver needs, independent of decode vs prefill.
template <class KV>
struct PagedAttentionProblem {
  const float* q = nullptr;
  std::int64_t q_row_stride = 0;   ///< elements between query tokens; 0: num_qo_heads * head_dim
  std::int64_t q_head_stride = 0;  ///< elements between heads of a token; 0: head_dim
  const std::int32_t* q_indptr = nullptr;  ///< nullptr: uniform q_per_seq
  std::int32_t q_per_seq = 1;
  PagedKVView<const KV> kv;
  PageTableView pages;
  std::int32_t num_qo_heads = 0;
  std::int32_t head_dim = 0;
  const std::uint8_t* custom_mask = nullptr;
  float* out = nullptr;
  float* lse = nullptr;
  AttentionParams params;
  std::int32_t kv_split_tokens = 0;
  std::int32_t prefetch_tokens_ahead = kPrefetchTokensAhead;

  [[nodiscard]] std::int64_t q_begin(std::int32_t s) const noexcept {
    return q_indptr != nullptr ? q_indptr[s] : std::int64_t{s} * q_per_seq;
  }
  [[nodiscard]] std::int32_t q_count(std::int32_t s) const noexcept {
    return q_indptr != nullptr ? q_indptr[s + 1] - q_indptr[s] : q_per_seq;
  }
};

struct AttentionWorkItem {
  std::int32_t seq = 0;
  std::int32_t kv_head = 0;
  std::int64_t q_token = 0;  ///< first query token (global row of q)
  std::int32_t q_tokens = 0;
  std::int64_t first_position = 0;
  std::int64_t kv_begin = 0;
  std::int64_t kv_end = 0;
  std::int64_t mask_offset = 0;  ///< custom mask row of the first query token
  std::int64_t partial = -1;     ///< offset in rows of the partial buffers, -1: write out
};

struct AttentionMergeJob {
  std::int32_t kv_head = 0;
  std::int64_t q_token = 0;
  std::int32_t q_tokens = 0;
  std::int64_t first_partial = 0;  ///< row offset of split 0; split i at + i * rows
  std::int32_t num_splits = 0;
};

template <class KV>
void plan_work(const PagedAttentionProblem<KV>& pb, std::vector<AttentionWorkItem>& items,
               std::vector<AttentionMergeJob>& merges, std::int64_t& partial_rows) {
  const std::int32_t kv_heads = pb.kv.num_kv_heads;
  const std::int32_t group = pb.num_qo_heads / kv_heads;
  const std::int32_t q_tile = std::max<std::int32_t>(1, kPrefillRowsPerItem / group);
  const std::int64_t split =
      pb.kv_split_tokens > 0
          ? (std::int64_t{pb.kv_split_tokens} + kTileTokens - 1) / kTileTokens * kTileTokens
          : 0;
  partial_rows = 0;
  std::int64_t mask_offset = 0;
  for (std::int32_t s = 0; s < pb.pages.num_seqs; ++s) {
    const std::int64_t kv_len = pb.pages.seq_len(s, pb.kv.block_size);
    const std::int32_t n_q = pb.q_count(s);
    for (std::int32_t t0 = 0; t0 < n_q; t0 += q_tile) {
      const std::int32_t nt = std::min(q_tile, n_q - t0);
      const std::int64_t p0 = kv_len - n_q + t0;
      const std::int64_t p1 = p0 + nt - 1;
      std::int64_t hi = pb.params.causal ? std::min(kv_len, p1 + 1) : kv_len;
      std::int64_t lo =
          pb.params.window_left >= 0 ? std::max<std::int64_t>(0, p0 - pb.params.window_left) : 0;
      hi = std::max<std::int64_t>(hi, 0);
      lo = std::min(lo, hi);
      // Chunk boundaries at multiples of `split` (sequence-local: batch and thread invariant).
      std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
      if (split > 0 && hi - lo > split) {
        for (std::int64_t c = lo; c < hi;) {
          const std::int64_t e = std::min(hi, (c / split + 1) * split);
          chunks.emplace_back(c, e);
          c = e;
        }
      } else {
        chunks.emplace_back(lo, hi);
      }
      for (std::int32_t h = 0; h < kv_heads; ++h) {
        AttentionWorkItem item;
        item.seq = s;
        item.kv_head = h;
        item.q_token = pb.q_begin(s) + t0;
        item.q_tokens = nt;
        item.first_position = p0;
        item.mask_offset = mask_offset + std::int64_t{t0} * kv_len;
        if (chunks.size() == 1) {
          item.kv_begin = chunks[0].first;
          item.kv_end = chunks[0].second;
          items.push_back(item);
          continue;
        }
        const std::int64_t rows = std::int64_t{nt} * group;
        merges.push_back(
            {h, item.q_token, nt, partial_rows, static_cast<std::int32_t>(chunks.size())});
        for (const auto& [b, e] : chunks) {
          item.kv_begin = b;
          item.kv_end = e;
          item.partial = partial_rows;
          partial_rows += rows;
          items.push_back(item);
        }
      }
    }
    mask_offset += std::int64_t{n_q} * kv_len;
  }
}

/// Runs every work item of `pb` through the tile kernel of the path `Kernels` (an IsaKernels of
/// attention_tile.hpp) for head dim kHeadDim (0: any), then merges split-KV chunks.
template <class Kernels, int kHeadDim, class KV>
void run_paged_attention(const PagedAttentionProblem<KV>& pb) {
  std::vector<AttentionWorkItem> items;
  std::vector<AttentionMergeJob> merges;
  std::int64_t partial_rows = 0;
  plan_work(pb, items, merges, partial_rows);
  const std::int32_t dim = pb.head_dim;
  const std::int32_t group = pb.num_qo_heads / pb.kv.num_kv_heads;
  const std::int32_t padded = padded_head_dim(dim);
  std::int32_t max_rows = 1;
  for (const AttentionWorkItem& it : items) max_rows = std::max(max_rows, it.q_tokens * group);
  // Every partial row is written by its work item before the merge reads it.
  const std::unique_ptr<float[]> partial_out(
      new float[static_cast<std::size_t>(partial_rows * dim)]);
  const std::unique_ptr<float[]> partial_lse(new float[static_cast<std::size_t>(partial_rows)]);
  // q may be strided (a slice of a fused QKV row); out and lse are packed.
  const std::int64_t q_head_stride = pb.q_head_stride != 0 ? pb.q_head_stride : dim;
  const std::int64_t q_token_stride =
      pb.q_row_stride != 0 ? pb.q_row_stride : std::int64_t{pb.num_qo_heads} * dim;
  const std::int64_t out_token_stride = std::int64_t{pb.num_qo_heads} * dim;
  const auto num_items = static_cast<std::int64_t>(items.size());

#if INFERKIT_HAS_OPENMP
#  pragma omp parallel if (num_items > 1)
#endif
  {
    AttentionScratch scratch;
    scratch.reserve(max_rows, padded);
#if INFERKIT_HAS_OPENMP
#  pragma omp for schedule(dynamic, 1)
#endif
    for (std::int64_t i = 0; i < num_items; ++i) {
      const AttentionWorkItem& it = items[static_cast<std::size_t>(i)];
      const auto src =
          make_kv_head_source(pb.kv, pb.pages.indices + pb.pages.page_begin(it.seq), it.kv_head);

      QueryRowBlock rows;
      rows.num_tokens = it.q_tokens;
      rows.group = group;
      rows.q =
          pb.q + it.q_token * q_token_stride + std::int64_t{it.kv_head} * group * q_head_stride;
      rows.q_token_stride = q_token_stride;
      rows.q_head_stride = q_head_stride;
      rows.first_position = it.first_position;
      if (pb.custom_mask != nullptr) {
        rows.mask = pb.custom_mask + it.mask_offset;
        rows.mask_stride = pb.pages.seq_len(it.seq, pb.kv.block_size);
      }
      if (it.partial < 0) {
        rows.out = pb.out + it.q_token * out_token_stride + std::int64_t{it.kv_head} * group * dim;
        rows.out_token_stride = out_token_stride;
        if (pb.lse != nullptr) {
          rows.lse = pb.lse + it.q_token * pb.num_qo_heads + std::int64_t{it.kv_head} * group;
          rows.lse_token_stride = pb.num_qo_heads;
        }
      } else {
        rows.out = partial_out.get() + it.partial * dim;
        rows.out_token_stride = std::int64_t{group} * dim;
        rows.lse = partial_lse.get() + it.partial;
        rows.lse_token_stride = group;
      }
      Kernels::template attend_rows<kHeadDim>(rows, src, it.kv_begin, it.kv_end, dim, pb.params,
                                              pb.prefetch_tokens_ahead, scratch);
    }

    const auto num_merges = static_cast<std::int64_t>(merges.size());
#if INFERKIT_HAS_OPENMP
#  pragma omp for schedule(static)
#endif
    for (std::int64_t i = 0; i < num_merges; ++i) {
      const AttentionMergeJob& mj = merges[static_cast<std::size_t>(i)];
      const std::int64_t rows = std::int64_t{mj.q_tokens} * group;
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t t = r / group;
        const std::int64_t g = r % group;
        const std::int64_t head = std::int64_t{mj.kv_head} * group + g;
        float* out = pb.out + (mj.q_token + t) * out_token_stride + head * dim;
        float* lse =
            pb.lse != nullptr ? pb.lse + (mj.q_token + t) * pb.num_qo_heads + head : nullptr;
        merge_row(mj.num_splits, partial_out.get() + (mj.first_partial + r) * dim, rows * dim,
                  partial_lse.get() + mj.first_partial + r, rows, dim, out, lse);
      }
    }
  }
}

/// paged attention of `pb` on the path `Kernels`, its head_dim dispatched to a compiled kernel.
template <class Kernels, class KV>
void dispatch_paged_attention(const PagedAttentionProblem<KV>& pb) {
  static_assert(is_cpu_kv_type_v<std::remove_const_t<KV>>,
                "CPU paged attention reads float, float16, bfloat16, float8_e4m3, float8_e5m2, "
                "std::int8_t or std::uint8_t (packed int4) KV");
  dispatch_value<64, 80, 96, 128, 256>(
      pb.head_dim, [&](auto k) { run_paged_attention<Kernels, decltype(k)::value>(pb); },
      [&] { run_paged_attention<Kernels, 0>(pb); });
}

/// The paged attention entry of path `isa` (which this build must have; see cpu_isa()).
template <class KV>
auto paged_attention_kernel(CpuIsa isa) noexcept -> void (*)(const PagedAttentionProblem<KV>&) {
  switch (isa) {
#if INFERKIT_CPU_DISPATCH
    case CpuIsa::kAvx512:
      return &dispatch_paged_attention<avx512::IsaKernels, KV>;
    case CpuIsa::kAvx2:
      return &dispatch_paged_attention<avx2::IsaKernels, KV>;
#endif
#if INFERKIT_HAS_NEON
    case CpuIsa::kNeon:
      return &dispatch_paged_attention<neon::IsaKernels, KV>;
#endif
    default:
      return &dispatch_paged_attention<baseline::IsaKernels, KV>;
  }
}

/// paged attention of `pb` on the process's path (cpu_isa(); throws for a bad INFERKIT_CPU_ISA).
template <class KV>
void run_paged_attention_on_cpu(const PagedAttentionProblem<KV>& pb) {
  paged_attention_kernel<KV>(cpu_isa())(pb);
}

template <class KV>
PagedAttentionProblem<KV> make_problem(const PagedDecodeArgs<KV, float>& a) {
  PagedAttentionProblem<KV> pb;
  pb.q = a.q;
  pb.q_row_stride = a.q_row_stride;
  pb.q_head_stride = a.q_head_stride;
  pb.q_per_seq = a.q_per_seq;
  pb.kv = a.kv;
  pb.pages = a.pages;
  pb.num_qo_heads = a.num_qo_heads;
  pb.head_dim = a.head_dim;
  pb.out = a.out;
  pb.lse = a.lse;
  pb.params = a.params;
  pb.kv_split_tokens = a.kv_split_tokens;
  return pb;
}

template <class KV>
PagedAttentionProblem<KV> make_problem(const PagedPrefillArgs<KV, float>& a) {
  PagedAttentionProblem<KV> pb;
  pb.q = a.q;
  pb.q_row_stride = a.q_row_stride;
  pb.q_head_stride = a.q_head_stride;
  pb.q_indptr = a.q_indptr;
  pb.q_per_seq = 0;
  pb.kv = a.kv;
  pb.pages = a.pages;
  pb.num_qo_heads = a.num_qo_heads;
  pb.head_dim = a.head_dim;
  pb.custom_mask = a.custom_mask;
  pb.out = a.out;
  pb.lse = a.lse;
  pb.params = a.params;
  pb.kv_split_tokens = a.kv_split_tokens;
  return pb;
}

/// Runs `run` on fp32 copies of 16-bit q/out: `args` with q converted to a packed float copy
/// (read through its strides), then the float output converted back (`rows` query rows of
/// num_qo_heads x head_dim).
template <template <class, class> class Args, class KV, class QO, class Run>
void run_through_fp32(const Args<KV, QO>& args, std::int64_t rows, Run&& run) {
  const auto n = static_cast<std::size_t>(rows * args.num_qo_heads * args.head_dim);
  std::vector<float> q(n);
  std::vector<float> out(n);
  const QueryStrides st = resolved_q_strides(args);
  std::size_t i = 0;
  for (std::int64_t t = 0; t < rows; ++t) {
    for (std::int64_t h = 0; h < args.num_qo_heads; ++h) {
      const QO* src = args.q + t * st.row + h * st.head;
      for (std::int32_t d = 0; d < args.head_dim; ++d) q[i++] = static_cast<float>(src[d]);
    }
  }
  Args<KV, float> fp32;
  fp32.q = q.data();
  fp32.out = out.data();
  fp32.kv = args.kv;
  fp32.pages = args.pages;
  fp32.num_qo_heads = args.num_qo_heads;
  fp32.head_dim = args.head_dim;
  fp32.lse = args.lse;
  fp32.params = args.params;
  fp32.kv_split_tokens = args.kv_split_tokens;
  if constexpr (requires { args.q_per_seq; }) {
    fp32.q_per_seq = args.q_per_seq;
  } else {
    fp32.q_indptr = args.q_indptr;
    fp32.custom_mask = args.custom_mask;
  }
  run(fp32);
  for (std::size_t j = 0; j < n; ++j) args.out[j] = QO(out[j]);
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

namespace inferkit {
// In the ISA-named inline namespace (core/config.hpp): these run kernels, so a TU built with
// other -m flags must get its own copies.
inline namespace INFERKIT_ISA_ABI {

/// Decode attention over paged KV on the CPU (see `PagedDecodeArgs`). Each K/V page is read
/// once per GQA group (all query heads of a KV head, and all q_per_seq tokens, share it);
/// work is split over (sequence, KV head, KV chunk of kv_split_tokens) on OpenMP threads, and
/// chunks are merged in a fixed order, so results do not depend on the thread count. Unwritten
/// slots of a last page are never read. 16-bit q/out are converted through fp32 copies.
/// Throws as `validate(args)`, before any work.
/// O(num_seqs * seq_len * num_qo_heads * head_dim) flops, O(KV bytes) memory traffic.
template <class KV, class QO>
void paged_decode(cpu, const PagedDecodeArgs<KV, QO>& args) {
  validate(args);
  if constexpr (std::is_same_v<QO, float>) {
    detail::run_paged_attention_on_cpu(detail::make_problem(args));
  } else {
    const std::int64_t rows = std::int64_t{args.pages.num_seqs} * args.q_per_seq;
    detail::run_through_fp32(args, rows, [](const PagedDecodeArgs<KV, float>& a) {
      detail::run_paged_attention_on_cpu(detail::make_problem(a));
    });
  }
}

/// Prefill / append attention over paged KV on the CPU (see `PagedPrefillArgs`): the n_s new
/// tokens of each sequence attend causally to its cached pages and to each other, with an
/// optional custom (tree) mask. Work items are (sequence, KV head, block of ~64 query rows,
/// KV chunk). 16-bit q/out are converted through fp32 copies. Throws as `validate(args)`,
/// before any work.
template <class KV, class QO>
void paged_prefill(cpu, const PagedPrefillArgs<KV, QO>& args) {
  validate(args);
  if constexpr (std::is_same_v<QO, float>) {
    detail::run_paged_attention_on_cpu(detail::make_problem(args));
  } else {
    const std::int64_t rows = args.q_indptr[args.pages.num_seqs];
    detail::run_through_fp32(args, rows, [](const PagedPrefillArgs<KV, float>& a) {
      detail::run_paged_attention_on_cpu(detail::make_problem(a));
    });
  }
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit
