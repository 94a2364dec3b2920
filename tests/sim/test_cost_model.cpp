// SPDX-License-Identifier: Apache-2.0
// Tests for sim/cost_model.hpp: RooflineCostModel against the roofline formulas recomputed here
// in double from the model shape (FLOPs, bytes, efficiencies, TP all-reduce, overhead), the
// decode and prefill regimes it must land in, and validation of every field.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/core/model_shape.hpp>
#include <inferkit/perf/hardware.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/sim/cost_model.hpp>
#include <string>
#include <tests/support/error_code.hpp>
#include <vector>

using namespace inferkit;
using inferkit::test::code_of;

namespace {

RooflineCostModel llama70b_on(int gpus) {
  RooflineCostModel m;
  m.model = model_preset("llama-3-70b");
  m.hardware = hardware_preset("a100-80gb");
  m.tensor_parallel = gpus;
  return m;
}

// The same model from first principles: 2 * params FLOPs per token plus attention
// 4 * layers * heads * head_dim per visible key; bytes: bf16 weights once plus KV read and write.
double expected_seconds(const RooflineCostModel& m, const std::vector<SequenceWork>& work) {
  const double params = static_cast<double>(parameter_count(m.model));
  const double kv_per_token =
      2.0 * m.model.num_layers * m.model.num_kv_heads * m.model.head_dim * 2;
  double flops = 0, bytes = params * 2.0, tokens = 0;
  for (const SequenceWork& w : work) {
    const double n = static_cast<double>(w.new_tokens);
    const double c = static_cast<double>(w.context_tokens);
    tokens += n;
    flops += 2.0 * params * n;
    for (double i = 1; i <= n; ++i) {
      flops += 4.0 * m.model.num_layers * m.model.num_q_heads * m.model.head_dim * (c + i);
    }
    bytes += kv_per_token * (c + n);
  }
  const double g = m.tensor_parallel;
  const double compute = flops / (g * m.hardware.peak_flops * m.compute_efficiency);
  const double memory = bytes / (g * m.hardware.memory_bandwidth * m.memory_efficiency);
  double allreduce = 0.0;
  if (m.tensor_parallel > 1) {
    const double msg = tokens * m.model.hidden_size * 2.0;
    allreduce = 2.0 * m.model.num_layers *
                (2.0 * (g - 1) / g * msg / m.allreduce_bytes_per_s + m.allreduce_latency_s);
  }
  return std::max(compute, memory) + allreduce + m.step_overhead_s;
}

}  // namespace

TEST_CASE("RooflineCostModel: step time follows the roofline, TP and overhead terms",
          "[sim][cost_model]") {
  for (int gpus : {1, 2, 4, 8}) {
    const RooflineCostModel m = llama70b_on(gpus);
    validate(m);
    const std::vector<std::vector<SequenceWork>> steps = {
        {{1, 1000}},                               // one decode: memory-bound
        std::vector<SequenceWork>(64, {1, 2000}),  // a decode batch
        {{2048, 0}},                               // a prefill chunk: compute-bound
        {{512, 4096}, {1, 300}, {1, 7000}},        // mixed
    };
    for (const auto& w : steps) {
      INFO("gpus " << gpus << " sequences " << w.size());
      CHECK(m.step_seconds(w) == Approx(expected_seconds(m, w)).epsilon(1e-9));
    }
  }
  const RooflineCostModel four = llama70b_on(4);
  const std::vector<SequenceWork> decode = {{1, 512}};
  // A single decode of a 70B bf16 model reads ~141 GB: ~17 ms at 4 x 2.039 TB/s, over 80%.
  CHECK(four.step_seconds(decode) > 0.141e12 / (4 * 2.039e12) / 0.8);
  CHECK(four.step_seconds({}) == 0.0);
  const std::vector<SequenceWork> prefill = {{4096, 0}};
  const StepCost ideal = step_cost(four.tensor_parallel_group(), four.model, four.dtypes, prefill);
  CHECK(ideal.bound == Roof::kCompute);
}

TEST_CASE("RooflineCostModel: every field is validated", "[sim][cost_model]") {
  const auto rejects = [](RooflineCostModel m, const char* field) {
    std::string message;
    CHECK(code_of([&] { validate(m); }, &message) == ErrorCode::kInvalidArgument);
    CHECK_THAT(message, Catch::Contains(field));
  };
  RooflineCostModel m = llama70b_on(1);
  m.tensor_parallel = 0;
  rejects(m, "tensor_parallel");
  m = llama70b_on(3);  // 8 KV heads are not split 3 ways
  rejects(m, "tensor_parallel");
  m = llama70b_on(1);
  m.compute_efficiency = 0.0;
  rejects(m, "compute_efficiency");
  m = llama70b_on(1);
  m.memory_efficiency = 1.5;
  rejects(m, "memory_efficiency");
  m = llama70b_on(1);
  m.step_overhead_s = -1.0;
  rejects(m, "step_overhead_s");
  m = llama70b_on(1);
  m.allreduce_bytes_per_s = 0.0;
  rejects(m, "allreduce_bytes_per_s");
  m = llama70b_on(1);
  m.hardware.peak_flops = 0.0;
  rejects(m, "peak_flops");
}

TEST_CASE("plan_work: one SequenceWork per scheduled sequence", "[sim][cost_model]") {
  StepPlan plan;
  plan.sequences = {{1, 10, 3, 2, true}, {2, 0, 7, 0, false}};
  std::vector<SequenceWork> work;
  plan_work(plan, work);
  REQUIRE(work.size() == 2);
  CHECK(work[0].new_tokens == 3);
  CHECK(work[0].context_tokens == 10);
  CHECK(work[1].new_tokens == 7);
  CHECK(work[1].context_tokens == 0);
}
