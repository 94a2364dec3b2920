// SPDX-License-Identifier: Apache-2.0
// SchedulerConfig: the limits and rules a scheduler plans each step under: the token budget and
// sequence limit per step, chunked prefill, the admission watermark and preemption hysteresis,
// how much KV a request reserves on admission (on demand as with paging, or a fixed reservation
// as pre-paging systems did), and whether batches are formed continuously or as static batches.
// Threads: a value type and pure functions; safe from any number of threads.
#pragma once

#include <cstdint>
#include <inferkit/core/error.hpp>
#include <string_view>

namespace inferkit {

/// How much KV a running request is promised. Paging allocates on demand; the others model the
/// systems the vLLM paper compares against (Orca and pre-paging servers reserve contiguous KV).
enum class KvReservation : std::uint8_t {
  kOnDemand,        ///< paged: blocks for the tokens known so far (prompt, then one per decode)
  kMaxModelLength,  ///< `max_model_len` tokens per request (Orca (Max), static batching)
  kNextPowerOfTwo,  ///< prompt + max_new_tokens rounded up to a power of two (Orca (Pow2))
  kExact,           ///< prompt + max_new_tokens (Orca (Oracle): the true length is known)
};

/// When waiting requests may join the running set.
enum class AdmissionMode : std::uint8_t {
  kContinuous,  ///< every step (iteration-level scheduling, Orca / vLLM)
  kWholeBatch,  ///< only when the running set is empty: a batch runs until all of it finishes
};

/// "on-demand", "max-model-length", "next-power-of-two" or "exact".
constexpr std::string_view to_string(KvReservation reservation) noexcept {
  switch (reservation) {
    case KvReservation::kOnDemand:
      return "on-demand";
    case KvReservation::kMaxModelLength:
      return "max-model-length";
    case KvReservation::kNextPowerOfTwo:
      return "next-power-of-two";
    case KvReservation::kExact:
      return "exact";
  }
  return "?";
}

/// Limits and rules of a scheduler. The defaults are vLLM V1's online-serving defaults where
/// they exist (256 sequences, 2048 batched tokens, chunked prefill, 1% watermark).
struct SchedulerConfig {
  std::int32_t max_num_seqs = 256;            ///< running sequences at most, >= 1
  std::int64_t max_batched_tokens = 2048;     ///< tokens computed per step at most (budget), >= 1
  std::int64_t max_prefill_chunk_tokens = 0;  ///< one chunk's tokens at most; 0: the budget
  /// Split a prompt over several steps. Off: a prompt is computed in one step or waits, so the
  /// budget must cover the longest prompt (such a request finishes with kExceedsCapacity).
  bool chunked_prefill = true;
  /// Share of the pool kept free when admitting (vLLM's watermark), in [0, 1): running
  /// sequences can then grow for a while before anyone is preempted. It is also the capacity
  /// that "can never fit" is judged against: a request whose KV (its prompt, or its reservation)
  /// needs more than num_blocks - floor(watermark * num_blocks) blocks finishes with
  /// kExceedsCapacity, even alone in an empty pool.
  double watermark = 0.01;
  /// Hysteresis after a preemption: until `preemption_headroom_steps` steps pass without one,
  /// a request is admitted only if the running decodes keep room to grow that many steps
  /// (ceil(running * steps / block_size) blocks) after it, so the same requests are not
  /// readmitted and preempted step after step. 0 turns it off.
  std::int32_t preemption_headroom_steps = 32;
  /// Speculative drafts one sequence may add to a step, >= 0 (more are ignored).
  std::int32_t max_draft_tokens = 16;
  KvReservation reservation = KvReservation::kOnDemand;  ///< KV promised per running request
  /// Most tokens (prompt + output) one sequence may reach; 0 = unlimited. Every request emits
  /// at least one token, so a prompt of max_model_len tokens or more finishes with
  /// kExceedsCapacity when added (a prompt of max_model_len - 1 runs and emits one token); output
  /// stops (kLength) at the limit. kMaxModelLength reserves it for every request and needs it > 0.
  std::int64_t max_model_len = 0;
  AdmissionMode admission = AdmissionMode::kContinuous;  ///< when waiting requests may join
  /// Keep a StepMetrics record per step (`step_metrics()`); off saves memory on long runs.
  bool record_step_metrics = true;
};

/// Throws `Error{kInvalidArgument}` naming the first bad field.
inline void validate(const SchedulerConfig& c) {
  check_arg(c.max_num_seqs >= 1, ErrorCode::kInvalidArgument, "max_num_seqs", c.max_num_seqs,
            "must be >=", 1);
  check_arg(c.max_batched_tokens >= 1, ErrorCode::kInvalidArgument, "max_batched_tokens",
            c.max_batched_tokens, "must be >=", 1);
  check_arg(c.max_batched_tokens <= (std::int64_t{1} << 30), ErrorCode::kOutOfRange,
            "max_batched_tokens", c.max_batched_tokens, "must be <=", std::int64_t{1} << 30);
  check_arg(c.max_prefill_chunk_tokens >= 0, ErrorCode::kInvalidArgument,
            "max_prefill_chunk_tokens", c.max_prefill_chunk_tokens, "must be >=", 0);
  check_arg(c.watermark >= 0.0 && c.watermark < 1.0, ErrorCode::kInvalidArgument, "watermark",
            c.watermark, "must be in", "[0, 1)");
  check_arg(c.preemption_headroom_steps >= 0, ErrorCode::kInvalidArgument,
            "preemption_headroom_steps", c.preemption_headroom_steps, "must be >=", 0);
  check_arg(c.max_draft_tokens >= 0, ErrorCode::kInvalidArgument, "max_draft_tokens",
            c.max_draft_tokens, "must be >=", 0);
  check_arg(c.max_model_len >= 0, ErrorCode::kInvalidArgument, "max_model_len", c.max_model_len,
            "must be >=", 0);
  check_arg(c.reservation != KvReservation::kMaxModelLength || c.max_model_len > 0,
            ErrorCode::kInvalidArgument, "max_model_len", c.max_model_len,
            "must be > 0 with reservation = max-model-length, got", 0);
}

}  // namespace inferkit
