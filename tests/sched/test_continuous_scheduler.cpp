// SPDX-License-Identifier: Apache-2.0
// Tests for sched/continuous_scheduler.hpp. Long randomized runs under memory pressure (small
// pools, bursty arrivals, mixed priorities, shared prefixes in several cache namespaces, aborts,
// speculative drafts that are often wrong, whole prompts with prefix hits over small budgets)
// drive the scheduler with a fake engine that reads every context back through the plan's page
// table; each request's output must equal the same request run alone, every request finishes
// exactly once, budgets hold every step, the scheduler is consistent after every schedule and
// commit, and every block is back in the pool at the end. Targeted cases cover preemption order
// and hysteresis, rollback of rejected drafts, requests that can never fit, namespaces, and bad
// arguments (state unchanged).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <inferkit/sched/scheduling_policy.hpp>
#include <map>
#include <optional>
#include <string>
#include <tests/support/error_code.hpp>
#include <tests/support/fake_engine.hpp>
#include <vector>

namespace {

using namespace inferkit;
using inferkit::test::code_of;
using inferkit::test::FakeEngine;
using inferkit::test::reference_output;

constexpr std::int32_t kVocab = 61;

#ifdef INFERKIT_TEST_SANITIZED
constexpr int kRunScale = 1;
#else
constexpr int kRunScale = 3;
#endif

struct Scenario {
  std::int32_t num_blocks = 64;
  std::int32_t block_size = 4;
  SchedulerConfig config{};
  bool prefix_cache = true;
  std::int32_t num_requests = 120;
  std::int32_t max_arrivals_per_step = 6;  // bursty: 0..max each step
  std::int32_t prompt_min = 1;
  std::int32_t prompt_max = 40;
  std::int32_t output_max = 30;
  std::int32_t prefix_groups = 3;  // shared prompt heads
  std::int32_t prefix_len = 12;
  std::int32_t namespaces = 2;
  std::int32_t priorities = 3;
  double abort_rate = 0.01;  // per step, one random held request
  double draft_rate = 0.5;   // share of decodes that get drafts
  std::int32_t max_drafts = 4;
  double draft_accuracy = 0.6;
  std::int32_t too_large = 2;  // requests whose prompt exceeds the pool
  std::uint64_t seed = 1;
};

struct RunOutcome {
  std::map<RequestId, RequestOutcome> outcomes;
  std::map<RequestId, Request> requests;
  SchedulerStats stats;
  std::int64_t steps = 0;
};

Request make_request(Rng& rng, const Scenario& sc, RequestId id, double now,
                     const std::vector<std::vector<TokenId>>& heads) {
  Request r;
  r.id = id;
  const auto len = static_cast<std::int32_t>(
      sc.prompt_min + rng.below(static_cast<std::uint32_t>(sc.prompt_max - sc.prompt_min + 1)));
  if (!heads.empty() && rng.below(2) == 0) {
    const auto& head = heads[rng.below(static_cast<std::uint32_t>(heads.size()))];
    r.prompt.assign(head.begin(), head.end());
  }
  while (static_cast<std::int32_t>(r.prompt.size()) < len) {
    r.prompt.push_back(static_cast<TokenId>(rng.below(kVocab)));
  }
  r.max_new_tokens = 1 + rng.below(static_cast<std::uint32_t>(sc.output_max));
  if (rng.below(3) == 0) r.stop_tokens = {static_cast<TokenId>(rng.below(kVocab))};
  r.arrival_s = now;
  r.priority = static_cast<std::int32_t>(rng.below(static_cast<std::uint32_t>(sc.priorities)));
  r.cache_namespace = rng.below(static_cast<std::uint32_t>(sc.namespaces));
  return r;
}

template <class Policy = FcfsPolicy>
RunOutcome run_scenario(const Scenario& sc, Policy policy = {}) {
  Rng rng(sc.seed);
  BlockAllocator pool(sc.num_blocks, sc.block_size);
  std::optional<RadixTree> tree;
  if (sc.prefix_cache) tree.emplace(pool);
  RunOutcome run;
  {
    ContinuousScheduler<Policy> sched(pool, tree ? &*tree : nullptr, sc.config, policy);
    FakeEngine engine(sc.num_blocks, sc.block_size, kVocab);
    std::vector<std::vector<TokenId>> heads;
    for (std::int32_t g = 0; g < sc.prefix_groups; ++g) {
      std::vector<TokenId> head;
      for (std::int32_t i = 0; i < sc.prefix_len; ++i) {
        head.push_back(static_cast<TokenId>(rng.below(kVocab)));
      }
      heads.push_back(head);
    }
    RequestId next_id = 0;
    double now = 0.0;
    std::int32_t big_left = sc.too_large;
    while (next_id < sc.num_requests || sched.has_unfinished()) {
      const auto arrivals = rng.below(static_cast<std::uint32_t>(sc.max_arrivals_per_step + 1));
      for (std::uint32_t a = 0; a < arrivals && next_id < sc.num_requests; ++a) {
        Request r = make_request(rng, sc, next_id++, now, heads);
        if (big_left > 0 && rng.below(10) == 0) {
          --big_left;
          r.prompt.resize(static_cast<std::size_t>(sc.num_blocks * sc.block_size + 1), 3);
        }
        run.requests[r.id] = r;
        sched.add(r);
      }
      if (rng.uniform_double() < sc.abort_rate && next_id > 0) {
        (void)sched.abort(static_cast<RequestId>(rng.below(static_cast<std::uint32_t>(next_id))),
                          now);
      }
      for (const auto& [id, req] : run.requests) {
        if (!sched.contains(id) || sched.state(id) != RequestState::kRunning) continue;
        if (rng.uniform_double() >= sc.draft_rate) continue;
        const auto k =
            static_cast<std::int32_t>(1 + rng.below(static_cast<std::uint32_t>(sc.max_drafts)));
        sched.propose_drafts(
            id, test::fake_drafts(sched.tokens(id), k, sc.draft_accuracy, kVocab, rng));
      }
      const StepPlan& plan = sched.schedule(now);
      sched.check_consistency();  // in flight too: every running request, planned or not
      check_step_plan(plan);
      REQUIRE(plan.num_tokens() <= sc.config.max_batched_tokens);
      REQUIRE(plan.num_seqs() <= sc.config.max_num_seqs);
      REQUIRE(sched.num_running() <= sc.config.max_num_seqs);
      now += 1.0;
      if (!plan.empty()) {
        const std::vector<SequenceResult> results = engine.run(plan);
        // Sometimes abort a request whose step is in flight: its result must be ignored.
        if (rng.uniform_double() < sc.abort_rate && plan.num_seqs() > 0) {
          (void)sched.abort(
              plan.sequences[rng.below(static_cast<std::uint32_t>(plan.num_seqs()))].request_id,
              now);
        }
        sched.commit(results, now);
        ++run.steps;
      }
      sched.check_consistency();
      for (RequestOutcome& o : sched.take_finished()) {
        REQUIRE(run.outcomes.count(o.id) == 0);  // finished exactly once
        run.outcomes.emplace(o.id, std::move(o));
      }
      REQUIRE(run.steps < 100000);
    }
    run.stats = sched.stats();
  }
  // Every block is back in the pool or evictable in the prefix cache.
  CHECK(pool.num_used_blocks() == 0);
  if (tree) {
    tree->check_consistency();
    CHECK(pool.num_free_blocks() + pool.num_evictable_blocks() == pool.num_blocks());
  }
  pool.check_consistency();
  return run;
}

// Every request finished once, with the output it produces alone (a prefix of it if aborted).
void check_outputs(const RunOutcome& run, const Scenario& sc) {
  REQUIRE(run.outcomes.size() == run.requests.size());
  for (const auto& [id, req] : run.requests) {
    INFO("request " << id);
    const RequestOutcome& o = run.outcomes.at(id);
    const std::vector<TokenId> want = reference_output(req, kVocab);
    const auto pool_tokens = static_cast<std::size_t>(sc.num_blocks * sc.block_size);
    switch (o.reason) {
      case FinishReason::kStopToken:
      case FinishReason::kLength:
        CHECK(o.output == want);
        CHECK((o.reason == FinishReason::kLength) ==
              (static_cast<std::int64_t>(o.output.size()) == req.max_new_tokens &&
               std::find(req.stop_tokens.begin(), req.stop_tokens.end(), o.output.back()) ==
                   req.stop_tokens.end()));
        break;
      case FinishReason::kAborted:
        REQUIRE(o.output.size() <= want.size());
        CHECK(std::equal(o.output.begin(), o.output.end(), want.begin()));
        break;
      case FinishReason::kExceedsCapacity:
        // Only a request whose prompt (or prompt + output so far) outgrows the pool, or without
        // chunked prefill one that outgrows a step's budget (its recompute must fit one step).
        if (sc.config.chunked_prefill ||
            static_cast<std::int64_t>(req.prompt.size() + o.output.size()) <=
                sc.config.max_batched_tokens) {
          CHECK(req.prompt.size() + o.output.size() + 1 > pool_tokens / 2);
        }
        CHECK(std::equal(o.output.begin(), o.output.end(), want.begin()));
        break;
      case FinishReason::kNone:
        FAIL("finished without a reason");
    }
  }
}

}  // namespace

TEST_CASE(
    "ContinuousScheduler: randomized runs under memory pressure give every request its solo output",
    "[sched][continuous_scheduler]") {
  for (int round = 0; round < 4 * kRunScale; ++round) {
    Scenario sc;
    sc.seed = 100 + static_cast<std::uint64_t>(round);
    sc.config.max_num_seqs = 3 + round % 6;
    sc.config.max_batched_tokens = 8 + 9 * (round % 5);
    sc.config.max_prefill_chunk_tokens = round % 3 == 0 ? 5 : 0;
    sc.config.watermark = round % 2 == 0 ? 0.0 : 0.05;
    sc.config.preemption_headroom_steps = round % 4 == 1 ? 0 : 8;
    sc.block_size = 1 + round % 5;
    sc.num_blocks = 20 * 4 / sc.block_size + 8;
    sc.prefix_cache = round % 4 != 3;
    INFO("round " << round << " seed " << sc.seed);
    const RunOutcome run = run_scenario(sc);
    check_outputs(run, sc);
    CHECK(run.stats.preemptions > 0);  // the pools are small enough to force them
  }
}

TEST_CASE(
    "ContinuousScheduler: without chunked prefill, prefix hits that miss the leftover budget keep "
    "every policy consistent",
    "[sched][continuous_scheduler]") {
  // Whole prompts only, small budgets eaten by decodes and drafts, and prompts from a few shared
  // heads in two namespaces: requests often match a cached prefix but their remaining prompt does
  // not fit what the step has left, so they are admitted but not planned (the class comment's
  // contract). Pools of 6-40 blocks of 1-16 tokens; bursty arrivals; run_scenario checks
  // consistency after every schedule and every commit.
  Rng params(3100);
  std::int64_t cached = 0;
  for (int round = 0; round < 6 * kRunScale; ++round) {
    Scenario sc;
    sc.seed = 3100 + static_cast<std::uint64_t>(round);
    sc.block_size = static_cast<std::int32_t>(1 + params.below(16));
    sc.num_blocks = static_cast<std::int32_t>(6 + params.below(35));
    const std::int32_t pool_tokens = sc.num_blocks * sc.block_size;
    sc.config.chunked_prefill = false;
    sc.config.max_batched_tokens = std::min<std::int64_t>(4 + params.below(29), pool_tokens);
    sc.config.max_num_seqs = static_cast<std::int32_t>(2 + params.below(7));
    sc.config.watermark = params.below(2) == 0 ? 0.0 : 0.05;
    sc.config.preemption_headroom_steps = params.below(2) == 0 ? 0 : 8;
    sc.num_requests = 80;
    sc.max_arrivals_per_step = 8;
    sc.prompt_max = static_cast<std::int32_t>(std::max<std::int64_t>(
        2, std::min<std::int64_t>(pool_tokens / 2, sc.config.max_batched_tokens)));
    sc.prompt_min = std::max(1, sc.prompt_max / 2);
    sc.prefix_len = std::max(sc.block_size, sc.prompt_max * 2 / 3);
    sc.prefix_groups = 3;
    sc.namespaces = 2;
    sc.output_max = 12;
    INFO("round " << round << " seed " << sc.seed << ": " << sc.num_blocks << " blocks of "
                  << sc.block_size << ", budget " << sc.config.max_batched_tokens);
    {
      INFO("fcfs");
      const RunOutcome run = run_scenario(sc, FcfsPolicy{});
      check_outputs(run, sc);
      cached += run.stats.cached_prompt_tokens;
    }
    {
      INFO("priority");
      check_outputs(run_scenario(sc, PriorityPolicy{}), sc);
    }
    {
      INFO("longest prefix match");
      check_outputs(run_scenario(sc, LongestPrefixMatchPolicy{5.0, 16}), sc);
    }
    {
      INFO("whole-batch admission");  // a batch may form past the budget, prefix hits and all
      sc.config.admission = AdmissionMode::kWholeBatch;
      check_outputs(run_scenario(sc, FcfsPolicy{}), sc);
    }
  }
  CHECK(cached > 0);  // the shared heads were matched
}

TEST_CASE("ContinuousScheduler: priority and prefix-match policies keep outputs exact",
          "[sched][continuous_scheduler]") {
  Scenario sc;
  sc.seed = 7;
  sc.config.max_num_seqs = 5;
  sc.config.max_batched_tokens = 24;
  check_outputs(run_scenario(sc, PriorityPolicy{}), sc);
  sc.seed = 8;
  check_outputs(run_scenario(sc, LongestPrefixMatchPolicy{5.0, 16}), sc);
}

TEST_CASE("ContinuousScheduler: a roomy pool with no drafts never preempts and caches prefixes",
          "[sched][continuous_scheduler]") {
  Scenario sc;
  sc.num_blocks = 2000;
  sc.draft_rate = 0.0;
  sc.too_large = 0;
  sc.abort_rate = 0.0;
  sc.config.max_num_seqs = 16;
  const RunOutcome run = run_scenario(sc);
  check_outputs(run, sc);
  CHECK(run.stats.preemptions == 0);
  CHECK(run.stats.cached_prompt_tokens > 0);  // shared heads were matched
  CHECK(run.stats.rejected_draft_tokens == 0);
}

TEST_CASE("ContinuousScheduler: decodes first, then chunked prefill in the leftover budget",
          "[sched][continuous_scheduler]") {
  BlockAllocator pool(100, 4);
  SchedulerConfig config;
  config.max_batched_tokens = 10;
  ContinuousScheduler<> sched(pool, nullptr, config);
  FakeEngine engine(100, 4, kVocab);
  Request a;
  a.id = 1;
  a.prompt.assign(3, 5);
  a.max_new_tokens = 50;
  sched.add(a);
  const StepPlan& p0 = sched.schedule(0.0);
  REQUIRE(p0.num_seqs() == 1);
  CHECK(p0.num_decodes == 0);
  CHECK(p0.sequences[0].num_new_tokens == 3);
  CHECK(p0.sequences[0].samples);
  sched.commit(engine.run(p0), 1.0);
  Request b;
  b.id = 2;
  b.prompt.assign(25, 6);
  b.max_new_tokens = 5;
  sched.add(b);
  const StepPlan& p1 = sched.schedule(1.0);
  REQUIRE(p1.num_seqs() == 2);
  CHECK(p1.num_decodes == 1);
  CHECK(p1.decode_q_per_seq == 1);
  CHECK(p1.sequences[0].request_id == 1);
  CHECK(p1.sequences[1].request_id == 2);
  CHECK(p1.sequences[1].num_new_tokens == 9);  // 10 - the decode
  CHECK_FALSE(p1.sequences[1].samples);
  CHECK(p1.logits_indices == std::vector<std::int32_t>{0});
  CHECK(p1.prefill_q_indptr == std::vector<std::int32_t>{0, 9});
  const std::vector<SequenceResult> r1 = engine.run(p1);
  CHECK(r1[1].tokens.empty());
  sched.commit(r1, 2.0);
  const StepPlan& p2 = sched.schedule(2.0);
  CHECK(p2.sequences[1].num_cached_tokens == 9);
  CHECK(p2.sequences[1].num_new_tokens == 9);
  sched.commit(engine.run(p2), 3.0);
  const StepPlan& p3 = sched.schedule(3.0);
  CHECK(p3.sequences[1].num_new_tokens == 7);  // the rest: 25 - 18
  CHECK(p3.sequences[1].samples);
  sched.commit(engine.run(p3), 4.0);
  sched.check_consistency();
}

TEST_CASE(
    "ContinuousScheduler: a decode without a block preempts the latest, lowest-priority request",
    "[sched][continuous_scheduler]") {
  // 6 blocks of 2 tokens: three 4-token requests fill 2 blocks each; the next decode of any of
  // them needs a 7th block.
  BlockAllocator pool(6, 2);
  SchedulerConfig config;
  config.watermark = 0.0;
  config.preemption_headroom_steps = 0;
  ContinuousScheduler<> sched(pool, nullptr, config);
  FakeEngine engine(6, 2, kVocab);
  for (RequestId id : {10, 11, 12}) {
    Request r;
    r.id = id;
    r.prompt = {1, 2, 3, static_cast<TokenId>(id)};
    r.max_new_tokens = 10;
    r.priority = id == 10 ? 1 : 0;  // 10 outranks; 12 arrived last
    r.arrival_s = static_cast<double>(id);
    sched.add(r);
  }
  const StepPlan& p0 = sched.schedule(20.0);
  REQUIRE(p0.num_seqs() == 3);
  sched.commit(engine.run(p0), 21.0);  // each holds 4 tokens in 2 full blocks, knows 5
  CHECK(pool.num_free_blocks() == 0);
  const StepPlan& p1 = sched.schedule(21.0);
  // Request 10 needs a block: victim is 12 (priority 0, latest). Then 11 needs one: 12's freed
  // blocks give it room. 12 is requeued at the front.
  CHECK(p1.preempted == std::vector<RequestId>{12});
  REQUIRE(p1.num_seqs() == 2);
  CHECK(p1.sequences[0].request_id == 10);
  CHECK(p1.sequences[1].request_id == 11);
  CHECK(sched.state(12) == RequestState::kPreempted);
  sched.commit(engine.run(p1), 22.0);
  CHECK(sched.stats().preemptions == 1);
}

TEST_CASE("ContinuousScheduler: rejected drafts are rolled back and never reach the prefix cache",
          "[sched][continuous_scheduler]") {
  BlockAllocator pool(40, 4);
  RadixTree tree(pool);
  ContinuousScheduler<> sched(pool, &tree);
  FakeEngine engine(40, 4, kVocab);
  Request r;
  r.id = 1;
  r.prompt = {4, 5, 6, 7, 8};
  r.max_new_tokens = 12;
  sched.add(r);
  sched.commit(engine.run(sched.schedule(0.0)), 1.0);
  // All four drafts wrong except the first: accepted 1, emitted 2, three rolled back.
  std::vector<TokenId> known(sched.tokens(1).begin(), sched.tokens(1).end());
  std::vector<TokenId> drafts = {test::fake_next_token(known, kVocab)};
  known.push_back(drafts[0]);
  const TokenId right = test::fake_next_token(known, kVocab);
  for (int i = 0; i < 3; ++i) drafts.push_back(static_cast<TokenId>((right + 1 + i) % kVocab));
  sched.propose_drafts(1, drafts);
  const StepPlan& p = sched.schedule(1.0);
  REQUIRE(p.num_decodes == 1);
  CHECK(p.sequences[0].num_draft_tokens == 4);
  CHECK(p.decode_q_per_seq == 5);
  CHECK(p.logits_indices == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  const std::vector<SequenceResult> res = engine.run(p);
  REQUIRE(res[0].tokens.size() == 2);
  sched.commit(res, 2.0);
  CHECK(sched.stats().rejected_draft_tokens == 3);
  CHECK(sched.tokens(1).size() == 5 + 1 + 2);
  sched.check_consistency();
  // Verified: the prompt, its first output, the accepted draft and the correction.
  std::vector<TokenId> speculated(sched.tokens(1).begin(), sched.tokens(1).begin() + 7);
  speculated.insert(speculated.end(), drafts.begin() + 1, drafts.end());
  while (sched.contains(1)) {
    const StepPlan& next = sched.schedule(3.0);
    sched.commit(engine.run(next), 3.0);
  }
  const RequestOutcome done = sched.take_finished().at(0);
  CHECK(done.output == reference_output(r, kVocab));
  std::vector<TokenId> verified = r.prompt;
  verified.insert(verified.end(), done.output.begin(), done.output.end());
  // The cache holds the verified tokens' full pages (the last output has no KV), and the
  // rejected drafts' page matches nothing past the first page.
  CHECK(tree.match_length(verified) == (static_cast<std::int64_t>(verified.size()) - 1) / 4 * 4);
  CHECK(tree.match_length(speculated) == 4);
}

TEST_CASE("ContinuousScheduler: a request that can never fit finishes with a reason",
          "[sched][continuous_scheduler]") {
  BlockAllocator pool(8, 4);  // 32 tokens
  ContinuousScheduler<> sched(pool);
  Request big;
  big.id = 1;
  big.prompt.assign(33, 1);
  sched.add(big);
  std::vector<RequestOutcome> done = sched.take_finished();
  REQUIRE(done.size() == 1);
  CHECK(done[0].reason == FinishReason::kExceedsCapacity);
  CHECK_FALSE(sched.contains(1));
  // One that fits its prompt but outgrows the pool alone stops with its output so far.
  FakeEngine engine(8, 4, kVocab);
  Request grow;
  grow.id = 2;
  grow.prompt.assign(30, 2);
  grow.max_new_tokens = 100;
  sched.add(grow);
  for (int step = 0; step < 10 && sched.has_unfinished(); ++step) {
    const StepPlan& p = sched.schedule(step);
    if (!p.empty()) sched.commit(engine.run(p), step + 0.5);
  }
  done = sched.take_finished();
  REQUIRE(done.size() == 1);
  CHECK(done[0].reason == FinishReason::kExceedsCapacity);
  CHECK(done[0].output.size() == 3);  // 30 + 3 = 33 tokens: the 33rd KV row has no block
  CHECK(pool.num_used_blocks() == 0);
}

TEST_CASE("ContinuousScheduler: max_model_len and the pool minus the watermark, at their edges",
          "[sched][continuous_scheduler]") {
  // Drives one request to its end; returns its outcome.
  const auto run_alone = [](ContinuousScheduler<>& sched, FakeEngine& engine, Request r) {
    sched.add(std::move(r));
    for (int step = 0; step < 200 && sched.has_unfinished(); ++step) {
      const StepPlan& p = sched.schedule(step);
      if (!p.empty()) sched.commit(engine.run(p), step + 0.5);
    }
    std::vector<RequestOutcome> done = sched.take_finished();
    REQUIRE(done.size() == 1);
    return done[0];
  };
  SECTION("a prompt of max_model_len - 1 emits one token; one of max_model_len is refused") {
    BlockAllocator pool(64, 4);
    SchedulerConfig config;
    config.max_model_len = 8;
    ContinuousScheduler<> sched(pool, nullptr, config);
    FakeEngine engine(64, 4, kVocab);
    Request fits;
    fits.id = 1;
    fits.prompt.assign(7, 3);
    fits.max_new_tokens = 100;
    const RequestOutcome a = run_alone(sched, engine, fits);
    CHECK(a.reason == FinishReason::kLength);
    CHECK(a.output.size() == 1);  // 7 + 1 = max_model_len
    Request too_long;
    too_long.id = 2;
    too_long.prompt.assign(8, 3);
    sched.add(too_long);
    const std::vector<RequestOutcome> refused = sched.take_finished();
    REQUIRE(refused.size() == 1);
    CHECK(refused[0].reason == FinishReason::kExceedsCapacity);
    CHECK(refused[0].output.empty());
    CHECK(pool.num_used_blocks() == 0);
  }
  SECTION("capacity is the pool minus the watermark, for each reservation") {
    // 20 blocks of 4 tokens, watermark 0.1: 2 blocks kept back, 18 blocks = 72 tokens admit.
    for (const KvReservation reservation : {KvReservation::kOnDemand, KvReservation::kExact}) {
      CAPTURE(static_cast<int>(reservation));
      BlockAllocator pool(20, 4);
      SchedulerConfig config;
      config.watermark = 0.1;
      config.reservation = reservation;
      ContinuousScheduler<> sched(pool, nullptr, config);
      FakeEngine engine(20, 4, kVocab);
      // kOnDemand admits on the prompt (72 tokens); kExact on prompt + output (68 + 4).
      const std::int64_t max_new = reservation == KvReservation::kExact ? 4 : 1;
      Request edge;
      edge.id = 1;
      edge.prompt.assign(static_cast<std::size_t>(72 - (max_new == 1 ? 0 : max_new)), 5);
      edge.max_new_tokens = max_new;
      const RequestOutcome a = run_alone(sched, engine, edge);
      CHECK(a.reason == FinishReason::kLength);
      CHECK(a.output.size() == static_cast<std::size_t>(max_new));
      Request over = edge;  // 4 tokens (one block) more: 19 blocks, though the pool has 20
      over.id = 2;
      over.prompt.insert(over.prompt.end(), 4, 6);
      sched.add(over);
      const std::vector<RequestOutcome> refused = sched.take_finished();
      REQUIRE(refused.size() == 1);
      CHECK(refused[0].reason == FinishReason::kExceedsCapacity);
      CHECK(pool.num_used_blocks() == 0);
      config.watermark = 0.0;  // without the watermark the same request runs
      ContinuousScheduler<> open(pool, nullptr, config);
      CHECK(run_alone(open, engine, over).reason == FinishReason::kLength);
    }
  }
}

TEST_CASE("ContinuousScheduler: prefix matches never cross cache namespaces",
          "[sched][continuous_scheduler]") {
  BlockAllocator pool(64, 4);
  RadixTree tree(pool);
  ContinuousScheduler<> sched(pool, &tree);
  FakeEngine engine(64, 4, kVocab);
  const std::vector<TokenId> prompt = {9, 8, 7, 6, 5, 4, 3, 2, 1, 9, 8, 7, 6};
  const auto serve = [&](RequestId id, CacheNamespace ns, double t) {
    Request r;
    r.id = id;
    r.prompt = prompt;
    r.max_new_tokens = 2;
    r.cache_namespace = ns;
    sched.add(r);
    while (sched.contains(id)) {
      const StepPlan& p = sched.schedule(t);
      sched.commit(engine.run(p), t);
    }
    return sched.take_finished().at(0);
  };
  const RequestOutcome a = serve(1, 7, 0.0);
  CHECK(a.metrics.cached_prompt_tokens == 0);
  const RequestOutcome b = serve(2, 8, 1.0);  // same tokens, another tenant: no hit
  CHECK(b.metrics.cached_prompt_tokens == 0);
  const RequestOutcome c = serve(3, 7, 2.0);  // same tenant: 3 full pages of the 12 matched
  CHECK(c.metrics.cached_prompt_tokens == 12);
  CHECK(a.output == b.output);
  CHECK(a.output == c.output);
}

TEST_CASE("ContinuousScheduler: blocks(id) is each request's page table, shared prefix included",
          "[sched][continuous_scheduler]") {
  BlockAllocator pool(64, 4);
  RadixTree tree(pool);
  ContinuousScheduler<> sched(pool, &tree);
  FakeEngine engine(64, 4, kVocab);
  const std::vector<TokenId> prompt = {9, 8, 7, 6, 5, 4, 3, 2, 1, 9, 8, 7, 6};  // 3 pages + 1
  const auto add = [&](RequestId id) {
    Request r;
    r.id = id;
    r.prompt = prompt;
    r.max_new_tokens = 6;
    sched.add(r);
  };
  CHECK(test::code_of([&] { (void)sched.blocks(1); }) == ErrorCode::kInvalidArgument);
  add(1);
  CHECK(sched.blocks(1).empty());  // waiting: holds nothing
  CHECK(sched.num_computed_tokens(1) == 0);
  // Prefill request 1 to its end, then admit request 2 behind it: a 12-token prefix hit.
  for (int i = 0; i < 3; ++i) {
    const StepPlan& p = sched.schedule(i);
    // While the step is in flight, a planned sequence's pages are the plan's pages.
    for (std::int32_t s = 0; s < p.num_seqs(); ++s) {
      const PageTableView pages = p.pages();
      const std::span<const BlockId> mine =
          sched.blocks(p.sequences[static_cast<std::size_t>(s)].request_id);
      REQUIRE(mine.size() == static_cast<std::size_t>(pages.num_pages(s)));
      for (std::size_t k = 0; k < mine.size(); ++k) {
        CHECK(mine[k] == pages.indices[pages.page_begin(s) + static_cast<std::int32_t>(k)]);
      }
    }
    sched.commit(engine.run(p), i);
    if (i == 0) add(2);
  }
  REQUIRE(sched.state(2) == RequestState::kRunning);
  const std::span<const BlockId> one = sched.blocks(1);
  const std::span<const BlockId> two = sched.blocks(2);
  for (const RequestId id : {1, 2}) {  // between steps: ceil(computed / block_size) pages
    CHECK(static_cast<std::int64_t>(sched.blocks(id).size()) ==
          (sched.num_computed_tokens(id) + 3) / 4);
  }
  REQUIRE(two.size() >= 3);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(two[k] == one[k]);  // the cached prefix's pages are shared, not copied
    CHECK(pool.ref_count(one[k]) >= 2);
  }
  CHECK(two[3] != one[3]);  // the partial page is each request's own
}

TEST_CASE("ContinuousScheduler: hysteresis stops decode-heavy preemption thrash",
          "[sched][continuous_scheduler]") {
  // Long outputs from short prompts in a pool that holds about half of them at full length:
  // without headroom, readmitted requests are preempted again and again.
  const auto preemptions = [](std::int32_t headroom) {
    Scenario sc;
    sc.seed = 42;
    sc.num_blocks = 60;
    sc.block_size = 4;
    sc.num_requests = 40;
    sc.prompt_max = 6;
    sc.output_max = 60;
    sc.prefix_groups = 0;
    sc.abort_rate = 0.0;
    sc.draft_rate = 0.0;
    sc.too_large = 0;
    sc.prefix_cache = false;
    sc.config.max_num_seqs = 16;
    sc.config.watermark = 0.0;
    sc.config.preemption_headroom_steps = headroom;
    const RunOutcome run = run_scenario(sc);
    check_outputs(run, sc);
    return run.stats.preemptions;
  };
  const std::int64_t without = preemptions(0);
  const std::int64_t with = preemptions(16);
  INFO("preemptions without headroom " << without << ", with " << with);
  CHECK(without >= 20);
  CHECK(with * 3 <= without);
}

TEST_CASE("ContinuousScheduler: bad arguments throw and change nothing",
          "[sched][continuous_scheduler]") {
  BlockAllocator pool(32, 4);
  RadixTree tree(pool);
  ContinuousScheduler<> sched(pool, &tree);
  FakeEngine engine(32, 4, kVocab);
  Request r;
  r.id = 5;
  r.prompt = {1, 2, 3, 4, 5, 6};
  r.max_new_tokens = 4;
  sched.add(r);
  const auto snapshot = [&] {
    return std::vector<std::int64_t>{sched.num_waiting(),
                                     sched.num_running(),
                                     sched.stats().steps,
                                     sched.stats().admissions,
                                     pool.num_free_blocks(),
                                     pool.num_used_blocks(),
                                     static_cast<std::int64_t>(sched.tokens(5).size()),
                                     sched.step_in_flight() ? 1 : 0};
  };
  auto before = snapshot();
  SECTION("add: empty prompt, negative token, no output, non-finite arrival, duplicate id") {
    Request bad = r;
    bad.id = 6;
    bad.prompt.clear();
    CHECK(code_of([&] { sched.add(bad); }) == ErrorCode::kInvalidArgument);
    bad.prompt = {1, -2};
    CHECK(code_of([&] { sched.add(bad); }) == ErrorCode::kInvalidArgument);
    bad.prompt = {1};
    bad.max_new_tokens = 0;
    CHECK(code_of([&] { sched.add(bad); }) == ErrorCode::kInvalidArgument);
    bad.max_new_tokens = 1;
    bad.arrival_s = std::numeric_limits<double>::quiet_NaN();
    CHECK(code_of([&] { sched.add(bad); }) == ErrorCode::kInvalidArgument);
    std::string message;
    CHECK(code_of([&] { sched.add(r); }, &message) == ErrorCode::kInvalidArgument);
    CHECK_THAT(message, Catch::Contains("request id 5"));
    CHECK(snapshot() == before);
    CHECK_FALSE(sched.contains(6));
  }
  SECTION("propose_drafts: unknown id, a waiting request, a negative token") {
    const std::vector<TokenId> drafts = {1, 2};
    CHECK(code_of([&] { sched.propose_drafts(99, drafts); }) == ErrorCode::kInvalidArgument);
    CHECK(code_of([&] { sched.propose_drafts(5, drafts); }) == ErrorCode::kInvalidState);
    CHECK(snapshot() == before);
  }
  SECTION("commit without a step, schedule twice, time going back") {
    CHECK(code_of([&] { sched.commit({}, 0.0); }) == ErrorCode::kInvalidState);
    const StepPlan& p = sched.schedule(1.0);
    REQUIRE_FALSE(p.empty());
    before = snapshot();
    CHECK(code_of([&] { (void)sched.schedule(2.0); }) == ErrorCode::kInvalidState);
    Request other = r;
    other.id = 8;
    CHECK(code_of([&] { sched.add(other); }) == ErrorCode::kInvalidState);
    const std::vector<SequenceResult> res = engine.run(p);
    CHECK(code_of([&] { sched.commit(res, 0.5); }) == ErrorCode::kInvalidArgument);
    CHECK(snapshot() == before);
    sched.commit(res, 1.5);
    CHECK(code_of([&] { (void)sched.schedule(1.0); }) == ErrorCode::kInvalidArgument);
  }
  SECTION("commit: wrong count, unknown id, too many tokens, tokens for a chunk, bad token") {
    SchedulerConfig small;
    small.max_batched_tokens = 4;
    BlockAllocator pool2(32, 4);
    ContinuousScheduler<> chunked(pool2, nullptr, small);
    Request two = r;
    chunked.add(two);
    const StepPlan& p = chunked.schedule(0.0);
    REQUIRE(p.num_seqs() == 1);
    REQUIRE_FALSE(p.sequences[0].samples);  // 4 of 6 prompt tokens
    const std::vector<TokenId> one = {3};
    const std::vector<TokenId> neg = {-1};
    std::string message;
    CHECK(code_of([&] { chunked.commit({}, 1.0); }) == ErrorCode::kInvalidArgument);
    const std::vector<SequenceResult> unknown = {{77, {}}};
    CHECK(code_of([&] { chunked.commit(unknown, 1.0); }, &message) == ErrorCode::kInvalidArgument);
    CHECK_THAT(message, Catch::Contains("not scheduled in this step"));
    const std::vector<SequenceResult> chunk_token = {{5, one}};
    CHECK(code_of([&] { chunked.commit(chunk_token, 1.0); }, &message) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(message, Catch::Contains("non-final prefill chunk"));
    CHECK(chunked.step_in_flight());
    const std::vector<SequenceResult> ok = {{5, {}}};
    chunked.commit(ok, 1.0);
    const StepPlan& q = chunked.schedule(1.0);
    REQUIRE(q.sequences[0].samples);
    const std::vector<TokenId> many = {1, 2};
    const std::vector<SequenceResult> too_many = {{5, many}};
    CHECK(code_of([&] { chunked.commit(too_many, 2.0); }) == ErrorCode::kInvalidArgument);
    const std::vector<SequenceResult> negative = {{5, neg}};
    CHECK(code_of([&] { chunked.commit(negative, 2.0); }) == ErrorCode::kInvalidArgument);
    CHECK(chunked.tokens(5).size() == 6);
    const std::vector<SequenceResult> good = {{5, one}};
    chunked.commit(good, 2.0);
    CHECK(chunked.tokens(5).size() == 7);
  }
  SECTION("abort of an unknown id is false, of a waiting one finishes it") {
    CHECK_FALSE(sched.abort(1234, 0.0));
    CHECK(snapshot() == before);
    CHECK(sched.abort(5, 0.0));
    const std::vector<RequestOutcome> done = sched.take_finished();
    REQUIRE(done.size() == 1);
    CHECK(done[0].reason == FinishReason::kAborted);
    CHECK(done[0].output.empty());
  }
  SECTION("a bad config") {
    SchedulerConfig bad;
    bad.max_num_seqs = 0;
    CHECK(code_of([&] { ContinuousScheduler<> s(pool, nullptr, bad); }) ==
          ErrorCode::kInvalidArgument);
  }
}
