// SPDX-License-Identifier: Apache-2.0
// Attention over paged KV, the public API: argument structs for decode and prefill, their
// validation, and backend dispatch by tag (`inferkit::cpu`, `inferkit::cuda{stream}`). An engine
// calls paged_decode / paged_prefill once per layer per step, after appending the step's K/V to
// the pages. The CPU overloads come with this header; CUDA ones from attention/cuda/*.cuh.
// Threads: validate() is pure; paged_decode / paged_prefill keep no state and run OpenMP threads
// inside: concurrent calls are safe when each writes its own out / lse, read by no other call.
#pragma once

#include <cstdint>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/core/backend.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/detail/dispatch_value.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <limits>
#include <string>
#include <type_traits>

namespace inferkit {

/// Default split size of the KV length (tokens): longer ranges are cut into chunks of this many
/// tokens (rounded up to a multiple of 16; boundaries at multiples of it in the sequence),
/// attended independently (in parallel) and merged in a fixed order with the log-sum-exp.
/// Fixed, not derived from the thread count, so the result of a sequence is bit-identical for
/// any thread count and whatever else is in the batch.
inline constexpr std::int32_t kDefaultKvSplitTokens = 2048;

/// Decode: every sequence contributes `q_per_seq` query tokens (1, or a few for speculative
/// verification), the last `q_per_seq` tokens of the sequence, already appended to its pages.
/// Query t of sequence s sits at position seq_len(s) - q_per_seq + t. Query head h reads KV
/// head h / (num_qo_heads / num_kv_heads). Outputs are softmax(scale * q k^T) v in fp32; the
/// LSE is the natural-log log-sum-exp of the (scaled, capped) logits, -inf for a query that sees
/// no key (its output is 0).
///
/// `KV` is the storage type: float, float16, bfloat16, float8_e4m3, float8_e5m2 (scale per
/// (block, head), nullptr = 1), std::int8_t (scale per (block, head, slot), required) or, on the
/// CPU, std::uint8_t: packed int4 (`kv.packed_int4`, an even head_dim, value = (nibble - zero) *
/// scale with a scale and a zero point per (block, head, slot), both required). `QO` is
/// the element type of q and out: float (the default), float16 or bfloat16 (engines keep GPU
/// activations in 16 bits; the CPU backend converts them through fp32). All pointers are host
/// memory for the CPU backend, device memory for CUDA, which also needs `host_pages`.
///
/// CUDA backend: KV float16, bfloat16, float8_e4m3, float8_e5m2 or packed int4 (std::uint8_t),
/// head_dim 64, 128 or 256.
/// It plans the split itself (see `plan_attention`), so a sequence's rounding may depend on the
/// rest of the batch; `kv_split_tokens = 0` still means never split.
template <class KV, class QO = float>
struct PagedDecodeArgs {
  /// [num_seqs][q_per_seq][num_qo_heads][head_dim], packed unless the strides below say
  /// otherwise: element d of head h of query token t is q[t * q_row_stride + h * q_head_stride
  /// + d] (t counts every sequence's tokens in order, as the rows of out do).
  const QO* q = nullptr;
  /// Elements between consecutive query tokens of q; 0 means packed (num_qo_heads * head_dim).
  /// A fused QKV projection [tokens][(num_qo_heads + 2 * num_kv_heads) * head_dim] passes its
  /// row width here and is read in place. Otherwise at least
  /// (num_qo_heads - 1) * q_head_stride + head_dim (rows may not overlap).
  std::int64_t q_row_stride = 0;
  /// Elements between consecutive heads of one query token; 0 means head_dim, else >= head_dim.
  std::int64_t q_head_stride = 0;
  PagedKVView<const KV> kv;       ///< one layer's pages; kv.head_dim must equal head_dim
  PageTableView pages;            ///< sequence s owns pages [page_begin(s), page_end(s))
  std::int32_t num_qo_heads = 0;  ///< query heads; a multiple of kv.num_kv_heads (GQA)
  std::int32_t head_dim = 0;      ///< elements per head of q and out
  std::int32_t q_per_seq = 1;     ///< query tokens per sequence
  QO* out = nullptr;              ///< [num_seqs][q_per_seq][num_qo_heads][head_dim]
  float* lse = nullptr;           ///< optional [num_seqs][q_per_seq][num_qo_heads], natural log
  AttentionParams params;         ///< scale, causal / sliding window, soft-cap
  std::int32_t kv_split_tokens = kDefaultKvSplitTokens;  ///< 0: never split a sequence
  /// CUDA backend: `pages` again, in host memory (it plans and validates from the lengths);
  /// the CPU backend ignores it.
  PageTableView host_pages;
  /// CUDA backend: > 0 caps the KV chunk of one CTA (tests force splits with it); 0 lets the
  /// planner choose. The CPU backend ignores it.
  std::int32_t max_chunk_tokens = 0;
};

/// Prefill / append: sequence s contributes the n_s = q_indptr[s+1] - q_indptr[s] newest tokens
/// (already appended to its pages); they attend to the whole sequence, causally (chunked
/// prefill): query i of sequence s sits at position seq_len(s) - n_s + i.
///
/// CUDA backend: KV and QO float16 or bfloat16 (tensor cores), or QO float with 16-bit KV (q is
/// rounded to the KV type), head_dim 64, 128 or 256, sm_80 or newer; needs `host_pages` and
/// `host_q_indptr`.
template <class KV, class QO = float>
struct PagedPrefillArgs {
  /// [q_indptr[num_seqs]][num_qo_heads][head_dim], packed unless the strides below say
  /// otherwise: element d of head h of query token t is q[t * q_row_stride + h * q_head_stride
  /// + d].
  const QO* q = nullptr;
  /// Elements between consecutive query tokens of q; 0 means packed (num_qo_heads * head_dim).
  /// A fused QKV projection [tokens][(num_qo_heads + 2 * num_kv_heads) * head_dim] passes its
  /// row width here and is read in place. Otherwise at least
  /// (num_qo_heads - 1) * q_head_stride + head_dim (rows may not overlap).
  std::int64_t q_row_stride = 0;
  /// Elements between consecutive heads of one query token; 0 means head_dim, else >= head_dim.
  std::int64_t q_head_stride = 0;
  const std::int32_t* q_indptr = nullptr;  ///< [num_seqs + 1], q_indptr[0] = 0, non-decreasing
  PagedKVView<const KV> kv;                ///< one layer's pages; kv.head_dim must equal head_dim
  PageTableView pages;                     ///< sequence s owns pages [page_begin(s), page_end(s))
  std::int32_t num_qo_heads = 0;           ///< query heads; a multiple of kv.num_kv_heads (GQA)
  std::int32_t head_dim = 0;               ///< elements per head of q and out
  /// Optional tree mask (speculative verification), ANDed with the causal/window rules: for
  /// each sequence in order, [n_s][seq_len(s)] bytes, nonzero = may attend; sequences are
  /// concatenated (sequence s starts at sum over r < s of n_r * seq_len(r)). Masked keys are
  /// still read (weight 0 times their V), so every token up to seq_len must hold finite K/V, as
  /// cached tokens do; only the unwritten slots past seq_len are never read.
  const std::uint8_t* custom_mask = nullptr;
  QO* out = nullptr;       ///< [q_indptr[num_seqs]][num_qo_heads][head_dim]
  float* lse = nullptr;    ///< optional [q_indptr[num_seqs]][num_qo_heads], natural log
  AttentionParams params;  ///< scale, causal / sliding window, soft-cap
  std::int32_t kv_split_tokens = kDefaultKvSplitTokens;  ///< 0: never split a sequence
  /// CUDA backend: host copies of `pages` and `q_indptr`; the CPU backend ignores them.
  PageTableView host_pages;
  const std::int32_t* host_q_indptr = nullptr;  ///< CUDA backend: `q_indptr` in host memory
  /// CUDA backend: > 0 caps the KV chunk of one CTA; 0 lets the planner choose.
  std::int32_t max_chunk_tokens = 0;
};

namespace detail {

/// The element strides of q actually used: zeros of the args resolved to the packed layout.
struct QueryStrides {
  std::int64_t row = 0;   ///< elements between consecutive query tokens
  std::int64_t head = 0;  ///< elements between consecutive heads of one token
};

/// `args`' q strides with 0 resolved (row: num_qo_heads * head_dim, head: head_dim).
template <class Args>
QueryStrides resolved_q_strides(const Args& args) noexcept {
  QueryStrides st;
  st.head = args.q_head_stride != 0 ? args.q_head_stride : std::int64_t{args.head_dim};
  st.row =
      args.q_row_stride != 0 ? args.q_row_stride : std::int64_t{args.num_qo_heads} * args.head_dim;
  return st;
}

/// Checks the q strides of `args` (after num_qo_heads and head_dim are known to be valid):
/// q_head_stride 0 or >= head_dim; q_row_stride 0 or at least a row's extent, so no two query
/// rows overlap.
template <class Args>
void validate_q_strides(const Args& args) {
  const std::int64_t dim = args.head_dim;
  check_arg(args.q_head_stride == 0 || args.q_head_stride >= dim, ErrorCode::kInvalidArgument,
            "q_head_stride", args.q_head_stride, "must be 0 (packed) or >= head_dim =", dim);
  const std::int64_t head = args.q_head_stride != 0 ? args.q_head_stride : dim;
  const std::int64_t gaps = std::int64_t{args.num_qo_heads} - 1;
  // Saturates instead of overflowing for absurd head strides (no row stride can then pass).
  const std::int64_t extent =
      gaps > 0 && head > (std::numeric_limits<std::int64_t>::max() - dim) / gaps
          ? std::numeric_limits<std::int64_t>::max()
          : gaps * head + dim;
  check_arg(args.q_row_stride == 0 || args.q_row_stride >= extent, ErrorCode::kInvalidArgument,
            "q_row_stride", args.q_row_stride,
            "must be 0 (packed) or >= (num_qo_heads - 1) * q_head_stride + head_dim =", extent);
}

/// Element types of q and out: float, float16, bfloat16.
template <class QO>
inline constexpr bool is_qo_type_v =
    std::is_same_v<QO, float> || std::is_same_v<QO, float16> || std::is_same_v<QO, bfloat16>;

// Null-pointer checks build their message without check_arg's string formatting of the value
// (GCC 12 -O3 reports a false -Wrestrict in that path for string-literal values).
inline void check_pointer(bool ok, const char* name, const char* expected) {
  if (!ok) {
    throw_error(ErrorCode::kInvalidArgument,
                std::string(name) + " = nullptr, " + std::string(expected));
  }
}

template <class KV>
void validate_kv_and_pages(const PagedKVView<const KV>& kv, const PageTableView& pages,
                           std::int32_t num_qo_heads, std::int32_t head_dim,
                           const AttentionParams& params, std::int32_t kv_split_tokens) {
  validate(params, head_dim);
  check_arg(kv.head_dim == head_dim, ErrorCode::kInvalidArgument, "kv.head_dim", kv.head_dim,
            "must equal head_dim =", head_dim);
  constexpr bool kInt4 = std::is_same_v<std::remove_const_t<KV>, std::uint8_t>;
  check_arg(kv.packed_int4 == kInt4, ErrorCode::kInvalidArgument, "kv.packed_int4",
            int{kv.packed_int4}, "must equal, for this KV type (1: std::uint8_t, packed int4),",
            int{kInt4});
  check_arg(!kInt4 || head_dim % 2 == 0, ErrorCode::kInvalidArgument, "head_dim", head_dim,
            "must be even for packed int4 KV (two dims a byte): head_dim % 2 must be", 0);
  check_arg(kv.num_kv_heads >= 1, ErrorCode::kInvalidArgument, "kv.num_kv_heads", kv.num_kv_heads,
            "must be >=", 1);
  check_arg(kv.block_size >= 1, ErrorCode::kInvalidArgument, "kv.block_size", kv.block_size,
            "must be >=", 1);
  check_arg(kv.num_blocks >= 0, ErrorCode::kInvalidArgument, "kv.num_blocks", kv.num_blocks,
            "must be >=", 0);
  check_arg(num_qo_heads >= 1 && num_qo_heads % kv.num_kv_heads == 0, ErrorCode::kInvalidArgument,
            "num_qo_heads", num_qo_heads,
            "must be a positive multiple of kv.num_kv_heads =", kv.num_kv_heads);
  check_arg(kv_split_tokens >= 0, ErrorCode::kInvalidArgument, "kv_split_tokens", kv_split_tokens,
            "must be >=", 0);
  check_arg(pages.num_seqs >= 0, ErrorCode::kInvalidArgument, "pages.num_seqs", pages.num_seqs,
            "must be >=", 0);
  detail::check_pointer(pages.indptr != nullptr, "pages.indptr",
                        pages.has_gaps() ? "must point to num_seqs begin offsets"
                                         : "must point to num_seqs + 1 offsets");
  if (!pages.has_gaps()) {
    check_arg(pages.indptr[0] == 0, ErrorCode::kInvalidArgument, "pages.indptr[0]", pages.indptr[0],
              "must equal", 0);
  }
  std::int64_t total_pages = 0;
  for (std::int32_t s = 0; s < pages.num_seqs; ++s) {
    if (!(pages.page_end(s) >= pages.page_begin(s) && pages.page_begin(s) >= 0)) {
      const std::string end = pages.has_gaps() ? "pages.indptr_end[" + std::to_string(s) + "]"
                                               : "pages.indptr[" + std::to_string(s + 1) + "]";
      check_arg(pages.page_begin(s) >= 0, ErrorCode::kInvalidArgument,
                "pages.indptr[" + std::to_string(s) + "]", pages.page_begin(s), "must be >=", 0);
      check_arg(false, ErrorCode::kInvalidArgument, end, pages.page_end(s),
                "must be >= the sequence's begin offset =", pages.page_begin(s));
    }
    total_pages += pages.num_pages(s);
  }
  if (pages.num_seqs > 0) {
    detail::check_pointer(pages.last_page_len != nullptr, "pages.last_page_len",
                          "must point to num_seqs lengths");
  }
  if (total_pages > 0) {
    detail::check_pointer(pages.indices != nullptr, "pages.indices",
                          "must point to every sequence's block ids");
    detail::check_pointer(kv.k != nullptr && kv.v != nullptr, "kv.k/kv.v",
                          "must point to the paged K/V storage");
  }
  for (std::int32_t s = 0; s < pages.num_seqs; ++s) {
    for (std::int32_t i = pages.page_begin(s); i < pages.page_end(s); ++i) {
      if (!(pages.indices[i] >= 0 && pages.indices[i] < kv.num_blocks)) {
        check_arg(false, ErrorCode::kOutOfRange, "pages.indices[" + std::to_string(i) + "]",
                  pages.indices[i],
                  "must be in [0, kv.num_blocks) with num_blocks =", kv.num_blocks);
      }
    }
  }
  for (std::int32_t s = 0; s < pages.num_seqs; ++s) {
    if (pages.num_pages(s) == 0) continue;
    if (!(pages.last_page_len[s] >= 1 && pages.last_page_len[s] <= kv.block_size)) {
      check_arg(false, ErrorCode::kOutOfRange, "pages.last_page_len[" + std::to_string(s) + "]",
                pages.last_page_len[s],
                "must be in [1, block_size] with block_size =", kv.block_size);
    }
  }
  if constexpr (std::is_same_v<std::remove_const_t<KV>, std::int8_t> || kInt4) {
    detail::check_pointer(kv.k_scale != nullptr && kv.v_scale != nullptr, "kv.k_scale/kv.v_scale",
                          kInt4 ? "must be set for int4 KV" : "must be set for int8 KV");
  }
  if constexpr (kInt4) {
    detail::check_pointer(kv.k_zero != nullptr && kv.v_zero != nullptr, "kv.k_zero/kv.v_zero",
                          "must be set for int4 KV");
  }
}

}  // namespace detail

/// Checks decode arguments (reads the page tables, so they must be host memory); throws
/// `Error` naming the argument, its value and the limit: head_dim != kv.head_dim,
/// num_qo_heads % num_kv_heads != 0, a page index outside [0, num_blocks), last_page_len outside
/// [1, block_size], null pointers, q_per_seq < 1, a sequence shorter than q_per_seq when causal,
/// q_head_stride not 0 and < head_dim, q_row_stride not 0 and smaller than a query row.
template <class KV, class QO>
void validate(const PagedDecodeArgs<KV, QO>& args) {
  static_assert(detail::is_qo_type_v<QO>, "q and out are float, float16 or bfloat16");
  detail::validate_kv_and_pages(args.kv, args.pages, args.num_qo_heads, args.head_dim, args.params,
                                args.kv_split_tokens);
  check_arg(args.q_per_seq >= 1, ErrorCode::kInvalidArgument, "q_per_seq", args.q_per_seq,
            "must be >=", 1);
  detail::validate_q_strides(args);
  if (args.pages.num_seqs > 0) {
    detail::check_pointer(args.q != nullptr && args.out != nullptr, "q/out",
                          "must point to num_seqs * q_per_seq query rows");
  }
  for (std::int32_t s = 0; s < args.pages.num_seqs && args.params.causal; ++s) {
    const std::int64_t len = args.pages.seq_len(s, args.kv.block_size);
    if (!(len >= args.q_per_seq)) {
      check_arg(false, ErrorCode::kInvalidArgument, "seq_len(" + std::to_string(s) + ")", len,
                "must be >= q_per_seq (causal) =", args.q_per_seq);
    }
  }
}

/// Checks prefill arguments (as for decode, q strides included, plus q_indptr: non-null, starts
/// at 0, non-decreasing, and n_s <= seq_len(s) when causal).
template <class KV, class QO>
void validate(const PagedPrefillArgs<KV, QO>& args) {
  static_assert(detail::is_qo_type_v<QO>, "q and out are float, float16 or bfloat16");
  detail::validate_kv_and_pages(args.kv, args.pages, args.num_qo_heads, args.head_dim, args.params,
                                args.kv_split_tokens);
  detail::validate_q_strides(args);
  detail::check_pointer(args.q_indptr != nullptr, "q_indptr", "must point to num_seqs + 1 offsets");
  check_arg(args.q_indptr[0] == 0, ErrorCode::kInvalidArgument, "q_indptr[0]", args.q_indptr[0],
            "must equal", 0);
  for (std::int32_t s = 0; s < args.pages.num_seqs; ++s) {
    const std::int32_t n = args.q_indptr[s + 1] - args.q_indptr[s];
    if (!(n >= 0)) {
      check_arg(false, ErrorCode::kInvalidArgument, "q_indptr[" + std::to_string(s + 1) + "]",
                args.q_indptr[s + 1], "must be >= q_indptr[s] =", args.q_indptr[s]);
    }
    const std::int64_t len = args.pages.seq_len(s, args.kv.block_size);
    if (!(!args.params.causal || n <= len)) {
      check_arg(false, ErrorCode::kInvalidArgument, "new tokens of sequence " + std::to_string(s),
                n, "must be <= its seq_len (causal) =", len);
    }
  }
  if (args.q_indptr[args.pages.num_seqs] > 0) {
    detail::check_pointer(args.q != nullptr && args.out != nullptr, "q/out",
                          "must point to q_indptr[num_seqs] query rows");
  }
}

/// Backends without an implementation in this translation unit land here.
template <class Backend, class KV, class QO>
void paged_decode(Backend, const PagedDecodeArgs<KV, QO>&) {
  static_assert(detail::dependent_false_v<Backend>,
                "no paged_decode for this backend here: CUDA overloads come from "
                "<inferkit/attention/cuda/paged_attention.cuh>, compiled by nvcc in a .cu file");
}

/// Backends without an implementation in this translation unit land here.
template <class Backend, class KV, class QO>
void paged_prefill(Backend, const PagedPrefillArgs<KV, QO>&) {
  static_assert(detail::dependent_false_v<Backend>,
                "no paged_prefill for this backend here: CUDA overloads come from "
                "<inferkit/attention/cuda/paged_attention.cuh>, compiled by nvcc in a .cu file");
}

}  // namespace inferkit

// The CPU backend is always available to host translation units (not to nvcc, which never
// compiles the host-only kernels).
#if !INFERKIT_CUDA_COMPILER
#  include <inferkit/attention/cpu/paged_attention.hpp>
#endif
