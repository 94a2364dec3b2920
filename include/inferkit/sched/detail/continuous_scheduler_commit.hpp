// SPDX-License-Identifier: Apache-2.0
// ContinuousScheduler, bookkeeping half: commit's validation and application of a step's
// results (append tokens, roll back rejected drafts, stop and length checks, prefix caching),
// preemption by recompute, finishing, and the consistency check the tests call. Included by
// continuous_scheduler.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <string>

namespace inferkit {

// Inserts the tokens whose KV is computed into the prefix cache (whole pages only), unless no
// new page was completed since the last insert.
template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::cache_prefix(detail::SequenceRecord& r) {
  if (tree_ == nullptr) return;
  const std::int64_t bs = allocator_.block_size();
  const std::int64_t full = r.num_computed / bs * bs;
  if (full <= r.cached_inserted) return;
  const std::span<const TokenId> tokens =
      std::span<const TokenId>(r.tokens).first(static_cast<std::size_t>(r.num_computed));
  const PrefixInsert inserted = tree_->insert(tokens, r.table.blocks(), r.request.cache_namespace);
  r.cached_inserted = std::max(r.cached_inserted, inserted.cached_tokens());
}

template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::release_kv(detail::SequenceRecord& r) {
  r.table.release(allocator_);
  if (r.prefix_locked) {
    tree_->unlock(r.prefix);
    r.prefix_locked = false;
  }
}

// Preemption by recompute: the victim's computed prefix goes into the prefix cache (so its
// readmission is mostly a cache hit while the blocks survive), its blocks and lock are freed,
// and it is queued at the front of its rank.
template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::preempt(std::int32_t slot, double now) {
  detail::SequenceRecord& r = rec(slot);
  cache_prefix(r);
  release_kv(r);
  pages_.clear(static_cast<std::size_t>(slot));
  erase_running(slot);
  r.state = RequestState::kPreempted;
  r.num_computed = 0;
  r.cached_inserted = 0;
  r.drafts.clear();
  ++r.metrics.num_preemptions;
  r.queued_since_s = now;
  update_promise(r);
  enqueue(slot, /*front=*/true);
  plan_.preempted.push_back(r.request.id);
  ++stats_.preemptions;
  last_preemption_step_ = plan_.step;
}

template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::finish(std::int32_t slot, FinishReason reason, double now) {
  detail::SequenceRecord& r = rec(slot);
  if (r.state == RequestState::kRunning) {
    if (reason != FinishReason::kAborted) cache_prefix(r);
    release_kv(r);
    pages_.clear(static_cast<std::size_t>(slot));
    erase_running(slot);
  }
  if (r.queued) {
    waiting_.erase(r.wait_key);
    r.queued = false;
  }
  if (in_flight_ && r.plan_index >= 0) plan_slots_[static_cast<std::size_t>(r.plan_index)] = -1;
  r.plan_index = -1;
  r.state = RequestState::kFinished;
  update_promise(r);
  r.metrics.finish_s = now;
  RequestOutcome outcome;
  outcome.id = r.request.id;
  outcome.reason = reason;
  outcome.output.assign(r.tokens.begin() + static_cast<std::ptrdiff_t>(r.request.prompt.size()),
                        r.tokens.end());
  outcome.metrics = std::move(r.metrics);
  finished_.push_back(std::move(outcome));
  switch (reason) {
    case FinishReason::kAborted:
      ++stats_.aborted;
      break;
    case FinishReason::kExceedsCapacity:
      ++stats_.rejected;
      break;
    default:
      ++stats_.finished;
  }
  slot_of_.erase(r.request.id);
  r.live = false;
  r.drafts.clear();
  free_slots_.push_back(slot);
}

template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::validate_results(std::span<const SequenceResult> results) const {
  check_arg(results.size() == plan_.sequences.size(), ErrorCode::kInvalidArgument, "results.size()",
            results.size(), "must equal the planned sequences", plan_.sequences.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const ScheduledSequence& seq = plan_.sequences[i];
    const SequenceResult& res = results[i];
    const auto name = [i] { return "results[" + std::to_string(i) + "]"; };  // only on errors
    if (res.request_id != seq.request_id) [[unlikely]] {
      const bool planned =
          std::any_of(plan_.sequences.begin(), plan_.sequences.end(),
                      [&](const ScheduledSequence& s) { return s.request_id == res.request_id; });
      detail::throw_error(
          ErrorCode::kInvalidArgument,
          name() + ".request_id = " + std::to_string(res.request_id) +
              (planned ? " is out of plan order" : " is not scheduled in this step") +
              ": expected request " + std::to_string(seq.request_id));
    }
    if (plan_slots_[i] < 0) continue;  // aborted during the step: its tokens are ignored
    const auto n = static_cast<std::int64_t>(res.tokens.size());
    if (!seq.samples ? n != 0 : (n < 1 || n > seq.num_logits())) [[unlikely]] {
      if (!seq.samples) {
        check_arg(false, ErrorCode::kInvalidArgument, name() + ".tokens.size()", n,
                  "must be 0 for a non-final prefill chunk of request", seq.request_id);
      }
      check_arg(false, ErrorCode::kInvalidArgument, name() + ".tokens.size()", n,
                "must be in [1, 1 + drafts] with 1 + drafts =", seq.num_logits());
    }
    for (std::size_t t = 0; t < res.tokens.size(); ++t) {
      if (res.tokens[t] < 0) [[unlikely]] {
        check_arg(false, ErrorCode::kInvalidArgument, name() + ".tokens[" + std::to_string(t) + "]",
                  res.tokens[t], "must be >=", 0);
      }
    }
  }
}

template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::apply_result(const ScheduledSequence& seq, std::int32_t slot,
                                               const SequenceResult& result, bool prefill,
                                               double now) {
  detail::SequenceRecord& r = rec(slot);
  r.plan_index = -1;
  const auto emitted = static_cast<std::int64_t>(result.tokens.size());
  // KV stays valid for the known tokens and the accepted drafts (emitted - 1 of them).
  const std::int64_t rejected = seq.samples ? seq.num_draft_tokens - (emitted - 1) : 0;
  r.num_computed = seq.seq_len() - rejected;
  if (rejected > 0) {
    r.table.truncate(allocator_, r.num_computed);
    pages_.sync(static_cast<std::size_t>(slot), r.table.blocks());
    stats_.rejected_draft_tokens += rejected;
  }
  const FinishReason reason = append_output(r, result.tokens, now);
  if (reason != FinishReason::kNone) {
    finish(slot, reason, now);
    return;
  }
  if (prefill) cache_prefix(r);  // decodes are cached when they finish or are preempted
  update_promise(r);
}

// Appends emitted `tokens` to `r`'s output up to and including a stop token or the length
// limit; returns why `r` must finish then (kNone: it goes on).
template <SchedulingPolicy Policy>
FinishReason ContinuousScheduler<Policy>::append_output(detail::SequenceRecord& r,
                                                        std::span<const TokenId> tokens,
                                                        double now) {
  const std::int64_t limit = output_limit(r);
  for (const TokenId t : tokens) {
    r.tokens.push_back(t);
    r.metrics.token_times_s.push_back(now);
    if (r.metrics.first_token_s < 0.0) r.metrics.first_token_s = now;
    const std::vector<TokenId>& stops = r.request.stop_tokens;
    if (std::find(stops.begin(), stops.end(), t) != stops.end()) return FinishReason::kStopToken;
    if (r.num_output() >= limit) return FinishReason::kLength;
  }
  return FinishReason::kNone;
}

template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::check_consistency() const {
  const auto fail = [](const std::string& what) {
    detail::throw_error(ErrorCode::kInvalidState, "ContinuousScheduler inconsistent: " + what);
  };
  std::int64_t promised = 0;
  std::size_t live = 0;
  std::size_t queued = 0;
  for (std::size_t s = 0; s < records_.size(); ++s) {
    const detail::SequenceRecord& r = records_[s];
    if (!r.live) continue;
    ++live;
    const std::string name = "request " + std::to_string(r.request.id) + ": ";
    const auto it = slot_of_.find(r.request.id);
    if (it == slot_of_.end() || it->second != static_cast<std::int32_t>(s)) fail(name + "id map");
    const bool running = r.state == RequestState::kRunning;
    if (!in_flight_ && r.table.num_tokens() != r.num_computed) fail(name + "table length");
    if (!running && (r.table.num_blocks() != 0 || r.prefix_locked)) fail(name + "holds KV queued");
    if (running != (std::find(running_.begin(), running_.end(), s) != running_.end())) {
      fail(name + "running set");
    }
    if (r.queued != (r.state == RequestState::kWaiting || r.state == RequestState::kPreempted)) {
      fail(name + "queue state");
    }
    if (r.queued) {
      ++queued;
      if (!waiting_.contains(r.wait_key) || r.wait_key.slot != static_cast<std::int32_t>(s)) {
        fail(name + "waiting key");
      }
    }
    if (running) {
      const std::int64_t want = std::max<std::int64_t>(0, target_blocks(r) - r.table.num_blocks());
      if (!in_flight_ && (r.promised_blocks != want || blocks_short(r) != want)) {
        fail(name + "promise");
      }
      const std::span<const BlockId> blocks = r.table.blocks();
      const std::int32_t b = pages_.begin(s);
      if (pages_.end(s) - b != static_cast<std::int32_t>(blocks.size())) fail(name + "page run");
      for (std::size_t i = 0; i < blocks.size(); ++i) {
        if (pages_.data()[static_cast<std::size_t>(b) + i] != blocks[i]) fail(name + "page entry");
      }
      if (r.pending() < 1 && !in_flight_) fail(name + "nothing pending");
    }
    // In the plan exactly while a step is in flight and it is planned (admitted-but-unplanned
    // requests run outside it), with the page offsets of its run.
    if (r.plan_index >= 0) {
      const auto i = static_cast<std::size_t>(r.plan_index);
      if (!in_flight_ || !running || i >= plan_slots_.size() ||
          plan_slots_[i] != static_cast<std::int32_t>(s)) {
        fail(name + "plan index");
      }
      if (plan_.page_begin[i] != pages_.begin(s) || plan_.page_end[i] != pages_.end(s)) {
        fail(name + "plan pages");
      }
    }
    promised += r.promised_blocks;
  }
  if (in_flight_) {
    for (std::size_t i = 0; i < plan_slots_.size(); ++i) {
      const std::int32_t slot = plan_slots_[i];
      if (slot >= 0 && rec(slot).plan_index != static_cast<std::int32_t>(i)) fail("plan slots");
    }
  }
  if (live != slot_of_.size()) fail("id map size");
  if (queued != waiting_.size()) fail("waiting set size");
  if (promised != promised_total_) fail("promised total");
  if (!std::is_sorted(running_.begin(), running_.end(), [&](std::int32_t a, std::int32_t b) {
        return detail::runs_before(rec(a), rec(b));
      })) {
    fail("running order");
  }
  allocator_.check_consistency();
  if (tree_ != nullptr) tree_->check_consistency();
}

}  // namespace inferkit
