// SPDX-License-Identifier: Apache-2.0
// Tests for sim/simulator.hpp. With one-token prompts and a cost model of one second per step,
// static and continuous batching reduce to the step-counting simulators of the batching
// literature, re-implemented here independently: every request's finish time must match them
// exactly. Also: closed-loop clients, idle gaps between arrivals, the utilization figure,
// the CSV timeline, and a user-defined cost model satisfying the concept.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <inferkit/sched/static_scheduler.hpp>
#include <inferkit/sim/simulator.hpp>
#include <inferkit/sim/workload.hpp>
#include <map>
#include <numeric>
#include <string>
#include <tests/support/error_code.hpp>
#include <vector>

using namespace inferkit;
using inferkit::test::code_of;

namespace {

/// Every step costs one second, whatever it computes.
struct UnitStep {
  [[nodiscard]] double step_seconds(std::span<const SequenceWork> work) const {
    return work.empty() ? 0.0 : 1.0;
  }
};
static_assert(StepCostModel<UnitStep>);
static_assert(StepCostModel<RooflineCostModel>);

struct Req {
  std::int64_t arrival;
  std::int64_t output;
};

// Iteration-level batching, one token per active request per step; a finished request leaves
// at the end of its step and a waiting one joins at the start of the next.
std::vector<std::int64_t> continuous_reference(const std::vector<Req>& reqs, std::size_t batch) {
  std::vector<std::int64_t> finish(reqs.size(), -1), done(reqs.size(), 0);
  std::deque<std::size_t> waiting;
  std::vector<std::size_t> active;
  std::size_t next = 0;
  std::int64_t step = 0;
  while (next < reqs.size() || !waiting.empty() || !active.empty()) {
    while (next < reqs.size() && reqs[next].arrival <= step) waiting.push_back(next++);
    while (!waiting.empty() && active.size() < batch) {
      active.push_back(waiting.front());
      waiting.pop_front();
    }
    if (active.empty()) {
      step = reqs[next].arrival;
      continue;
    }
    for (std::size_t r : active) ++done[r];
    std::vector<std::size_t> still;
    for (std::size_t r : active) {
      if (done[r] == reqs[r].output) {
        finish[r] = step + 1;
      } else {
        still.push_back(r);
      }
    }
    active = still;
    ++step;
  }
  return finish;
}

// Request-level batching: a batch of the first `batch` waiting requests runs until its longest
// member is done; the next batch starts after it.
std::vector<std::int64_t> static_reference(const std::vector<Req>& reqs, std::size_t batch) {
  std::vector<std::int64_t> finish(reqs.size(), -1);
  std::int64_t step = 0;
  for (std::size_t first = 0; first < reqs.size(); first += batch) {
    const std::size_t last = std::min(reqs.size(), first + batch);
    std::int64_t start = step;
    for (std::size_t r = first; r < last; ++r) start = std::max(start, reqs[r].arrival);
    std::int64_t longest = 0;
    for (std::size_t r = first; r < last; ++r) longest = std::max(longest, reqs[r].output);
    for (std::size_t r = first; r < last; ++r) finish[r] = start + reqs[r].output;
    step = start + longest;
  }
  return finish;
}

std::vector<SimRequestSpec> specs_of(const std::vector<Req>& reqs) {
  std::vector<SimRequestSpec> out;
  for (const Req& r : reqs) {
    SimRequestSpec s;
    s.arrival_s = static_cast<double>(r.arrival);
    s.prompt_tokens = 1;
    s.output_tokens = r.output;
    out.push_back(s);
  }
  return out;
}

std::map<RequestId, double> finish_times(const SimulationResult& res) {
  std::map<RequestId, double> out;
  for (const RequestOutcome& o : res.outcomes) out[o.id] = o.metrics.finish_s;
  return out;
}

std::vector<Req> random_requests(std::uint64_t seed, std::size_t n, bool spread) {
  Rng rng(seed);
  std::vector<Req> reqs;
  std::int64_t t = 0;
  const auto lengths = LengthDistribution::pareto(1.5, 20.0).clamped(1, 300);
  for (std::size_t i = 0; i < n; ++i) {
    if (spread) t += rng.below(12);
    reqs.push_back({t, sample_length(lengths, rng)});
  }
  return reqs;
}

}  // namespace

TEST_CASE("simulate: continuous batching finishes every request when the step count says",
          "[sim][simulator]") {
  for (bool spread : {false, true}) {
    const std::vector<Req> reqs = random_requests(spread ? 2 : 1, 50, spread);
    const auto want = continuous_reference(reqs, 8);
    BlockAllocator pool(4096, 16);
    SchedulerConfig config;
    config.max_num_seqs = 8;
    ContinuousScheduler<> sched(pool, nullptr, config);
    const auto specs = specs_of(reqs);
    const SimulationResult res = simulate(sched, UnitStep{}, specs);
    const auto got = finish_times(res);
    REQUIRE(got.size() == reqs.size());
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      INFO("spread " << spread << " request " << i);
      CHECK(got.at(static_cast<RequestId>(i)) == static_cast<double>(want[i]));
    }
    CHECK(res.summary.output_tokens ==
          std::accumulate(reqs.begin(), reqs.end(), std::int64_t{0},
                          [](std::int64_t s, const Req& r) { return s + r.output; }));
  }
}

TEST_CASE("simulate: static batching finishes every request when the step count says",
          "[sim][simulator]") {
  const std::vector<Req> reqs = random_requests(3, 50, false);
  const auto want = static_reference(reqs, 8);
  BlockAllocator pool(8192, 16);
  StaticSchedulerOptions options;
  options.max_batch_size = 8;
  StaticScheduler sched(pool, options);
  const auto specs = specs_of(reqs);
  const SimulationResult res = simulate(sched, UnitStep{}, specs);
  const auto got = finish_times(res);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    CHECK(got.at(static_cast<RequestId>(i)) == static_cast<double>(want[i]));
  }
  // Continuous batching fills the slots static batching leaves idle.
  BlockAllocator pool2(8192, 16);
  SchedulerConfig config;
  config.max_num_seqs = 8;
  ContinuousScheduler<> cont(pool2, nullptr, config);
  const SimulationResult c = simulate(cont, UnitStep{}, specs);
  const double static_util = res.slot_utilization(8);
  const double cont_util = c.slot_utilization(8, c.steps.back().start_s);
  INFO("static " << static_util << " continuous " << cont_util);
  CHECK(cont_util > static_util);
  CHECK(c.end_s < res.end_s);
}

TEST_CASE("simulate: closed-loop clients keep at most N requests in flight", "[sim][simulator]") {
  WorkloadOptions w;
  w.num_requests = 60;
  w.prompt = LengthDistribution::uniform(4, 40);
  w.output = LengthDistribution::uniform(1, 30);
  w.seed = 4;
  const auto specs = generate_workload(w);
  BlockAllocator pool(2048, 16);
  ContinuousScheduler<> sched(pool);
  SimulationOptions options;
  options.concurrency = 5;
  options.think_time_s = 0.5;
  RooflineCostModel cost;
  cost.model = model_preset("llama-3-8b");
  cost.hardware = hardware_preset("h100-sxm");
  const SimulationResult res = simulate(sched, cost, specs, options);
  REQUIRE(res.outcomes.size() == 60);
  for (const SimStep& s : res.steps) CHECK(s.num_running + s.num_waiting <= 5);
  // Request i (i >= 5) arrives think_time after the request before it in finishing order.
  std::vector<double> finishes;
  for (const RequestOutcome& o : res.outcomes) finishes.push_back(o.metrics.finish_s);
  for (const RequestOutcome& o : res.outcomes) {
    if (o.id < 5) {
      CHECK(o.metrics.arrival_s == 0.0);
    } else {
      CHECK(o.metrics.arrival_s == Approx(finishes[static_cast<std::size_t>(o.id - 5)] + 0.5));
    }
  }
  const std::string csv = timeline_csv(res, 256, 2048);
  CHECK(std::count(csv.begin(), csv.end(), '\n') ==
        static_cast<std::ptrdiff_t>(res.steps.size() + 1));
  CHECK(csv.rfind("start_s,seconds,num_seqs", 0) == 0);
}

TEST_CASE("simulate: bad options and a busy scheduler are rejected", "[sim][simulator]") {
  BlockAllocator pool(64, 16);
  ContinuousScheduler<> sched(pool);
  const std::vector<SimRequestSpec> none;
  SimulationOptions bad;
  bad.vocab_size = 1;
  CHECK(code_of([&] { (void)simulate(sched, UnitStep{}, none, bad); }) ==
        ErrorCode::kInvalidArgument);
  bad = {};
  bad.concurrency = -1;
  CHECK(code_of([&] { (void)simulate(sched, UnitStep{}, none, bad); }) ==
        ErrorCode::kInvalidArgument);
  Request r;
  r.id = 1;
  r.prompt = {1};
  sched.add(r);
  CHECK(code_of([&] { (void)simulate(sched, UnitStep{}, none); }) == ErrorCode::kInvalidState);
}
