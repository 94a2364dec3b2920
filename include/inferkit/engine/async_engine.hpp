// SPDX-License-Identifier: Apache-2.0
// AsyncEngine: the thread-safe front of an Engine, for servers. One engine thread owns the
// Engine (scheduler, KV cache, model) and runs its steps; any number of client threads submit
// requests, stream their tokens and text, and cancel them, through handles. The waiting queue is
// bounded (requests and prompt tokens): overflow is an immediate kOverloaded, never a blocked
// caller. Text is detokenized on the engine thread (partial UTF-8 held back) and matched against
// each request's stop strings. Counters and latency histograms live in constant memory.
// Threads: every AsyncEngine and CompletionHandle call may run concurrently from any threads
// (concurrent shutdowns wait for the first); one consumer per handle.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <inferkit/core/error.hpp>
#include <inferkit/engine/engine.hpp>
#include <inferkit/engine/latency_histogram.hpp>
#include <inferkit/engine/stop_string_matcher.hpp>
#include <inferkit/model/bpe_tokenizer.hpp>
#include <inferkit/model/stream_decoder.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace inferkit {

/// How an AsyncEngine is built.
struct AsyncEngineOptions {
  EngineOptions engine;  ///< the engine (its scheduler never keeps per-step records here)
  std::int32_t max_queued_requests = 256;           ///< requests waiting for admission, >= 1
  std::int64_t max_queued_prompt_tokens = 1 << 20;  ///< their prompt tokens together, >= 1
};

/// What a client asks for.
struct CompletionRequest {
  std::vector<TokenId> prompt;            ///< >= 1 token, each in the vocabulary
  GenerationParams params;                ///< length, sampling, seed, stop tokens, log-probs
  std::vector<std::string> stop_strings;  ///< text that ends the output (not returned)
};

/// Why a completion ended.
enum class CompletionEnd : std::uint8_t {
  kNone,             ///< not finished
  kStop,             ///< a stop token (end of sequence included) or a stop string
  kLength,           ///< max_new_tokens, or the context length
  kCancelled,        ///< cancelled by its client or by a drain deadline
  kExceedsCapacity,  ///< its prompt can never fit the KV pool
  kEngineError,      ///< the engine thread failed (see AsyncEngine::last_error)
};

/// What a handle has received since the last `next`, and, once finished, the summary.
struct CompletionUpdate {
  std::vector<TokenId> tokens;               ///< new output tokens
  std::string text;                          ///< new text: whole UTF-8 characters, no stop string
  std::vector<TokenLogprobs> logprobs;       ///< one per new token, when asked
  bool finished = false;                     ///< the last update: the fields below are set
  CompletionEnd end = CompletionEnd::kNone;  ///< why it ended
  std::string stop_string;                   ///< the stop string that ended it, if one did
  std::int64_t prompt_tokens = 0;            ///< the prompt's length
  std::int64_t cached_prompt_tokens = 0;     ///< served by the prefix cache
  std::int64_t completion_tokens = 0;        ///< output tokens in all (a stop token included)

  /// Adds a later update `later` of the same request: its tokens, text and log-probabilities
  /// follow these, and a final `later` sets the summary. Folding every update of a handle into
  /// one, in order, gives the whole completion.
  void append(CompletionUpdate&& later) {
    tokens.insert(tokens.end(), later.tokens.begin(), later.tokens.end());
    text += later.text;
    for (TokenLogprobs& lp : later.logprobs) logprobs.push_back(std::move(lp));
    if (!later.finished) return;
    finished = true;
    end = later.end;
    stop_string = std::move(later.stop_string);
    prompt_tokens = later.prompt_tokens;
    cached_prompt_tokens = later.cached_prompt_tokens;
    completion_tokens = later.completion_tokens;
  }
};

/// The most completions of one prompt `AsyncEngine::submit_n` takes (OpenAI's `n`).
inline constexpr std::int32_t kMaxCompletions = 16;

/// Result of `AsyncEngine::submit`.
enum class SubmitStatus : std::uint8_t {
  kAccepted,    ///< queued: the handle streams it
  kOverloaded,  ///< the waiting queue is full (requests or prompt tokens): try again later
  kDraining,    ///< the engine stopped accepting (drain or shutdown)
};

/// Counters since start (monotonic) and gauges now: what a server exports as metrics.
struct AsyncEngineMetrics {
  std::int32_t running = 0;              ///< requests running
  std::int32_t waiting = 0;              ///< requests waiting (queued, or preempted)
  std::int32_t kv_pages_total = 0;       ///< KV pages in the pool
  std::int32_t kv_pages_used = 0;        ///< held by requests (neither free nor cached-evictable)
  std::int32_t kv_pages_cached = 0;      ///< free but holding cached prefixes
  std::int64_t requests_accepted = 0;    ///< submitted and queued
  std::int64_t requests_overloaded = 0;  ///< refused: queue full
  std::int64_t requests_finished_stop = 0;    ///< ended by a stop token or string
  std::int64_t requests_finished_length = 0;  ///< ended at their length limit
  std::int64_t requests_cancelled = 0;        ///< cancelled (client or drain deadline)
  std::int64_t requests_failed = 0;           ///< exceeds capacity or engine error
  std::int64_t prompt_tokens = 0;             ///< prompts of finished requests
  std::int64_t cached_prompt_tokens = 0;      ///< of which served by the prefix cache
  std::int64_t generation_tokens = 0;         ///< output tokens delivered
  std::int64_t preemptions = 0;               ///< scheduler preemptions
  std::int64_t steps = 0;                     ///< engine steps
  LatencyHistogram ttft;                      ///< arrival to first token, seconds
  LatencyHistogram inter_token;               ///< between consecutive tokens of a request, seconds
  LatencyHistogram queue_time;                ///< arrival to first scheduled, seconds
  LatencyHistogram e2e;                       ///< arrival to finish, seconds
};

namespace detail {

// State shared by a handle and the engine thread, guarded by its own mutex.
struct CompletionState {
  std::mutex mu;
  std::condition_variable cv;
  CompletionUpdate pending;  // accumulated since the client's last take
  bool finished = false;
};

// State shared by the front, the engine thread and the handles (for cancel), guarded by `mu`.
struct FrontShared {
  struct Submission {
    std::vector<RequestId> ids;  // one per completion of the prompt (n)
    CompletionRequest request;
    std::vector<std::shared_ptr<CompletionState>> states;  // [ids]
    double arrival_s;
  };
  std::mutex mu;
  std::condition_variable wake;  // the engine thread waits on it when idle
  std::deque<Submission> inbox;
  std::vector<RequestId> cancels;
  bool accepting = true;
  bool stop = false;  // the engine thread exits once nothing runs
  std::optional<std::chrono::steady_clock::time_point> deadline;  // then cancels the rest
  std::int32_t queued_requests = 0;                               // accepted, not yet admitted
  std::int64_t queued_prompt_tokens = 0;
  RequestId next_id = 0;
  std::int64_t accepted = 0;
  std::int64_t overloaded = 0;
};

}  // namespace detail

/// A client's view of one request: take its updates, wait for them, cancel it. Safe to use from
/// any thread (one consumer at a time takes the updates); outlives the engine.
class CompletionHandle {
 public:
  /// An empty handle (assign one from `AsyncEngine::submit`).
  CompletionHandle() = default;
  /// Made by `AsyncEngine::submit`.
  CompletionHandle(RequestId id, std::shared_ptr<detail::CompletionState> state,
                   std::weak_ptr<detail::FrontShared> front)
      : id_(id), state_(std::move(state)), front_(std::move(front)) {}

  /// The engine's id of the request.
  [[nodiscard]] RequestId id() const noexcept { return id_; }

  /// Waits up to `timeout` for something new, then moves out what arrived since the last call
  /// (possibly nothing). After the update with `finished`, returns empty updates.
  template <class Rep, class Period>
  [[nodiscard]] CompletionUpdate next(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock lock(state_->mu);
    state_->cv.wait_for(lock, timeout, [&] { return has_news(); });
    return take();
  }

  /// Waits until the request finishes; returns everything not taken yet (finished is true).
  [[nodiscard]] CompletionUpdate wait() {
    std::unique_lock lock(state_->mu);
    state_->cv.wait(lock, [&] { return state_->finished; });
    return take();
  }

  /// Asks the engine to end the request (its KV pages are freed at the next step); the handle
  /// then finishes with kCancelled, unless it finished first. Idempotent.
  void cancel() {
    if (const auto front = front_.lock()) {
      {
        std::lock_guard lock(front->mu);
        front->cancels.push_back(id_);
      }
      front->wake.notify_one();
    }
  }

  /// Whether the final update has been produced (taken or not).
  [[nodiscard]] bool finished() const {
    std::lock_guard lock(state_->mu);
    return state_->finished;
  }

 private:
  [[nodiscard]] bool has_news() const {
    const CompletionUpdate& p = state_->pending;
    return !p.tokens.empty() || !p.text.empty() || (state_->finished && !delivered_final_);
  }
  CompletionUpdate take() {
    CompletionUpdate out = std::exchange(state_->pending, {});
    if (state_->finished && !delivered_final_) {
      delivered_final_ = true;
    } else {
      out.finished = false;
    }
    return out;
  }

  RequestId id_ = -1;
  std::shared_ptr<detail::CompletionState> state_;
  std::weak_ptr<detail::FrontShared> front_;
  bool delivered_final_ = false;
};

/// The thread-safe front of an Engine over `model` and `tokenizer` (both must outlive it).
class AsyncEngine {
 public:
  /// Builds the engine and starts its thread. Throws `Error{kInvalidArgument}` for bad options.
  AsyncEngine(const LlamaModel& model, const BpeTokenizer& tokenizer, AsyncEngineOptions options)
      : tokenizer_(tokenizer), options_(std::move(options)) {
    check_arg(options_.max_queued_requests >= 1, ErrorCode::kInvalidArgument, "max_queued_requests",
              options_.max_queued_requests, "must be >=", 1);
    check_arg(options_.max_queued_prompt_tokens >= 1, ErrorCode::kInvalidArgument,
              "max_queued_prompt_tokens", options_.max_queued_prompt_tokens, "must be >=", 1);
    options_.engine.scheduler.record_step_metrics = false;  // would grow per step
    engine_ = std::make_unique<Engine>(model, options_.engine);
    vocab_ = model.config().vocab_size;
    max_prompt_tokens_ = engine_->max_prompt_tokens();
    max_model_len_ = engine_->max_model_len();
    metrics_.kv_pages_total = engine_->kv_pages_total();
    engine_->set_event_callback([this](const TokenEvent& e) { on_event(e); });
    thread_ = std::thread([this] { loop(); });
  }

  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  /// Cancels whatever still runs and joins the engine thread.
  ~AsyncEngine() { shutdown(std::chrono::seconds(0)); }

  /// Validates `request` on the calling thread (throws `Error{kInvalidArgument}` naming the
  /// field: empty prompt, a token outside the vocabulary, a prompt of more than
  /// `max_prompt_tokens()`, bad sampling or stop strings), then queues it. Returns the status and,
  /// when accepted, the handle. Never blocks on the engine.
  std::pair<SubmitStatus, std::optional<CompletionHandle>> submit(CompletionRequest request) {
    auto [status, handles] = submit_n(std::move(request), 1);
    if (handles.empty()) return {status, std::nullopt};
    return {status, std::move(handles[0])};
  }

  /// As `submit`, for `n` completions of one prompt (OpenAI's `n`): the prompt is computed once
  /// and its KV pages shared (Engine::submit_n); completion i samples with seed
  /// `params.seed + i`. They count as one request in the waiting queue. Returns n handles when
  /// accepted. Throws `Error{kInvalidArgument}` also for `n` outside [1, kMaxCompletions].
  std::pair<SubmitStatus, std::vector<CompletionHandle>> submit_n(CompletionRequest request,
                                                                  std::int32_t n) {
    check_arg(n >= 1 && n <= kMaxCompletions, ErrorCode::kInvalidArgument, "n", n,
              "must be in [1, kMaxCompletions] with kMaxCompletions =", kMaxCompletions);
    validate_request(request);
    const auto prompt_tokens = static_cast<std::int64_t>(request.prompt.size());
    detail::FrontShared::Submission sub{{}, std::move(request), {}, seconds_now()};
    std::vector<CompletionHandle> handles;
    for (std::int32_t i = 0; i < n; ++i) {
      sub.states.push_back(std::make_shared<detail::CompletionState>());
    }
    {
      std::lock_guard lock(shared_->mu);
      if (!shared_->accepting) return {SubmitStatus::kDraining, {}};
      if (shared_->queued_requests + 1 > options_.max_queued_requests ||
          shared_->queued_prompt_tokens + prompt_tokens > options_.max_queued_prompt_tokens) {
        ++shared_->overloaded;
        return {SubmitStatus::kOverloaded, {}};
      }
      for (std::int32_t i = 0; i < n; ++i) {
        sub.ids.push_back(shared_->next_id++);
        handles.emplace_back(sub.ids.back(), sub.states[static_cast<std::size_t>(i)], shared_);
      }
      ++shared_->queued_requests;
      shared_->queued_prompt_tokens += prompt_tokens;
      ++shared_->accepted;
      shared_->inbox.push_back(std::move(sub));
    }
    shared_->wake.notify_one();
    return {SubmitStatus::kAccepted, std::move(handles)};
  }

  /// Stops accepting requests and waits until every accepted one has finished, or until
  /// `deadline` from now, when the rest are cancelled. Returns true if all finished by themselves.
  /// Every handle gets its final update either way.
  template <class Rep, class Period>
  bool drain(std::chrono::duration<Rep, Period> deadline) {
    {
      std::lock_guard lock(shared_->mu);
      shared_->accepting = false;
      const auto at = std::chrono::steady_clock::now() +
                      std::chrono::duration_cast<std::chrono::steady_clock::duration>(deadline);
      if (!shared_->deadline || at < *shared_->deadline) shared_->deadline = at;
    }
    shared_->wake.notify_one();
    std::unique_lock lock(idle_mu_);
    idle_cv_.wait(lock, [&] { return idle_ || exited_; });
    return !cancelled_by_deadline_;
  }

  /// Drains within `deadline` and joins the engine thread. Idempotent, and safe from several
  /// threads at once: the later callers wait for the first to finish.
  template <class Rep, class Period>
  void shutdown(std::chrono::duration<Rep, Period> deadline) {
    std::lock_guard once(shutdown_mu_);  // one joiner: std::thread::join is not thread-safe
    if (!thread_.joinable()) return;
    (void)drain(deadline);
    {
      std::lock_guard lock(shared_->mu);
      shared_->stop = true;
    }
    shared_->wake.notify_one();
    thread_.join();
  }

  /// Whether new requests are accepted (false once draining).
  [[nodiscard]] bool accepting() const {
    std::lock_guard lock(shared_->mu);
    return shared_->accepting;
  }

  /// A copy of the counters, gauges and histograms.
  [[nodiscard]] AsyncEngineMetrics metrics() const {
    AsyncEngineMetrics m;
    {
      std::lock_guard lock(metrics_mu_);
      m = metrics_;
    }
    std::lock_guard lock(shared_->mu);
    m.requests_accepted = shared_->accepted;
    m.requests_overloaded = shared_->overloaded;
    m.waiting += static_cast<std::int32_t>(shared_->inbox.size());
    return m;
  }

  /// The longest prompt accepted (tokens).
  [[nodiscard]] std::int64_t max_prompt_tokens() const noexcept { return max_prompt_tokens_; }
  /// The engine's context length (prompt and output together).
  [[nodiscard]] std::int64_t max_model_len() const noexcept { return max_model_len_; }
  /// The tokenizer the text comes from.
  [[nodiscard]] const BpeTokenizer& tokenizer() const noexcept { return tokenizer_; }
  /// The message of the last exception the engine thread caught (empty if none).
  [[nodiscard]] std::string last_error() const {
    std::lock_guard lock(metrics_mu_);
    return last_error_;
  }

 private:
  // Per request, on the engine thread only.
  struct Live {
    std::shared_ptr<detail::CompletionState> state;
    RequestId front_id = 0;  // the handle's id (the engine numbers requests itself)
    StreamDecoder decoder;
    StopStringMatcher stops;
    bool logprobs = false;
    bool queued = true;  // counted in the waiting queue until admitted
    std::int64_t prompt_tokens = 0;
    std::int64_t delivered = 0;  // output tokens delivered
    double arrival_s = 0.0;
    double last_token_s = -1.0;
    bool stop_requested = false;  // a stop string matched: abort after this step
  };

  static double seconds_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void validate_request(const CompletionRequest& r) const {
    check_arg(!r.prompt.empty(), ErrorCode::kInvalidArgument, "prompt.size()", r.prompt.size(),
              "must be >=", 1);
    check_arg(static_cast<std::int64_t>(r.prompt.size()) <= max_prompt_tokens_,
              ErrorCode::kInvalidArgument, "prompt.size()", r.prompt.size(),
              "must be <= max_prompt_tokens =", max_prompt_tokens_);
    for (std::size_t i = 0; i < r.prompt.size(); ++i) {
      if (r.prompt[i] < 0 || r.prompt[i] >= vocab_) [[unlikely]] {
        check_arg(false, ErrorCode::kInvalidArgument, "prompt[" + std::to_string(i) + "]",
                  r.prompt[i], "must be in [0, vocab) with vocab =", vocab_);
      }
    }
    check_arg(r.params.max_new_tokens >= 1, ErrorCode::kInvalidArgument, "max_new_tokens",
              r.params.max_new_tokens, "must be >=", 1);
    validate(r.params.sampling);
    check_arg(!r.params.logprobs ||
                  (r.params.top_logprobs >= 0 && r.params.top_logprobs <= kMaxTopLogprobs),
              ErrorCode::kInvalidArgument, "top_logprobs", r.params.top_logprobs,
              "must be in [0, kMaxTopLogprobs] with kMaxTopLogprobs =", kMaxTopLogprobs);
    (void)StopStringMatcher(r.stop_strings);  // throws for bad stop strings
  }

  // Engine thread: new tokens of one request.
  void on_event(const TokenEvent& e) {
    const auto it = live_.find(e.id);
    if (it == live_.end()) return;
    Live& l = it->second;
    if (l.stop_requested) return;  // tokens after a stop string: not delivered
    const double now = seconds_now();
    CompletionUpdate add;
    for (std::size_t i = 0; i < e.tokens.size() && !l.stops.stopped(); ++i) {
      add.tokens.push_back(e.tokens[i]);
      if (l.logprobs && i < e.logprobs.size()) add.logprobs.push_back(e.logprobs[i]);
      add.text += l.stops.push(l.decoder.push(e.tokens[i]));
    }
    if (l.stops.stopped()) l.stop_requested = true;
    {
      std::lock_guard lock(metrics_mu_);
      const auto n = static_cast<double>(add.tokens.size());
      if (l.last_token_s < 0) {
        metrics_.ttft.observe(now - l.arrival_s);
        for (std::size_t i = 1; i < add.tokens.size(); ++i) metrics_.inter_token.observe(0.0);
      } else {
        for (std::size_t i = 0; i < add.tokens.size(); ++i) {
          metrics_.inter_token.observe((now - l.last_token_s) / n);
        }
      }
      metrics_.generation_tokens += static_cast<std::int64_t>(add.tokens.size());
    }
    l.last_token_s = now;
    l.delivered += static_cast<std::int64_t>(add.tokens.size());
    publish(l, std::move(add), false);
  }

  // Engine thread: appends `add` to the handle's pending update and wakes its client.
  static void publish(Live& l, CompletionUpdate add, bool final) {
    add.finished = final;
    {
      std::lock_guard lock(l.state->mu);
      l.state->pending.append(std::move(add));
      if (final) l.state->finished = true;
    }
    l.state->cv.notify_all();
  }

  void unqueue(Live& l) {
    if (!l.queued) return;
    l.queued = false;
    std::lock_guard lock(shared_->mu);
    --shared_->queued_requests;
    shared_->queued_prompt_tokens -= l.prompt_tokens;
  }

  // Engine thread: the final update of request `id`.
  void finish(RequestId id, CompletionEnd end, const RequestMetrics* m) {
    const auto it = live_.find(id);
    if (it == live_.end()) return;
    Live& l = it->second;
    unqueue(l);
    CompletionUpdate last;
    if (end != CompletionEnd::kCancelled) {
      last.text = l.stops.stopped() ? std::string() : l.stops.push(l.decoder.finish());
      if (!l.stops.stopped()) last.text += l.stops.finish();
    }
    if (l.stops.stopped()) {
      end = CompletionEnd::kStop;
      last.stop_string = std::string(*l.stops.matched());
    }
    last.end = end;
    last.prompt_tokens = l.prompt_tokens;
    last.completion_tokens = l.delivered;
    if (m != nullptr) last.cached_prompt_tokens = m->cached_prompt_tokens;
    {
      std::lock_guard lock(metrics_mu_);
      switch (end) {
        case CompletionEnd::kStop:
          ++metrics_.requests_finished_stop;
          break;
        case CompletionEnd::kLength:
          ++metrics_.requests_finished_length;
          break;
        case CompletionEnd::kCancelled:
          ++metrics_.requests_cancelled;
          break;
        default:
          ++metrics_.requests_failed;
      }
      metrics_.prompt_tokens += l.prompt_tokens;
      metrics_.cached_prompt_tokens += last.cached_prompt_tokens;
      if (m != nullptr) {
        metrics_.queue_time.observe(m->first_scheduled_s < 0 ? -1.0
                                                             : m->first_scheduled_s - m->arrival_s);
      }
      metrics_.e2e.observe(seconds_now() - l.arrival_s);
    }
    publish(l, std::move(last), true);
    engine_id_.erase(l.front_id);
    live_.erase(it);
  }

  // Engine thread: takes new submissions and cancellations; returns false to exit.
  bool take_work(std::vector<detail::FrontShared::Submission>& subs,
                 std::vector<RequestId>& cancels) {
    std::unique_lock lock(shared_->mu);
    const auto has_work = [&] {
      return !shared_->inbox.empty() || !shared_->cancels.empty() || shared_->stop ||
             engine_->has_unfinished() ||
             (shared_->deadline && std::chrono::steady_clock::now() >= *shared_->deadline &&
              !live_.empty());
    };
    bool was_idle = false;
    while (!has_work()) {
      if (!shared_->accepting) {  // drained: nothing runs and nothing more can come
        std::lock_guard idle(idle_mu_);
        idle_ = was_idle = true;
        idle_cv_.notify_all();
      }
      shared_->wake.wait(lock);
    }
    if (was_idle) {
      std::lock_guard idle(idle_mu_);
      idle_ = false;
    }
    while (!shared_->inbox.empty()) {
      subs.push_back(std::move(shared_->inbox.front()));
      shared_->inbox.pop_front();
    }
    cancels.swap(shared_->cancels);
    if (shared_->deadline && std::chrono::steady_clock::now() >= *shared_->deadline) {
      for (const auto& [id, l] : live_) cancels.push_back(l.front_id);
      for (const auto& s : subs) cancels.insert(cancels.end(), s.ids.begin(), s.ids.end());
      if (!cancels.empty()) cancelled_by_deadline_ = true;
    }
    return !(shared_->stop && shared_->inbox.empty() && live_.empty() && subs.empty() &&
             !engine_->has_unfinished());
  }

  void admit(detail::FrontShared::Submission& s) {
    const CompletionRequest& r = s.request;
    std::vector<RequestId> ids;
    if (s.ids.size() == 1) {
      ids.push_back(engine_->submit(r.prompt, r.params));
    } else {
      std::vector<std::uint64_t> seeds;
      for (std::size_t i = 0; i < s.ids.size(); ++i) seeds.push_back(r.params.seed + i);
      ids = engine_->submit_n(r.prompt, r.params, seeds);
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      Live l{s.states[i], s.ids[i], StreamDecoder(tokenizer_, /*render_special=*/false),
             StopStringMatcher(r.stop_strings)};
      l.logprobs = r.params.logprobs;
      l.prompt_tokens = static_cast<std::int64_t>(r.prompt.size());
      l.arrival_s = s.arrival_s;
      l.queued = i == 0;  // the group is one entry of the waiting queue
      engine_id_.emplace(s.ids[i], ids[i]);
      live_.emplace(ids[i], std::move(l));
    }
  }

  void collect() {
    for (RequestOutcome& o : engine_->take_finished()) {
      CompletionEnd end = CompletionEnd::kStop;
      switch (o.reason) {
        case FinishReason::kLength:
          end = CompletionEnd::kLength;
          break;
        case FinishReason::kAborted:
          end = CompletionEnd::kCancelled;
          break;
        case FinishReason::kExceedsCapacity:
          end = CompletionEnd::kExceedsCapacity;
          break;
        default:
          end = CompletionEnd::kStop;
      }
      const auto it = live_.find(o.id);
      if (it != live_.end() && it->second.stop_requested) end = CompletionEnd::kStop;
      finish(o.id, end, &o.metrics);
    }
  }

  void update_gauges() {
    for (auto& [id, l] : live_) {
      if (!l.queued) continue;
      const std::optional<RequestState> st = engine_->state(id);
      if (!st || *st != RequestState::kWaiting) unqueue(l);
    }
    std::lock_guard lock(metrics_mu_);
    metrics_.running = engine_->num_running();
    metrics_.waiting = engine_->num_waiting();
    metrics_.kv_pages_used =
        engine_->kv_pages_total() - engine_->kv_pages_free() - engine_->kv_pages_cached();
    metrics_.kv_pages_cached = engine_->kv_pages_cached();
    metrics_.preemptions = engine_->scheduler_stats().preemptions;
    metrics_.steps = engine_->stats().steps;
  }

  void loop() {
    std::vector<detail::FrontShared::Submission> subs;
    std::vector<RequestId> cancels;
    for (;;) {
      subs.clear();
      cancels.clear();
      if (!take_work(subs, cancels)) break;
      try {
        // Submissions first, so a cancel that raced its own submission finds the request.
        for (auto& s : subs) admit(s);
        for (RequestId front_id : cancels) {
          const auto it = engine_id_.find(front_id);
          if (it != engine_id_.end()) (void)engine_->abort(it->second);
        }
        collect();
        if (engine_->has_unfinished()) (void)engine_->step();
        std::vector<RequestId> stopped;
        for (const auto& [id, l] : live_) {
          if (l.stop_requested) stopped.push_back(id);
        }
        for (RequestId id : stopped) (void)engine_->abort(id);  // frees its KV pages now
        collect();
        update_gauges();
      } catch (const std::exception& e) {
        fail_all(e.what());
      }
    }
    std::lock_guard lock(idle_mu_);
    exited_ = true;
    idle_cv_.notify_all();
  }

  // Engine thread: an unexpected exception. Every request ends with kEngineError and the engine
  // is rebuilt, so one failure never wedges the server.
  void fail_all(const std::string& what) {
    {
      std::lock_guard lock(metrics_mu_);
      last_error_ = what;
    }
    std::vector<RequestId> ids;
    for (const auto& [id, l] : live_) ids.push_back(id);
    for (RequestId id : ids) finish(id, CompletionEnd::kEngineError, nullptr);
    engine_ = std::make_unique<Engine>(engine_->model(), options_.engine);
    engine_->set_event_callback([this](const TokenEvent& e) { on_event(e); });
  }

  const BpeTokenizer& tokenizer_;
  AsyncEngineOptions options_;
  std::unique_ptr<Engine> engine_;  // engine thread only
  std::int32_t vocab_ = 0;
  std::int64_t max_prompt_tokens_ = 0;
  std::int64_t max_model_len_ = 0;
  std::unordered_map<RequestId, Live> live_;            // by engine id; engine thread only
  std::unordered_map<RequestId, RequestId> engine_id_;  // front id -> engine id; likewise
  std::shared_ptr<detail::FrontShared> shared_ = std::make_shared<detail::FrontShared>();
  mutable std::mutex metrics_mu_;
  AsyncEngineMetrics metrics_;
  std::string last_error_;
  std::mutex idle_mu_;
  std::mutex shutdown_mu_;  // serializes shutdown's join
  std::condition_variable idle_cv_;
  bool idle_ = false;
  bool exited_ = false;
  bool cancelled_by_deadline_ = false;  // engine thread writes, drain reads after idle
  std::thread thread_;
};

}  // namespace inferkit
