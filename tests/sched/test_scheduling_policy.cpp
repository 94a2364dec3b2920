// SPDX-License-Identifier: Apache-2.0
// Tests for sched/scheduling_policy.hpp: the admission order each policy produces through a
// one-seat ContinuousScheduler (FCFS: arrival, preempted first; priority: classes, FCFS inside;
// longest prefix match: hot prefixes first), and the bound aging puts on a cache-cold request's
// wait under a steady stream of cache-hot ones (pure LPM starves it).
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <inferkit/sched/scheduling_policy.hpp>
#include <tests/support/error_code.hpp>
#include <tests/support/fake_engine.hpp>
#include <vector>

using namespace inferkit;
using inferkit::test::code_of;
using inferkit::test::FakeEngine;

namespace {

constexpr std::int32_t kVocab = 50;

Request one_token_request(RequestId id, std::vector<TokenId> prompt, double arrival,
                          std::int32_t priority = 0) {
  Request r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_new_tokens = 1;
  r.arrival_s = arrival;
  r.priority = priority;
  return r;
}

// Runs one step at a time until idle and returns the request ids in the order they were
// first scheduled.
template <class Sched>
std::vector<RequestId> admission_order(Sched& sched, FakeEngine& engine, double& now) {
  std::vector<RequestId> order;
  while (sched.has_unfinished()) {
    const StepPlan& p = sched.schedule(now);
    for (const ScheduledSequence& s : p.sequences) {
      if (std::find(order.begin(), order.end(), s.request_id) == order.end()) {
        order.push_back(s.request_id);
      }
    }
    if (!p.empty()) sched.commit(engine.run(p), now);
    now += 1.0;
    (void)sched.take_finished();
  }
  return order;
}

}  // namespace

TEST_CASE("FcfsPolicy: arrival order, whatever the priority", "[sched][scheduling_policy]") {
  BlockAllocator pool(64, 4);
  SchedulerConfig one_seat;
  one_seat.max_num_seqs = 1;
  ContinuousScheduler<FcfsPolicy> sched(pool, nullptr, one_seat);
  FakeEngine engine(64, 4, kVocab);
  for (RequestId id = 0; id < 5; ++id) {
    sched.add(one_token_request(id, {1, 2, static_cast<TokenId>(id)}, static_cast<double>(id),
                                static_cast<std::int32_t>(5 - id)));
  }
  double now = 5.0;
  CHECK(admission_order(sched, engine, now) == std::vector<RequestId>{0, 1, 2, 3, 4});
}

TEST_CASE("PriorityPolicy: higher classes first, FCFS within a class",
          "[sched][scheduling_policy]") {
  BlockAllocator pool(64, 4);
  SchedulerConfig one_seat;
  one_seat.max_num_seqs = 1;
  ContinuousScheduler<PriorityPolicy> sched(pool, nullptr, one_seat);
  FakeEngine engine(64, 4, kVocab);
  const std::int32_t priorities[] = {0, 2, 1, 2, 0, 1};
  for (RequestId id = 0; id < 6; ++id) {
    sched.add(one_token_request(id, {3, static_cast<TokenId>(id)}, static_cast<double>(id),
                                priorities[id]));
  }
  double now = 6.0;
  CHECK(admission_order(sched, engine, now) == std::vector<RequestId>{1, 3, 2, 5, 0, 4});
  PriorityPolicy p;
  const Request r = one_token_request(9, {1}, 0.0, 7);
  CHECK(p.rank(WaitingRequestInfo{&r, 0.0, 0, 0}, 100.0) == 7.0);
}

TEST_CASE("FcfsPolicy: a preempted request goes back to the front of the queue",
          "[sched][scheduling_policy]") {
  // Two 4-token requests fill the pool; a third waits. When the first decode needs a block,
  // request 1 (latest running) is preempted and must be readmitted before request 2.
  BlockAllocator pool(4, 2);
  SchedulerConfig config;
  config.watermark = 0.0;
  config.preemption_headroom_steps = 0;
  ContinuousScheduler<FcfsPolicy> sched(pool, nullptr, config);
  FakeEngine engine(4, 2, kVocab);
  for (RequestId id = 0; id < 3; ++id) {
    Request r = one_token_request(id, {1, 2, 3, static_cast<TokenId>(id)}, 0.0);
    r.max_new_tokens = 3;
    sched.add(r);
  }
  double now = 0.0;
  std::vector<RequestId> readmitted;
  bool preempted = false;
  while (sched.has_unfinished()) {
    const StepPlan& p = sched.schedule(now);
    if (!p.preempted.empty()) {
      CHECK(p.preempted == std::vector<RequestId>{1});
      preempted = true;
    }
    for (const ScheduledSequence& s : p.sequences) {
      if (preempted && s.request_id != 0 &&
          std::find(readmitted.begin(), readmitted.end(), s.request_id) == readmitted.end()) {
        readmitted.push_back(s.request_id);
      }
    }
    if (!p.empty()) sched.commit(engine.run(p), now);
    now += 1.0;
    (void)sched.take_finished();
  }
  CHECK(preempted);
  REQUIRE(readmitted.size() == 2);
  CHECK(readmitted[0] == 1);
  CHECK(readmitted[1] == 2);
}

TEST_CASE("LongestPrefixMatchPolicy: cache-hot requests first, a cold one within the aging bound",
          "[sched][scheduling_policy]") {
  // A hot prefix of 64 tokens is cached. A cold request arrives first, then one hot request per
  // step, each served in one step on a single seat: the queue never empties.
  const std::vector<TokenId> hot_prefix = [] {
    std::vector<TokenId> p;
    for (int i = 0; i < 64; ++i) p.push_back(static_cast<TokenId>(i % kVocab));
    return p;
  }();
  const auto cold_admitted_at = [&](double aging) {
    BlockAllocator pool(512, 4);
    RadixTree tree(pool);
    SchedulerConfig one_seat;
    one_seat.max_num_seqs = 1;
    ContinuousScheduler<LongestPrefixMatchPolicy> sched(pool, &tree, one_seat,
                                                        LongestPrefixMatchPolicy{aging, 64});
    FakeEngine engine(512, 4, kVocab);
    double now = 0.0;
    std::vector<TokenId> warm = hot_prefix;
    warm.push_back(1);
    sched.add(one_token_request(1000, warm, now));
    (void)admission_order(sched, engine, now);  // caches the hot prefix
    const double cold_arrival = now;
    sched.add(one_token_request(0, {7, 7, 7, 7, 7, 7}, now));
    double admitted = -1.0;
    for (int step = 1; step <= 200; ++step) {
      std::vector<TokenId> prompt = hot_prefix;
      prompt.push_back(static_cast<TokenId>(step % kVocab));
      prompt.push_back(static_cast<TokenId>(step / kVocab));
      sched.add(one_token_request(step, prompt, now));
      const StepPlan& p = sched.schedule(now);
      for (const ScheduledSequence& s : p.sequences) {
        if (s.request_id == 0 && admitted < 0) admitted = now - cold_arrival;
      }
      if (!p.empty()) sched.commit(engine.run(p), now);
      (void)sched.take_finished();
      now += 1.0;
    }
    return admitted;
  };
  // Hot rank = 64 cached tokens + aging * wait; cold rank = aging * wait. The cold request
  // outranks every hot request that arrived more than 64 / aging seconds after it.
  const double at = cold_admitted_at(4.0);  // bound: 64 / 4 = 16 s, plus one step
  INFO("cold request admitted after waiting " << at << " s");
  CHECK(at >= 1.0);  // hot requests went first
  CHECK(at <= 17.0);
  CHECK(cold_admitted_at(1e-6) < 0.0);  // pure LPM: starved for the whole run
  CHECK(code_of([] { validate(LongestPrefixMatchPolicy{0.0, 4}); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { validate(LongestPrefixMatchPolicy{1.0, 0}); }) == ErrorCode::kInvalidArgument);
}
