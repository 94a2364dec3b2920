// SPDX-License-Identifier: Apache-2.0
// ContinuousScheduler: iteration-level batching (Orca, vLLM) over paged KV. Each step it plans
// running decodes first, then chunked prefill of partially prefilled and newly admitted requests
// in what is left of the token budget; it admits through the BlockAllocator with a watermark
// after subtracting the prefix-cache match, locks the matched prefix while the request runs,
// preempts by recompute when a decode cannot get a block (with hysteresis), and rolls block
// tables back past rejected speculative drafts. schedule() -> engine -> commit() is one step.
// A running request can be forked (n completions, parallel sampling, beam-like search): the
// child shares every KV page, and the first write into a shared partial page is a planned copy.
// Threads: one thread at a time per scheduler, and nothing else may use its allocator or tree
// meanwhile; its const queries may run together while nothing mutates it.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/core/token_id.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <inferkit/sched/detail/page_store.hpp>
#include <inferkit/sched/detail/sequence_record.hpp>
#include <inferkit/sched/request.hpp>
#include <inferkit/sched/scheduler_config.hpp>
#include <inferkit/sched/scheduling_policy.hpp>
#include <inferkit/sched/serving_metrics.hpp>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace inferkit {

/// Counters of a scheduler since construction.
struct SchedulerStats {
  std::int64_t steps = 0;          ///< non-empty plans (schedule() calls that computed tokens)
  std::int64_t admissions = 0;     ///< requests admitted (readmissions after preemption too)
  std::int64_t preemptions = 0;    ///< requests preempted by recompute
  std::int64_t finished = 0;       ///< by stop token or length
  std::int64_t aborted = 0;        ///< finished by `abort`
  std::int64_t rejected = 0;       ///< finished with kExceedsCapacity
  std::int64_t prompt_tokens = 0;  ///< prompts of first admissions
  std::int64_t cached_prompt_tokens = 0;   ///< of which served by the prefix cache
  std::int64_t computed_tokens = 0;        ///< KV rows computed (recomputation and drafts included)
  std::int64_t rejected_draft_tokens = 0;  ///< draft KV rows rolled back at commit
  std::int64_t forks = 0;                  ///< children created by `fork` and `fork_sampled`

  /// cached_prompt_tokens / prompt_tokens (0 without admissions).
  [[nodiscard]] double prefix_hit_rate() const noexcept {
    return prompt_tokens == 0
               ? 0.0
               : static_cast<double>(cached_prompt_tokens) / static_cast<double>(prompt_tokens);
  }
};

/// An iteration-level scheduler over a BlockAllocator, optionally with a RadixTree prefix cache
/// on the same allocator. `Policy` orders the waiting queue (see scheduling_policy.hpp).
///
/// **A step.** `schedule(now)` returns the StepPlan (valid until the next call); the engine
/// computes it and calls `commit(results, now)` with each scheduled sequence's emitted tokens,
/// in plan order. Between the two no other mutating call but `abort` is allowed.
///
/// **Admission.** A waiting request is admitted (it runs: it holds its prefix-cache match,
/// locked, and is promised the rest of its KV) when its KV fits, whether or not this step can
/// plan its first prefill chunk. Without chunked prefill a prompt whose rest exceeds the step's
/// leftover budget, and with whole-batch admission a batch larger than the budget, leave it
/// *admitted but unplanned*: running, absent from the plan, with its block table (the matched
/// blocks, or none) mirrored in its page run like every running request's; a later step plans
/// it among the running prefills, before any new admission. `check_consistency()` holds in that
/// state, between schedule() and commit() too.
///
/// **Forks.** `fork` (between steps) and `fork_sampled` (during the step that samples the
/// parent) create a child request that shares every KV page of a running parent, reference
/// counted: the prompt and output so far are computed once. Whichever of them first appends
/// into the shared, partially filled last page gets a copy of it planned in `block_copies`
/// (copy-on-write); full shared pages are never copied. A child is a request like any other
/// from then on: it is preempted, aborted and finished on its own, and the pages return to the
/// pool (or the prefix cache) when their last holder lets them go.
///
/// **Guarantees.** No request is lost, duplicated or given tokens out of order: a preempted
/// request recomputes its KV and continues where it stopped. Every throwing call changes
/// nothing. A request that can never fit (its prompt, or its KV reservation, exceeds the pool)
/// finishes with kExceedsCapacity instead of waiting forever.
///
/// The allocator and the tree must outlive the scheduler; neither may be used by anyone else
/// while it runs. Not thread-safe.
template <SchedulingPolicy Policy = FcfsPolicy>
class ContinuousScheduler {
  BlockAllocator& allocator_;
  RadixTree* tree_ = nullptr;
  SchedulerConfig config_;
  Policy policy_;
  std::vector<detail::SequenceRecord> records_;  // slots, recycled through free_slots_
  std::vector<std::int32_t> free_slots_;
  std::unordered_map<RequestId, std::int32_t> slot_of_;
  std::set<detail::WaitKey> waiting_;
  std::vector<std::int32_t> running_;  // slots, in detail::runs_before order
  detail::PageStore pages_;
  StepPlan plan_;
  std::vector<std::int32_t> plan_slots_;  // [plan sequences] slot, -1 once aborted in flight
  std::vector<std::int32_t> candidates_;  // scratch of an admission round
  std::vector<std::pair<detail::WaitKey, std::int32_t>> ranked_;
  std::vector<RequestOutcome> finished_;
  std::vector<StepMetrics> step_metrics_;
  std::vector<detail::PendingFork> pending_forks_;  // fork_sampled calls awaiting commit
  SchedulerStats stats_;
  bool in_flight_ = false;
  double last_now_ = -std::numeric_limits<double>::infinity();
  std::int64_t promised_total_ = 0;
  std::int64_t next_back_order_ = 0;
  std::int64_t next_front_order_ = 0;
  std::int64_t next_arrival_order_ = 0;
  std::int64_t last_preemption_step_ = -1;

 public:
  /// A scheduler over `allocator` (and `prefix_cache`, nullable, bound to the same allocator).
  /// Throws `Error{kInvalidArgument}` for a bad config or policy, or a tree of another block size.
  explicit ContinuousScheduler(BlockAllocator& allocator, RadixTree* prefix_cache = nullptr,
                               const SchedulerConfig& config = {}, Policy policy = {})
      : allocator_(allocator), tree_(prefix_cache), config_(config), policy_(policy) {
    validate(config_);
    validate(policy_);
    if (tree_ != nullptr) {
      check_arg(tree_->block_size() == allocator.block_size(), ErrorCode::kInvalidArgument,
                "prefix_cache block_size", tree_->block_size(), "must equal the allocator's",
                allocator.block_size());
    }
    plan_.block_size = allocator.block_size();
    plan_.q_indptr.push_back(0);
    plan_.prefill_q_indptr.push_back(0);
  }

  ContinuousScheduler(const ContinuousScheduler&) = delete;
  ContinuousScheduler& operator=(const ContinuousScheduler&) = delete;

  /// Returns every block and lock it holds (running requests are dropped unfinished).
  ~ContinuousScheduler() {
    try {
      for (std::int32_t slot : running_) release_kv(rec(slot));
    } catch (...) {  // only a broken invariant can throw here; a destructor must not
    }
  }

  // ---- requests ----

  /// Queues `request`. A request that can never fit finishes at once with kExceedsCapacity: a
  /// prompt of max_model_len tokens or more (it must still emit a token), more KV than the pool
  /// minus the watermark holds, or, without chunked prefill, a prompt over the step's token
  /// budget. O(prompt + log waiting).
  /// Throws `Error{kInvalidArgument}` for an invalid request (see `validate(Request)`) or an id
  /// already held; `Error{kInvalidState}` while a step is in flight.
  void add(Request request) {
    check_idle("add");
    validate(request);
    if (slot_of_.contains(request.id)) {
      detail::throw_error(ErrorCode::kInvalidArgument,
                          "request id " + std::to_string(request.id) +
                              " is already held by the scheduler (ids must be unique)");
    }
    const std::int32_t slot = take_slot();
    detail::SequenceRecord& r = rec(slot);
    r.request = std::move(request);
    r.tokens = r.request.prompt;
    r.drafts.clear();
    r.live = true;
    r.state = RequestState::kWaiting;
    r.num_computed = 0;
    r.arrival_order = next_arrival_order_++;
    r.cached_inserted = 0;
    r.promised_blocks = 0;
    r.prefix_locked = false;
    r.forked = false;
    r.metrics = RequestMetrics{};
    r.metrics.arrival_s = r.request.arrival_s;
    r.metrics.prompt_tokens = static_cast<std::int64_t>(r.request.prompt.size());
    r.queued_since_s = r.request.arrival_s;
    slot_of_.emplace(r.request.id, slot);
    if (!fits_pool(r)) {
      finish(slot, FinishReason::kExceedsCapacity, r.request.arrival_s);
      return;
    }
    enqueue(slot, /*front=*/false);
  }

  /// Ends request `id` in any state, freeing everything it holds; during a step its result is
  /// then ignored by commit. Returns false for an id the scheduler does not hold (never added,
  /// or already finished). O(running + log waiting).
  bool abort(RequestId id, double now) {
    const auto it = slot_of_.find(id);
    if (it == slot_of_.end()) return false;
    finish(it->second, FinishReason::kAborted, std::max(now, last_now_));
    return true;
  }

  /// Proposes `drafts` (speculative tokens to verify) for running request `id`'s next decode;
  /// the next schedule() gives it up to max_draft_tokens lookahead slots if budget and blocks
  /// allow (fewer, or none, otherwise), and commit rolls back the rejected ones. Replaces
  /// earlier proposals; ignored if the request is prefilling. Throws `Error{kInvalidArgument}`
  /// for an unknown id or a negative token, `Error{kInvalidState}` unless it is running and no
  /// step is in flight.
  void propose_drafts(RequestId id, std::span<const TokenId> drafts) {
    check_idle("propose_drafts");
    detail::SequenceRecord& r = rec(checked_slot(id, "propose_drafts"));
    INFERKIT_CHECK(r.state == RequestState::kRunning, ErrorCode::kInvalidState,
                   "propose_drafts: request " + std::to_string(id) + " is " +
                       std::string(to_string(r.state)) + ", not running");
    for (std::size_t i = 0; i < drafts.size(); ++i) {
      check_arg(
          drafts[i] >= 0, ErrorCode::kInvalidArgument,
          [&] { return "drafts[" + std::to_string(i) + "]"; }, drafts[i], "must be >=", 0);
    }
    r.drafts.assign(drafts.begin(), drafts.end());
  }

  /// Forks running request `parent` into a new request `child`: the child gets a copy of the
  /// parent's request (its prompt, output limit, stop tokens, priority, namespace, arrival) under
  /// the id `child`, its tokens so far, its metrics (but computed_tokens and num_preemptions 0)
  /// and a block table that shares every page (each reference count + 1): no KV is computed or
  /// copied now. Both then run on their own; the first of them to append into the shared,
  /// partially filled last page gets a copy of it in that step's `block_copies` (the slot mapping
  /// points into the copy). As the two sample the same context, they continue identically unless
  /// the engine samples them differently (another seed); to give the child a different last
  /// token, fork during the step with `fork_sampled`.
  ///
  /// The child runs beside its parent (same rank in the running order) when fewer than
  /// max_num_seqs requests run; otherwise it is queued at the front of its rank, holding nothing,
  /// and recomputes its KV (from the prefix cache where it can) when admitted. The child's
  /// promise counts what a request of its length would need, not the copy of the shared page:
  /// that block is taken when the copy is planned, preempting like any decode if it must.
  /// O(parent's tokens + pages). Throws `Error{kInvalidArgument}` for an unknown parent or a
  /// `child` id already held, `Error{kInvalidState}` unless the parent is running and no step is
  /// in flight; nothing changes then.
  void fork(RequestId parent, RequestId child);

  /// Forks `parent` during the step that samples it: between schedule() and commit(), for a
  /// request planned in this step with a sampling sequence without drafts (a decode or a final
  /// prefill chunk). At commit, before the parent's result is applied, `child` is created as by
  /// `fork` from the parent as the step leaves it (its KV includes this step's rows) and emits
  /// `token` in place of the parent's result: the token a different sample of the same logits
  /// row drew (parallel sampling: every child's first token comes from the prompt's last row;
  /// beam-like search: the runner-up tokens). The child then finishes at once if `token` is a
  /// stop token or its output reaches the limit, like any request. Forks of a parent aborted
  /// before the commit are dropped (the child never exists); a commit that throws keeps them
  /// pending. O(1) now, O(parent's tokens + pages) at commit. Throws `Error{kInvalidArgument}`
  /// for an unknown parent, a `child` id held or already pending, or a negative token;
  /// `Error{kInvalidState}` without a step in flight, or for a parent not planned in it, or
  /// planned without sampling or with drafts; nothing changes then.
  void fork_sampled(RequestId parent, RequestId child, TokenId token);

  // ---- the step ----

  /// Plans one step at time `now` (seconds, non-decreasing across calls). An empty plan means
  /// nothing can run now and needs no commit; any other plan must be committed before the next
  /// mutating call but `abort`. The plan is valid until the next schedule(). Throws
  /// `Error{kInvalidState}` if the previous step was not committed, `Error{kInvalidArgument}` for a
  /// `now` that is not finite or goes back in time. O(scheduled tokens + running + admitted prompts
  /// + changed pages).
  const StepPlan& schedule(double now) {
    check_idle("schedule");
    check_time(now);
    last_now_ = now;
    reset_plan();
    const std::int64_t evictions_before = allocator_.num_evictions();
    const auto preemptions_before = static_cast<std::int32_t>(stats_.preemptions);
    std::int64_t budget = config_.max_batched_tokens;
    for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
      if (rec(running_[i]).pending() == 1 && !schedule_decode(i, budget, now)) break;
    }
    plan_.num_decodes = plan_.num_seqs();
    schedule_running_prefills(budget);
    admit(budget, now);
    while (plan_.empty() && !running_.empty()) unstick(budget, now);
    finish_plan(now, evictions_before, preemptions_before);
    in_flight_ = !plan_.empty();
    return plan_;
  }

  /// Applies the engine's results for the planned step at time `now`: one entry per planned
  /// sequence, in plan order, with the tokens it emitted (none for a non-final prefill chunk,
  /// one for a decode or a final chunk, 1..drafts+1 after speculative verification). Appends
  /// them, rolls back rejected drafts, finishes requests at a stop token or their length
  /// (their outcome then waits in `take_finished`), caches prefilled prefixes, and creates the
  /// children `fork_sampled` asked for (each before its parent's result is applied).
  /// Throws `Error{kInvalidState}` without a planned step; `Error{kInvalidArgument}` (changing
  /// nothing) for a wrong number of results, an id out of plan order, a token count the plan
  /// does not allow, a negative token, or a bad `now`. O(emitted tokens + prefixes inserted).
  void commit(std::span<const SequenceResult> results, double now) {
    INFERKIT_CHECK(in_flight_, ErrorCode::kInvalidState,
                   std::string("commit: no step is planned (call schedule first)"));
    check_time(now);
    validate_results(results);
    last_now_ = now;
    in_flight_ = false;
    std::size_t next_fork = 0;  // pending_forks_ is in plan order
    for (std::size_t i = 0; i < results.size(); ++i) {
      const bool prefill = static_cast<std::int32_t>(i) >= plan_.num_decodes;
      apply_forks(i, prefill, now, next_fork);  // children first: they copy the parent as planned
      if (plan_slots_[i] < 0) continue;         // aborted during the step
      apply_result(plan_.sequences[i], plan_slots_[i], results[i], prefill, now);
    }
    pending_forks_.clear();
    if (config_.record_step_metrics && !step_metrics_.empty())
      step_metrics_.back().committed_s = now;
  }

  /// Moves out the outcomes of requests finished since the last call, in finishing order.
  [[nodiscard]] std::vector<RequestOutcome> take_finished() {
    std::vector<RequestOutcome> out;
    out.swap(finished_);
    return out;
  }

  // ---- queries ----

  /// Requests queued (waiting or preempted).
  [[nodiscard]] std::int32_t num_waiting() const noexcept {
    return static_cast<std::int32_t>(waiting_.size());
  }
  /// Requests holding KV.
  [[nodiscard]] std::int32_t num_running() const noexcept {
    return static_cast<std::int32_t>(running_.size());
  }
  /// Whether any request is waiting or running.
  [[nodiscard]] bool has_unfinished() const noexcept { return !slot_of_.empty(); }
  /// Whether a planned step awaits its commit.
  [[nodiscard]] bool step_in_flight() const noexcept { return in_flight_; }
  /// Whether the scheduler holds request `id` (not yet finished).
  [[nodiscard]] bool contains(RequestId id) const { return slot_of_.contains(id); }
  /// State of held request `id`. Throws `Error{kInvalidArgument}` for an id not held.
  [[nodiscard]] RequestState state(RequestId id) const { return crec(id, "state").state; }
  /// Prompt and output so far of held request `id` (valid until the next mutating call), the
  /// context a drafter proposes from. Throws `Error{kInvalidArgument}` for an id not held.
  [[nodiscard]] std::span<const TokenId> tokens(RequestId id) const {
    return crec(id, "tokens").tokens;
  }
  /// KV blocks of held request `id`, one per page in order (its prefix-cache hit first), valid
  /// until the next mutating call: what an engine that offloads, exports or mirrors KV reads.
  /// Between steps the pages hold `num_computed_tokens(id)` tokens; a waiting or preempted
  /// request holds none (a locked prefix match is adopted when it is admitted). Throws
  /// `Error{kInvalidArgument}` for an id not held. O(1).
  [[nodiscard]] std::span<const BlockId> blocks(RequestId id) const {
    return crec(id, "blocks").table.blocks();
  }
  /// Tokens of held request `id` whose KV its blocks hold (between steps; a step in flight adds
  /// its planned rows at commit). Throws `Error{kInvalidArgument}` for an id not held.
  [[nodiscard]] std::int64_t num_computed_tokens(RequestId id) const {
    return crec(id, "num_computed_tokens").num_computed;
  }
  /// Counters since construction.
  [[nodiscard]] const SchedulerStats& stats() const noexcept { return stats_; }
  /// One record per step (if config.record_step_metrics).
  [[nodiscard]] const std::vector<StepMetrics>& step_metrics() const noexcept {
    return step_metrics_;
  }
  /// The configuration.
  [[nodiscard]] const SchedulerConfig& config() const noexcept { return config_; }
  /// Blocks promised to running requests beyond what they hold (prefill remainders; the rest
  /// of a reservation).
  [[nodiscard]] std::int64_t promised_blocks() const noexcept { return promised_total_; }

  /// Checks every invariant (tables vs computed tokens, queue and running sets, promises, the
  /// page store, the allocator and the tree); throws `Error{kInvalidState}` on the first
  /// violation. O(everything); for tests.
  void check_consistency() const;

 private:
  // ---- records ----
  detail::SequenceRecord& rec(std::int32_t slot) {
    return records_[static_cast<std::size_t>(slot)];
  }
  const detail::SequenceRecord& rec(std::int32_t slot) const {
    return records_[static_cast<std::size_t>(slot)];
  }
  std::int32_t checked_slot(RequestId id, const char* op) const {
    const auto it = slot_of_.find(id);
    if (it == slot_of_.end()) {
      detail::throw_error(ErrorCode::kInvalidArgument,
                          std::string(op) + ": request id " + std::to_string(id) +
                              " is not held by the scheduler (unknown or finished)");
    }
    return it->second;
  }
  const detail::SequenceRecord& crec(RequestId id, const char* op) const {
    return rec(checked_slot(id, op));
  }
  std::int32_t take_slot() {
    if (!free_slots_.empty()) {
      const std::int32_t s = free_slots_.back();
      free_slots_.pop_back();
      return s;
    }
    check_arg(records_.size() < static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
              ErrorCode::kOutOfRange, "requests held", records_.size(), "must be <", "2^31 - 1");
    records_.emplace_back(allocator_);
    pages_.resize(records_.size());
    return static_cast<std::int32_t>(records_.size() - 1);
  }
  void check_idle(const char* op) const {
    INFERKIT_CHECK(!in_flight_, ErrorCode::kInvalidState,
                   std::string(op) + ": a planned step awaits commit()");
  }
  void check_time(double now) const {
    check_arg(std::isfinite(now) && now >= last_now_, ErrorCode::kInvalidArgument, "now", now,
              "must be finite and >= the previous time", last_now_);
  }

  // ---- KV accounting ----
  [[nodiscard]] std::int64_t blocks_for(std::int64_t tokens) const noexcept {
    const std::int64_t bs = allocator_.block_size();
    return (tokens + bs - 1) / bs;
  }
  [[nodiscard]] std::int64_t output_limit(const detail::SequenceRecord& r) const noexcept {
    std::int64_t limit = r.request.max_new_tokens;
    if (config_.max_model_len > 0) {
      limit = std::min(limit,
                       config_.max_model_len - static_cast<std::int64_t>(r.request.prompt.size()));
    }
    return limit;
  }
  // Blocks the request must be able to hold while running: what it knows (paging) or its
  // reservation.
  [[nodiscard]] std::int64_t target_blocks(const detail::SequenceRecord& r) const noexcept {
    const auto known = static_cast<std::int64_t>(r.tokens.size());
    const auto full = static_cast<std::int64_t>(r.request.prompt.size()) + output_limit(r);
    switch (config_.reservation) {
      case KvReservation::kOnDemand:
        return blocks_for(known);
      case KvReservation::kMaxModelLength:
        return blocks_for(config_.max_model_len);
      case KvReservation::kNextPowerOfTwo: {
        auto p2 = static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(full)));
        if (config_.max_model_len > 0) p2 = std::min(p2, config_.max_model_len);
        return blocks_for(std::max(p2, known));
      }
      case KvReservation::kExact:
        return blocks_for(std::max(full, known));
    }
    return blocks_for(known);
  }
  [[nodiscard]] std::int64_t chunk_limit() const noexcept {
    return config_.max_prefill_chunk_tokens > 0
               ? std::min(config_.max_prefill_chunk_tokens, config_.max_batched_tokens)
               : config_.max_batched_tokens;
  }
  [[nodiscard]] std::int64_t watermark_blocks() const noexcept {
    return static_cast<std::int64_t>(config_.watermark *
                                     static_cast<double>(allocator_.num_blocks()));
  }
  [[nodiscard]] bool fits_pool(const detail::SequenceRecord& r) const noexcept {
    const auto prompt = static_cast<std::int64_t>(r.request.prompt.size());
    if (config_.max_model_len > 0 && prompt >= config_.max_model_len) return false;
    if (!config_.chunked_prefill && static_cast<std::int64_t>(r.tokens.size()) > chunk_limit()) {
      return false;  // it could never be computed in one step
    }
    return target_blocks(r) <= allocator_.num_blocks() - watermark_blocks();
  }
  // Blocks the request still needs to reach its target (0 when it holds them all).
  [[nodiscard]] std::int64_t blocks_short(const detail::SequenceRecord& r) const noexcept {
    if (config_.reservation == KvReservation::kOnDemand) {  // the per-step case: no division
      const std::int64_t room =
          std::int64_t{r.table.num_blocks()} * allocator_.block_size() - r.table.num_tokens();
      const std::int64_t missing =
          static_cast<std::int64_t>(r.tokens.size()) - r.table.num_tokens() - room;
      return missing <= 0 ? 0 : blocks_for(missing);
    }
    return std::max<std::int64_t>(0, target_blocks(r) - r.table.num_blocks());
  }
  void update_promise(detail::SequenceRecord& r) noexcept {
    const std::int64_t want = r.state == RequestState::kRunning ? blocks_short(r) : 0;
    promised_total_ += want - r.promised_blocks;
    r.promised_blocks = static_cast<std::int32_t>(want);
  }

  // ---- queues ----
  void enqueue(std::int32_t slot, bool front) {
    detail::SequenceRecord& r = rec(slot);
    double rank = 0.0;
    if constexpr (!Policy::kTimeDependent) {
      rank = policy_.rank(info_of(r), r.queued_since_s);
    }
    const std::int64_t order = front ? -(++next_front_order_) : ++next_back_order_;
    r.wait_key = detail::WaitKey{-rank, order, slot};
    waiting_.insert(r.wait_key);
    r.queued = true;
  }
  [[nodiscard]] WaitingRequestInfo info_of(const detail::SequenceRecord& r) const {
    WaitingRequestInfo w;
    w.request = &r.request;
    w.queued_since_s = r.queued_since_s;
    w.num_preemptions = r.metrics.num_preemptions;
    if constexpr (Policy::kUsesPrefixMatch) {
      if (tree_ != nullptr) {
        w.cached_prefix_tokens = tree_->match_length(match_span(r), r.request.cache_namespace);
      }
    }
    return w;
  }
  // The tokens matched against the prefix cache: all but the last known one, whose logits the
  // step must compute.
  static std::span<const TokenId> match_span(const detail::SequenceRecord& r) noexcept {
    return std::span<const TokenId>(r.tokens).first(r.tokens.size() - 1);
  }
  void insert_running(std::int32_t slot) {
    const auto pos = std::upper_bound(
        running_.begin(), running_.end(), slot,
        [&](std::int32_t a, std::int32_t b) { return detail::runs_before(rec(a), rec(b)); });
    running_.insert(pos, slot);
  }
  void erase_running(std::int32_t slot) {
    running_.erase(std::find(running_.begin(), running_.end(), slot));
  }

  // ---- planning (bodies in detail/continuous_scheduler_plan.hpp) ----
  void reset_plan();
  void push_sequence(std::int32_t slot, std::int32_t new_tokens, std::int32_t drafts,
                     std::int64_t& budget);
  bool schedule_decode(std::size_t index, std::int64_t& budget, double now);
  bool schedule_prefill(std::int32_t slot, std::int64_t& budget);
  void schedule_running_prefills(std::int64_t& budget);
  void admit(std::int64_t& budget, double now);
  bool try_admit(std::int32_t slot, std::int64_t& budget, bool recovering);
  void unstick(std::int64_t& budget, double now);
  void finish_plan(double now, std::int64_t evictions_before, std::int32_t preemptions_before);
  void preempt(std::int32_t slot, double now);
  void cache_prefix(detail::SequenceRecord& r);
  void release_kv(detail::SequenceRecord& r);
  void finish(std::int32_t slot, FinishReason reason, double now);
  void validate_results(std::span<const SequenceResult> results) const;
  void apply_result(const ScheduledSequence& seq, std::int32_t slot, const SequenceResult& result,
                    bool prefill, double now);
  FinishReason append_output(detail::SequenceRecord& r, std::span<const TokenId> tokens,
                             double now);
  // ---- forks (bodies in detail/continuous_scheduler_fork.hpp) ----
  void check_fork_ids(std::int32_t parent_slot, RequestId parent, RequestId child,
                      const char* op) const;
  std::int32_t spawn_fork(std::int32_t parent_slot, RequestId child);
  void apply_forks(std::size_t plan_index, bool prefill, double now, std::size_t& next_fork);
};

}  // namespace inferkit

#include <inferkit/sched/detail/continuous_scheduler_commit.hpp>
#include <inferkit/sched/detail/continuous_scheduler_fork.hpp>
#include <inferkit/sched/detail/continuous_scheduler_plan.hpp>
