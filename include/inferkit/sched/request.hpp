// SPDX-License-Identifier: Apache-2.0
// Request: what a client submits to a scheduler (prompt, output limit, stop tokens, arrival,
// priority, cache namespace), the states it moves through (waiting -> running -> (preempted ->
// waiting) -> finished), why it finished, and what the scheduler hands back at the end: the
// output tokens and the request's latency record. The first type of the step flow.
// Threads: value types and pure functions; safe from any number of threads.
#pragma once

#include <cmath>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/core/request_id.hpp>
#include <inferkit/core/token_id.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace inferkit {

/// One generation request.
struct Request {
  RequestId id = 0;                    ///< unique among the requests a scheduler holds
  std::vector<TokenId> prompt;         ///< >= 1 token
  std::int64_t max_new_tokens = 1;     ///< >= 1 output tokens at most (the "length" limit)
  std::vector<TokenId> stop_tokens;    ///< generation ends after emitting any of these
  double arrival_s = 0.0;              ///< when the request arrived (the caller's clock), seconds
  std::int32_t priority = 0;           ///< larger is more important (priority policy, preemption)
  CacheNamespace cache_namespace = 0;  ///< prefix-cache partition
};

/// Where a request is in its life.
enum class RequestState : std::uint8_t {
  kWaiting,    ///< queued, holds no KV blocks
  kRunning,    ///< admitted: holds KV blocks, scheduled each step its budget allows
  kPreempted,  ///< evicted from the running set to free KV; queued again, recomputes its KV
  kFinished,   ///< done; its outcome waits in `take_finished`
};

/// Why a request finished.
enum class FinishReason : std::uint8_t {
  kNone,             ///< not finished
  kStopToken,        ///< emitted one of its stop tokens (the stop token is part of the output)
  kLength,           ///< emitted max_new_tokens tokens
  kAborted,          ///< `abort` was called
  kExceedsCapacity,  ///< its KV cannot fit the whole pool (prompt at admission, or output so far)
};

/// "waiting", "running", "preempted" or "finished".
constexpr std::string_view to_string(RequestState state) noexcept {
  switch (state) {
    case RequestState::kWaiting:
      return "waiting";
    case RequestState::kRunning:
      return "running";
    case RequestState::kPreempted:
      return "preempted";
    case RequestState::kFinished:
      return "finished";
  }
  return "?";
}

/// "none", "stop token", "length", "aborted" or "exceeds KV capacity".
constexpr std::string_view to_string(FinishReason reason) noexcept {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStopToken:
      return "stop token";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAborted:
      return "aborted";
    case FinishReason::kExceedsCapacity:
      return "exceeds KV capacity";
  }
  return "?";
}

/// Timestamps and counters of one request, in the caller's clock (seconds). A time that has not
/// happened yet is negative (-1).
struct RequestMetrics {
  double arrival_s = 0.0;             ///< Request::arrival_s
  double first_scheduled_s = -1.0;    ///< first step that computed any of its tokens
  double first_token_s = -1.0;        ///< commit that delivered its first output token
  double finish_s = -1.0;             ///< when it finished (any reason)
  std::vector<double> token_times_s;  ///< commit time of each output token, in order
  std::int64_t prompt_tokens = 0;     ///< prompt length
  std::int64_t cached_prompt_tokens =
      0;  ///< prompt tokens served by the prefix cache at first admission
  std::int64_t computed_tokens = 0;  ///< tokens whose KV was computed (recomputes included)
  std::int32_t num_preemptions = 0;  ///< times it was preempted and recomputed

  /// Time to first token: first_token_s - arrival_s (-1 without a token).
  [[nodiscard]] double ttft_s() const noexcept {
    return first_token_s < 0.0 ? -1.0 : first_token_s - arrival_s;
  }
  /// End-to-end latency: finish_s - arrival_s (-1 while unfinished).
  [[nodiscard]] double e2e_s() const noexcept {
    return finish_s < 0.0 ? -1.0 : finish_s - arrival_s;
  }
  /// Time per output token after the first: (last - first token time) / (tokens - 1); 0 for one
  /// token, -1 without tokens.
  [[nodiscard]] double tpot_s() const noexcept {
    const auto n = token_times_s.size();
    if (n == 0) return -1.0;
    if (n == 1) return 0.0;
    return (token_times_s.back() - token_times_s.front()) / static_cast<double>(n - 1);
  }
};

/// A finished request as the scheduler returns it.
struct RequestOutcome {
  RequestId id = 0;                           ///< the request
  FinishReason reason = FinishReason::kNone;  ///< why it finished
  std::vector<TokenId> output;  ///< generated tokens, in order (a stop token included)
  RequestMetrics metrics;       ///< its timestamps and counters
};

/// Throws `Error{kInvalidArgument}` naming the field unless the prompt is non-empty, every token
/// is >= 0, max_new_tokens >= 1 and arrival_s is finite.
inline void validate(const Request& request) {
  check_arg(!request.prompt.empty(), ErrorCode::kInvalidArgument, "prompt.size()",
            request.prompt.size(), "must be >=", 1);
  for (std::size_t i = 0; i < request.prompt.size(); ++i) {
    if (request.prompt[i] < 0) [[unlikely]] {
      check_arg(false, ErrorCode::kInvalidArgument, "prompt[" + std::to_string(i) + "]",
                request.prompt[i], "must be >=", 0);
    }
  }
  check_arg(request.max_new_tokens >= 1, ErrorCode::kInvalidArgument, "max_new_tokens",
            request.max_new_tokens, "must be >=", 1);
  check_arg(std::isfinite(request.arrival_s), ErrorCode::kInvalidArgument, "arrival_s",
            request.arrival_s, "must be", "finite");
}

}  // namespace inferkit
