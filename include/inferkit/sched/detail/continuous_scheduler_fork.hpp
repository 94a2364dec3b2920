// SPDX-License-Identifier: Apache-2.0
// ContinuousScheduler, forks: a child request created from a running parent shares every KV
// page of the parent's block table (reference counts up), so the shared prefix is computed once;
// copy-on-write of a shared partial last page happens when either one next appends to it and
// reaches the engine as a planned block copy. `fork` copies the parent between steps,
// `fork_sampled` during the step that samples it, with a token of the child's own. Included by
// continuous_scheduler.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <string>

namespace inferkit {

template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::fork(RequestId parent, RequestId child) {
  check_idle("fork");
  const std::int32_t slot = checked_slot(parent, "fork");
  check_fork_ids(slot, parent, child, "fork");
  (void)spawn_fork(slot, child);
}

template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::fork_sampled(RequestId parent, RequestId child, TokenId token) {
  INFERKIT_CHECK(in_flight_, ErrorCode::kInvalidState,
                 std::string("fork_sampled: no step is in flight (call it between schedule and "
                             "commit; between steps use fork)"));
  const std::int32_t slot = checked_slot(parent, "fork_sampled");
  check_fork_ids(slot, parent, child, "fork_sampled");
  const detail::SequenceRecord& p = rec(slot);
  const std::string name = "fork_sampled: request " + std::to_string(parent);
  INFERKIT_CHECK(p.plan_index >= 0, ErrorCode::kInvalidState,
                 name + " is not planned in this step");
  const ScheduledSequence& seq = plan_.sequences[static_cast<std::size_t>(p.plan_index)];
  INFERKIT_CHECK(seq.samples, ErrorCode::kInvalidState,
                 name + " does not sample in this step (a non-final prefill chunk)");
  INFERKIT_CHECK(seq.num_draft_tokens == 0, ErrorCode::kInvalidState,
                 name + " verifies " + std::to_string(seq.num_draft_tokens) +
                     " drafts in this step; only a single-token sample can be forked");
  const auto pending = std::find_if(pending_forks_.begin(), pending_forks_.end(),
                                    [&](const detail::PendingFork& f) { return f.child == child; });
  if (pending != pending_forks_.end()) {
    detail::throw_error(ErrorCode::kInvalidArgument,
                        "fork_sampled: child id " + std::to_string(child) +
                            " is already pending in this step (ids must be unique)");
  }
  check_arg(token >= 0, ErrorCode::kInvalidArgument, "token", token, "must be >=", 0);
  // Kept in plan order (commit walks them with the plan), in call order within a parent.
  const detail::PendingFork f{p.plan_index, child, token};
  const auto at = std::upper_bound(pending_forks_.begin(), pending_forks_.end(), f,
                                   [](const detail::PendingFork& a, const detail::PendingFork& b) {
                                     return a.plan_index < b.plan_index;
                                   });
  pending_forks_.insert(at, f);
}

template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::check_fork_ids(std::int32_t parent_slot, RequestId parent,
                                                 RequestId child, const char* op) const {
  const detail::SequenceRecord& p = rec(parent_slot);
  INFERKIT_CHECK(p.state == RequestState::kRunning, ErrorCode::kInvalidState,
                 std::string(op) + ": request " + std::to_string(parent) + " is " +
                     std::string(to_string(p.state)) +
                     ", not running (only running requests "
                     "hold KV to share)");
  if (slot_of_.contains(child)) {
    detail::throw_error(ErrorCode::kInvalidArgument,
                        std::string(op) + ": child id " + std::to_string(child) +
                            " is already held by the scheduler (ids must be unique)");
  }
}

// Creates `child` from the record in `parent_slot` (see `fork`); returns its slot. Throws only
// before anything changed (the table's references are returned by its destructor).
template <SchedulingPolicy Policy>
std::int32_t ContinuousScheduler<Policy>::spawn_fork(std::int32_t parent_slot, RequestId child) {
  const bool runs = running_.size() < static_cast<std::size_t>(config_.max_num_seqs);
  BlockTable shared(allocator_);
  if (runs) shared = rec(parent_slot).table.fork(allocator_);
  const std::int32_t slot = take_slot();  // may move records_: references only from here on
  const detail::SequenceRecord& p = rec(parent_slot);
  detail::SequenceRecord& c = rec(slot);
  c.request = p.request;
  c.request.id = child;
  c.tokens = p.tokens;
  c.drafts.clear();
  c.live = true;
  c.forked = true;
  c.arrival_order = p.arrival_order;  // beside its parent in the running order
  c.promised_blocks = 0;
  c.prefix = PrefixHandle{};
  c.prefix_locked = false;  // its references to the shared pages keep them; the parent locks
  c.plan_index = -1;
  c.metrics = p.metrics;
  c.metrics.computed_tokens = 0;  // the shared KV was computed for the parent
  c.metrics.num_preemptions = 0;
  c.queued_since_s = last_now_;
  slot_of_.emplace(child, slot);
  ++stats_.forks;
  if (runs) {
    c.table = std::move(shared);
    c.num_computed = p.num_computed;
    c.cached_inserted = p.cached_inserted;
    c.state = RequestState::kRunning;
    insert_running(slot);
    pages_.sync(static_cast<std::size_t>(slot), c.table.blocks());
  } else {  // no room to run: queued like a preempted request, holding nothing
    c.num_computed = 0;
    c.cached_inserted = 0;
    c.state = RequestState::kWaiting;
    enqueue(slot, /*front=*/true);
  }
  update_promise(c);
  return slot;
}

// Creates the children `fork_sampled` asked for from plan sequence `plan_index` (next_fork walks
// pending_forks_), each emitting its own token; dropped if the parent was aborted in flight.
template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::apply_forks(std::size_t plan_index, bool prefill, double now,
                                              std::size_t& next_fork) {
  for (; next_fork < pending_forks_.size() &&
         pending_forks_[next_fork].plan_index == static_cast<std::int32_t>(plan_index);
       ++next_fork) {
    const std::int32_t parent = plan_slots_[plan_index];
    if (parent < 0) continue;
    const detail::PendingFork f = pending_forks_[next_fork];
    const std::int32_t slot = spawn_fork(parent, f.child);
    const std::span<const TokenId> token(&f.token, 1);
    if (rec(slot).state == RequestState::kRunning) {
      // The child's table holds the parent's pages as the step wrote them.
      apply_result(plan_.sequences[plan_index], slot, SequenceResult{f.child, token}, prefill, now);
      continue;
    }
    const FinishReason reason = append_output(rec(slot), token, now);
    if (reason != FinishReason::kNone) finish(slot, reason, now);
  }
}

}  // namespace inferkit
