// SPDX-License-Identifier: Apache-2.0
// Tests for sched/request.hpp: request validation names the bad field, the state and reason
// names, and the latency helpers of RequestMetrics against their definitions.
#include <catch2/catch.hpp>
#include <cmath>
#include <inferkit/sched/request.hpp>
#include <limits>
#include <string>
#include <tests/support/error_code.hpp>

using namespace inferkit;
using inferkit::test::code_of;

TEST_CASE("validate(Request): a good request passes, each bad field is named", "[sched][request]") {
  Request r;
  r.prompt = {1, 2, 3};
  r.max_new_tokens = 4;
  validate(r);
  std::string message;
  Request bad = r;
  bad.prompt.clear();
  CHECK(code_of([&] { validate(bad); }, &message) == ErrorCode::kInvalidArgument);
  CHECK_THAT(message, Catch::Contains("prompt.size() = 0"));
  bad = r;
  bad.prompt[2] = -4;
  CHECK(code_of([&] { validate(bad); }, &message) == ErrorCode::kInvalidArgument);
  CHECK_THAT(message, Catch::Contains("prompt[2] = -4"));
  bad = r;
  bad.max_new_tokens = 0;
  CHECK(code_of([&] { validate(bad); }, &message) == ErrorCode::kInvalidArgument);
  CHECK_THAT(message, Catch::Contains("max_new_tokens = 0"));
  bad = r;
  bad.arrival_s = std::numeric_limits<double>::infinity();
  CHECK(code_of([&] { validate(bad); }, &message) == ErrorCode::kInvalidArgument);
  CHECK_THAT(message, Catch::Contains("arrival_s"));
}

TEST_CASE("RequestMetrics: TTFT, end-to-end and time per output token", "[sched][request]") {
  RequestMetrics m;
  m.arrival_s = 2.0;
  CHECK(m.ttft_s() == -1.0);
  CHECK(m.e2e_s() == -1.0);
  CHECK(m.tpot_s() == -1.0);
  m.first_token_s = 2.5;
  m.token_times_s = {2.5};
  CHECK(m.ttft_s() == 0.5);
  CHECK(m.tpot_s() == 0.0);
  m.token_times_s = {2.5, 2.75, 3.5};
  m.finish_s = 3.5;
  CHECK(m.e2e_s() == 1.5);
  CHECK(m.tpot_s() == Approx(0.5));  // (3.5 - 2.5) / 2
}

TEST_CASE("to_string: request states and finish reasons", "[sched][request]") {
  CHECK(to_string(RequestState::kWaiting) == "waiting");
  CHECK(to_string(RequestState::kRunning) == "running");
  CHECK(to_string(RequestState::kPreempted) == "preempted");
  CHECK(to_string(RequestState::kFinished) == "finished");
  CHECK(to_string(FinishReason::kStopToken) == "stop token");
  CHECK(to_string(FinishReason::kLength) == "length");
  CHECK(to_string(FinishReason::kAborted) == "aborted");
  CHECK(to_string(FinishReason::kExceedsCapacity) == "exceeds KV capacity");
  CHECK(to_string(FinishReason::kNone) == "none");
}
