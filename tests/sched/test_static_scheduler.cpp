// SPDX-License-Identifier: Apache-2.0
// Tests for sched/static_scheduler.hpp: a batch forms from the first arrivals, no request joins
// until the whole batch finished, KV is reserved for the maximum length (so fewer requests fit
// than with paging), outputs equal each request run alone, and bad options are rejected.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/sched/static_scheduler.hpp>
#include <set>
#include <tests/support/error_code.hpp>
#include <tests/support/fake_engine.hpp>
#include <vector>

using namespace inferkit;
using inferkit::test::code_of;

TEST_CASE("StaticScheduler: no request joins until the whole batch finishes",
          "[sched][static_scheduler]") {
  BlockAllocator pool(256, 4);
  StaticSchedulerOptions options;
  options.max_batch_size = 3;
  StaticScheduler sched(pool, options);
  test::FakeEngine engine(256, 4, 40);
  std::vector<Request> requests;
  for (RequestId id = 0; id < 7; ++id) {
    Request r;
    r.id = id;
    r.prompt = {1, static_cast<TokenId>(id), 2};
    r.max_new_tokens = 1 + (id * 5) % 9;
    requests.push_back(r);
    sched.add(r);
  }
  std::set<RequestId> batch;
  std::vector<std::set<RequestId>> batches;
  double now = 0.0;
  std::vector<RequestOutcome> done;
  while (sched.has_unfinished()) {
    const StepPlan& p = sched.schedule(now);
    REQUIRE_FALSE(p.empty());
    std::set<RequestId> ids;
    for (const ScheduledSequence& s : p.sequences) ids.insert(s.request_id);
    if (batch.empty() || !std::includes(batch.begin(), batch.end(), ids.begin(), ids.end())) {
      // A new batch starts only when the previous one is gone.
      REQUIRE(sched.num_running() == static_cast<std::int32_t>(ids.size()));
      batch = ids;
      batches.push_back(ids);
    }
    sched.commit(engine.run(p), now + 1.0);
    now += 1.0;
    for (RequestOutcome& o : sched.take_finished()) done.push_back(std::move(o));
  }
  REQUIRE(batches.size() == 3);
  CHECK(batches[0] == std::set<RequestId>{0, 1, 2});
  CHECK(batches[1] == std::set<RequestId>{3, 4, 5});
  CHECK(batches[2] == std::set<RequestId>{6});
  REQUIRE(done.size() == 7);
  for (const RequestOutcome& o : done) {
    CHECK(o.output == test::reference_output(requests[static_cast<std::size_t>(o.id)], 40));
  }
  CHECK(pool.num_used_blocks() == 0);
}

TEST_CASE("StaticScheduler: reserving the maximum length admits fewer requests than paging",
          "[sched][static_scheduler]") {
  BlockAllocator pool(64, 4);  // 256 tokens
  StaticSchedulerOptions options;
  options.max_batch_size = 16;
  options.max_model_len = 64;  // 16 blocks reserved per request: 4 fit
  StaticScheduler sched(pool, options);
  for (RequestId id = 0; id < 10; ++id) {
    Request r;
    r.id = id;
    r.prompt = {1, 2, 3};
    r.max_new_tokens = 8;
    sched.add(r);
  }
  const StepPlan& p = sched.schedule(0.0);
  CHECK(p.num_seqs() == 4);
  CHECK(sched.promised_blocks() + pool.num_used_blocks() == 64);
  test::FakeEngine engine(64, 4, 40);
  sched.commit(engine.run(p), 1.0);
  sched.check_consistency();
}

TEST_CASE("static_batching_config: options are checked", "[sched][static_scheduler]") {
  StaticSchedulerOptions bad;
  bad.max_batch_size = 0;
  CHECK(code_of([&] { (void)static_batching_config(bad); }) == ErrorCode::kInvalidArgument);
  bad = {};
  bad.max_model_len = -1;
  CHECK(code_of([&] { (void)static_batching_config(bad); }) == ErrorCode::kInvalidArgument);
  const SchedulerConfig c = static_batching_config({});
  CHECK(c.admission == AdmissionMode::kWholeBatch);
  CHECK(c.reservation == KvReservation::kExact);
}
