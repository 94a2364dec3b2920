// SPDX-License-Identifier: Apache-2.0
// The CUDA backend of paged_decode and paged_prefill: the same calls as the CPU backend with
// `inferkit::cuda{stream}`. A launcher validates the arguments from their host mirrors, plans
// the launch on the host (attention_plan.hpp: split from the batch, the KV heads, the lengths
// and the SM count; the plan travels as a kernel argument), runs the decode (CUDA cores) or
// prefill (tensor cores) kernel, then the merge of split chunks. Asynchronous on the stream;
// split buffers come from the stream-ordered allocator.
// Threads: launchers without host state, callable from any host thread; launches whose outputs
// overlap another launch's inputs or outputs must be ordered by the caller (stream or events).
#pragma once

#if !defined(__CUDACC__)
#  error "inferkit/attention/cuda/paged_attention.cuh is CUDA code: compile this file with nvcc"
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <inferkit/attention/attention.hpp>
#include <inferkit/attention/attention_plan.hpp>
#include <inferkit/attention/cuda/detail/decode_kernel.cuh>
#include <inferkit/attention/cuda/detail/kernel_args.cuh>
#include <inferkit/attention/cuda/detail/merge_kernel.cuh>
#include <inferkit/attention/cuda/detail/prefill_kernel.cuh>
#include <inferkit/core/backend.hpp>
#include <inferkit/core/cuda/cuda_check.cuh>
#include <inferkit/core/detail/dispatch_value.hpp>
#include <type_traits>
#include <vector>

namespace inferkit::detail::cuda {

/// KV storage types the CUDA decode kernel reads (std::uint8_t: packed int4).
template <class KV>
inline constexpr bool is_cuda_kv_type_v =
    std::is_same_v<KV, float16> || std::is_same_v<KV, bfloat16> ||
    std::is_same_v<KV, float8_e4m3> || std::is_same_v<KV, float8_e5m2> ||
    std::is_same_v<KV, std::uint8_t>;

inline void check_aligned(const void* p, const char* name) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) {
    throw_error(ErrorCode::kInvalidArgument,
                concat({name, " is not 16-byte aligned (the CUDA kernels load 16-byte vectors)"}));
  }
}

/// Checks what only the CUDA backend requires: host mirrors, head_dim, alignment.
template <class Args>
void check_cuda_args(const Args& args) {
  check_pointer(args.host_pages.indptr != nullptr, "host_pages.indptr",
                "must mirror pages in host memory (the CUDA backend plans from it)");
  check_arg(args.host_pages.num_seqs == args.pages.num_seqs, ErrorCode::kInvalidArgument,
            "host_pages.num_seqs", args.host_pages.num_seqs,
            "must equal pages.num_seqs =", args.pages.num_seqs);
  if (args.head_dim != 64 && args.head_dim != 128 && args.head_dim != 256) {
    check_arg(false, ErrorCode::kUnsupported, "head_dim", args.head_dim,
              "is not one the CUDA kernels are built for:", "64, 128, 256");
  }
  check_aligned(args.q, "q");
  // Every query row is loaded in 16-byte vectors from q + t * row + h * head.
  using QO = std::remove_const_t<std::remove_pointer_t<decltype(args.q)>>;
  const QueryStrides st = resolved_q_strides(args);
  const auto bytes = static_cast<std::int64_t>(sizeof(QO));
  check_arg(st.row * bytes % 16 == 0, ErrorCode::kInvalidArgument, "q_row_stride", st.row,
            "must be a multiple of 16 bytes (the CUDA kernels load 16-byte vectors), elements of",
            bytes);
  check_arg(st.head * bytes % 16 == 0, ErrorCode::kInvalidArgument, "q_head_stride", st.head,
            "must be a multiple of 16 bytes (the CUDA kernels load 16-byte vectors), elements of",
            bytes);
  check_aligned(args.out, "out");
  check_aligned(args.kv.k, "kv.k");
  check_aligned(args.kv.v, "kv.v");
}

/// Device resources of one launch: SM count and occupancy of `kernel`.
template <class Kernel>
int ctas_per_sm(Kernel kernel, int threads, int smem_bytes) {
  int blocks = 0;
  INFERKIT_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem_bytes));
  return std::max(blocks, 1);
}

/// Split buffers from the stream-ordered pool, freed on the stream after the merge.
struct SplitBuffers {
  cudaStream_t stream = nullptr;
  float* out = nullptr;
  float* lse = nullptr;
  SplitBuffers(cudaStream_t s, const AttentionPlan& plan, std::int32_t kv_heads,
               std::int32_t head_dim)
      : stream(s) {
    const std::size_t rows =
        static_cast<std::size_t>(kv_heads) * plan.num_items * plan.rows_per_block;
    INFERKIT_CUDA_CHECK(
        cudaMallocAsync(reinterpret_cast<void**>(&out), rows * head_dim * sizeof(float), stream));
    INFERKIT_CUDA_CHECK(
        cudaMallocAsync(reinterpret_cast<void**>(&lse), rows * sizeof(float), stream));
  }
  SplitBuffers(const SplitBuffers&) = delete;
  SplitBuffers& operator=(const SplitBuffers&) = delete;
  ~SplitBuffers() {
    cudaFreeAsync(out, stream);  // stream-ordered: after the kernels that use them
    cudaFreeAsync(lse, stream);
  }
};

/// Runs `launch(plan, slice_begin)` for each slice of at most kMaxPlanSeqs sequences, with
/// split buffers and the merge when the plan splits.
template <class KV, class QO, class Launch>
void run_sliced(AttentionKernelArgs<KV, QO> kargs, const PageTableView& host_pages,
                const std::int32_t* host_q_indptr, std::int32_t q_per_seq,
                std::int32_t rows_per_block, int resident_ctas, std::int32_t kv_split_tokens,
                std::int32_t max_chunk_tokens, cudaStream_t stream, Launch&& launch) {
  const std::int32_t heads = kargs.kv.num_kv_heads;
  const int sms = sm_count();
  std::vector<std::int64_t> lens;
  std::vector<std::int32_t> rows;
  for (std::int32_t begin = 0; begin < host_pages.num_seqs; begin += kMaxPlanSeqs) {
    const std::int32_t end = std::min(host_pages.num_seqs, begin + kMaxPlanSeqs);
    lens.clear();
    rows.clear();
    for (std::int32_t s = begin; s < end; ++s) {
      lens.push_back(host_pages.seq_len(s, kargs.kv.block_size));
      const std::int32_t n_q =
          host_q_indptr != nullptr ? host_q_indptr[s + 1] - host_q_indptr[s] : q_per_seq;
      rows.push_back(n_q * kargs.group);
    }
    AttentionPlanInput in;
    in.kv_len = lens;
    in.q_rows = rows;
    in.rows_per_block = rows_per_block;
    in.num_kv_heads = heads;
    in.sm_count = sms;
    in.ctas_per_sm = resident_ctas;
    in.allow_split = kv_split_tokens != 0;
    in.max_chunk_tokens = max_chunk_tokens;
    const AttentionPlan plan = plan_attention(in, begin);
    if (plan.num_items == 0) continue;
    const dim3 grid(static_cast<unsigned>(plan.num_items), static_cast<unsigned>(heads));
    if (!plan.any_split) {
      launch(kargs, plan, grid);
      continue;
    }
    const SplitBuffers split(stream, plan, heads, kargs.kv.head_dim);
    AttentionKernelArgs<KV, QO> with_split = kargs;
    with_split.partial_out = split.out;
    with_split.partial_lse = split.lse;
    launch(with_split, plan, grid);
    merge_chunks_kernel<KV, QO><<<grid, 32 * kMergeWarps, 0, stream>>>(with_split, plan);
    check_launch("merge_chunks_kernel");
  }
}

template <class Args>
auto kernel_args(const Args& args) {
  using KV = std::remove_const_t<std::remove_pointer_t<decltype(args.kv.k)>>;
  using QO = std::remove_const_t<std::remove_pointer_t<decltype(args.q)>>;
  AttentionKernelArgs<KV, QO> k;
  k.q = args.q;
  const QueryStrides st = resolved_q_strides(args);
  k.q_row_stride = st.row;
  k.q_head_stride = st.head;
  k.out = args.out;
  k.lse = args.lse;
  k.kv = args.kv;
  k.pages = args.pages;
  k.num_qo_heads = args.num_qo_heads;
  k.group = args.num_qo_heads / args.kv.num_kv_heads;
  k.params = args.params;
  k.sm_scale = args.params.resolved_scale(args.head_dim);
  return k;
}

}  // namespace inferkit::detail::cuda

namespace inferkit {

/// Decode attention over paged KV on the GPU (see `PagedDecodeArgs`): split-KV flash-decoding
/// on CUDA cores with fp32 softmax; every query row of a GQA group (times q_per_seq) shares each
/// K/V tile; fp8 block scales are folded into the logit and value factors per page, and packed
/// int4's per-token scales likewise, its zero points subtracted as the codes are widened. All
/// pointers are device memory except `host_pages`. Asynchronous on `backend.stream`.
/// Throws as `validate(args)` (run on the host mirror), `Error{kUnsupported}` for a head_dim
/// other than 64/128/256, `Error{kInvalidArgument}` for misaligned pointers, q strides that are
/// not whole 16-byte vectors, or a missing host mirror, `Error{kCuda}` when a launch fails.
template <class KV, class QO>
void paged_decode(cuda backend, const PagedDecodeArgs<KV, QO>& args) {
  static_assert(detail::cuda::is_cuda_kv_type_v<KV>,
                "CUDA paged_decode reads float16, bfloat16, float8_e4m3, float8_e5m2 or packed "
                "int4 (std::uint8_t) KV");
  detail::cuda::check_cuda_args(args);
  PagedDecodeArgs<KV, QO> host = args;
  host.pages = args.host_pages;
  validate(host);
  auto kargs = detail::cuda::kernel_args(args);
  kargs.q_per_seq = args.q_per_seq;
  const cudaStream_t stream = backend.stream;
  detail::dispatch_value<64, 128, 256>(
      args.head_dim,
      [&](auto hd) {
        constexpr int kHeadDim = decltype(hd)::value;
        using Config = detail::cuda::DecodeConfig<KV, kHeadDim>;
        const auto kernel = detail::cuda::paged_decode_kernel<KV, QO, kHeadDim>;
        detail::cuda::run_sliced(kargs, args.host_pages, nullptr, args.q_per_seq, Config::kTeams,
                                 detail::cuda::ctas_per_sm(kernel, Config::kThreads, 0),
                                 args.kv_split_tokens, args.max_chunk_tokens, stream,
                                 [&](const auto& ka, const AttentionPlan& plan, dim3 grid) {
                                   kernel<<<grid, Config::kThreads, 0, stream>>>(ka, plan);
                                   detail::check_launch("paged_decode_kernel");
                                 });
      },
      [] {});
}

/// Prefill / append attention over paged KV on the GPU (see `PagedPrefillArgs`): tensor cores
/// (mma.sync m16n8k16), 64 query rows per CTA with the GQA group packed into the rows, causal,
/// sliding window, soft cap and the custom (tree) mask; long chunks are split and merged as in
/// decode. KV float16 or bfloat16; q/out float (q is rounded to the KV type for the tensor
/// cores), float16 or bfloat16. Device pointers except `host_pages` and `host_q_indptr`.
/// Throws as `paged_decode`, plus `Error{kInvalidArgument}` without `host_q_indptr`.
template <class KV, class QO>
void paged_prefill(cuda backend, const PagedPrefillArgs<KV, QO>& args) {
  static_assert(std::is_same_v<KV, float16> || std::is_same_v<KV, bfloat16>,
                "CUDA paged_prefill runs on tensor cores: float16 or bfloat16 KV");
  detail::cuda::check_cuda_args(args);
  detail::check_pointer(args.host_q_indptr != nullptr, "host_q_indptr",
                        "must mirror q_indptr in host memory (the CUDA backend plans from it)");
  PagedPrefillArgs<KV, QO> host = args;
  host.pages = args.host_pages;
  host.q_indptr = args.host_q_indptr;
  validate(host);
  auto kargs = detail::cuda::kernel_args(args);
  kargs.q_indptr = args.q_indptr;
  kargs.custom_mask = args.custom_mask;
  const cudaStream_t stream = backend.stream;
  detail::dispatch_value<64, 128, 256>(
      args.head_dim,
      [&](auto hd) {
        constexpr int kHeadDim = decltype(hd)::value;
        using Config = detail::cuda::PrefillConfig<kHeadDim>;
        const auto kernel = detail::cuda::paged_prefill_kernel<KV, QO, kHeadDim>;
        INFERKIT_CUDA_CHECK(cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Config::kSmemBytes));
        detail::cuda::run_sliced(
            kargs, args.host_pages, args.host_q_indptr, 0, Config::kRows,
            detail::cuda::ctas_per_sm(kernel, Config::kThreads, Config::kSmemBytes),
            args.kv_split_tokens, args.max_chunk_tokens, stream,
            [&](const auto& ka, const AttentionPlan& plan, dim3 grid) {
              detail::cuda::MaskPlan masks;
              std::int64_t at = 0;
              for (std::int32_t s = 0; s < plan.seq_begin + plan.num_seqs; ++s) {
                if (s >= plan.seq_begin) masks.begin[s - plan.seq_begin] = at;
                at += std::int64_t{args.host_q_indptr[s + 1] - args.host_q_indptr[s]} *
                      args.host_pages.seq_len(s, args.kv.block_size);
              }
              kernel<<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(ka, plan, masks);
              detail::check_launch("paged_prefill_kernel");
            });
      },
      [] {});
}

}  // namespace inferkit
