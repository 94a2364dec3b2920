// SPDX-License-Identifier: Apache-2.0
// Test helper: the logits of every position of a token sequence (teacher forcing), computed by
// LlamaModel::forward over paged KV in chunks, outside any scheduler: the reference the model
// tests compare against the golden files, and the engine tests compare log-probabilities with.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/float16.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <inferkit/model/llama_model.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <span>
#include <vector>

namespace inferkit::test {

// Logits of every position of `tokens`, computed as chunks of `chunk` tokens, each chunk one
// step whose every row samples, with the K/V stored as `KV` (the model's float16 by default).
template <class KV = float16>
std::vector<float> teacher_forced(const LlamaModel& model, std::span<const TokenId> tokens,
                                  std::int32_t chunk) {
  constexpr std::int32_t kBlock = 16;
  const auto n = static_cast<std::int32_t>(tokens.size());
  BlockAllocator pool(n / kBlock + 2, kBlock);
  BlockTable table(pool);
  PagedKVCache<KV> kv(model.kv_shape(pool.num_blocks(), kBlock));
  LlamaWorkspace ws;
  const auto vocab = static_cast<std::size_t>(model.config().vocab_size);
  std::vector<float> all(static_cast<std::size_t>(n) * vocab);
  for (std::int32_t begin = 0; begin < n; begin += chunk) {
    const std::int32_t len = std::min(chunk, n - begin);
    StepPlan plan;
    plan.block_size = kBlock;
    plan.slot_mapping.resize(static_cast<std::size_t>(len));
    REQUIRE(table.append_tokens(pool, len, plan.slot_mapping, plan.block_copies));
    plan.sequences = {{0, begin, len, 0, true}};
    for (std::int32_t i = 0; i < len; ++i) {
      plan.token_ids.push_back(tokens[static_cast<std::size_t>(begin + i)]);
      plan.positions.push_back(begin + i);
      plan.logits_indices.push_back(i);
    }
    plan.q_indptr = {0, len};
    plan.prefill_q_indptr = {0, len};
    plan.page_begin = {0};
    plan.page_end = {table.num_blocks()};
    plan.last_page_len = {table.last_block_tokens()};
    plan.page_indices = table.blocks();
    // Not a scheduler plan (every row samples), so check_step_plan does not apply.
    model.forward(plan, kv, ws,
                  std::span<float>(all).subspan(static_cast<std::size_t>(begin) * vocab,
                                                static_cast<std::size_t>(len) * vocab));
  }
  return all;
}

}  // namespace inferkit::test
