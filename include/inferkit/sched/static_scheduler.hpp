// SPDX-License-Identifier: Apache-2.0
// StaticScheduler: request-level (static) batching, the baseline continuous batching is
// measured against. It forms a batch of up to N requests in arrival order, reserves each one's
// maximum KV length up front (as pre-paging servers did), prefills them together, and admits no
// new request until every member has finished, so finished members' slots sit idle.
// Threads: as ContinuousScheduler: one thread at a time per scheduler and its allocator;
// static_batching_config is pure.
#pragma once

#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <inferkit/sched/scheduler_config.hpp>
#include <inferkit/sched/scheduling_policy.hpp>

namespace inferkit {

/// Options of a StaticScheduler.
struct StaticSchedulerOptions {
  std::int32_t max_batch_size = 8;  ///< requests per batch, >= 1
  /// Tokens each request reserves (the server's maximum sequence length); 0: reserve each
  /// request's own prompt + max_new_tokens.
  std::int64_t max_model_len = 0;
  /// Tokens computed per step; the default covers any batch's prompts in one step, as static
  /// servers prefill the whole batch at once.
  std::int64_t max_batched_tokens = std::int64_t{1} << 20;
  bool record_step_metrics = true;  ///< keep a StepMetrics per step
};

/// The SchedulerConfig that makes a ContinuousScheduler batch statically: whole-batch
/// admission, a reservation of the maximum length, no watermark and no preemption headroom
/// (reserved KV never runs out). Throws `Error{kInvalidArgument}` for max_batch_size < 1,
/// negative max_model_len or max_batched_tokens < 1.
inline SchedulerConfig static_batching_config(const StaticSchedulerOptions& options) {
  check_arg(options.max_batch_size >= 1, ErrorCode::kInvalidArgument, "max_batch_size",
            options.max_batch_size, "must be >=", 1);
  check_arg(options.max_model_len >= 0, ErrorCode::kInvalidArgument, "max_model_len",
            options.max_model_len, "must be >=", 0);
  SchedulerConfig c;
  c.max_num_seqs = options.max_batch_size;
  c.max_batched_tokens = options.max_batched_tokens;
  c.max_model_len = options.max_model_len;
  c.reservation =
      options.max_model_len > 0 ? KvReservation::kMaxModelLength : KvReservation::kExact;
  c.admission = AdmissionMode::kWholeBatch;
  c.watermark = 0.0;
  c.preemption_headroom_steps = 0;
  c.record_step_metrics = options.record_step_metrics;
  validate(c);
  return c;
}

/// Static batching with the ContinuousScheduler's interface (schedule / commit / take_finished),
/// so engines and the simulator drive both the same way.
class StaticScheduler : public ContinuousScheduler<FcfsPolicy> {
 public:
  /// A static scheduler over `allocator` (no prefix cache: static servers had none). Throws as
  /// `static_batching_config`.
  explicit StaticScheduler(BlockAllocator& allocator, const StaticSchedulerOptions& options = {})
      : ContinuousScheduler<FcfsPolicy>(allocator, nullptr, static_batching_config(options)) {}
};

}  // namespace inferkit
