// SPDX-License-Identifier: Apache-2.0
// The host-side plan of one GPU attention launch (FlashInfer's "plan" step) and the index math
// its kernels share: which work item (sequence, block of query rows, KV chunk) a CTA runs, the
// chunk bounds, and the keys a block of rows can see. The planner picks the KV split from the
// batch, the KV heads, the lengths and the SM count so that a skewed batch (one long sequence
// among short ones) spreads the long one over many CTAs. Plain C++ (no CUDA headers): the CUDA
// kernels take the plan by value and call the same functions the CPU tests check.
// Threads: value types and pure functions; safe from any number of threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <span>

namespace inferkit {

/// Sequences per launch: the plan is a kernel argument (no host-to-device copy, no
/// synchronization), so its arrays are bounded; larger batches run as several launches.
inline constexpr std::int32_t kMaxPlanSeqs = 256;
/// KV chunks are multiples of this many tokens (except a sequence's last) and never shorter.
inline constexpr std::int32_t kChunkQuantumTokens = 256;

/// The work of one launch. Sequence s (of this launch) has `row_blocks(s)` blocks of
/// `rows_per_block` query rows and its keys [0, kv_len) cut into `chunks[s]` non-empty chunks
/// of `chunk_tokens[s]` keys (the last one shorter; see `chunk_bounds`); its work items are
/// `[item_begin[s], item_begin[s + 1])`, row block major: item `item_begin[s] + b * chunks[s] + c`
/// is row block b, chunk c. Every KV head runs every item (a grid of num_items x num_kv_heads
/// CTAs).
struct AttentionPlan {
  std::int32_t seq_begin = 0;       ///< first sequence of the batch in this launch
  std::int32_t num_seqs = 0;        ///< sequences in this launch, <= kMaxPlanSeqs
  std::int32_t rows_per_block = 1;  ///< query rows (tokens x GQA group) per work item
  std::int32_t num_items = 0;       ///< work items per KV head
  bool any_split = false;           ///< some sequence has chunks > 1 (a merge follows)
  /// [num_seqs + 1] CSR offsets into the work items: sequence s owns items
  /// `[item_begin[s], item_begin[s + 1])`, and `item_begin[num_seqs] == num_items`.
  std::int32_t item_begin[kMaxPlanSeqs + 1] = {};
  /// [num_seqs] KV chunks of each sequence, >= 1 (1: the sequence is not split).
  std::int32_t chunks[kMaxPlanSeqs] = {};
  std::int32_t chunk_tokens[kMaxPlanSeqs] = {};  ///< 0 with one chunk (the whole sequence)

  /// Row blocks of sequence s.
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr std::int32_t row_blocks(
      std::int32_t s) const noexcept {
    return (item_begin[s + 1] - item_begin[s]) / chunks[s];
  }
};

/// What the planner needs to know of one launch.
struct AttentionPlanInput {
  std::span<const std::int64_t> kv_len;  ///< keys of each sequence
  std::span<const std::int32_t> q_rows;  ///< query rows of each sequence (tokens x group)
  std::int32_t rows_per_block = 1;       ///< rows one work item takes (kernel-specific)
  /// KV heads (>= 1): every head runs every work item, so they multiply the work to spread.
  std::int32_t num_kv_heads = 1;
  std::int32_t sm_count = 1;          ///< multiprocessors of the device
  std::int32_t ctas_per_sm = 1;       ///< resident CTAs per multiprocessor (occupancy)
  bool allow_split = true;            ///< false: one chunk per sequence (kv_split_tokens = 0)
  std::int32_t max_chunk_tokens = 0;  ///< > 0: no chunk longer than this (rounded to quantum)
};

namespace detail {

/// Rounds `n` up to a multiple of `q` (q >= 1).
INFERKIT_HOST_DEVICE constexpr std::int64_t round_up(std::int64_t n, std::int64_t q) noexcept {
  return (n + q - 1) / q * q;
}

/// Keys [begin, end) of chunk `c` of a sequence of `kv_len` keys cut into chunks of
/// `chunk_tokens` keys (0: one chunk, the whole sequence).
struct KeyRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};
INFERKIT_HOST_DEVICE constexpr KeyRange chunk_bounds(std::int64_t kv_len, std::int32_t chunk_tokens,
                                                     std::int32_t c) noexcept {
  if (chunk_tokens <= 0) return {0, kv_len};
  const std::int64_t b = std::int64_t{c} * chunk_tokens;
  const std::int64_t e = b + chunk_tokens;
  return {b < kv_len ? b : kv_len, e < kv_len ? e : kv_len};
}

/// Keys that some row of a block can see: rows hold query positions [first_pos, last_pos]
/// (causal and window rules of `params`), intersected with [0, kv_len). Empty when end <= begin.
INFERKIT_HOST_DEVICE constexpr KeyRange visible_keys(const AttentionParams& params,
                                                     std::int64_t first_pos, std::int64_t last_pos,
                                                     std::int64_t kv_len) noexcept {
  std::int64_t end = params.causal ? last_pos + 1 : kv_len;
  std::int64_t begin = params.window_left >= 0 ? first_pos - params.window_left : 0;
  end = end < kv_len ? end : kv_len;
  begin = begin > 0 ? begin : 0;
  return {begin, end};
}

/// The work item a CTA runs: sequence (of the launch), row block and chunk of item `item`.
struct WorkItem {
  std::int32_t seq = 0;
  std::int32_t row_block = 0;
  std::int32_t chunk = 0;
};
INFERKIT_HOST_DEVICE constexpr WorkItem find_item(const AttentionPlan& plan,
                                                  std::int32_t item) noexcept {
  // The last s with item_begin[s] <= item (binary search; sequences with no items are skipped
  // because their item_begin equals the next one's).
  std::int32_t lo = 0;
  std::int32_t hi = plan.num_seqs;  // item_begin[hi] > item
  while (hi - lo > 1) {
    const std::int32_t mid = (lo + hi) / 2;
    if (plan.item_begin[mid] <= item) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const std::int32_t local = item - plan.item_begin[lo];
  return {lo, local / plan.chunks[lo], local % plan.chunks[lo]};
}

}  // namespace detail

/// Plans one launch of at most kMaxPlanSeqs sequences (see `AttentionPlan`).
///
/// Split rule: the target chunk is the batch's work (sum over sequences of row blocks x kv_len,
/// times the KV heads) divided by the CTAs the device holds at once (sm_count x ctas_per_sm),
/// never below kChunkQuantumTokens; each sequence takes round(kv_len / target) chunks (at least
/// 1), so that a long sequence among short ones is spread over many CTAs and a batch that
/// already fills the device is not split. `max_chunk_tokens` caps the chunk length (tests use it
/// to force splits); `allow_split = false` keeps one chunk per sequence. O(num_seqs).
/// Throws `Error{kInvalidArgument}` for mismatched spans, more than kMaxPlanSeqs sequences or
/// non-positive sizes.
inline AttentionPlan plan_attention(const AttentionPlanInput& in, std::int32_t seq_begin = 0) {
  const auto n = static_cast<std::int64_t>(in.kv_len.size());
  check_arg(static_cast<std::int64_t>(in.q_rows.size()) == n, ErrorCode::kInvalidArgument,
            "q_rows.size()", in.q_rows.size(), "must equal kv_len.size() =", n);
  check_arg(n <= kMaxPlanSeqs, ErrorCode::kInvalidArgument, "sequences in one launch", n,
            "must be <=", kMaxPlanSeqs);
  check_arg(
      in.rows_per_block >= 1 && in.num_kv_heads >= 1 && in.sm_count >= 1 && in.ctas_per_sm >= 1,
      ErrorCode::kInvalidArgument, "rows_per_block, num_kv_heads, sm_count, ctas_per_sm",
      "a value < 1", "must all be >=", 1);
  AttentionPlan plan;
  plan.seq_begin = seq_begin;
  plan.num_seqs = static_cast<std::int32_t>(n);
  plan.rows_per_block = in.rows_per_block;
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  const auto blocks_of = [&](std::int64_t s) {
    return (std::int64_t{in.q_rows[at(s)]} + in.rows_per_block - 1) / in.rows_per_block;
  };
  std::int64_t work = 0;
  for (std::int64_t s = 0; s < n; ++s) work += blocks_of(s) * in.kv_len[at(s)];
  const std::int64_t slots = std::int64_t{in.sm_count} * in.ctas_per_sm;
  std::int64_t target = (work * in.num_kv_heads + slots - 1) / slots;
  target = std::max<std::int64_t>(target, kChunkQuantumTokens);
  if (in.max_chunk_tokens > 0) {
    target = std::min(target, detail::round_up(in.max_chunk_tokens, kChunkQuantumTokens));
  }
  std::int32_t items = 0;
  for (std::int64_t s = 0; s < n; ++s) {
    const std::int64_t len = in.kv_len[at(s)];
    std::int64_t chunks = 1;
    if (in.allow_split && len > target) {
      chunks = in.max_chunk_tokens > 0 ? (len + target - 1) / target : (len + target / 2) / target;
      chunks = std::clamp<std::int64_t>(chunks, 1,
                                        (len + kChunkQuantumTokens - 1) / kChunkQuantumTokens);
    }
    // Equal chunks, rounded up to the quantum; the count then follows from that length, so
    // no chunk is empty.
    const std::int64_t chunk_len =
        chunks > 1 ? detail::round_up((len + chunks - 1) / chunks, kChunkQuantumTokens) : 0;
    if (chunk_len > 0) chunks = (len + chunk_len - 1) / chunk_len;
    plan.chunks[at(s)] = static_cast<std::int32_t>(chunks);
    plan.chunk_tokens[at(s)] = chunks > 1 ? static_cast<std::int32_t>(chunk_len) : 0;
    plan.any_split = plan.any_split || chunks > 1;
    plan.item_begin[at(s)] = items;
    const std::int64_t more = blocks_of(s) * chunks;
    check_arg(items + more <= (std::int64_t{1} << 30), ErrorCode::kInvalidArgument,
              "work items of one launch", items + more, "must be <=", std::int64_t{1} << 30);
    items += static_cast<std::int32_t>(more);
  }
  plan.item_begin[at(n)] = items;
  plan.num_items = items;
  return plan;
}

}  // namespace inferkit
