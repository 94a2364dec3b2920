// SPDX-License-Identifier: Apache-2.0
// Internals of the schedulers: the record a scheduler keeps per request (its tokens, KV block
// table, locked prefix, counters and metrics), the key that orders the waiting queue, and the
// order of the running set (priority, then arrival: preemption victims come from its tail), and
// a fork waiting for its step's commit.
#pragma once

#include <cstdint>
#include <inferkit/core/token_id.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <inferkit/sched/request.hpp>
#include <vector>

namespace inferkit::detail {

/// Position in the waiting queue: highest rank first, then the smallest order (preempted
/// requests get negative orders, so they go before every new arrival of their rank).
struct WaitKey {
  double neg_rank = 0.0;
  std::int64_t order = 0;
  std::int32_t slot = 0;
  bool operator<(const WaitKey& o) const noexcept {
    if (neg_rank != o.neg_rank) return neg_rank < o.neg_rank;
    return order < o.order;
  }
};

/// One request held by a scheduler.
struct SequenceRecord {
  Request request;
  std::vector<TokenId> tokens;  ///< prompt, then the output so far
  std::vector<TokenId> drafts;  ///< speculative drafts proposed for the next step
  BlockTable table;             ///< its KV blocks; num_tokens() == num_computed between steps
  PrefixHandle prefix;          ///< the prefix-cache path it locked at admission
  bool prefix_locked = false;
  bool live = false;
  bool forked = false;  ///< created by a fork: its prompt was counted at its parent's admission
  bool queued = false;  ///< in the waiting queue under `wait_key`
  RequestState state = RequestState::kWaiting;
  std::int64_t num_computed = 0;     ///< tokens whose KV is in `table`
  std::int64_t arrival_order = 0;    ///< add() order: the running set's tie-break
  std::int64_t cached_inserted = 0;  ///< tokens already inserted into the prefix cache
  std::int32_t promised_blocks = 0;  ///< counted in the scheduler's promised total
  std::int32_t plan_index = -1;      ///< index in the planned step, -1 when not in it
  WaitKey wait_key;                  ///< valid while queued
  double queued_since_s = 0.0;
  RequestMetrics metrics;

  explicit SequenceRecord(BlockAllocator& allocator) : table(allocator) {}

  /// Output tokens so far.
  [[nodiscard]] std::int64_t num_output() const noexcept {
    return static_cast<std::int64_t>(tokens.size() - request.prompt.size());
  }
  /// Known tokens whose KV is not computed yet (1 for a decode).
  [[nodiscard]] std::int64_t pending() const noexcept {
    return static_cast<std::int64_t>(tokens.size()) - num_computed;
  }
};

/// A `fork_sampled` awaiting its commit: the parent's sequence in the plan, the child's id and
/// the token the child emits instead of the parent's result.
struct PendingFork {
  std::int32_t plan_index = 0;
  RequestId child = 0;
  TokenId token = 0;
};

/// Running-set order: larger priority first, then earlier arrival. Victims of preemption are
/// taken from the back: lowest priority, latest arrival.
inline bool runs_before(const SequenceRecord& a, const SequenceRecord& b) noexcept {
  if (a.request.priority != b.request.priority) return a.request.priority > b.request.priority;
  return a.arrival_order < b.arrival_order;
}

}  // namespace inferkit::detail
