// SPDX-License-Identifier: Apache-2.0
// Step cost models for the serving simulator: the `StepCostModel` concept (seconds for one
// StepPlan's work) and RooflineCostModel, which prices a step as the binding roof of its prefill
// and decode tokens on G tensor-parallel GPUs, with an efficiency per roof, an all-reduce term
// per layer and a fixed per-step overhead. A user replaces it with a model fitted to measured
// step times by writing any type that satisfies the concept.
// Threads: the cost models are value types with const, pure calls, shareable by any number of
// threads; plan_work writes only the vector it is given.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/model_shape.hpp>
#include <inferkit/perf/hardware.hpp>
#include <inferkit/perf/roofline.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <span>
#include <vector>

namespace inferkit {

/// Prices one step: `model.step_seconds(work)` for the step's sequences (new tokens after their
/// cached context), >= 0.
template <class M>
concept StepCostModel = requires(const M& model, std::span<const SequenceWork> work) {
  { model.step_seconds(work) } -> std::convertible_to<double>;
};

/// The work of a plan, one SequenceWork per scheduled sequence.
inline void plan_work(const StepPlan& plan, std::vector<SequenceWork>& out) {
  out.clear();
  for (const ScheduledSequence& s : plan.sequences) {
    out.push_back(SequenceWork{s.num_new_tokens, s.num_cached_tokens});
  }
}

/// A roofline with the costs a real deployment adds.
struct RooflineCostModel {
  ModelShape model;          ///< the served model
  Hardware hardware;         ///< one device
  int tensor_parallel = 1;   ///< GPUs the model is split over (weights, KV, FLOPs / G)
  RooflineOptions dtypes{};  ///< weight and KV storage types
  /// Share of peak FLOP/s real kernels reach, (0, 1]. GEMMs reach 0.6-0.8 of tensor peak at
  /// large batch; attention and small decode batches less.
  double compute_efficiency = 0.6;
  /// Share of peak bandwidth real kernels reach, (0, 1] (decode GEMV and paged attention reach
  /// 0.7-0.9 of HBM bandwidth).
  double memory_efficiency = 0.8;
  /// Per-step overhead (scheduler, kernel launches, sampling, host sync), seconds, >= 0.
  double step_overhead_s = 2e-3;
  /// Per-GPU all-reduce bus bandwidth, bytes/s (NVLink 3 on A100: ~240 GB/s achieved).
  double allreduce_bytes_per_s = 240e9;
  /// Latency of one all-reduce, seconds (two per layer under tensor parallelism).
  double allreduce_latency_s = 8e-6;
  DType activation_dtype = DType::kBFloat16;  ///< width of the all-reduced activations

  /// Seconds for `work`: max(compute / efficiency, memory / efficiency) on the group, plus two
  /// ring all-reduces of the new tokens' hidden states per layer (none for one GPU), plus the
  /// overhead. An empty step costs nothing. Throws as `step_cost`.
  [[nodiscard]] double step_seconds(std::span<const SequenceWork> work) const {
    if (work.empty()) return 0.0;
    const StepCost cost = step_cost(tensor_parallel_group(), model, dtypes, work);
    const double compute = cost.compute_seconds / compute_efficiency;
    const double memory = cost.memory_seconds / memory_efficiency;
    return std::max(compute, memory) + allreduce_seconds(cost.new_tokens) + step_overhead_s;
  }

  /// The ring all-reduce time of one step with `tokens` new tokens: 2 per layer, each moving
  /// 2 (G - 1) / G of tokens * hidden * activation bytes over every GPU's link, plus latency.
  [[nodiscard]] double allreduce_seconds(std::int64_t tokens) const {
    if (tensor_parallel <= 1 || tokens <= 0) return 0.0;
    const double g = tensor_parallel;
    const double bytes =
        static_cast<double>(tokens) * model.hidden_size * bits_per_element(activation_dtype) / 8.0;
    const double one = 2.0 * (g - 1.0) / g * bytes / allreduce_bytes_per_s + allreduce_latency_s;
    return 2.0 * model.num_layers * one;
  }

  /// The ideal group the roofline prices (FLOP/s and bandwidth times G).
  [[nodiscard]] Hardware tensor_parallel_group() const {
    return inferkit::tensor_parallel(hardware, tensor_parallel);
  }
};

/// Throws `Error{kInvalidArgument}` naming the first bad field: an invalid model or hardware,
/// tensor_parallel < 1 or not dividing the KV heads, an efficiency outside (0, 1], a negative
/// overhead or latency, a non-positive all-reduce bandwidth.
inline void validate(const RooflineCostModel& m) {
  validate(m.model);
  validate(m.hardware);
  check_arg(m.tensor_parallel >= 1, ErrorCode::kInvalidArgument, "tensor_parallel",
            m.tensor_parallel, "must be >=", 1);
  check_arg(m.model.num_kv_heads % m.tensor_parallel == 0 ||
                m.tensor_parallel % m.model.num_kv_heads == 0,
            ErrorCode::kInvalidArgument, "tensor_parallel", m.tensor_parallel,
            "must divide (or be a multiple of) num_kv_heads =", m.model.num_kv_heads);
  const auto efficiency = [](const char* name, double e) {
    check_arg(e > 0.0 && e <= 1.0, ErrorCode::kInvalidArgument, name, e, "must be in", "(0, 1]");
  };
  efficiency("compute_efficiency", m.compute_efficiency);
  efficiency("memory_efficiency", m.memory_efficiency);
  check_arg(std::isfinite(m.step_overhead_s) && m.step_overhead_s >= 0.0,
            ErrorCode::kInvalidArgument, "step_overhead_s", m.step_overhead_s, "must be >=", 0);
  check_arg(std::isfinite(m.allreduce_latency_s) && m.allreduce_latency_s >= 0.0,
            ErrorCode::kInvalidArgument, "allreduce_latency_s", m.allreduce_latency_s,
            "must be >=", 0);
  check_arg(m.allreduce_bytes_per_s > 0.0, ErrorCode::kInvalidArgument, "allreduce_bytes_per_s",
            m.allreduce_bytes_per_s, "must be >", 0);
}

}  // namespace inferkit
