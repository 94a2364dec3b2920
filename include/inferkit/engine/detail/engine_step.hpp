// SPDX-License-Identifier: Apache-2.0
// Engine, the step itself: schedule, forward, then per sampling sequence either one token
// (greedy argmax or a draw from the filtered distribution) or the chain verification of its
// drafts (greedy, or exact rejection sampling against the one-hot n-gram draft), the first token
// of each submit_n member forked from the same row, commit, stream the new tokens, and propose
// the next drafts. Included by engine/engine.hpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <inferkit/engine/engine.hpp>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif

namespace inferkit {

namespace detail {

/// Runs the OpenMP regions of its scope on `team` threads, then gives the calling thread back
/// the team size it had (the engine's caller may run OpenMP code of its own on that thread).
class ScopedOmpThreads {
 public:
  ScopedOmpThreads(int team, int previous) noexcept
      : previous_(previous), changed_(team != previous) {
#if INFERKIT_HAS_OPENMP
    if (changed_) omp_set_num_threads(team);
#endif
  }
  ~ScopedOmpThreads() {
#if INFERKIT_HAS_OPENMP
    if (changed_) omp_set_num_threads(previous_);
#endif
  }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int previous_;
  bool changed_;
};

}  // namespace detail

inline bool Engine::step() {
  const auto t0 = std::chrono::steady_clock::now();
  const StepPlan& plan = sched_->schedule(now());
  if (plan.empty()) return false;
#if INFERKIT_HAS_OPENMP
  const int caller_threads = omp_get_max_threads();  // the caller's setting, read at every step
#else
  const int caller_threads = 1;
#endif
  const int max_threads =
      options_.threads > 0 && INFERKIT_HAS_OPENMP ? options_.threads : caller_threads;
  if (options_.adaptive_threads && tuner_.max_threads() != max_threads) {
    tuner_ = ThreadTuner(max_threads, options_.thread_tuner);
  }
  const int team = options_.adaptive_threads ? tuner_.threads() : max_threads;
  const detail::ScopedOmpThreads scoped_team(team, caller_threads);
  stats_.step_threads = team;
  const auto vocab = static_cast<std::size_t>(model_.config().vocab_size);
  logits_.resize(plan.logits_indices.size() * vocab);
  const auto f0 = std::chrono::steady_clock::now();
  std::visit([&](auto& kv) { model_.forward(plan, kv, ws_, logits_); }, kv_);
  stats_.forward_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - f0).count();
  if (options_.time_forward_phases) stats_.forward_phase_seconds = ws_.phase_seconds;
  ++stats_.steps;
  // Each sampling sequence owns 1 + drafts consecutive logit rows, in plan order, and emits at
  // most that many tokens.
  // A parent of submit_n members samples its first token now (from the prompt's last row): each
  // member draws its own from the same row, after the plan's tokens in emitted_.
  std::size_t fork_at = plan.logits_indices.size();
  std::size_t forks = 0;
  for (const ScheduledSequence& seq : plan.sequences) {
    if (seq.samples) forks += requests_.at(seq.request_id).fork_children.size();
  }
  forked_.clear();
  emitted_.resize(plan.logits_indices.size() + forks);
  emitted_logprobs_.resize(emitted_.size());
  begins_.assign(1, 0);
  std::size_t row = 0;
  for (std::int32_t s = 0; s < plan.num_seqs(); ++s) {
    const ScheduledSequence& seq = plan.sequences[static_cast<std::size_t>(s)];
    (s < plan.num_decodes ? stats_.decode_tokens : stats_.prefill_tokens) += seq.num_new_tokens;
    std::size_t n = 0;
    if (seq.samples) {
      const auto end = static_cast<std::size_t>(plan.q_indptr[static_cast<std::size_t>(s) + 1]);
      const auto k = static_cast<std::size_t>(seq.num_draft_tokens);
      PerRequest& req = requests_.at(seq.request_id);
      n = pick_tokens(logits_.data() + row * vocab,
                      std::span<const TokenId>(plan.token_ids.data() + end - k, k), req,
                      emitted_.data() + begins_.back());
      req.step_begin = begins_.back();
      if (req.params.logprobs) {
        // Token j was drawn from logit row j of the sequence (drafts accepted in order).
        for (std::size_t j = 0; j < n; ++j) {
          emitted_logprobs_[begins_.back() + j] =
              token_logprobs(std::span<const float>(logits_.data() + (row + j) * vocab, vocab),
                             emitted_[begins_.back() + j], req.params.top_logprobs);
        }
      }
      for (const RequestId child : req.fork_children) {  // k == 0: a final prefill chunk
        PerRequest& c = requests_.at(child);
        (void)pick_tokens(logits_.data() + row * vocab, {}, c, emitted_.data() + fork_at);
        if (c.params.logprobs) {
          emitted_logprobs_[fork_at] =
              token_logprobs(std::span<const float>(logits_.data() + row * vocab, vocab),
                             emitted_[fork_at], c.params.top_logprobs);
        }
        c.step_begin = fork_at;
        c.fork_parent = -1;
        sched_->fork_sampled(seq.request_id, child, emitted_[fork_at++]);
        forked_.push_back(child);
      }
      req.fork_children.clear();
      row += k + 1;
    }
    begins_.push_back(begins_.back() + n);
  }
  results_.clear();
  for (std::int32_t s = 0; s < plan.num_seqs(); ++s) {
    const auto b = begins_[static_cast<std::size_t>(s)];
    results_.push_back({plan.sequences[static_cast<std::size_t>(s)].request_id,
                        std::span<const TokenId>(emitted_).subspan(
                            b, begins_[static_cast<std::size_t>(s) + 1] - b)});
  }
  sched_->commit(results_, now());
  if (on_tokens_) {
    for (const ScheduledSequence& seq : plan.sequences) {
      if (!sched_->contains(seq.request_id)) continue;  // finished: streamed from its outcome
      stream(seq.request_id, sched_->tokens(seq.request_id));
    }
    for (const RequestId child : forked_) {
      if (sched_->contains(child)) stream(child, sched_->tokens(child));
    }
  }
  collect_finished();
  for (const ScheduledSequence& seq : plan.sequences) {
    const auto it = requests_.find(seq.request_id);
    if (it != requests_.end()) it->second.step_begin = static_cast<std::size_t>(-1);
  }
  for (const RequestId child : forked_) {
    const auto it = requests_.find(child);
    if (it != requests_.end()) it->second.step_begin = static_cast<std::size_t>(-1);
  }
  if (options_.ngram_speculation) {
    for (const ScheduledSequence& seq : plan.sequences) propose_drafts(seq.request_id);
    for (const RequestId child : forked_) propose_drafts(child);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.step_seconds += seconds;
  if (options_.adaptive_threads) {
    const std::int64_t switches = tuner_.switches();
    tuner_.record(seconds, static_cast<double>(plan.num_tokens()));
    stats_.thread_switches += tuner_.switches() - switches;
  }
  return true;
}

inline std::size_t Engine::pick_tokens(const float* rows, std::span<const TokenId> drafts,
                                       PerRequest& req, TokenId* out) {
  const auto vocab = static_cast<std::size_t>(model_.config().vocab_size);
  const SamplingParams& sp = req.params.sampling;
  const std::size_t k = drafts.size();
  if (k == 0) {
    const std::span<const float> logits(rows, vocab);
    if (sp.is_greedy()) {
      out[0] = argmax(logits);
    } else {
      probs_.resize(vocab);
      logits_to_probs(logits, sp, probs_, sampling_);
      out[0] = sample_categorical(probs_, req.rng);
    }
    return 1;
  }
  probs_.resize((k + 1) * vocab);
  for (std::size_t i = 0; i <= k; ++i) {
    logits_to_probs(std::span<const float>(rows + i * vocab, vocab), sp,
                    std::span<float>(probs_.data() + i * vocab, vocab), sampling_);
  }
  // The n-gram drafter is deterministic: its distribution is one-hot at the draft (empty q).
  const std::size_t n = verify_chain(drafts, {}, probs_, vocab,
                                     sp.is_greedy() ? VerifyMode::kGreedy : VerifyMode::kSample,
                                     req.rng, std::span<TokenId>(out, k + 1));
  stats_.drafted_tokens += static_cast<std::int64_t>(k);
  stats_.accepted_tokens += static_cast<std::int64_t>(n - 1);
  return n;
}

inline void Engine::stream(RequestId id, std::span<const TokenId> all) {
  PerRequest& req = requests_.at(id);
  const std::size_t outputs = all.size() - req.prompt_size;
  if (outputs > req.streamed) {
    emit(id, req, all.subspan(req.prompt_size + req.streamed));
    req.streamed = outputs;
  }
}

// The tokens a step committed for `id` are a prefix of what it emitted for it (the scheduler
// cuts after a stop token or at the length limit), so their log-probabilities are too.
inline void Engine::emit(RequestId id, const PerRequest& req, std::span<const TokenId> tokens) {
  TokenEvent e{id, tokens, {}};
  if (req.params.logprobs && req.step_begin != static_cast<std::size_t>(-1)) {
    e.logprobs =
        std::span<const TokenLogprobs>(emitted_logprobs_).subspan(req.step_begin, tokens.size());
  }
  on_tokens_(e);
}

inline void Engine::collect_finished() {
  for (RequestOutcome& o : sched_->take_finished()) {
    const auto it = requests_.find(o.id);
    if (it != requests_.end()) {
      PerRequest& req = it->second;
      // A parent that ends before its first sample (aborted, or it can never fit) takes the
      // submit_n members it has not forked yet with it.
      for (const RequestId child : req.fork_children) {
        RequestOutcome c;
        c.id = child;
        c.reason = o.reason;
        c.metrics = o.metrics;
        c.metrics.computed_tokens = 0;
        requests_.erase(child);
        finished_.push_back(std::move(c));
      }
      if (on_tokens_ && o.output.size() > req.streamed) {
        emit(o.id, req, std::span<const TokenId>(o.output).subspan(req.streamed));
      }
      requests_.erase(it);
    }
    finished_.push_back(std::move(o));
  }
}

// Drafts for request `id` if it will decode next step: the n-gram continuation of its tokens.
inline void Engine::propose_drafts(RequestId id) {
  if (!sched_->contains(id) || sched_->state(id) != RequestState::kRunning) return;
  const std::span<const TokenId> context = sched_->tokens(id);
  draft_buffer_.resize(static_cast<std::size_t>(options_.max_draft_tokens));
  const std::size_t n = drafter_.propose(context, draft_buffer_);
  if (n > 0) sched_->propose_drafts(id, std::span<const TokenId>(draft_buffer_).first(n));
}

}  // namespace inferkit
