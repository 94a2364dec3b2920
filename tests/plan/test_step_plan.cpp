// SPDX-License-Identifier: Apache-2.0
// Tests for plan/step_plan.hpp: a real plan (decodes with drafts, a chunked prefill, a fresh
// prompt) passes check_step_plan, and each single corruption of it is reported; the decode and
// prefill sub-tables are valid views of their sequences.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <span>
#include <string>
#include <tests/support/error_code.hpp>
#include <tests/support/fake_engine.hpp>
#include <vector>

using namespace inferkit;
using inferkit::test::code_of;

TEST_CASE("check_step_plan: a scheduler's plan passes and every corruption is caught",
          "[plan][step_plan]") {
  BlockAllocator pool(64, 4);
  SchedulerConfig config;
  config.max_batched_tokens = 20;
  ContinuousScheduler<> sched(pool, nullptr, config);
  test::FakeEngine engine(64, 4, 40);
  for (RequestId id = 0; id < 2; ++id) {
    Request r;
    r.id = id;
    r.prompt = {1, 2, 3, static_cast<TokenId>(id)};
    r.max_new_tokens = 20;
    sched.add(r);
  }
  sched.commit(engine.run(sched.schedule(0.0)), 0.0);
  const std::vector<TokenId> drafts = {5, 6};
  sched.propose_drafts(0, drafts);
  sched.propose_drafts(1, drafts);
  Request big;
  big.id = 9;
  big.prompt.assign(30, 4);
  sched.add(big);
  const StepPlan& plan = sched.schedule(1.0);
  REQUIRE(plan.num_decodes == 2);
  REQUIRE(plan.decode_q_per_seq == 3);
  REQUIRE(plan.num_prefills() == 1);
  CHECK(plan.sequences[2].num_new_tokens == 14);  // 20 - 2 * 3
  check_step_plan(plan);
  // The sub-tables are the decode and prefill sequences' own pages.
  const PageTableView all = plan.pages();
  const PageTableView dec = plan.decode_pages();
  const PageTableView pre = plan.prefill_pages();
  CHECK(dec.num_seqs == 2);
  CHECK(pre.num_seqs == 1);
  CHECK(dec.seq_len(1, 4) == all.seq_len(1, 4));
  CHECK(pre.seq_len(0, 4) == all.seq_len(2, 4));
  CHECK(pre.page_begin(0) == all.page_begin(2));
  // sequence_pages(s) is the page table's run for s, and each is the scheduler's table for it.
  for (std::int32_t s = 0; s < plan.num_seqs(); ++s) {
    const std::span<const std::int32_t> mine = plan.sequence_pages(s);
    REQUIRE(mine.size() == static_cast<std::size_t>(all.num_pages(s)));
    const std::span<const BlockId> table =
        sched.blocks(plan.sequences[static_cast<std::size_t>(s)].request_id);
    CHECK(std::equal(mine.begin(), mine.end(), table.begin(), table.end()));
  }

  const auto broken = [&](auto&& mutate, const char* what) {
    StepPlan copy = plan;
    mutate(copy);
    std::string message;
    CHECK(code_of([&] { check_step_plan(copy); }, &message) == ErrorCode::kInvalidState);
    INFO(what << ": " << message);
  };
  broken([](StepPlan& p) { p.positions[1] += 1; }, "position");
  broken([](StepPlan& p) { p.slot_mapping[0] += 1; }, "slot");
  broken([](StepPlan& p) { p.slot_mapping[4] = p.slot_mapping[3]; }, "shared slot");
  broken([](StepPlan& p) { p.q_indptr[1] += 1; }, "q_indptr");
  broken([](StepPlan& p) { p.logits_indices.pop_back(); }, "logits");
  broken([](StepPlan& p) { p.logits_indices[0] += 1; }, "logit row");
  broken([](StepPlan& p) { p.num_decodes = 3; }, "num_decodes");
  broken([](StepPlan& p) { p.decode_q_per_seq = 1; }, "decode_q_per_seq");
  broken([](StepPlan& p) { p.sequences[0].samples = false; }, "decode must sample");
  broken([](StepPlan& p) { p.sequences[2].num_draft_tokens = 1; }, "prefill drafts");
  broken([](StepPlan& p) { p.last_page_len[2] -= 1; }, "page length");
  broken([](StepPlan& p) { p.prefill_q_indptr.push_back(99); }, "prefill_q_indptr");
  broken([](StepPlan& p) { p.token_ids.push_back(1); }, "row count");
  broken([](StepPlan& p) { p.page_indices = p.page_indices.first(1); }, "pages outside the store");
  sched.commit(engine.run(plan), 2.0);
}

TEST_CASE("StepPlan: an empty plan has no sequences and valid empty views", "[plan][step_plan]") {
  StepPlan p;
  p.block_size = 16;
  p.q_indptr = {0};
  p.prefill_q_indptr = {0};
  CHECK(p.empty());
  CHECK(p.num_tokens() == 0);
  CHECK(p.pages().num_seqs == 0);
  CHECK(p.decode_pages().num_seqs == 0);
  check_step_plan(p);
}
