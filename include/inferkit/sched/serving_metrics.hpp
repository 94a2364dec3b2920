// SPDX-License-Identifier: Apache-2.0
// Serving metrics: the per-step record a scheduler keeps (batch size, tokens, KV use,
// evictions, preemptions), latency summaries (mean and p50/p90/p99, interpolated as numpy's
// default), and the summary of a finished run: TTFT, time per output token, inter-token latency,
// end-to-end and normalized latency, throughput, preemptions and prefix-cache hit rate.
// Threads: value types and pure functions; safe from any number of threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/sched/request.hpp>
#include <span>
#include <vector>

namespace inferkit {

/// One step as the scheduler saw it.
struct StepMetrics {
  std::int64_t step = 0;                ///< StepPlan::step
  double scheduled_s = 0.0;             ///< `now` given to schedule()
  double committed_s = 0.0;             ///< `now` given to commit()
  std::int32_t num_seqs = 0;            ///< sequences computed in the step (batch size)
  std::int32_t num_decodes = 0;         ///< of which decodes
  std::int32_t num_tokens = 0;          ///< tokens computed (prefill chunks + decodes + drafts)
  std::int32_t num_prefill_tokens = 0;  ///< of which prefill-chunk tokens
  std::int64_t context_tokens = 0;      ///< cached tokens the step's attention reads (all seqs)
  std::int32_t num_running = 0;         ///< requests holding KV after planning
  std::int32_t num_waiting = 0;         ///< requests queued after planning
  std::int32_t kv_blocks_used = 0;      ///< allocator blocks in use after planning
  std::int32_t kv_blocks_reserved = 0;  ///< used + promised to running requests (reservations)
  std::int64_t evictions = 0;           ///< cached blocks the allocator reused during planning
  std::int32_t preemptions = 0;         ///< requests preempted during planning
};

/// Order statistics of a set of latencies (seconds). Empty sets give count 0 and zeros.
struct LatencySummary {
  std::int64_t count = 0;  ///< values summarized
  double mean = 0.0;       ///< arithmetic mean, seconds
  double p50 = 0.0;        ///< median
  double p90 = 0.0;        ///< 90th percentile
  double p99 = 0.0;        ///< 99th percentile
  double max = 0.0;        ///< largest value
};

/// The `q` quantile (q in [0, 1]) of sorted `values` with linear interpolation between order
/// statistics (numpy's default): position q * (n - 1). Throws `Error{kInvalidArgument}` for an
/// empty span or q outside [0, 1].
inline double quantile_sorted(std::span<const double> values, double q) {
  check_arg(!values.empty(), ErrorCode::kInvalidArgument, "values.size()", values.size(),
            "must be >=", 1);
  check_arg(q >= 0.0 && q <= 1.0, ErrorCode::kInvalidArgument, "q", q, "must be in", "[0, 1]");
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

/// Mean, p50, p90, p99 and max of `values` (any order). O(n log n).
inline LatencySummary summarize_latencies(std::vector<double> values) {
  LatencySummary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.count = static_cast<std::int64_t>(values.size());
  double sum = 0.0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  s.p50 = quantile_sorted(values, 0.50);
  s.p90 = quantile_sorted(values, 0.90);
  s.p99 = quantile_sorted(values, 0.99);
  s.max = values.back();
  return s;
}

/// A whole run, from its requests' outcomes.
struct ServingSummary {
  std::int64_t num_requests = 0;          ///< outcomes summarized
  std::int64_t num_completed = 0;         ///< finished by stop token or length
  std::int64_t num_aborted = 0;           ///< finished by abort
  std::int64_t num_rejected = 0;          ///< finished with kExceedsCapacity
  std::int64_t prompt_tokens = 0;         ///< prompts of completed requests
  std::int64_t output_tokens = 0;         ///< their outputs
  std::int64_t cached_prompt_tokens = 0;  ///< prompt tokens served by the prefix cache
  std::int64_t preemptions = 0;           ///< over every request
  double duration_s = 0.0;                ///< first arrival to last finish
  double requests_per_s = 0.0;            ///< completed requests / duration
  double output_tokens_per_s = 0.0;       ///< output tokens / duration
  LatencySummary ttft;                    ///< time to first token
  LatencySummary tpot;                    ///< time per output token after the first, per request
  LatencySummary itl;                     ///< inter-token latency, every gap of every request
  LatencySummary e2e;                     ///< arrival to finish
  LatencySummary normalized;  ///< e2e / output tokens (the vLLM paper's metric), s/token

  /// Prompt tokens served by the prefix cache / prompt tokens (0 without prompts).
  [[nodiscard]] double prefix_hit_rate() const noexcept {
    return prompt_tokens == 0
               ? 0.0
               : static_cast<double>(cached_prompt_tokens) / static_cast<double>(prompt_tokens);
  }
};

/// Summarizes finished requests. Latencies cover requests that produced tokens (aborted and
/// rejected ones count only in their counters). O(total tokens + n log n).
inline ServingSummary summarize(std::span<const RequestOutcome> outcomes) {
  ServingSummary s;
  std::vector<double> ttft, tpot, itl, e2e, normalized;
  double first_arrival = 0.0;
  double last_finish = 0.0;
  for (const RequestOutcome& o : outcomes) {
    const RequestMetrics& m = o.metrics;
    first_arrival = s.num_requests == 0 ? m.arrival_s : std::min(first_arrival, m.arrival_s);
    last_finish = s.num_requests == 0 ? m.finish_s : std::max(last_finish, m.finish_s);
    ++s.num_requests;
    s.preemptions += m.num_preemptions;
    if (o.reason == FinishReason::kAborted) {
      ++s.num_aborted;
      continue;
    }
    if (o.reason == FinishReason::kExceedsCapacity) {
      ++s.num_rejected;
      continue;
    }
    ++s.num_completed;
    s.prompt_tokens += m.prompt_tokens;
    s.cached_prompt_tokens += m.cached_prompt_tokens;
    s.output_tokens += static_cast<std::int64_t>(o.output.size());
    if (m.first_token_s >= 0.0) ttft.push_back(m.ttft_s());
    if (m.token_times_s.size() >= 2) tpot.push_back(m.tpot_s());
    for (std::size_t i = 1; i < m.token_times_s.size(); ++i) {
      itl.push_back(m.token_times_s[i] - m.token_times_s[i - 1]);
    }
    e2e.push_back(m.e2e_s());
    if (!o.output.empty()) normalized.push_back(m.e2e_s() / static_cast<double>(o.output.size()));
  }
  s.duration_s = s.num_requests == 0 ? 0.0 : last_finish - first_arrival;
  if (s.duration_s > 0.0) {
    s.requests_per_s = static_cast<double>(s.num_completed) / s.duration_s;
    s.output_tokens_per_s = static_cast<double>(s.output_tokens) / s.duration_s;
  }
  s.ttft = summarize_latencies(std::move(ttft));
  s.tpot = summarize_latencies(std::move(tpot));
  s.itl = summarize_latencies(std::move(itl));
  s.e2e = summarize_latencies(std::move(e2e));
  s.normalized = summarize_latencies(std::move(normalized));
  return s;
}

}  // namespace inferkit
