// SPDX-License-Identifier: Apache-2.0
// ContinuousScheduler, planning half: how schedule() fills a StepPlan. Decodes of running
// requests first (preempting from the tail of the running order when one cannot get a block),
// then chunked prefill of running requests, then admission in policy order with the watermark,
// the prefix-cache match and the post-preemption headroom. Included by continuous_scheduler.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <inferkit/sched/continuous_scheduler.hpp>

namespace inferkit {

template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::reset_plan() {
  for (std::int32_t slot : plan_slots_) {
    if (slot >= 0) rec(slot).plan_index = -1;
  }
  plan_.step = stats_.steps;
  plan_.sequences.clear();
  plan_.num_decodes = 0;
  plan_.decode_q_per_seq = 0;
  plan_.token_ids.clear();
  plan_.positions.clear();
  plan_.slot_mapping.clear();
  plan_.q_indptr.assign(1, 0);
  plan_.prefill_q_indptr.assign(1, 0);
  plan_.logits_indices.clear();
  plan_.block_copies.clear();
  plan_.page_begin.clear();
  plan_.page_end.clear();
  plan_.last_page_len.clear();
  plan_.preempted.clear();
  plan_slots_.clear();
}

// Appends `new_tokens` tokens of `slot` (the last `drafts` of them its proposed drafts) to the
// plan. The caller has checked that the allocator can supply the blocks.
template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::push_sequence(std::int32_t slot, std::int32_t new_tokens,
                                                std::int32_t drafts, std::int64_t& budget) {
  detail::SequenceRecord& r = rec(slot);
  const std::size_t row0 = plan_.token_ids.size();
  const auto n = static_cast<std::size_t>(new_tokens);
  plan_.token_ids.resize(row0 + n);
  plan_.positions.resize(row0 + n);
  plan_.slot_mapping.resize(row0 + n);
  const bool appended = r.table.append_tokens(
      allocator_, new_tokens, std::span<std::int64_t>(plan_.slot_mapping).subspan(row0, n),
      plan_.block_copies);
  INFERKIT_CHECK(appended, ErrorCode::kInvalidState,
                 std::string("scheduler: the allocator refused blocks it reported available"));
  const std::size_t known = n - static_cast<std::size_t>(drafts);
  const auto first = static_cast<std::size_t>(r.num_computed);
  std::copy_n(r.tokens.begin() + static_cast<std::ptrdiff_t>(first), known,
              plan_.token_ids.begin() + static_cast<std::ptrdiff_t>(row0));
  std::copy_n(r.drafts.begin(), drafts,
              plan_.token_ids.begin() + static_cast<std::ptrdiff_t>(row0 + known));
  for (std::size_t i = 0; i < n; ++i) {
    plan_.positions[row0 + i] =
        static_cast<std::int32_t>(r.num_computed + static_cast<std::int64_t>(i));
  }
  pages_.sync(static_cast<std::size_t>(slot), r.table.blocks());

  ScheduledSequence seq;
  seq.request_id = r.request.id;
  seq.num_cached_tokens = r.num_computed;
  seq.num_new_tokens = new_tokens;
  seq.num_draft_tokens = drafts;
  seq.samples = r.num_computed + static_cast<std::int64_t>(known) ==
                static_cast<std::int64_t>(r.tokens.size());
  r.plan_index = plan_.num_seqs();
  plan_.sequences.push_back(seq);
  plan_slots_.push_back(slot);
  plan_.last_page_len.push_back(r.table.last_block_tokens());
  plan_.q_indptr.push_back(static_cast<std::int32_t>(row0 + n));
  for (std::int32_t i = new_tokens - seq.num_logits(); i < new_tokens; ++i) {
    plan_.logits_indices.push_back(static_cast<std::int32_t>(row0) + i);
  }
  budget -= new_tokens;
  stats_.computed_tokens += new_tokens;
  r.metrics.computed_tokens += new_tokens;
  if (r.metrics.first_scheduled_s < 0.0) r.metrics.first_scheduled_s = last_now_;
  update_promise(r);
}

// Plans the decode of running_[index]: one token plus the drafts that fit. When its block is
// not available it first gives up its drafts, then preempts from the tail of the running order;
// false when that tail was the request itself (preempted, or finished if it is alone).
template <SchedulingPolicy Policy>
bool ContinuousScheduler<Policy>::schedule_decode(std::size_t index, std::int64_t& budget,
                                                  double now) {
  const std::int32_t slot = running_[index];
  detail::SequenceRecord& r = rec(slot);
  const std::int64_t room = output_limit(r) - r.num_output();  // >= 1 while running
  auto drafts = std::min<std::int64_t>(
      {static_cast<std::int64_t>(r.drafts.size()), config_.max_draft_tokens, budget - 1, room - 1});
  drafts = std::max<std::int64_t>(drafts, 0);
  for (;;) {
    if (r.table.blocks_needed_to_append(allocator_, 1 + drafts) <=
        allocator_.num_available_blocks()) {
      break;
    }
    if (drafts > 0) {
      drafts = 0;
      continue;
    }
    const std::int32_t victim = running_.back();
    if (victim == slot) {
      if (running_.size() == 1) {
        finish(slot, FinishReason::kExceedsCapacity, now);
      } else {
        preempt(slot, now);
      }
      return false;
    }
    preempt(victim, now);
  }
  push_sequence(slot, static_cast<std::int32_t>(1 + drafts), static_cast<std::int32_t>(drafts),
                budget);
  r.drafts.clear();
  return true;
}

// Plans the next prefill chunk of `slot`: as many of its pending tokens as the budget, the chunk
// limit and the free blocks allow (all of them without chunked prefill). False if none fit.
template <SchedulingPolicy Policy>
bool ContinuousScheduler<Policy>::schedule_prefill(std::int32_t slot, std::int64_t& budget) {
  detail::SequenceRecord& r = rec(slot);
  const std::int64_t pending = r.pending();
  std::int64_t chunk = std::min({pending, budget, chunk_limit()});
  const std::int64_t available = allocator_.num_available_blocks();
  if (r.table.blocks_needed_to_append(allocator_, chunk) > available) {
    // The tokens that fit: the room left in the last block (unless it must be copied first)
    // plus whole free blocks.
    const std::int64_t bs = allocator_.block_size();
    const std::int64_t room = std::int64_t{r.table.num_blocks()} * bs - r.table.num_tokens();
    const bool copy_first = room > 0 && r.table.blocks_needed_to_append(allocator_, 1) == 1;
    const std::int64_t fit =
        copy_first ? (available >= 1 ? room + (available - 1) * bs : 0) : room + available * bs;
    chunk = std::min(chunk, fit);
  }
  if (chunk < 1 || (!config_.chunked_prefill && chunk < pending)) return false;
  push_sequence(slot, static_cast<std::int32_t>(chunk), 0, budget);
  r.drafts.clear();
  return true;
}

template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::schedule_running_prefills(std::int64_t& budget) {
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    const std::int32_t slot = running_[i];
    if (rec(slot).pending() > 1 && rec(slot).plan_index < 0) schedule_prefill(slot, budget);
  }
}

// Admits waiting requests in policy order while sequences, budget and memory allow. Stops at
// the first request that does not fit (head-of-line order is what keeps large requests from
// being starved by small ones).
template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::admit(std::int64_t& budget, double now) {
  if (config_.admission == AdmissionMode::kWholeBatch && !running_.empty()) return;
  const bool whole_batch = config_.admission == AdmissionMode::kWholeBatch;
  const bool recovering = config_.preemption_headroom_steps > 0 && last_preemption_step_ >= 0 &&
                          plan_.step - last_preemption_step_ <= config_.preemption_headroom_steps;
  const auto room = [&] {
    return running_.size() < static_cast<std::size_t>(config_.max_num_seqs) &&
           (whole_batch || budget > 0);
  };
  if (waiting_.empty() || !room()) return;
  if constexpr (Policy::kTimeDependent) {
    ranked_.clear();
    for (const detail::WaitKey& key : waiting_) {
      if (static_cast<std::int32_t>(ranked_.size()) >= policy_.ranked_window()) break;
      const double rank = policy_.rank(info_of(rec(key.slot)), now);
      ranked_.emplace_back(detail::WaitKey{-rank, key.order, key.slot}, key.slot);
    }
    std::sort(ranked_.begin(), ranked_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [key, slot] : ranked_) {
      if (!room() || !try_admit(slot, budget, recovering)) break;
    }
  } else {
    (void)now;
    while (!waiting_.empty() && room()) {
      if (!try_admit(waiting_.begin()->slot, budget, recovering)) break;
    }
  }
}

// Admits `slot` if its KV fits after the prefix match (true), finishes it if it never can
// (true), or leaves it waiting (false: admission stops). An admitted request whose first prefill
// chunk this step cannot plan runs unplanned until a later step does (see the class comment);
// its page run mirrors its block table, the matched prefix, from admission on.
template <SchedulingPolicy Policy>
bool ContinuousScheduler<Policy>::try_admit(std::int32_t slot, std::int64_t& budget,
                                            bool recovering) {
  detail::SequenceRecord& r = rec(slot);
  if (!fits_pool(r)) {
    finish(slot, FinishReason::kExceedsCapacity, last_now_);
    return true;
  }
  PrefixMatch match;
  if (tree_ != nullptr) match = tree_->match_and_lock(match_span(r), r.request.cache_namespace);
  const std::int64_t need = target_blocks(r) - static_cast<std::int64_t>(match.blocks.size());
  std::int64_t reserve = watermark_blocks();
  if (recovering && !running_.empty()) {  // with nothing running, a fitting request must run
    const std::int64_t growth =
        static_cast<std::int64_t>(running_.size()) * config_.preemption_headroom_steps;
    reserve += blocks_for(growth);
  }
  if (allocator_.num_available_blocks() - promised_total_ - need < reserve) {
    if (tree_ != nullptr) tree_->unlock(match.handle);
    return false;
  }
  waiting_.erase(r.wait_key);
  r.queued = false;
  r.table.append_shared_blocks(allocator_, match.blocks);
  r.num_computed = match.num_tokens;
  r.cached_inserted = match.num_tokens;
  r.prefix = match.handle;
  r.prefix_locked = tree_ != nullptr;
  r.state = RequestState::kRunning;
  insert_running(slot);
  ++stats_.admissions;
  if (r.metrics.num_preemptions == 0 && !r.forked) {  // first admission (a fork's was its parent's)
    r.metrics.cached_prompt_tokens = match.num_tokens;
    stats_.prompt_tokens += static_cast<std::int64_t>(r.request.prompt.size());
    stats_.cached_prompt_tokens += match.num_tokens;
  }
  update_promise(r);
  const bool planned = budget > 0 && schedule_prefill(slot, budget);
  // Planned or not, a running request's page run mirrors its block table (push_sequence synced
  // a planned one; an unplanned one holds the matched prefix, if any, and nothing else).
  if (!planned) pages_.sync(static_cast<std::size_t>(slot), r.table.blocks());
  return true;
}

// Nothing could be planned although requests run: every one of them is a prefill waiting for
// blocks that decodes took. Preempt the lowest-ranked (or finish it if it is alone: it cannot
// fit), then retry the prefills.
template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::unstick(std::int64_t& budget, double now) {
  const std::int32_t victim = running_.back();
  if (running_.size() == 1) {
    finish(victim, FinishReason::kExceedsCapacity, now);
  } else {
    preempt(victim, now);
  }
  schedule_running_prefills(budget);
}

template <SchedulingPolicy Policy>
void ContinuousScheduler<Policy>::finish_plan(double now, std::int64_t evictions_before,
                                              std::int32_t preemptions_before) {
  std::int32_t q = 0;
  for (std::int32_t s = 0; s < plan_.num_decodes; ++s) {
    const std::int32_t rows = plan_.sequences[static_cast<std::size_t>(s)].num_new_tokens;
    q = s == 0 ? rows : (q == rows ? q : 0);
  }
  plan_.decode_q_per_seq = q;
  for (std::int32_t s = plan_.num_decodes; s < plan_.num_seqs(); ++s) {
    plan_.prefill_q_indptr.push_back(plan_.prefill_q_indptr.back() +
                                     plan_.sequences[static_cast<std::size_t>(s)].num_new_tokens);
  }
  // Offsets last: a run may have moved (or the arena compacted) while later tables grew.
  plan_.page_begin.resize(plan_slots_.size());
  plan_.page_end.resize(plan_slots_.size());
  for (std::size_t s = 0; s < plan_slots_.size(); ++s) {
    plan_.page_begin[s] = pages_.begin(static_cast<std::size_t>(plan_slots_[s]));
    plan_.page_end[s] = pages_.end(static_cast<std::size_t>(plan_slots_[s]));
  }
  plan_.page_indices = std::span<const std::int32_t>(pages_.data(), pages_.arena_size());
  if (tree_ != nullptr) tree_->flush();
  if (plan_.empty()) return;  // not a step: nothing is computed, nothing to commit
  ++stats_.steps;
  if (!config_.record_step_metrics) return;
  StepMetrics m;
  m.step = plan_.step;
  m.scheduled_s = now;
  m.committed_s = now;
  m.num_seqs = plan_.num_seqs();
  m.num_decodes = plan_.num_decodes;
  m.num_tokens = plan_.num_tokens();
  m.num_prefill_tokens =
      plan_.num_tokens() - plan_.q_indptr[static_cast<std::size_t>(plan_.num_decodes)];
  for (const ScheduledSequence& s : plan_.sequences) m.context_tokens += s.num_cached_tokens;
  m.num_running = num_running();
  m.num_waiting = num_waiting();
  m.kv_blocks_used = allocator_.num_used_blocks();
  m.kv_blocks_reserved = static_cast<std::int32_t>(m.kv_blocks_used + promised_total_);
  m.evictions = allocator_.num_evictions() - evictions_before;
  m.preemptions = static_cast<std::int32_t>(stats_.preemptions) - preemptions_before;
  step_metrics_.push_back(m);
}

}  // namespace inferkit
