// SPDX-License-Identifier: Apache-2.0
// Tests for sched/scheduler_config.hpp: the defaults are valid, every bad field is rejected by
// name, and the reservation names.
#include <catch2/catch.hpp>
#include <inferkit/sched/scheduler_config.hpp>
#include <string>
#include <tests/support/error_code.hpp>

using namespace inferkit;
using inferkit::test::code_of;

TEST_CASE("validate(SchedulerConfig): defaults pass, each bad field is named",
          "[sched][scheduler_config]") {
  validate(SchedulerConfig{});
  const auto rejects = [](SchedulerConfig c, const char* field) {
    std::string message;
    CHECK(code_of([&] { validate(c); }, &message) != ErrorCode::kCuda);
    CHECK_THAT(message, Catch::Contains(field));
  };
  SchedulerConfig c;
  c.max_num_seqs = 0;
  rejects(c, "max_num_seqs");
  c = {};
  c.max_batched_tokens = 0;
  rejects(c, "max_batched_tokens");
  c = {};
  c.max_batched_tokens = std::int64_t{1} << 31;
  rejects(c, "max_batched_tokens");
  c = {};
  c.max_prefill_chunk_tokens = -1;
  rejects(c, "max_prefill_chunk_tokens");
  c = {};
  c.watermark = 1.0;
  rejects(c, "watermark");
  c = {};
  c.preemption_headroom_steps = -1;
  rejects(c, "preemption_headroom_steps");
  c = {};
  c.max_draft_tokens = -1;
  rejects(c, "max_draft_tokens");
  c = {};
  c.reservation = KvReservation::kMaxModelLength;
  rejects(c, "max_model_len");
  c.max_model_len = 2048;
  validate(c);
}

TEST_CASE("to_string(KvReservation): every reservation", "[sched][scheduler_config]") {
  CHECK(to_string(KvReservation::kOnDemand) == "on-demand");
  CHECK(to_string(KvReservation::kMaxModelLength) == "max-model-length");
  CHECK(to_string(KvReservation::kNextPowerOfTwo) == "next-power-of-two");
  CHECK(to_string(KvReservation::kExact) == "exact");
}
