// SPDX-License-Identifier: Apache-2.0
// Tests of attention/attention_plan.hpp, the split-KV planner and work-item index math the CUDA
// kernels run: every (sequence, row block, chunk) is one item and find_item inverts the
// numbering; chunks partition [0, kv_len) into non-empty quantum-aligned ranges; a skewed batch
// spreads its long sequence over many CTAs while a batch that fills the device stays unsplit;
// visible_keys bounds exactly the keys AttentionParams::visible admits.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/attention/attention_plan.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
#include <numeric>
#include <vector>

namespace {

using namespace inferkit;

AttentionPlanInput input(const std::vector<std::int64_t>& lens,
                         const std::vector<std::int32_t>& rows, std::int32_t rows_per_block,
                         std::int32_t heads, std::int32_t sms = 132, std::int32_t per_sm = 2) {
  AttentionPlanInput in;
  in.kv_len = lens;
  in.q_rows = rows;
  in.rows_per_block = rows_per_block;
  in.num_kv_heads = heads;
  in.sm_count = sms;
  in.ctas_per_sm = per_sm;
  return in;
}

/// Checks the plan's numbering: items in order, find_item inverts it, chunks partition kv_len.
void check_plan(const AttentionPlan& plan, const std::vector<std::int64_t>& lens,
                const std::vector<std::int32_t>& rows) {
  std::int32_t item = 0;
  for (std::int32_t s = 0; s < plan.num_seqs; ++s) {
    const auto su = static_cast<std::size_t>(s);
    const std::int32_t blocks = (rows[su] + plan.rows_per_block - 1) / plan.rows_per_block;
    REQUIRE(plan.item_begin[s] == item);
    REQUIRE(plan.row_blocks(s) == blocks);
    for (std::int32_t b = 0; b < blocks; ++b) {
      for (std::int32_t c = 0; c < plan.chunks[s]; ++c) {
        const detail::WorkItem w = detail::find_item(plan, item++);
        REQUIRE(w.seq == s);
        REQUIRE(w.row_block == b);
        REQUIRE(w.chunk == c);
      }
    }
    // Chunks: consecutive, non-empty, quantum-aligned starts, covering [0, len).
    std::int64_t at = 0;
    for (std::int32_t c = 0; c < plan.chunks[s]; ++c) {
      const detail::KeyRange r = detail::chunk_bounds(lens[su], plan.chunk_tokens[s], c);
      REQUIRE(r.begin == at);
      REQUIRE(r.begin % kChunkQuantumTokens == 0);
      REQUIRE((r.end > r.begin || lens[su] == 0));
      at = r.end;
    }
    REQUIRE(at == lens[su]);
  }
  REQUIRE(plan.num_items == item);
  REQUIRE(plan.item_begin[plan.num_seqs] == item);
}

}  // namespace

TEST_CASE("plan_attention: numbers every (sequence, row block, chunk) once",
          "[attention][attention_plan]") {
  Rng rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 1 + rng.below(40);
    std::vector<std::int64_t> lens(n);
    std::vector<std::int32_t> rows(n);
    for (std::size_t s = 0; s < n; ++s) {
      lens[s] = rng.below(4) == 0 ? rng.below(3) : 1 + rng.below(rng.below(2) ? 40000 : 600);
      rows[s] = static_cast<std::int32_t>(rng.below(3) == 0 ? 0 : 1 + rng.below(100));
    }
    AttentionPlanInput in = input(lens, rows, 1 + static_cast<std::int32_t>(rng.below(64)),
                                  1 + static_cast<std::int32_t>(rng.below(8)),
                                  1 + static_cast<std::int32_t>(rng.below(140)));
    if (trial % 5 == 0) in.max_chunk_tokens = 1 + static_cast<std::int32_t>(rng.below(3000));
    if (trial % 7 == 0) in.allow_split = false;
    const AttentionPlan plan = plan_attention(in, 3);
    CHECK(plan.seq_begin == 3);
    check_plan(plan, lens, rows);
    if (!in.allow_split) {
      for (std::size_t s = 0; s < n; ++s) CHECK(plan.chunks[s] == 1);
    }
    if (in.max_chunk_tokens > 0 && in.allow_split) {
      const std::int64_t cap = detail::round_up(in.max_chunk_tokens, kChunkQuantumTokens);
      for (std::size_t s = 0; s < n; ++s) {
        for (std::int32_t c = 0; c < plan.chunks[s]; ++c) {
          const auto r = detail::chunk_bounds(lens[s], plan.chunk_tokens[s], c);
          CHECK(r.end - r.begin <= cap);
        }
      }
    }
  }
}

TEST_CASE("plan_attention: a skewed batch spreads its long sequence, a full batch is not split",
          "[attention][attention_plan]") {
  // One 32K sequence among 63 short ones, decode (1 row block each), 8 KV heads, 132 SMs.
  std::vector<std::int64_t> lens(64, 512);
  lens[17] = 32768;
  const std::vector<std::int32_t> rows(64, 4);
  const AttentionPlan skewed = plan_attention(input(lens, rows, 8, 8));
  check_plan(skewed, lens, rows);
  CHECK(skewed.chunks[17] >= 16);
  CHECK(skewed.any_split);
  // The longest chunk is within a few times the short sequences' work, not the whole 32K.
  const auto longest = detail::chunk_bounds(32768, skewed.chunk_tokens[17], 0);
  CHECK(longest.end - longest.begin <= 4096);
  for (std::size_t s = 0; s < 64; ++s) {
    if (s != 17) CHECK(skewed.chunks[s] == 1);
  }
  // 64 x 32K fills the device without splitting.
  const std::vector<std::int64_t> full(64, 32768);
  const AttentionPlan unsplit = plan_attention(input(full, rows, 8, 8));
  CHECK_FALSE(unsplit.any_split);
  // One long sequence alone is cut into about one wave of CTAs.
  const AttentionPlan single = plan_attention(input({32768}, {4}, 8, 8));
  CHECK(single.chunks[0] * 8 >= 132);
  CHECK(single.chunks[0] * 8 <= 2 * 132 * 2);
}

TEST_CASE("plan_attention: rejects bad inputs", "[attention][attention_plan]") {
  const std::vector<std::int64_t> lens(kMaxPlanSeqs + 1, 10);
  const std::vector<std::int32_t> rows(kMaxPlanSeqs + 1, 1);
  CHECK_THROWS_AS(plan_attention(input(lens, rows, 1, 1)), Error);
  const std::vector<std::int32_t> short_rows(3, 1);
  CHECK_THROWS_AS(plan_attention(input({1, 2}, short_rows, 1, 1)), Error);
  CHECK_THROWS_AS(plan_attention(input({1}, {1}, 0, 1)), Error);
}

TEST_CASE("visible_keys: bounds exactly the keys some row of the block sees",
          "[attention][attention_plan]") {
  Rng rng(9);
  for (int trial = 0; trial < 300; ++trial) {
    AttentionParams p;
    p.causal = rng.below(4) != 0;
    p.window_left = rng.below(3) == 0 ? -1 : static_cast<std::int32_t>(rng.below(50));
    const std::int64_t kv_len = 1 + rng.below(200);
    const std::int64_t n_rows_tokens = 1 + rng.below(static_cast<std::uint32_t>(kv_len));
    const std::int64_t first =
        kv_len - n_rows_tokens + rng.below(static_cast<std::uint32_t>(n_rows_tokens));
    const std::int64_t last = first + rng.below(static_cast<std::uint32_t>(kv_len - first));
    const detail::KeyRange r = detail::visible_keys(p, first, last, kv_len);
    for (std::int64_t key = 0; key < kv_len; ++key) {
      bool seen = false;
      for (std::int64_t pos = first; pos <= last; ++pos) seen = seen || p.visible(pos, key);
      INFO("key " << key << " range " << r.begin << ".." << r.end);
      if (seen) CHECK((key >= r.begin && key < r.end));
    }
    // The bounds are tight: the first and last keys of a non-empty range are seen.
    if (r.end > r.begin) {
      CHECK(p.visible(first, r.begin));
      CHECK(p.visible(last, r.end - 1));
    }
  }
}
