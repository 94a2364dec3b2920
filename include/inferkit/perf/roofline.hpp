// SPDX-License-Identifier: Apache-2.0
// Roofline cost model: FLOPs and bytes of one engine step (prefill chunks and decodes, each with
// its cached context) for a ModelShape on a Hardware, the arithmetic intensity (ops:byte), which
// roof binds, and the step time max(compute, memory). The serving simulator (sim/) prices each
// StepPlan with it; examples use it for "what does a prefix-cache hit save".
//
// The model: every new token costs 2 * parameters FLOPs in the matmuls plus attention FLOPs over
// the keys it sees; a step reads the weights once, reads each sequence's cached KV once and
// writes the new tokens' KV. Activations, kernel launch and communication cost nothing here, so
// the times are lower bounds that a real engine approaches at best.
//
// Threads: value types and pure functions; safe from any number of threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/model_shape.hpp>
#include <inferkit/perf/hardware.hpp>
#include <inferkit/perf/kv_memory_planner.hpp>
#include <span>
#include <string_view>
#include <vector>

namespace inferkit {

/// The roof that limits a step.
enum class Roof : std::uint8_t {
  kMemory,   ///< time = bytes / bandwidth (arithmetic intensity below the ridge point)
  kCompute,  ///< time = FLOPs / peak FLOP/s (at or above the ridge point)
};

/// "memory" or "compute".
constexpr std::string_view to_string(Roof roof) noexcept {
  return roof == Roof::kCompute ? "compute" : "memory";
}

/// Storage types the cost model assumes.
struct RooflineOptions {
  DType weights_dtype = DType::kBFloat16;  ///< weights read every step at this width
  KVCacheFormat kv{};                      ///< KV read and written at this width
};

/// One sequence's share of a step: `new_tokens` tokens computed now (a prefill chunk, or 1 for a
/// decode) after `context_tokens` tokens already in its KV cache.
struct SequenceWork {
  std::int64_t new_tokens = 1;      ///< >= 1
  std::int64_t context_tokens = 0;  ///< >= 0, tokens cached before this step
};

/// The cost of one step. FLOPs and bytes are totals over the step (all devices together).
struct StepCost {
  std::int64_t new_tokens = 0;        ///< tokens computed in the step
  double linear_flops = 0.0;          ///< 2 * parameters * new_tokens
  double attention_flops = 0.0;       ///< QK^T and PV: 4 * layers * q_heads * head_dim per key seen
  double flops = 0.0;                 ///< linear + attention
  double weight_bytes = 0.0;          ///< weights read once (0 for an empty step)
  double kv_read_bytes = 0.0;         ///< cached context read, per sequence
  double kv_write_bytes = 0.0;        ///< KV of the new tokens written
  double bytes = 0.0;                 ///< weight + kv_read + kv_write
  double arithmetic_intensity = 0.0;  ///< flops / bytes (ops:byte); 0 for an empty step
  double compute_seconds = 0.0;       ///< flops / peak_flops
  double memory_seconds = 0.0;        ///< bytes / memory_bandwidth
  double seconds = 0.0;               ///< max(compute_seconds, memory_seconds)
  Roof bound = Roof::kMemory;         ///< the larger of the two times (compute on a tie)
};

/// The roof that binds work of arithmetic intensity `ops_per_byte` on `hw`: compute at or above
/// the ridge point, memory below.
inline Roof roof_for_intensity(const Hardware& hw, double ops_per_byte) noexcept {
  return ops_per_byte >= hw.ridge_point() ? Roof::kCompute : Roof::kMemory;
}

/// FLOP/s attainable at arithmetic intensity `ops_per_byte`: min(peak, bandwidth * intensity).
inline double attainable_flops(const Hardware& hw, double ops_per_byte) noexcept {
  return std::min(hw.peak_flops, hw.memory_bandwidth * ops_per_byte);
}

/// The cost of a step that runs `work` (any mix of prefill chunks and decodes). An empty span
/// costs nothing. Throws `Error{kInvalidArgument}` for an invalid hardware, shape or KV format,
/// new_tokens < 1 or context_tokens < 0. O(work.size()).
inline StepCost step_cost(const Hardware& hw, const ModelShape& shape,
                          const RooflineOptions& options, std::span<const SequenceWork> work) {
  validate(hw);
  validate(shape);
  for (const SequenceWork& seq : work) {
    check_arg(seq.new_tokens >= 1, ErrorCode::kInvalidArgument, "new_tokens", seq.new_tokens,
              "must be >=", 1);
    check_arg(seq.context_tokens >= 0, ErrorCode::kInvalidArgument, "context_tokens",
              seq.context_tokens, "must be >=", 0);
  }
  StepCost cost;
  if (work.empty()) return cost;
  const auto params = static_cast<double>(parameter_count(shape));
  const double attention_per_key = 4.0 * shape.num_layers * shape.num_q_heads * shape.head_dim;
  for (const SequenceWork& seq : work) {
    const auto n = static_cast<double>(seq.new_tokens);
    const auto c = static_cast<double>(seq.context_tokens);
    // Causal attention: new token i (1-based) sees c + i keys.
    cost.attention_flops += attention_per_key * (n * c + n * (n + 1.0) / 2.0);
    cost.kv_read_bytes +=
        static_cast<double>(kv_bytes_for_tokens(shape, options.kv, seq.context_tokens));
    cost.kv_write_bytes +=
        static_cast<double>(kv_bytes_for_tokens(shape, options.kv, seq.new_tokens));
    cost.new_tokens += seq.new_tokens;
  }
  cost.linear_flops = 2.0 * params * static_cast<double>(cost.new_tokens);
  cost.flops = cost.linear_flops + cost.attention_flops;
  cost.weight_bytes = params * bits_per_element(options.weights_dtype) / 8.0;
  cost.bytes = cost.weight_bytes + cost.kv_read_bytes + cost.kv_write_bytes;
  cost.arithmetic_intensity = cost.flops / cost.bytes;
  cost.compute_seconds = cost.flops / hw.peak_flops;
  cost.memory_seconds = cost.bytes / hw.memory_bandwidth;
  cost.bound = cost.compute_seconds >= cost.memory_seconds ? Roof::kCompute : Roof::kMemory;
  cost.seconds = std::max(cost.compute_seconds, cost.memory_seconds);
  return cost;
}

/// A continuous-batching step: the prefill chunks `prefills` (each with its cached context) and
/// one decode token for each sequence whose context length is in `decode_context_tokens`. Throws
/// as `step_cost`.
inline StepCost mixed_step_cost(const Hardware& hw, const ModelShape& shape,
                                const RooflineOptions& options,
                                std::span<const SequenceWork> prefills,
                                std::span<const std::int64_t> decode_context_tokens) {
  std::vector<SequenceWork> work(prefills.begin(), prefills.end());
  work.reserve(prefills.size() + decode_context_tokens.size());
  for (std::int64_t context : decode_context_tokens) work.push_back({1, context});
  return step_cost(hw, shape, options, work);
}

/// Prefill of `batch` prompts of `prompt_tokens` tokens each, after `cached_prefix_tokens`
/// tokens of each were found in a prefix cache (so only the rest is computed). Throws as
/// `step_cost`, and for batch < 1 or prompt_tokens <= cached_prefix_tokens.
inline StepCost prefill_cost(const Hardware& hw, const ModelShape& shape,
                             const RooflineOptions& options, std::int64_t prompt_tokens,
                             std::int64_t batch = 1, std::int64_t cached_prefix_tokens = 0) {
  check_arg(batch >= 1, ErrorCode::kInvalidArgument, "batch", batch, "must be >=", 1);
  check_arg(cached_prefix_tokens >= 0, ErrorCode::kInvalidArgument, "cached_prefix_tokens",
            cached_prefix_tokens, "must be >=", 0);
  check_arg(prompt_tokens > cached_prefix_tokens, ErrorCode::kInvalidArgument, "prompt_tokens",
            prompt_tokens, "must be > cached_prefix_tokens =", cached_prefix_tokens);
  const std::vector<SequenceWork> work(
      static_cast<std::size_t>(batch),
      {prompt_tokens - cached_prefix_tokens, cached_prefix_tokens});
  return step_cost(hw, shape, options, work);
}

/// One decode step of `batch` sequences, each with `context_tokens` tokens cached. Throws as
/// `step_cost`, and for batch < 1.
inline StepCost decode_cost(const Hardware& hw, const ModelShape& shape,
                            const RooflineOptions& options, std::int64_t batch,
                            std::int64_t context_tokens) {
  check_arg(batch >= 1, ErrorCode::kInvalidArgument, "batch", batch, "must be >=", 1);
  const std::vector<SequenceWork> work(static_cast<std::size_t>(batch), {1, context_tokens});
  return step_cost(hw, shape, options, work);
}

/// Prefill seconds one request saves when the first `prefix_tokens` of its
/// `prefix_tokens + suffix_tokens` prompt come from a prefix cache instead of being recomputed:
/// prefill_cost(full).seconds - prefill_cost(suffix after cached prefix).seconds. Throws as
/// `prefill_cost`, and for prefix_tokens < 0 or suffix_tokens < 1.
inline double prefix_reuse_seconds_saved(const Hardware& hw, const ModelShape& shape,
                                         const RooflineOptions& options, std::int64_t prefix_tokens,
                                         std::int64_t suffix_tokens) {
  check_arg(prefix_tokens >= 0, ErrorCode::kInvalidArgument, "prefix_tokens", prefix_tokens,
            "must be >=", 0);
  check_arg(suffix_tokens >= 1, ErrorCode::kInvalidArgument, "suffix_tokens", suffix_tokens,
            "must be >=", 1);
  const std::int64_t prompt = prefix_tokens + suffix_tokens;
  return prefill_cost(hw, shape, options, prompt).seconds -
         prefill_cost(hw, shape, options, prompt, 1, prefix_tokens).seconds;
}

}  // namespace inferkit
