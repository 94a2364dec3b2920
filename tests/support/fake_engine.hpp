// SPDX-License-Identifier: Apache-2.0
// A deterministic fake model for scheduler tests that exercises the plan as a real engine would:
// its "KV cache" stores the token id of each slot; a step performs the block copies, writes each
// row's token into its slot, and reads every sampling sequence's context back through the page
// table. The next token is a hash of the whole context, so a wrong page, slot, copy or shared
// prefix block changes the output. Greedy speculative verification accepts drafts while they
// equal the model's token. `reference_output` is the same model run alone, without a scheduler.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/rng.hpp>
#include <inferkit/core/token_id.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/sched/request.hpp>
#include <span>
#include <vector>

namespace inferkit::test {

/// The fake model's next token after `context` (a hash of every token, mod vocab).
inline TokenId fake_next_token(std::span<const TokenId> context, std::int32_t vocab) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (TokenId t : context) h = (h ^ static_cast<std::uint32_t>(t)) * 0x100000001b3ull;
  h ^= h >> 29;
  return static_cast<TokenId>(h % static_cast<std::uint64_t>(vocab));
}

/// What `request` generates when it runs alone: greedy continuation until a stop token or
/// max_new_tokens (or `max_output` if smaller).
inline std::vector<TokenId> reference_output(const Request& request, std::int32_t vocab,
                                             std::int64_t max_output = INT64_MAX) {
  std::vector<TokenId> seq = request.prompt;
  std::vector<TokenId> out;
  const std::int64_t limit = std::min(request.max_new_tokens, max_output);
  while (static_cast<std::int64_t>(out.size()) < limit) {
    const TokenId t = fake_next_token(seq, vocab);
    out.push_back(t);
    seq.push_back(t);
    if (std::find(request.stop_tokens.begin(), request.stop_tokens.end(), t) !=
        request.stop_tokens.end()) {
      break;
    }
  }
  return out;
}

/// The fake engine over a pool of `num_blocks` blocks of `block_size` slots.
class FakeEngine {
 public:
  FakeEngine(std::int32_t num_blocks, std::int32_t block_size, std::int32_t vocab)
      : block_size_(block_size),
        vocab_(vocab),
        slots_(static_cast<std::size_t>(num_blocks) * static_cast<std::size_t>(block_size), -1) {}

  /// Runs `plan`: returns each sequence's emitted tokens in plan order (spans into `emitted`).
  std::vector<SequenceResult> run(const StepPlan& plan) {
    REQUIRE(plan.block_size == block_size_);
    for (const BlockCopy& c : plan.block_copies) {
      for (std::int32_t i = 0; i < c.num_slots; ++i) {
        slots_[slot_index(std::int64_t{c.dst} * block_size_ + i)] =
            slots_[slot_index(std::int64_t{c.src} * block_size_ + i)];
      }
    }
    for (std::size_t row = 0; row < plan.token_ids.size(); ++row) {
      slots_[slot_index(plan.slot_mapping[row])] = plan.token_ids[row];
    }
    emitted_.clear();
    std::vector<std::size_t> begin;
    const PageTableView pages = plan.pages();
    for (std::int32_t s = 0; s < plan.num_seqs(); ++s) {
      const ScheduledSequence& seq = plan.sequences[static_cast<std::size_t>(s)];
      begin.push_back(emitted_.size());
      if (!seq.samples) continue;
      // The context as attention would read it: every position through the page table.
      std::vector<TokenId> context;
      const std::int64_t len = seq.seq_len();
      for (std::int64_t p = 0; p < len; ++p) {
        const std::int32_t block =
            plan.page_indices[pages.page_begin(s) + static_cast<std::int32_t>(p / block_size_)];
        const TokenId t = slots_[slot_index(std::int64_t{block} * block_size_ + p % block_size_)];
        REQUIRE(t >= 0);  // never an unwritten slot
        context.push_back(t);
      }
      // Rows for positions len - 1 - drafts .. len - 1; draft j sits at position len - drafts + j.
      const std::int64_t first = len - 1 - seq.num_draft_tokens;
      for (std::int32_t j = 0; j <= seq.num_draft_tokens; ++j) {
        const TokenId t = fake_next_token(
            std::span<const TokenId>(context).first(static_cast<std::size_t>(first + j + 1)),
            vocab_);
        emitted_.push_back(t);
        if (j == seq.num_draft_tokens) break;
        if (context[static_cast<std::size_t>(first + j + 1)] != t) break;  // draft rejected
      }
    }
    begin.push_back(emitted_.size());
    std::vector<SequenceResult> results;
    for (std::int32_t s = 0; s < plan.num_seqs(); ++s) {
      const auto b = begin[static_cast<std::size_t>(s)];
      const auto e = begin[static_cast<std::size_t>(s) + 1];
      results.push_back({plan.sequences[static_cast<std::size_t>(s)].request_id,
                         std::span<const TokenId>(emitted_).subspan(b, e - b)});
    }
    return results;
  }

 private:
  std::size_t slot_index(std::int64_t slot) const {
    REQUIRE(slot >= 0);
    REQUIRE(static_cast<std::size_t>(slot) < slots_.size());
    return static_cast<std::size_t>(slot);
  }

  std::int32_t block_size_;
  std::int32_t vocab_;
  std::vector<TokenId> slots_;
  std::vector<TokenId> emitted_;
};

/// Drafts for a sequence whose tokens are `known`: `k` tokens, each the model's true next
/// token with probability `p_correct` (else a random one), continuing from the drafts so far.
inline std::vector<TokenId> fake_drafts(std::span<const TokenId> known, std::int32_t k,
                                        double p_correct, std::int32_t vocab, Rng& rng) {
  std::vector<TokenId> seq(known.begin(), known.end());
  std::vector<TokenId> drafts;
  for (std::int32_t i = 0; i < k; ++i) {
    TokenId t = fake_next_token(seq, vocab);
    if (rng.uniform_double() >= p_correct) {
      t = static_cast<TokenId>(rng.below(static_cast<std::uint32_t>(vocab)));
    }
    drafts.push_back(t);
    seq.push_back(t);
  }
  return drafts;
}

}  // namespace inferkit::test
