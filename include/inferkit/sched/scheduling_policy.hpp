// SPDX-License-Identifier: Apache-2.0
// Scheduling policies: which waiting request a scheduler admits next. Small objects that rank a
// waiting request (higher first; ties go to requests requeued by preemption, then to earlier
// arrivals): first come first served, priority classes, and longest prefix match with aging
// (SGLang's cache-aware policy, made starvation-free). ContinuousScheduler takes one as a
// template parameter; a user's own policy satisfies the `SchedulingPolicy` concept.
// Threads: the policies are value types whose rank is const and pure; safe from any number of
// threads.
#pragma once

#include <concepts>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/sched/request.hpp>

namespace inferkit {

/// What a policy sees of a waiting request.
struct WaitingRequestInfo {
  const Request* request = nullptr;       ///< the request (valid during the call)
  double queued_since_s = 0.0;            ///< arrival, or the time it was last preempted
  std::int32_t num_preemptions = 0;       ///< times it was preempted so far
  std::int64_t cached_prefix_tokens = 0;  ///< set only for policies with kUsesPrefixMatch
};

/// A policy ranks waiting requests; the scheduler admits the highest rank first.
/// - `P::kUsesPrefixMatch`: the scheduler fills `cached_prefix_tokens` (a read-only prefix-cache
///   lookup per ranked request and admission round).
/// - `P::kTimeDependent`: the rank changes while a request waits, so it is recomputed each
///   admission round over the first `p.ranked_window()` requests in queue order (the rest wait
///   their turn in that order); otherwise it is computed once, when the request is queued.
template <class P>
concept SchedulingPolicy = requires(const P& p, const WaitingRequestInfo& w, double now) {
  { P::kUsesPrefixMatch } -> std::convertible_to<bool>;
  { P::kTimeDependent } -> std::convertible_to<bool>;
  { p.rank(w, now) } -> std::convertible_to<double>;
  { p.ranked_window() } -> std::convertible_to<std::int32_t>;
};

/// First come, first served: queue order alone (arrival, with preempted requests at the front).
struct FcfsPolicy {
  static constexpr bool kUsesPrefixMatch = false;  ///< needs no prefix lookup
  static constexpr bool kTimeDependent = false;    ///< rank fixed when queued
  /// Every request ranks the same, so queue order decides.
  [[nodiscard]] double rank(const WaitingRequestInfo& /*w*/, double /*now*/) const noexcept {
    return 0.0;
  }
  /// Unused (the rank never changes).
  [[nodiscard]] std::int32_t ranked_window() const noexcept { return 0; }
};

/// Priority classes: a larger `Request::priority` is admitted first; within a class, FCFS.
struct PriorityPolicy {
  static constexpr bool kUsesPrefixMatch = false;  ///< needs no prefix lookup
  static constexpr bool kTimeDependent = false;    ///< rank fixed when queued
  /// The request's priority.
  [[nodiscard]] double rank(const WaitingRequestInfo& w, double /*now*/) const noexcept {
    return static_cast<double>(w.request->priority);
  }
  /// Unused (the rank never changes).
  [[nodiscard]] std::int32_t ranked_window() const noexcept { return 0; }
};

/// Longest prefix match with aging: rank = cached prefix tokens + `aging_tokens_per_s` * seconds
/// waited. Requests that share a cached prefix go first (their prefill is cheap and they keep
/// the prefix hot), but a cache-cold request gains `aging_tokens_per_s` of rank per second, so
/// once it has waited longer than (the longest match among newer arrivals) / aging_tokens_per_s
/// it outranks every request that arrived after it: pure LPM can starve it (SGLang's LPM left
/// 5% of requests at 20-60 s time to first token in one published report).
struct LongestPrefixMatchPolicy {
  static constexpr bool kUsesPrefixMatch = true;  ///< ranks by the cached prefix
  static constexpr bool kTimeDependent = true;    ///< rank grows while it waits
  double aging_tokens_per_s = 1000.0;  ///< > 0: rank gained per second of waiting, in tokens
  std::int32_t window = 128;           ///< requests ranked per round (oldest first), >= 1

  /// Cached prefix tokens plus the aging credit.
  [[nodiscard]] double rank(const WaitingRequestInfo& w, double now) const noexcept {
    return static_cast<double>(w.cached_prefix_tokens) +
           aging_tokens_per_s * (now - w.queued_since_s);
  }
  /// Requests ranked per admission round.
  [[nodiscard]] std::int32_t ranked_window() const noexcept { return window; }
};

/// Throws `Error{kInvalidArgument}` unless aging_tokens_per_s > 0 (finite) and window >= 1.
inline void validate(const LongestPrefixMatchPolicy& p) {
  check_arg(p.aging_tokens_per_s > 0.0 && p.aging_tokens_per_s < 1e300, ErrorCode::kInvalidArgument,
            "aging_tokens_per_s", p.aging_tokens_per_s, "must be finite and >", 0);
  check_arg(p.window >= 1, ErrorCode::kInvalidArgument, "window", p.window, "must be >=", 1);
}

/// Policies without parameters are always valid.
inline void validate(const FcfsPolicy& /*p*/) noexcept {}
/// Policies without parameters are always valid.
inline void validate(const PriorityPolicy& /*p*/) noexcept {}

}  // namespace inferkit
