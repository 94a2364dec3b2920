// SPDX-License-Identifier: Apache-2.0
// Tests for ContinuousScheduler's forks (sched/detail/continuous_scheduler_fork.hpp, declared in
// sched/continuous_scheduler.hpp). Randomized runs fork running requests between steps and
// during the steps that sample them (children given random tokens of their own, so a child that
// read its parent's page, or a page overwritten in place, would change an output), under small
// pools that force preemption, with block sizes 1 to 16, prompts ending mid-page and exactly at a
// page boundary, drafts, aborts and the prefix cache. Every request's output must equal the fake
// model's greedy continuation of what it started from; the plan must copy a shared partial page
// exactly when it is first written; the scheduler must be consistent after every schedule and
// commit, and every page back in the pool (or the prefix cache) at the end. Targeted cases show
// the copy in the plan and check bad arguments.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tests/support/error_code.hpp>
#include <tests/support/fake_engine.hpp>
#include <vector>

namespace {

using namespace inferkit;
using inferkit::test::code_of;
using inferkit::test::fake_next_token;
using inferkit::test::FakeEngine;

constexpr std::int32_t kVocab = 53;

#ifdef INFERKIT_TEST_SANITIZED
constexpr int kRunScale = 1;
#else
constexpr int kRunScale = 3;
#endif

// The output a request produces when it starts from `known` (its prompt, then the outputs it
// inherited): those outputs, then the fake model's greedy continuation until a stop token or
// max_new_tokens.
std::vector<TokenId> continued_output(const Request& request, const std::vector<TokenId>& known) {
  std::vector<TokenId> seq = known;
  std::vector<TokenId> out(known.begin() + static_cast<std::ptrdiff_t>(request.prompt.size()),
                           known.end());
  const auto stops = [&](TokenId t) {
    return std::find(request.stop_tokens.begin(), request.stop_tokens.end(), t) !=
           request.stop_tokens.end();
  };
  if (!out.empty() && stops(out.back())) return out;
  while (static_cast<std::int64_t>(out.size()) < request.max_new_tokens) {
    const TokenId t = fake_next_token(seq, kVocab);
    out.push_back(t);
    seq.push_back(t);
    if (stops(t)) break;
  }
  return out;
}

struct ForkScenario {
  std::int32_t block_size = 4;
  std::int32_t num_blocks = 40;
  SchedulerConfig config{};
  bool prefix_cache = true;
  std::int32_t num_requests = 50;
  double fork_sampled_rate = 0.25;  // per sampling sequence without drafts, per step
  double fork_idle_rate = 0.05;     // per running request, per step
  double draft_rate = 0.2;
  double abort_rate = 0.01;
  std::int32_t max_output = 16;
  std::uint64_t seed = 1;
};

struct ForkRun {
  std::int64_t copies = 0;
  std::int64_t forks = 0;
  std::int64_t preemptions = 0;
  std::int64_t checked_steps = 0;  // steps whose copies were checked exactly
};

// Per planned sequence whose last page is partial before the step: the page it wrote into was
// copied iff it was shared when the sequence appended (reference counts replayed in plan order
// from a snapshot taken before schedule). Exact unless the step preempted (victims drop
// references mid-schedule); the weaker checks hold always.
void check_copies(const StepPlan& plan, const std::vector<std::int32_t>& refs_before,
                  const std::vector<bool>& cached_before, ForkRun& run) {
  std::vector<std::int32_t> refs = refs_before;
  std::set<BlockId> dsts;
  const bool exact = plan.preempted.empty();
  std::size_t matched = 0;
  const PageTableView pages = plan.pages();
  for (std::int32_t s = 0; s < plan.num_seqs(); ++s) {
    const ScheduledSequence& seq = plan.sequences[static_cast<std::size_t>(s)];
    INFO("sequence " << s << " (request " << seq.request_id << ")");
    const std::int64_t fill = seq.num_cached_tokens % plan.block_size;
    const BlockId page =
        plan.page_indices[pages.page_begin(s) +
                          static_cast<std::int32_t>(seq.num_cached_tokens / plan.block_size)];
    const auto copy = std::find_if(plan.block_copies.begin(), plan.block_copies.end(),
                                   [&](const BlockCopy& c) { return c.dst == page && fill != 0; });
    if (fill == 0) continue;
    if (copy != plan.block_copies.end()) {
      ++matched;
      CHECK(copy->num_slots == fill);
      CHECK(copy->src != copy->dst);
      CHECK(dsts.insert(copy->dst).second);
      if (exact) {
        const auto src = static_cast<std::size_t>(copy->src);
        CHECK((refs[src] > 1 || cached_before[src]));                  // it was shared
        CHECK(refs_before[static_cast<std::size_t>(copy->dst)] == 0);  // a page taken now
        --refs[src];
      }
    } else if (exact) {
      CHECK(refs[static_cast<std::size_t>(page)] == 1);  // written in place: it owned it alone
      CHECK_FALSE(cached_before[static_cast<std::size_t>(page)]);
    }
  }
  CHECK(matched == plan.block_copies.size());  // every copy is some sequence's partial page
  run.copies += static_cast<std::int64_t>(plan.block_copies.size());
  if (exact) ++run.checked_steps;
}

ForkRun run_forks(const ForkScenario& sc) {
  Rng rng(sc.seed);
  BlockAllocator pool(sc.num_blocks, sc.block_size);
  std::optional<RadixTree> tree;
  if (sc.prefix_cache) tree.emplace(pool);
  ForkRun run;
  std::map<RequestId, std::vector<TokenId>> want;  // expected output of every request
  std::map<RequestId, RequestOutcome> outcomes;
  {
    ContinuousScheduler<> sched(pool, tree ? &*tree : nullptr, sc.config);
    FakeEngine engine(sc.num_blocks, sc.block_size, kVocab);
    std::map<RequestId, Request> requests;  // by id, children included
    RequestId next_id = 0;
    double now = 0.0;
    const auto add_request = [&] {
      Request r;
      r.id = next_id++;
      // Whole pages, or a page and a bit: prompts that end exactly at a boundary and mid-page.
      const auto pages = static_cast<std::int32_t>(1 + rng.below(3));
      const std::int32_t extra =
          rng.below(2) == 0
              ? 0
              : static_cast<std::int32_t>(1 + rng.below(static_cast<std::uint32_t>(sc.block_size)));
      const std::int32_t len = std::max(1, pages * sc.block_size + extra - (extra > 0 ? 1 : 0));
      const TokenId head = static_cast<TokenId>(rng.below(4));  // a few shared first tokens
      r.prompt.push_back(head);
      while (static_cast<std::int32_t>(r.prompt.size()) < len) {
        r.prompt.push_back(static_cast<TokenId>(rng.below(kVocab)));
      }
      r.max_new_tokens = 1 + rng.below(static_cast<std::uint32_t>(sc.max_output));
      if (rng.below(3) == 0) r.stop_tokens = {static_cast<TokenId>(rng.below(kVocab))};
      r.arrival_s = now;
      r.priority = static_cast<std::int32_t>(rng.below(2));
      requests[r.id] = r;
      want[r.id] = continued_output(r, r.prompt);
      sched.add(r);
    };
    const auto child_of = [&](RequestId parent, std::vector<TokenId> known) {
      const RequestId child = next_id++;
      Request r = requests.at(parent);
      r.id = child;
      requests[child] = r;
      want[child] = continued_output(r, known);
      return child;
    };
    std::int64_t steps = 0;
    while (next_id < sc.num_requests || sched.has_unfinished()) {
      const auto arrivals = rng.below(3);
      for (std::uint32_t a = 0; a < arrivals && next_id < sc.num_requests; ++a) add_request();
      // Idle forks: exact copies of running requests (they continue identically).
      std::vector<RequestId> running;
      for (const auto& [id, r] : requests) {
        if (sched.contains(id) && sched.state(id) == RequestState::kRunning) running.push_back(id);
      }
      for (RequestId id : running) {
        if (rng.uniform_double() >= sc.fork_idle_rate) continue;
        const std::vector<TokenId> known(sched.tokens(id).begin(), sched.tokens(id).end());
        const RequestId child = child_of(id, known);
        sched.fork(id, child);
        CHECK(sched.tokens(child).size() == known.size());
      }
      for (RequestId id : running) {
        if (!sched.contains(id) || sched.state(id) != RequestState::kRunning) continue;
        if (rng.uniform_double() >= sc.draft_rate) continue;
        const auto k = static_cast<std::int32_t>(1 + rng.below(3));
        sched.propose_drafts(id, test::fake_drafts(sched.tokens(id), k, 0.6, kVocab, rng));
      }
      sched.check_consistency();
      std::vector<std::int32_t> refs_before(static_cast<std::size_t>(sc.num_blocks));
      std::vector<bool> cached_before(static_cast<std::size_t>(sc.num_blocks));
      for (BlockId b = 0; b < sc.num_blocks; ++b) {
        refs_before[static_cast<std::size_t>(b)] = pool.ref_count(b);
        cached_before[static_cast<std::size_t>(b)] = pool.is_cached(b);
      }
      const StepPlan& plan = sched.schedule(now);
      sched.check_consistency();
      check_step_plan(plan);
      check_copies(plan, refs_before, cached_before, run);
      REQUIRE(sched.num_running() <= sc.config.max_num_seqs);
      now += 1.0;
      if (!plan.empty()) {
        const std::vector<SequenceResult> results = engine.run(plan);
        // Forks during the step: each child draws a random token of its own from the parent's
        // sampled row (sometimes the parent's own, sometimes a stop token).
        std::vector<std::pair<RequestId, RequestId>> pending;  // (parent, child)
        for (const ScheduledSequence& seq : plan.sequences) {
          if (!seq.samples || seq.num_draft_tokens != 0) continue;
          while (rng.uniform_double() < sc.fork_sampled_rate) {
            const TokenId token = static_cast<TokenId>(rng.below(kVocab));
            std::vector<TokenId> known(sched.tokens(seq.request_id).begin(),
                                       sched.tokens(seq.request_id).end());
            known.push_back(token);
            const RequestId child = child_of(seq.request_id, known);
            sched.fork_sampled(seq.request_id, child, token);
            pending.emplace_back(seq.request_id, child);
          }
        }
        std::set<RequestId> aborted_in_flight;
        if (rng.uniform_double() < sc.abort_rate * 5) {
          const RequestId victim =
              plan.sequences[rng.below(static_cast<std::uint32_t>(plan.num_seqs()))].request_id;
          if (sched.abort(victim, now)) aborted_in_flight.insert(victim);
        }
        sched.check_consistency();
        sched.commit(results, now);
        for (const auto& [parent, child] : pending) {
          if (aborted_in_flight.contains(parent)) {  // dropped: the child never existed
            CHECK_FALSE(sched.contains(child));
            want.erase(child);
          }
        }
        ++steps;
      }
      sched.check_consistency();
      if (rng.uniform_double() < sc.abort_rate && next_id > 0) {
        (void)sched.abort(static_cast<RequestId>(rng.below(static_cast<std::uint32_t>(next_id))),
                          now);
      }
      for (RequestOutcome& o : sched.take_finished()) {
        REQUIRE(outcomes.count(o.id) == 0);  // finished exactly once
        outcomes.emplace(o.id, std::move(o));
      }
      REQUIRE(steps < 20000);
    }
    run.forks = sched.stats().forks;
    run.preemptions = sched.stats().preemptions;
  }
  // Every request, children included, finished once with the output it starts from alone.
  REQUIRE(outcomes.size() == want.size());
  for (const auto& [id, expected] : want) {
    INFO("request " << id);
    const RequestOutcome& o = outcomes.at(id);
    switch (o.reason) {
      case FinishReason::kStopToken:
      case FinishReason::kLength:
        CHECK(o.output == expected);
        break;
      case FinishReason::kAborted:
      case FinishReason::kExceedsCapacity:
        REQUIRE(o.output.size() <= expected.size());
        CHECK(std::equal(o.output.begin(), o.output.end(), expected.begin()));
        break;
      case FinishReason::kNone:
        FAIL("finished without a reason");
    }
  }
  // Reference counts are back: every page free, or evictable in the prefix cache.
  CHECK(pool.num_used_blocks() == 0);
  if (tree) {
    tree->check_consistency();
    CHECK(pool.num_free_blocks() + pool.num_evictable_blocks() == pool.num_blocks());
  } else {
    CHECK(pool.num_free_blocks() == pool.num_blocks());
  }
  pool.check_consistency();
  return run;
}

Request request(RequestId id, std::int32_t prompt_len, std::int64_t max_new) {
  Request r;
  r.id = id;
  for (std::int32_t i = 0; i < prompt_len; ++i) r.prompt.push_back(static_cast<TokenId>(i + 1));
  r.max_new_tokens = max_new;
  return r;
}

}  // namespace

TEST_CASE(
    "ContinuousScheduler: forked requests under memory pressure give every child the output it "
    "starts from, and copy shared partial pages exactly when first written",
    "[sched][continuous_scheduler][fork]") {
  ForkRun total;
  std::int64_t preempted_runs = 0;
  const std::int32_t block_sizes[] = {1, 16, 2, 4, 7};
  for (int round = 0; round < 10 * kRunScale; ++round) {
    ForkScenario sc;
    sc.seed = 4200 + static_cast<std::uint64_t>(round);
    sc.block_size = block_sizes[round % 5];
    // Pools of about 3-6 long requests: enough to run, small enough that children preempt.
    sc.num_blocks = (90 + 30 * (round % 3)) / sc.block_size + 6;
    sc.config.max_num_seqs = 4 + round % 5;
    sc.config.max_batched_tokens = 16 + 8 * (round % 4);
    sc.config.max_prefill_chunk_tokens = round % 3 == 0 ? 7 : 0;
    sc.config.watermark = round % 2 == 0 ? 0.0 : 0.05;
    sc.config.preemption_headroom_steps = round % 4 == 1 ? 0 : 4;
    sc.prefix_cache = round % 4 != 3;
    sc.abort_rate = round % 5 == 2 ? 0.03 : 0.0;
    INFO("round " << round << " seed " << sc.seed << ": " << sc.num_blocks << " blocks of "
                  << sc.block_size);
    const ForkRun run = run_forks(sc);
    CHECK(run.forks > 0);
    total.copies += run.copies;
    total.forks += run.forks;
    total.checked_steps += run.checked_steps;
    preempted_runs += run.preemptions > 0 ? 1 : 0;
  }
  CHECK(total.copies > 0);    // shared partial pages were written
  CHECK(preempted_runs > 0);  // and children were preempted
  CHECK(total.checked_steps > 0);
}

TEST_CASE("ContinuousScheduler: without forks no plan carries a block copy",
          "[sched][continuous_scheduler][fork]") {
  for (const std::int32_t bs : {1, 4, 16}) {
    ForkScenario sc;
    sc.seed = 77 + static_cast<std::uint64_t>(bs);
    sc.block_size = bs;
    sc.num_blocks = 120 / bs + 6;
    sc.fork_sampled_rate = 0.0;
    sc.fork_idle_rate = 0.0;
    const ForkRun run = run_forks(sc);
    CHECK(run.forks == 0);
    CHECK(run.copies == 0);
  }
}

TEST_CASE(
    "ContinuousScheduler: a child forked after a mid-page prompt shares its pages and the first "
    "write into the partial page is a planned copy",
    "[sched][continuous_scheduler][fork]") {
  // Prompt of 6 tokens in pages of 4: one full page and one holding 2 tokens.
  BlockAllocator pool(16, 4);
  ContinuousScheduler<> sched(pool);
  FakeEngine engine(16, 4, kVocab);
  sched.add(request(1, 6, 5));
  const StepPlan& p0 = sched.schedule(0.0);
  REQUIRE(p0.num_seqs() == 1);
  REQUIRE(p0.sequences[0].samples);
  const std::vector<SequenceResult> r0 = engine.run(p0);
  const BlockId full = p0.page_indices[p0.page_begin[0]];
  const BlockId partial = p0.page_indices[p0.page_begin[0] + 1];
  sched.fork_sampled(1, 2, 9);
  sched.fork_sampled(1, 3, r0[0].tokens[0]);
  CHECK_FALSE(sched.contains(2));  // created at commit
  sched.commit(r0, 1.0);
  sched.check_consistency();
  CHECK(sched.stats().forks == 2);
  CHECK(sched.num_running() == 3);
  CHECK(pool.ref_count(full) == 3);
  CHECK(pool.ref_count(partial) == 3);
  CHECK(pool.num_used_blocks() == 2);
  CHECK(sched.tokens(2).back() == 9);
  CHECK(sched.tokens(3).back() == r0[0].tokens[0]);
  const StepPlan& p1 = sched.schedule(1.0);
  check_step_plan(p1);
  REQUIRE(p1.num_decodes == 3);
  // The first two writers copy the shared page (6 % 4 = 2 slots); the last writes in place.
  REQUIRE(p1.block_copies.size() == 2);
  for (const BlockCopy& c : p1.block_copies) {
    CHECK(c.src == partial);
    CHECK(c.num_slots == 2);
    CHECK(c.dst != partial);
  }
  for (std::size_t s = 0; s < 3; ++s) {
    CHECK(p1.page_indices[p1.page_begin[s]] == full);
    CHECK(p1.slot_mapping[s] == std::int64_t{p1.page_indices[p1.page_begin[s] + 1]} * 4 + 2);
  }
  CHECK(p1.page_indices[p1.page_begin[0] + 1] == p1.block_copies[0].dst);
  CHECK(p1.page_indices[p1.page_begin[1] + 1] == p1.block_copies[1].dst);
  CHECK(p1.page_indices[p1.page_begin[2] + 1] == partial);
  CHECK(pool.ref_count(partial) == 1);
  sched.commit(engine.run(p1), 2.0);
  sched.check_consistency();
  // Next write: every last page is private now, nothing to copy.
  const StepPlan& p2 = sched.schedule(2.0);
  CHECK(p2.block_copies.empty());
  sched.commit(engine.run(p2), 3.0);
  while (sched.has_unfinished()) {
    const StepPlan& p = sched.schedule(4.0);
    REQUIRE_FALSE(p.empty());
    CHECK(p.block_copies.empty());
    sched.commit(engine.run(p), 4.0);
    sched.check_consistency();
  }
  std::map<RequestId, std::vector<TokenId>> out;
  for (const RequestOutcome& o : sched.take_finished()) out[o.id] = o.output;
  const Request base = request(1, 6, 5);
  std::vector<TokenId> known2 = base.prompt;
  known2.push_back(9);
  CHECK(out.at(1) == continued_output(base, base.prompt));
  CHECK(out.at(2) == continued_output(base, known2));
  CHECK(out.at(3) == out.at(1));
  CHECK(pool.num_free_blocks() == 16);
}

TEST_CASE("ContinuousScheduler: a fork at a page boundary copies nothing",
          "[sched][continuous_scheduler][fork]") {
  BlockAllocator pool(16, 4);
  ContinuousScheduler<> sched(pool);
  FakeEngine engine(16, 4, kVocab);
  sched.add(request(1, 8, 3));
  const StepPlan& p0 = sched.schedule(0.0);
  const std::vector<SequenceResult> r0 = engine.run(p0);
  sched.fork_sampled(1, 2, 4);
  sched.commit(r0, 1.0);
  CHECK(pool.num_used_blocks() == 2);
  const StepPlan& p1 = sched.schedule(1.0);
  CHECK(p1.block_copies.empty());
  CHECK(pool.num_used_blocks() == 4);  // each takes a page of its own for position 8
  sched.commit(engine.run(p1), 2.0);
  // An idle fork now shares the partial page (9 tokens): the next write copies it.
  sched.fork(2, 3);
  CHECK(sched.tokens(3).size() == sched.tokens(2).size());
  const StepPlan& p2 = sched.schedule(2.0);
  CHECK(p2.block_copies.size() == 1);
  sched.commit(engine.run(p2), 3.0);
  sched.check_consistency();
}

TEST_CASE("ContinuousScheduler: a fork with the running set full waits and recomputes",
          "[sched][continuous_scheduler][fork]") {
  BlockAllocator pool(16, 4);
  RadixTree tree(pool);
  SchedulerConfig config;
  config.max_num_seqs = 1;
  ContinuousScheduler<> sched(pool, &tree, config);
  FakeEngine engine(16, 4, kVocab);
  sched.add(request(1, 9, 3));
  const StepPlan& p0 = sched.schedule(0.0);
  const std::vector<SequenceResult> r0 = engine.run(p0);
  sched.fork_sampled(1, 2, 7);
  sched.commit(r0, 1.0);
  sched.check_consistency();
  CHECK(sched.state(2) == RequestState::kWaiting);
  CHECK(sched.num_running() == 1);
  while (sched.has_unfinished()) {
    const StepPlan& p = sched.schedule(2.0);
    REQUIRE_FALSE(p.empty());
    REQUIRE(p.num_seqs() <= 1);
    sched.commit(engine.run(p), 2.0);
    sched.check_consistency();
  }
  std::map<RequestId, RequestOutcome> out;
  for (RequestOutcome& o : sched.take_finished()) out[o.id] = std::move(o);
  const Request base = request(1, 9, 3);
  std::vector<TokenId> known = base.prompt;
  known.push_back(7);
  CHECK(out.at(2).output == continued_output(base, known));
  CHECK(out.at(2).metrics.cached_prompt_tokens == out.at(1).metrics.cached_prompt_tokens);
  CHECK(sched.stats().prompt_tokens == 9);  // a child's prompt is its parent's
}

TEST_CASE("ContinuousScheduler: a child whose token stops it finishes at commit",
          "[sched][continuous_scheduler][fork]") {
  BlockAllocator pool(16, 4);
  ContinuousScheduler<> sched(pool);
  FakeEngine engine(16, 4, kVocab);
  Request r = request(1, 5, 4);
  const TokenId stop = (fake_next_token(r.prompt, kVocab) + 1) % kVocab;  // not the parent's
  r.stop_tokens = {stop};
  sched.add(r);
  const StepPlan& p0 = sched.schedule(0.0);
  const std::vector<SequenceResult> r0 = engine.run(p0);
  sched.fork_sampled(1, 2, stop);
  sched.commit(r0, 1.0);
  sched.check_consistency();
  CHECK_FALSE(sched.contains(2));
  const std::vector<RequestOutcome> done = sched.take_finished();
  REQUIRE(done.size() == 1);
  CHECK(done[0].id == 2);
  CHECK(done[0].reason == FinishReason::kStopToken);
  CHECK(done[0].output == std::vector<TokenId>{stop});
  CHECK(pool.num_used_blocks() == 2);  // the parent's pages only
}

TEST_CASE("ContinuousScheduler: bad forks throw and change nothing",
          "[sched][continuous_scheduler][fork]") {
  BlockAllocator pool(32, 4);
  SchedulerConfig config;
  config.max_batched_tokens = 4;
  ContinuousScheduler<> sched(pool, nullptr, config);
  FakeEngine engine(32, 4, kVocab);
  sched.add(request(1, 6, 4));
  sched.add(request(2, 3, 4));
  const auto snapshot = [&] {
    return std::vector<std::int64_t>{sched.num_waiting(), sched.num_running(), sched.stats().forks,
                                     pool.num_used_blocks(), sched.step_in_flight() ? 1 : 0};
  };
  auto before = snapshot();
  std::string message;
  // Not running yet.
  CHECK(code_of([&] { sched.fork(1, 9); }, &message) == ErrorCode::kInvalidState);
  CHECK_THAT(message, Catch::Contains("request 1 is waiting"));
  CHECK(code_of([&] { sched.fork(42, 9); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { sched.fork_sampled(1, 9, 3); }) == ErrorCode::kInvalidState);
  CHECK(snapshot() == before);
  const StepPlan& p0 = sched.schedule(0.0);  // 4 of request 1's 6 prompt tokens
  REQUIRE(p0.num_seqs() == 1);
  REQUIRE_FALSE(p0.sequences[0].samples);
  before = snapshot();
  CHECK(code_of([&] { sched.fork(1, 9); }) == ErrorCode::kInvalidState);  // in flight
  CHECK(code_of([&] { sched.fork_sampled(1, 9, 3); }, &message) == ErrorCode::kInvalidState);
  CHECK_THAT(message, Catch::Contains("does not sample"));
  CHECK(code_of([&] { sched.fork_sampled(2, 9, 3); }) == ErrorCode::kInvalidState);  // unplanned
  CHECK(snapshot() == before);
  sched.commit(engine.run(p0), 1.0);
  const StepPlan& p1 = sched.schedule(1.0);
  REQUIRE(p1.sequences[0].request_id == 1);
  REQUIRE(p1.sequences[0].samples);
  const std::vector<SequenceResult> r1 = engine.run(p1);
  before = snapshot();
  CHECK(code_of([&] { sched.fork_sampled(1, 2, 3); }, &message) == ErrorCode::kInvalidArgument);
  CHECK_THAT(message, Catch::Contains("child id 2"));
  CHECK(code_of([&] { sched.fork_sampled(1, 9, -1); }) == ErrorCode::kInvalidArgument);
  sched.fork_sampled(1, 9, 3);
  CHECK(code_of([&] { sched.fork_sampled(1, 9, 4); }) == ErrorCode::kInvalidArgument);
  CHECK(snapshot() == before);
  // A commit that throws keeps the fork pending; the next one applies it.
  CHECK(code_of([&] { sched.commit({}, 2.0); }) == ErrorCode::kInvalidArgument);
  CHECK_FALSE(sched.contains(9));
  sched.commit(r1, 2.0);
  CHECK(sched.contains(9));
  CHECK(code_of([&] { sched.fork(1, 9); }) == ErrorCode::kInvalidArgument);  // id held
  sched.check_consistency();
  // Drafts: a sequence verifying drafts cannot be forked in its step.
  const std::vector<TokenId> drafts = {1, 2};
  sched.propose_drafts(1, drafts);
  const StepPlan& p2 = sched.schedule(2.0);
  REQUIRE(p2.sequences[0].request_id == 1);
  REQUIRE(p2.sequences[0].num_draft_tokens > 0);
  CHECK(code_of([&] { sched.fork_sampled(1, 10, 3); }, &message) == ErrorCode::kInvalidState);
  CHECK_THAT(message, Catch::Contains("drafts"));
  sched.commit(engine.run(p2), 3.0);
  sched.check_consistency();
}
