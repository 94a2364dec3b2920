// SPDX-License-Identifier: Apache-2.0
// Engine: the loop a real inference engine runs, built from inferkit's parts, top floor beside
// sim/: ContinuousScheduler -> LlamaModel::forward over paged KV -> sampling, or verification of
// n-gram drafts by the chain verifier -> commit, with the RadixTree prefix cache. The simulator
// and the engine take the same scheduler and workloads, so predicted and measured figures can be
// compared. `submit_n` serves n completions of one prompt that share its KV (scheduler forks,
// copy-on-write).
// Threads: one thread at a time per Engine, which also runs its callbacks (steps use OpenMP
// inside); engines may share a LlamaModel; other threads go through AsyncEngine (async_engine.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/core/token_id.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <inferkit/model/llama_model.hpp>
#include <inferkit/perf/thread_tuner.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <inferkit/sched/request.hpp>
#include <inferkit/sched/scheduler_config.hpp>
#include <inferkit/spec/chain_verifier.hpp>
#include <inferkit/spec/logprobs.hpp>
#include <inferkit/spec/ngram_drafter.hpp>
#include <inferkit/spec/sampling.hpp>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <variant>
#include <vector>

namespace inferkit {

/// How one request generates.
struct GenerationParams {
  std::int64_t max_new_tokens = 128;  ///< >= 1
  /// Temperature, top-k, top-p, min-p; temperature 0 (the default here) is greedy.
  SamplingParams sampling{0.0f, 0, 1.0f, 0.0f};
  /// The request's random stream (sampling, verification): the same seed draws the same tokens
  /// on every run, alone or in any batch. Give requests distinct seeds for distinct draws.
  std::uint64_t seed = 0;
  std::vector<TokenId> stop_tokens;    ///< extra stop tokens
  bool stop_at_eos = true;             ///< also stop at the model's end-of-sequence tokens
  std::int32_t priority = 0;           ///< Request::priority
  CacheNamespace cache_namespace = 0;  ///< Request::cache_namespace
  /// Report each output token's log-probability (and the `top_logprobs` most likely tokens)
  /// with the token, through the event callback.
  bool logprobs = false;
  std::int32_t top_logprobs = 0;  ///< [0, kMaxTopLogprobs], with `logprobs`
};

/// New output tokens of one request, as a step commits them.
struct TokenEvent {
  RequestId id = 0;                         ///< the request
  std::span<const TokenId> tokens;          ///< its new tokens, in order
  std::span<const TokenLogprobs> logprobs;  ///< one per token when it asked; else empty
};

/// The KV formats an Engine serves (EngineOptions::kv_dtype): fp16 (the default, as
/// llama.cpp's), bf16, fp8 e4m3 and e5m2 (a power-of-two scale per page and head), int8 (a scale
/// per token and head) and int4 (a scale and a zero point per token and head). Each halves or
/// quarters the bytes a token's KV takes, at the quality cost docs/real-model.md measures. fp32
/// is not among them: twice fp16's memory for a model whose K/V llama.cpp keeps in fp16.
inline constexpr std::array<DType, 6> kEngineKVDTypes = {DType::kFloat16,    DType::kBFloat16,
                                                         DType::kFloat8E4M3, DType::kFloat8E5M2,
                                                         DType::kInt8,       DType::kInt4};

/// How an engine is built.
struct EngineOptions {
  std::int32_t num_blocks = 2048;  ///< KV pages (each block_size tokens, every layer)
  std::int32_t block_size = 16;    ///< tokens per page
  /// How K/V are stored: one of kEngineKVDTypes. A program that builds engines compiles the
  /// attention kernels of all six (inferkit/attention/cpu/kernel_instances.hpp compiles them
  /// once per program instead of once per translation unit).
  DType kv_dtype = DType::kFloat16;
  /// Batching rules. max_model_len 0 takes the model's context length. For static batching
  /// pass `static_batching_config(...)`.
  SchedulerConfig scheduler{};
  bool prefix_cache = true;           ///< share cached prompt prefixes (RadixTree)
  bool ngram_speculation = false;     ///< draft with prompt lookup, verify with the chain verifier
  std::int32_t max_draft_tokens = 4;  ///< drafts per decode, >= 1 when speculating
  std::int32_t ngram_min = 2;         ///< shortest suffix a draft must match
  std::int32_t ngram_max = 4;         ///< longest suffix tried first
  /// Tokens that end every request (besides its own stop tokens) when `stop_at_eos`; empty:
  /// none. The caller fills them from the tokenizer (eos, <|im_end|> for chat models).
  std::vector<TokenId> eos_tokens;
  /// The most OpenMP threads a step runs on; 0: omp_get_max_threads() of the thread that calls
  /// step(), read at every step. Set it here rather than with omp_set_num_threads(), whose
  /// setting belongs to the calling thread and never reaches AsyncEngine's engine thread.
  std::int32_t threads = 0;
  /// Each step runs on an OpenMP team of 1..(the limit above) threads that ThreadTuner
  /// learns from the steps' times (perf/thread_tuner.hpp): with another process busy on one of
  /// two cores, one thread decodes faster than two. Outputs do not depend on it. false: every
  /// step runs on the limit.
  bool adaptive_threads = true;
  ThreadTunerOptions thread_tuner{};  ///< how the team is probed and switched
  /// Time each phase of the forward pass (EngineStats::forward_phase_seconds): about 30 clock
  /// reads a layer, for profiling; off by default.
  bool time_forward_phases = false;
};

/// Counters of an engine since construction.
struct EngineStats {
  std::int64_t steps = 0;            ///< forward passes
  std::int64_t prefill_tokens = 0;   ///< prompt (and recomputed) tokens computed
  std::int64_t decode_tokens = 0;    ///< decode rows computed (drafts included)
  std::int64_t drafted_tokens = 0;   ///< draft tokens verified
  std::int64_t accepted_tokens = 0;  ///< of which accepted
  double forward_seconds = 0.0;      ///< wall time in LlamaModel::forward
  /// forward_seconds by phase (LlamaPhase), when EngineOptions::time_forward_phases; else 0.
  std::array<double, kLlamaPhaseCount> forward_phase_seconds{};
  double step_seconds = 0.0;         ///< wall time in step(), scheduling and sampling included
  std::int32_t step_threads = 0;     ///< OpenMP team of the last step (1 without OpenMP)
  std::int64_t thread_switches = 0;  ///< times adaptive_threads changed the team
};

/// Serves requests on a LlamaModel with inferkit's scheduler, paged KV, prefix cache and
/// speculative decoding. The model (and its file) must outlive the engine.
class Engine {
  struct PerRequest {
    GenerationParams params;
    Rng rng{0};
    std::size_t prompt_size = 0;
    std::size_t streamed = 0;  // output tokens handed to the callback
    // This step's emitted tokens start at emitted_[step_begin] (npos: none this step).
    std::size_t step_begin = static_cast<std::size_t>(-1);
    double arrival_s = 0.0;
    // submit_n: the members a parent forks when it first samples, and (in each of them until
    // then) the parent; -1 once forked or for a plain request.
    std::vector<RequestId> fork_children;
    RequestId fork_parent = -1;
  };

  const LlamaModel& model_;
  EngineOptions options_;
  std::unique_ptr<BlockAllocator> allocator_;
  std::unique_ptr<RadixTree> tree_;
  /// The KV pages, in the storage type options_.kv_dtype names (one alternative per entry of
  /// kEngineKVDTypes, in that order).
  using KVCache = std::variant<PagedKVCache<float16>, PagedKVCache<bfloat16>,
                               PagedKVCache<float8_e4m3>, PagedKVCache<float8_e5m2>,
                               PagedKVCache<std::int8_t>, PagedKVCache<std::uint8_t>>;
  KVCache kv_;
  std::unique_ptr<ContinuousScheduler<>> sched_;
  LlamaWorkspace ws_;
  NgramDrafter drafter_;
  std::vector<float> logits_;
  std::vector<float> probs_;
  SamplingWorkspace sampling_;
  std::vector<TokenId> emitted_;
  std::vector<TokenLogprobs> emitted_logprobs_;  // [emitted_] where the request asked
  std::vector<TokenId> draft_buffer_;
  std::vector<SequenceResult> results_;
  std::vector<RequestId> forked_;    // children forked this step
  std::vector<std::size_t> begins_;  // [sequences + 1] offsets of their tokens in emitted_
  std::unordered_map<RequestId, PerRequest> requests_;
  std::vector<RequestOutcome> finished_;
  std::function<void(const TokenEvent&)> on_tokens_;
  EngineStats stats_;
  ThreadTuner tuner_;  // rebuilt for the step's thread limit at the step that finds it changed
  RequestId next_id_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();

 public:
  /// An engine over `model` with a pool of `options.num_blocks` KV pages. Throws
  /// `Error{kInvalidArgument}` for bad options (what the scheduler, the allocator and the
  /// drafter throw).
  Engine(const LlamaModel& model, const EngineOptions& options)
      : model_(model),
        options_(options),
        allocator_(std::make_unique<BlockAllocator>(options.num_blocks, options.block_size)),
        kv_(make_kv_cache(options.kv_dtype,
                          model.kv_shape(options.num_blocks, options.block_size))),
        drafter_(
            static_cast<std::size_t>(std::max(options.ngram_min, 1)),
            static_cast<std::size_t>(std::max(options.ngram_max, std::max(options.ngram_min, 1))),
            static_cast<std::size_t>(std::max(options.max_draft_tokens, 1))),
        tuner_(1, options.thread_tuner) {  // throws for bad tuner options
    check_arg(options.num_blocks >= 1, ErrorCode::kInvalidArgument, "num_blocks",
              options.num_blocks, "must be >=", 1);
    check_arg(options.threads >= 0, ErrorCode::kInvalidArgument, "threads", options.threads,
              "must be >= 0 (0: omp_get_max_threads()); limit", 0);
    check_arg(!options.ngram_speculation || options.max_draft_tokens >= 1,
              ErrorCode::kInvalidArgument, "max_draft_tokens", options.max_draft_tokens,
              "must be >= 1 with ngram_speculation; limit", 1);
    ws_.time_phases = options_.time_forward_phases;
    if (options_.prefix_cache) tree_ = std::make_unique<RadixTree>(*allocator_);
    SchedulerConfig c = options_.scheduler;
    if (c.max_model_len == 0) c.max_model_len = model.config().context_length;
    sched_ = std::make_unique<ContinuousScheduler<>>(*allocator_, tree_.get(), c);
  }

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Seconds since the engine was built (the clock of every metric).
  [[nodiscard]] double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  /// Calls `callback(id, tokens)` after every step with each request's newly emitted tokens.
  void set_token_callback(std::function<void(RequestId, std::span<const TokenId>)> callback) {
    if (!callback) {
      on_tokens_ = nullptr;
      return;
    }
    on_tokens_ = [f = std::move(callback)](const TokenEvent& e) { f(e.id, e.tokens); };
  }

  /// Calls `callback(event)` after every step with each request's newly emitted tokens and, for
  /// the requests that asked, their log-probabilities. Replaces `set_token_callback`'s.
  void set_event_callback(std::function<void(const TokenEvent&)> callback) {
    on_tokens_ = std::move(callback);
  }

  /// Queues a request; returns its id (0, 1, 2, ...). Throws `Error{kInvalidArgument}` for an
  /// empty prompt, a token outside the vocabulary or bad generation parameters.
  RequestId submit(std::vector<TokenId> prompt, const GenerationParams& params = {}) {
    validate(params.sampling);
    check_arg(
        !params.logprobs || (params.top_logprobs >= 0 && params.top_logprobs <= kMaxTopLogprobs),
        ErrorCode::kInvalidArgument, "top_logprobs", params.top_logprobs,
        "must be in [0, kMaxTopLogprobs] with kMaxTopLogprobs =", kMaxTopLogprobs);
    for (std::size_t i = 0; i < prompt.size(); ++i) {
      if (prompt[i] < 0 || prompt[i] >= model_.config().vocab_size) {
        check_arg(false, ErrorCode::kInvalidArgument, "prompt[" + std::to_string(i) + "]",
                  prompt[i], "must be in [0, vocab) with vocab =", model_.config().vocab_size);
      }
    }
    Request r;
    r.id = next_id_;
    r.prompt = std::move(prompt);
    r.max_new_tokens = params.max_new_tokens;
    r.stop_tokens = params.stop_tokens;
    if (params.stop_at_eos) {
      r.stop_tokens.insert(r.stop_tokens.end(), options_.eos_tokens.begin(),
                           options_.eos_tokens.end());
    }
    r.arrival_s = now();
    r.priority = params.priority;
    r.cache_namespace = params.cache_namespace;
    const double arrival_s = r.arrival_s;
    sched_->add(std::move(r));          // validates; throws before anything is recorded
    if (!sched_->contains(next_id_)) {  // finished at once: it can never fit
      collect_finished();
      return next_id_++;
    }
    PerRequest& p = requests_[next_id_];
    p.params = params;
    // The stream depends on the seed alone, so a request drawn again with its seed draws the
    // same tokens, whenever and beside whatever it runs (OpenAI's `seed`).
    p.rng = Rng(params.seed, 0);
    p.prompt_size = sched_->tokens(next_id_).size();
    p.arrival_s = arrival_s;
    return next_id_++;
  }

  /// Queues `seeds.size()` completions of one prompt (OpenAI's `n`), each with `params` and its
  /// own seed; returns their ids, consecutive, in seed order. The prompt is prefilled once, by
  /// the first; when it samples its first token from the prompt's last logits row, every other
  /// member draws its own first token from that same row with its own seed and is forked from it
  /// (ContinuousScheduler::fork_sampled): the members share the prompt's KV pages and copy only
  /// the partially filled last one when they first write to it. Each member then runs, streams,
  /// finishes and can be aborted on its own, and outputs exactly what `submit(prompt, params)`
  /// with its seed outputs alone (the sampler's stream depends on the seed alone). Aborting the
  /// first member before the prompt is computed aborts the members not yet forked; a prompt that
  /// can never fit finishes them all with kExceedsCapacity. Throws what `submit` throws, and
  /// `Error{kInvalidArgument}` for no seeds; nothing is queued then.
  std::vector<RequestId> submit_n(std::vector<TokenId> prompt, const GenerationParams& params,
                                  std::span<const std::uint64_t> seeds) {
    check_arg(!seeds.empty(), ErrorCode::kInvalidArgument, "seeds.size()", seeds.size(),
              "must be >=", 1);
    GenerationParams first = params;
    first.seed = seeds[0];
    const RequestId parent = submit(std::move(prompt), first);
    std::vector<RequestId> ids{parent};
    const bool held = requests_.contains(parent);  // else it finished at once: it can never fit
    for (std::size_t i = 1; i < seeds.size(); ++i) {
      const RequestId id = next_id_++;
      ids.push_back(id);
      PerRequest c;
      c.params = params;
      c.params.seed = seeds[i];
      c.rng = Rng(seeds[i], 0);
      if (!held) {
        const auto o = std::find_if(finished_.begin(), finished_.end(),
                                    [&](const RequestOutcome& f) { return f.id == parent; });
        RequestOutcome copy = *o;
        copy.id = id;
        finished_.push_back(std::move(copy));
        continue;
      }
      const PerRequest& p = requests_.at(parent);
      c.prompt_size = p.prompt_size;
      c.arrival_s = p.arrival_s;
      c.fork_parent = parent;
      requests_.emplace(id, std::move(c));
      requests_.at(parent).fork_children.push_back(id);
    }
    return ids;
  }

  /// Ends request `id`; false if the engine does not hold it.
  bool abort(RequestId id) {
    const auto it = requests_.find(id);
    if (it != requests_.end() && it->second.fork_parent >= 0) {  // a submit_n member not forked
      std::vector<RequestId>& siblings = requests_.at(it->second.fork_parent).fork_children;
      siblings.erase(std::find(siblings.begin(), siblings.end(), id));
      RequestOutcome o;
      o.id = id;
      o.reason = FinishReason::kAborted;
      o.metrics.arrival_s = it->second.arrival_s;
      o.metrics.prompt_tokens = static_cast<std::int64_t>(it->second.prompt_size);
      o.metrics.finish_s = std::max(now(), o.metrics.arrival_s);
      requests_.erase(it);
      finished_.push_back(std::move(o));
      return true;
    }
    const bool held = sched_->abort(id, now());
    collect_finished();
    return held;
  }

  /// Runs one step (schedule, forward, sample or verify, commit). Returns false when there is
  /// nothing to run.
  bool step();

  /// Steps until every submitted request has finished.
  void run() {
    while (sched_->has_unfinished()) {
      if (!step()) break;
    }
  }

  /// Moves out the outcomes finished since the last call.
  [[nodiscard]] std::vector<RequestOutcome> take_finished() {
    std::vector<RequestOutcome> out;
    out.swap(finished_);
    return out;
  }

  /// Where request `id` is (waiting, running, preempted); nullopt once it has finished or for an
  /// id the engine never held.
  [[nodiscard]] std::optional<RequestState> state(RequestId id) const {
    const auto it = requests_.find(id);
    if (it != requests_.end() && it->second.fork_parent >= 0) {  // its parent computes for it
      id = it->second.fork_parent;
    }
    if (!sched_->contains(id)) return std::nullopt;
    return sched_->state(id);
  }
  /// Requests waiting for admission (preempted ones included).
  [[nodiscard]] std::int32_t num_waiting() const noexcept { return sched_->num_waiting(); }
  /// Requests running (admitted, holding KV pages).
  [[nodiscard]] std::int32_t num_running() const noexcept { return sched_->num_running(); }
  /// KV pages in the pool.
  [[nodiscard]] std::int32_t kv_pages_total() const noexcept { return allocator_->num_blocks(); }
  /// KV pages on the free list.
  [[nodiscard]] std::int32_t kv_pages_free() const noexcept {
    return allocator_->num_free_blocks();
  }
  /// KV pages free but still holding cached prefixes (reused before they are evicted).
  [[nodiscard]] std::int32_t kv_pages_cached() const noexcept {
    return allocator_->num_evictable_blocks();
  }
  /// Adds an observer of the prefix cache's block events (`RadixTree::add_observer`): blocks
  /// stored and removed, for a KV-event exporter or a router's index. Called on the thread that
  /// runs `step`. Throws `Error{kInvalidState}` when the engine has no prefix cache,
  /// `Error{kInvalidArgument}` for an empty function.
  PrefixObserverId add_prefix_observer(PrefixObserver observer) {
    if (!tree_) {
      detail::throw_error(ErrorCode::kInvalidState,
                          "add_prefix_observer: the engine has no prefix cache (prefix_cache off)");
    }
    return tree_->add_observer(std::move(observer));
  }
  /// Stops calling observer `id`. Throws `Error{kInvalidArgument}` for an unknown id,
  /// `Error{kInvalidState}` without a prefix cache.
  void remove_prefix_observer(PrefixObserverId id) {
    if (!tree_) {
      detail::throw_error(ErrorCode::kInvalidState,
                          "remove_prefix_observer: the engine has no prefix cache");
    }
    tree_->remove_observer(id);
  }
  /// The context length: prompt and output tokens of one request together.
  [[nodiscard]] std::int64_t max_model_len() const noexcept {
    return sched_->config().max_model_len;
  }
  /// The longest prompt `submit` can run: shorter than max_model_len and, with on-demand KV
  /// reservation, its pages within the pool less the scheduler's watermark (with chunked prefill
  /// off, also within one step's budget). A longer one finishes at once with kExceedsCapacity.
  /// (Other reservations can refuse shorter prompts, judged on their reservation.)
  [[nodiscard]] std::int64_t max_prompt_tokens() const noexcept {
    const SchedulerConfig& c = sched_->config();
    std::int64_t limit = c.max_model_len - 1;
    if (c.reservation == KvReservation::kOnDemand) {
      const auto watermark =
          static_cast<std::int64_t>(c.watermark * static_cast<double>(allocator_->num_blocks()));
      limit = std::min(limit, (allocator_->num_blocks() - watermark) * allocator_->block_size());
    }
    if (!c.chunked_prefill) {
      const std::int64_t chunk = c.max_prefill_chunk_tokens > 0
                                     ? std::min(c.max_prefill_chunk_tokens, c.max_batched_tokens)
                                     : c.max_batched_tokens;
      limit = std::min(limit, chunk);
    }
    return limit;
  }
  /// Whether requests are waiting or running.
  [[nodiscard]] bool has_unfinished() const noexcept { return sched_->has_unfinished(); }
  /// Engine counters.
  [[nodiscard]] const EngineStats& stats() const noexcept { return stats_; }
  /// The scheduler's counters (preemptions, prefix hits).
  [[nodiscard]] const SchedulerStats& scheduler_stats() const noexcept { return sched_->stats(); }
  /// Per-step records of the scheduler.
  [[nodiscard]] const std::vector<StepMetrics>& step_metrics() const noexcept {
    return sched_->step_metrics();
  }
  /// The model served.
  [[nodiscard]] const LlamaModel& model() const noexcept { return model_; }
  /// How K/V are stored (EngineOptions::kv_dtype).
  [[nodiscard]] DType kv_dtype() const noexcept { return options_.kv_dtype; }
  /// Bytes the KV pages take, quantization scales included, all layers.
  [[nodiscard]] std::int64_t kv_memory_bytes() const {
    return std::visit([](const auto& kv) { return kv.memory_bytes(); }, kv_);
  }
  /// Bytes one KV page of `block_size` tokens takes for `model` with K/V stored as `dtype`
  /// (scales included, all layers): what a memory budget divides by to size `num_blocks`. Throws
  /// `Error{kInvalidArgument}` for a dtype outside kEngineKVDTypes or a bad block size.
  [[nodiscard]] static std::int64_t kv_page_bytes(const LlamaModel& model, DType dtype,
                                                  std::int32_t block_size) {
    return std::visit([](const auto& kv) { return kv.memory_bytes(); },
                      make_kv_cache(dtype, model.kv_shape(1, block_size)));
  }

 private:
  // The KV cache of `dtype`'s storage type for `shape`; an Error naming kv_dtype for a dtype
  // the engine does not serve.
  static KVCache make_kv_cache(DType dtype, const PagedKVCacheShape& shape) {
    switch (dtype) {
      case DType::kFloat16:
        return KVCache(std::in_place_type<PagedKVCache<float16>>, shape);
      case DType::kBFloat16:
        return KVCache(std::in_place_type<PagedKVCache<bfloat16>>, shape);
      case DType::kFloat8E4M3:
        return KVCache(std::in_place_type<PagedKVCache<float8_e4m3>>, shape);
      case DType::kFloat8E5M2:
        return KVCache(std::in_place_type<PagedKVCache<float8_e5m2>>, shape);
      case DType::kInt8:
        return KVCache(std::in_place_type<PagedKVCache<std::int8_t>>, shape);
      case DType::kInt4:
        return KVCache(std::in_place_type<PagedKVCache<std::uint8_t>>, shape);
      case DType::kFloat32:
        break;
    }
    detail::fail_arg(ErrorCode::kInvalidArgument, "kv_dtype", to_string(dtype),
                     "is not a KV format the engine serves; one of",
                     "fp16, bf16, fp8_e4m3, fp8_e5m2, int8, int4");
  }

  void collect_finished();
  // Writes the tokens a sampling sequence emits from its logit rows (1 + drafts) into `out`;
  // returns how many.
  std::size_t pick_tokens(const float* rows, std::span<const TokenId> drafts, PerRequest& req,
                          TokenId* out);
  void stream(RequestId id, std::span<const TokenId> all);
  void emit(RequestId id, const PerRequest& req, std::span<const TokenId> tokens);
  void propose_drafts(RequestId id);
};

}  // namespace inferkit

#include <inferkit/engine/detail/engine_step.hpp>
