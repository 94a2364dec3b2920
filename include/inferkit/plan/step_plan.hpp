// SPDX-License-Identifier: Apache-2.0
// StepPlan: what a scheduler hands the engine for one step, already in the layout the attention
// kernels take (q rows in token order, q_indptr, a begin/end page table, the slot of every new
// token's K/V, the block copies copy-on-write needs first), and SequenceResult, what the engine
// hands back to `commit`. `check_step_plan` verifies a plan's internal consistency. The contract
// between whoever schedules and whoever executes: below both (sched/, model/, sim/ stand on it).
// Threads: plain values, and check_step_plan only reads: a plan may be read from any number of
// threads while no one writes it (the scheduler rewrites it at its next schedule()).
#pragma once

#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/core/request_id.hpp>
#include <inferkit/core/token_id.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

namespace inferkit {

/// One sequence's share of a step. Its new tokens are q rows `[q_indptr[s], q_indptr[s + 1])` of
/// the plan, at positions `num_cached_tokens .. num_cached_tokens + num_new_tokens - 1`.
struct ScheduledSequence {
  RequestId request_id = 0;            ///< the request the rows belong to
  std::int64_t num_cached_tokens = 0;  ///< tokens whose KV is in the pages before this step
  std::int32_t num_new_tokens = 0;     ///< tokens computed this step (a chunk, or 1 + drafts)
  std::int32_t num_draft_tokens = 0;   ///< the last this-many new tokens are speculative drafts
  bool samples = false;                ///< its last 1 + num_draft_tokens rows' logits are used

  /// Tokens the sequence's pages hold during the step (cached + new).
  [[nodiscard]] std::int64_t seq_len() const noexcept { return num_cached_tokens + num_new_tokens; }
  /// Logit rows the engine computes for it: 1 + drafts when it samples, else 0.
  [[nodiscard]] std::int32_t num_logits() const noexcept {
    return samples ? 1 + num_draft_tokens : 0;
  }
};

/// One step. Sequences `[0, num_decodes)` are decodes (exactly one known token to compute, plus
/// any drafts, and they sample); the rest are prefill chunks. Every vector is indexed as its
/// comment says; the page table is in PageTableView's begin/end form over the scheduler's page
/// store, valid until the next `schedule()`.
///
/// How an engine runs it, per layer: write the K/V of row i into `slot_mapping[i]` (after
/// performing `block_copies`), then either one `paged_prefill` over every sequence (`pages()`,
/// `q_indptr`), or `paged_decode` over `decode_pages()` with `q_per_seq = decode_q_per_seq` plus
/// `paged_prefill` over `prefill_pages()` with `prefill_q_indptr` and the q rows from
/// `q_indptr[num_decodes]` on. Sample from the rows in `logits_indices`.
struct StepPlan {
  std::int64_t step = 0;                     ///< 0, 1, 2, … per schedule() call
  std::vector<ScheduledSequence> sequences;  ///< [num_seqs], decodes first
  std::int32_t num_decodes = 0;              ///< leading sequences that are decodes
  std::int32_t decode_q_per_seq = 0;         ///< rows per decode when all are equal, else 0
  std::vector<TokenId> token_ids;            ///< [num_tokens] input token of each q row
  std::vector<std::int32_t> positions;       ///< [num_tokens] position of each row (RoPE)
  std::vector<std::int64_t> slot_mapping;    ///< [num_tokens] KV slot: block * block_size + offset
  std::vector<std::int32_t> q_indptr;        ///< [num_seqs + 1], q_indptr[0] = 0
  std::vector<std::int32_t> prefill_q_indptr;  ///< [num_seqs - num_decodes + 1], from 0
  std::vector<std::int32_t> logits_indices;    ///< rows whose logits are sampled, in order
  std::vector<BlockCopy> block_copies;         ///< run before writing this step's K/V
  std::vector<std::int32_t> page_begin;        ///< [num_seqs] offset of a sequence's first page
  std::vector<std::int32_t> page_end;          ///< [num_seqs] one past its last page
  std::vector<std::int32_t> last_page_len;     ///< [num_seqs] tokens in its last page
  /// The page store the begin/end offsets index (block ids; the scheduler's, valid until its
  /// next schedule()): every sequence's pages lie inside it, `sequence_pages(s)` gives them.
  std::span<const std::int32_t> page_indices;
  std::int32_t block_size = 0;       ///< tokens per page
  std::vector<RequestId> preempted;  ///< requests preempted while this step was planned

  /// Sequences scheduled.
  [[nodiscard]] std::int32_t num_seqs() const noexcept {
    return static_cast<std::int32_t>(sequences.size());
  }
  /// Query rows (new tokens) in the step.
  [[nodiscard]] std::int32_t num_tokens() const noexcept {
    return static_cast<std::int32_t>(token_ids.size());
  }
  /// Prefill chunks: sequences after the decodes.
  [[nodiscard]] std::int32_t num_prefills() const noexcept { return num_seqs() - num_decodes; }
  /// Whether nothing is computed this step.
  [[nodiscard]] bool empty() const noexcept { return sequences.empty(); }
  /// The pages (block ids) of sequence `s` in order, `[page_begin[s], page_end[s])` of the store.
  /// Checked in debug builds only (INFERKIT_ASSERT, which throws there), like an index.
  [[nodiscard]] std::span<const std::int32_t> sequence_pages(std::int32_t s) const {
    INFERKIT_ASSERT(s >= 0 && s < num_seqs());
    const auto i = static_cast<std::size_t>(s);
    return page_indices.subspan(static_cast<std::size_t>(page_begin[i]),
                                static_cast<std::size_t>(page_end[i] - page_begin[i]));
  }
  /// The page table of every sequence (begin/end form).
  [[nodiscard]] PageTableView pages() const noexcept { return sub_pages(0, num_seqs()); }
  /// The page table of the decodes, sequences [0, num_decodes).
  [[nodiscard]] PageTableView decode_pages() const noexcept { return sub_pages(0, num_decodes); }
  /// The page table of the prefill chunks, sequences [num_decodes, num_seqs).
  [[nodiscard]] PageTableView prefill_pages() const noexcept {
    return sub_pages(num_decodes, num_prefills());
  }

 private:
  [[nodiscard]] PageTableView sub_pages(std::int32_t first, std::int32_t count) const noexcept {
    const auto f = static_cast<std::size_t>(first);
    if (count == 0) {
      return PageTableView{page_begin.data(), page_indices.data(), nullptr, 0, nullptr};
    }
    return PageTableView{page_begin.data() + f, page_indices.data(), last_page_len.data() + f,
                         count, page_end.data() + f};
  }
};

/// What the engine returns for one scheduled sequence: the tokens it emits this step, in order.
/// A non-final prefill chunk emits none; a decode emits one; a decode with K drafts emits the
/// accepted drafts plus one more (1..K + 1).
struct SequenceResult {
  RequestId request_id = 0;         ///< the planned sequence, in plan order
  std::span<const TokenId> tokens;  ///< emitted tokens (valid during commit)
};

/// Checks that `plan` is consistent: every array has the size its comment gives, every
/// sequence's pages lie inside `page_indices`, decodes come
/// first and sample, q_indptr and positions follow the sequences, every slot is the page table's
/// slot for its position, no two rows share a slot, and logits_indices lists each sampling
/// sequence's last 1 + drafts rows. Throws `Error{kInvalidState}` describing the first violation.
/// O(num_tokens + pages touched). For tests, and for engines that want to assert a plan.
inline void check_step_plan(const StepPlan& plan) {
  const auto fail = [](const std::string& what) {
    detail::throw_error(ErrorCode::kInvalidState, "StepPlan inconsistent: " + what);
  };
  const auto n = static_cast<std::size_t>(plan.num_seqs());
  const auto rows = static_cast<std::size_t>(plan.num_tokens());
  if (plan.positions.size() != rows || plan.slot_mapping.size() != rows) fail("row arrays");
  if (plan.q_indptr.size() != n + 1 || plan.page_begin.size() != n || plan.page_end.size() != n ||
      plan.last_page_len.size() != n) {
    fail("per-sequence arrays");
  }
  if (plan.num_decodes < 0 || plan.num_decodes > plan.num_seqs()) fail("num_decodes");
  if (plan.prefill_q_indptr.size() != static_cast<std::size_t>(plan.num_prefills()) + 1) {
    fail("prefill_q_indptr size");
  }
  if (plan.q_indptr[0] != 0 || static_cast<std::size_t>(plan.q_indptr[n]) != rows) {
    fail("q_indptr ends");
  }
  if (plan.block_size < 1) fail("block_size");
  const std::int64_t bs = plan.block_size;
  const PageTableView pages = plan.pages();
  std::unordered_set<std::int64_t> slots;
  std::size_t logit = 0;
  std::int32_t decode_rows = -1;
  bool uniform = true;
  for (std::size_t s = 0; s < n; ++s) {
    const ScheduledSequence& seq = plan.sequences[s];
    const std::string name =
        "sequence " + std::to_string(s) + " (request " + std::to_string(seq.request_id) + "): ";
    const bool decode = static_cast<std::int32_t>(s) < plan.num_decodes;
    if (seq.num_new_tokens < 1 || seq.num_draft_tokens < 0 ||
        seq.num_draft_tokens >= seq.num_new_tokens || seq.num_cached_tokens < 0) {
      fail(name + "token counts");
    }
    if (plan.page_begin[s] < 0 || plan.page_end[s] < plan.page_begin[s] ||
        static_cast<std::size_t>(plan.page_end[s]) > plan.page_indices.size()) {
      fail(name + "pages outside page_indices");
    }
    if (decode && (!seq.samples || seq.num_new_tokens != 1 + seq.num_draft_tokens)) {
      fail(name + "a decode computes 1 + drafts tokens and samples");
    }
    if (!decode && seq.num_draft_tokens != 0) fail(name + "a prefill chunk carries no drafts");
    if (decode) {
      if (decode_rows >= 0 && decode_rows != seq.num_new_tokens) uniform = false;
      decode_rows = seq.num_new_tokens;
    }
    if (plan.q_indptr[s + 1] - plan.q_indptr[s] != seq.num_new_tokens) fail(name + "q_indptr");
    const auto s32 = static_cast<std::int32_t>(s);
    if (pages.seq_len(s32, plan.block_size) != seq.seq_len()) fail(name + "page table length");
    if (!decode) {
      const std::size_t p = s - static_cast<std::size_t>(plan.num_decodes);
      if (plan.prefill_q_indptr[p + 1] - plan.prefill_q_indptr[p] != seq.num_new_tokens ||
          plan.prefill_q_indptr[0] != 0) {
        fail(name + "prefill_q_indptr");
      }
    }
    for (std::int32_t i = 0; i < seq.num_new_tokens; ++i) {
      const auto row = static_cast<std::size_t>(plan.q_indptr[s]) + static_cast<std::size_t>(i);
      const std::int64_t pos = seq.num_cached_tokens + i;
      if (plan.positions[row] != pos) fail(name + "position of row " + std::to_string(row));
      const std::int64_t block =
          plan.page_indices[static_cast<std::size_t>(pages.page_begin(s32) + pos / bs)];
      if (plan.slot_mapping[row] != block * bs + pos % bs) {
        fail(name + "slot of row " + std::to_string(row) + " is not its page table slot");
      }
      if (!slots.insert(plan.slot_mapping[row]).second) {
        fail(name + "slot " + std::to_string(plan.slot_mapping[row]) + " written twice");
      }
    }
    for (std::int32_t i = seq.num_new_tokens - seq.num_logits(); i < seq.num_new_tokens; ++i) {
      if (logit >= plan.logits_indices.size() ||
          plan.logits_indices[logit] != plan.q_indptr[s] + i) {
        fail(name + "logits_indices");
      }
      ++logit;
    }
  }
  if (logit != plan.logits_indices.size()) fail("logits_indices has extra rows");
  const std::int32_t want_q = plan.num_decodes > 0 && uniform ? decode_rows : 0;
  if (plan.decode_q_per_seq != want_q) fail("decode_q_per_seq");
}

}  // namespace inferkit
