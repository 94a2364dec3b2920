// SPDX-License-Identifier: Apache-2.0
// Tests for engine/async_engine.hpp on SmolLM2-135M-Instruct: many client threads submitting,
// streaming, cancelling and draining at random against a running engine, with every greedy
// output equal to the same request run alone on a plain Engine; stop strings, log-probabilities,
// the bounded queue, drain and bad input. At the end of each test every KV page is free or
// cached. Run under ThreadSanitizer by scripts/test.sh (the tsan preset).
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <inferkit/engine/async_engine.hpp>
#include <inferkit/engine/engine.hpp>
#include <inferkit/model/bpe_tokenizer.hpp>
#include <inferkit/model/gguf.hpp>
#include <inferkit/model/llama_model.hpp>
#include <map>
#include <optional>
#include <string>
#include <tests/support/error_code.hpp>
#include <tests/support/smollm2.hpp>
#include <tests/support/teacher_forced.hpp>
#include <thread>
#include <vector>

namespace {

using namespace inferkit;
using namespace std::chrono_literals;

#if defined(INFERKIT_TEST_SANITIZED) || defined(INFERKIT_TEST_TSAN)
constexpr int kClients = 4;  // sanitized builds run 10-20x slower
constexpr int kPerClient = 3;
constexpr std::int64_t kMaxNew = 6;
#else
constexpr int kClients = 8;
constexpr int kPerClient = 4;
constexpr std::int64_t kMaxNew = 16;
#endif

const char* const kTexts[] = {
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "Paris is the capital of France. Berlin is the capital of",
    "1, 2, 3, 4, 5, 6, 7, 8,",
    "Once upon a time, in a small village by the sea, there lived",
    "Machine learning is a field of study in artificial intelligence concerned with",
};
constexpr int kNumTexts = 6;

AsyncEngineOptions front_options(const test::LoadedSmolLM2& m) {
  AsyncEngineOptions o;
  o.engine.num_blocks = 512;
  o.engine.eos_tokens = m.end_tokens;
  return o;
}

// Greedy outputs of each text alone, on a plain Engine with the front's options.
const std::vector<std::vector<TokenId>>& solo_outputs(const test::LoadedSmolLM2& m) {
  static const std::vector<std::vector<TokenId>> outputs = [&] {
    std::vector<std::vector<TokenId>> out;
    for (const char* text : kTexts) {
      Engine engine(m.model, front_options(m).engine);
      GenerationParams p;
      p.max_new_tokens = kMaxNew;
      (void)engine.submit(m.tokenizer.encode(text, false), p);
      engine.run();
      out.push_back(engine.take_finished().at(0).output);
    }
    return out;
  }();
  return outputs;
}

// Takes every update until the final one.
CompletionUpdate collect(CompletionHandle& h) {
  CompletionUpdate all;
  while (!all.finished) all.append(h.next(50ms));
  return all;
}

void check_pool_clean(const AsyncEngine& front) {
  // Gauges are published after each step; wait for the engine thread's last one.
  for (int i = 0; i < 200; ++i) {
    const AsyncEngineMetrics m = front.metrics();
    if (m.running == 0 && m.waiting == 0 && m.kv_pages_used == 0) break;
    std::this_thread::sleep_for(10ms);
  }
  const AsyncEngineMetrics m = front.metrics();
  CHECK(m.running == 0);
  CHECK(m.waiting == 0);
  CHECK(m.kv_pages_used == 0);  // every page is free or cached
}

}  // namespace

TEST_CASE("CompletionUpdate: appending a handle's updates in order gives the whole completion",
          "[engine][async_engine]") {
  Rng rng(2026, 0);
  for (int trial = 0; trial < 50; ++trial) {
    // A whole completion, cut at random points into updates; only the last is final.
    CompletionUpdate whole;
    const int n = 1 + static_cast<int>(rng.next_u32() % 12);
    for (int i = 0; i < n; ++i) {
      whole.tokens.push_back(static_cast<TokenId>(rng.next_u32() % 1000));
      whole.text += std::string(1 + rng.next_u32() % 3, static_cast<char>('a' + i % 26));
      whole.logprobs.push_back({-static_cast<float>(i), {{whole.tokens.back(), -0.5F}}});
    }
    whole.finished = true;
    whole.end = CompletionEnd::kStop;
    whole.stop_string = "###";
    whole.prompt_tokens = 7;
    whole.cached_prompt_tokens = 3;
    whole.completion_tokens = n;
    std::vector<CompletionUpdate> parts(1 + rng.next_u32() % 4);
    // Token i (with its log-probabilities) goes to a part no earlier than token i - 1's.
    std::size_t part = 0;
    std::size_t text_at = 0;
    for (int i = 0; i < n; ++i) {
      if (rng.next_u32() % 3 == 0 && part + 1 < parts.size()) ++part;
      parts[part].tokens.push_back(whole.tokens[i]);
      parts[part].logprobs.push_back(whole.logprobs[i]);
      const std::size_t cut = text_at + (whole.text.size() - text_at) / (n - i);
      parts[part].text += whole.text.substr(text_at, cut - text_at);
      text_at = cut;
    }
    CompletionUpdate& last = parts.back();
    last.finished = true;
    last.end = whole.end;
    last.stop_string = whole.stop_string;
    last.prompt_tokens = whole.prompt_tokens;
    last.cached_prompt_tokens = whole.cached_prompt_tokens;
    last.completion_tokens = whole.completion_tokens;
    CompletionUpdate folded;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      CHECK_FALSE(folded.finished);
      folded.append(std::move(parts[i]));
    }
    CHECK(folded.tokens == whole.tokens);
    CHECK(folded.text == whole.text);
    REQUIRE(folded.logprobs.size() == whole.logprobs.size());
    for (std::size_t i = 0; i < whole.logprobs.size(); ++i) {
      CHECK(folded.logprobs[i].logprob == whole.logprobs[i].logprob);
      CHECK(folded.logprobs[i].top.size() == whole.logprobs[i].top.size());
    }
    CHECK(folded.finished);
    CHECK(folded.end == whole.end);
    CHECK(folded.stop_string == whole.stop_string);
    CHECK(folded.prompt_tokens == whole.prompt_tokens);
    CHECK(folded.cached_prompt_tokens == whole.cached_prompt_tokens);
    CHECK(folded.completion_tokens == whole.completion_tokens);
  }
}

TEST_CASE("AsyncEngine: concurrent clients stream, cancel and get each request's solo output",
          "[engine][async_engine]") {
  INFERKIT_NEED_SMOLLM2(m);
  const auto& solo = solo_outputs(*m);
  AsyncEngine front(m->model, m->tokenizer, front_options(*m));
  std::atomic<int> completed{0};
  std::atomic<int> cancelled{0};
  std::vector<std::thread> clients;
  std::vector<std::string> failures(kClients);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      Rng rng(100 + static_cast<std::uint64_t>(c), 0);
      for (int r = 0; r < kPerClient; ++r) {
        const int t = static_cast<int>(rng.next_u32() % kNumTexts);
        CompletionRequest req;
        req.prompt = m->tokenizer.encode(kTexts[t], false);
        req.params.max_new_tokens = kMaxNew;
        auto [status, handle] = front.submit(req);
        if (status != SubmitStatus::kAccepted) {
          failures[static_cast<std::size_t>(c)] = "not accepted";
          return;
        }
        const bool cancel = rng.next_u32() % 4 == 0;
        if (cancel) {
          std::this_thread::sleep_for(std::chrono::milliseconds(rng.next_u32() % 20));
          handle->cancel();
        }
        const CompletionUpdate u = collect(*handle);
        const auto& expected = solo[static_cast<std::size_t>(t)];
        if (u.end == CompletionEnd::kCancelled) {
          ++cancelled;
          // What was streamed before the cancel is a prefix of the solo output.
          if (u.tokens.size() > expected.size() ||
              !std::equal(u.tokens.begin(), u.tokens.end(), expected.begin())) {
            failures[static_cast<std::size_t>(c)] = "cancelled stream is not a prefix";
          }
          continue;
        }
        ++completed;
        if (u.tokens != expected) failures[static_cast<std::size_t>(c)] = "tokens differ";
        if (u.text != m->tokenizer.decode(expected, false)) {
          failures[static_cast<std::size_t>(c)] = "text differs";
        }
        if (u.completion_tokens != static_cast<std::int64_t>(expected.size()) ||
            u.prompt_tokens != static_cast<std::int64_t>(req.prompt.size())) {
          failures[static_cast<std::size_t>(c)] = "usage differs";
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (const std::string& f : failures) CHECK(f.empty());
  CHECK(completed + cancelled == kClients * kPerClient);
  check_pool_clean(front);
  const AsyncEngineMetrics met = front.metrics();
  CHECK(met.requests_accepted == kClients * kPerClient);
  CHECK(met.requests_cancelled + met.requests_finished_stop + met.requests_finished_length ==
        kClients * kPerClient);
  CHECK(met.ttft.count() + static_cast<std::uint64_t>(met.requests_cancelled) >=
        static_cast<std::uint64_t>(kClients * kPerClient));
}

TEST_CASE("AsyncEngine: a stop string ends the text before it, across token boundaries",
          "[engine][async_engine]") {
  INFERKIT_NEED_SMOLLM2(m);
  const auto& solo = solo_outputs(*m);
  AsyncEngine front(m->model, m->tokenizer, front_options(*m));
  const std::string full = m->tokenizer.decode(solo[2], false);
  REQUIRE(full.size() >= 6);
  // A stop string that starts inside one token's text and ends inside a later one's.
  const std::string stop = full.substr(2, 4);
  CompletionRequest req;
  req.prompt = m->tokenizer.encode(kTexts[2], false);
  req.params.max_new_tokens = kMaxNew;
  req.stop_strings = {"never appears \x01", stop};
  auto [status, handle] = front.submit(req);
  REQUIRE(status == SubmitStatus::kAccepted);
  const CompletionUpdate u = collect(*handle);
  CHECK(u.end == CompletionEnd::kStop);
  CHECK(u.stop_string == stop);
  CHECK(u.text == full.substr(0, full.find(stop)));
  check_pool_clean(front);
}

TEST_CASE("AsyncEngine: log-probabilities of the chosen tokens are the engine's own",
          "[engine][async_engine]") {
  INFERKIT_NEED_SMOLLM2(m);
  const auto& solo = solo_outputs(*m);
  AsyncEngine front(m->model, m->tokenizer, front_options(*m));
  CompletionRequest req;
  req.prompt = m->tokenizer.encode(kTexts[0], false);
  req.params.max_new_tokens = 4;
  req.params.logprobs = true;
  req.params.top_logprobs = 3;
  auto [status, handle] = front.submit(req);
  REQUIRE(status == SubmitStatus::kAccepted);
  const CompletionUpdate u = collect(*handle);
  REQUIRE(u.tokens.size() == 4);
  REQUIRE(u.logprobs.size() == 4);
  // Greedy: each chosen token is the most likely one, so it heads its top list; and its
  // log-probability is the log-softmax of a teacher-forced forward over prompt + output.
  std::vector<TokenId> context = req.prompt;
  context.insert(context.end(), u.tokens.begin(), u.tokens.end());
  const std::vector<float> logits = test::teacher_forced(m->model, context, 64);
  const auto vocab = static_cast<std::size_t>(m->model.config().vocab_size);
  for (std::size_t i = 0; i < u.tokens.size(); ++i) {
    CHECK(u.tokens[i] == solo[0][i]);
    REQUIRE(u.logprobs[i].top.size() == 3);
    CHECK(u.logprobs[i].top[0].token == u.tokens[i]);
    CHECK(u.logprobs[i].top[0].logprob == u.logprobs[i].logprob);
    CHECK(u.logprobs[i].top[1].logprob <= u.logprobs[i].top[0].logprob);
    const std::size_t row = req.prompt.size() - 1 + i;
    const TokenLogprobs ref =
        token_logprobs(std::span<const float>(logits.data() + row * vocab, vocab), u.tokens[i], 3);
    CHECK(u.logprobs[i].logprob == Approx(ref.logprob).margin(2e-3));
    CHECK(ref.top[0].token == u.tokens[i]);
    for (const TokenLogprob& alt : u.logprobs[i].top) {  // each alternative's, likewise
      const float expected =
          token_logprobs(std::span<const float>(logits.data() + row * vocab, vocab), alt.token, 0)
              .logprob;
      CHECK(alt.logprob == Approx(expected).margin(2e-3));
    }
  }
  check_pool_clean(front);
}

TEST_CASE("AsyncEngine: n completions of one prompt each equal their seed's run alone",
          "[engine][async_engine]") {
  INFERKIT_NEED_SMOLLM2(m);
  AsyncEngine front(m->model, m->tokenizer, front_options(*m));
  CompletionRequest req;
  req.prompt = m->tokenizer.encode(kTexts[5], false);
  req.params.max_new_tokens = kMaxNew;
  req.params.sampling.temperature = 0.8f;
  req.params.seed = 40;
  auto [status, handles] = front.submit_n(req, 3);
  REQUIRE(status == SubmitStatus::kAccepted);
  REQUIRE(handles.size() == 3);
  for (std::size_t i = 0; i < handles.size(); ++i) {
    CompletionRequest alone = req;
    alone.params.seed = req.params.seed + i;  // completion i samples with seed + i
    auto [s, h] = front.submit(alone);
    REQUIRE(s == SubmitStatus::kAccepted);
    CHECK(collect(handles[i]).tokens == collect(*h).tokens);
  }
  CHECK(front.metrics().requests_accepted == 4);  // the group is one request
  CHECK(test::code_of([&] { (void)front.submit_n(req, kMaxCompletions + 1); }) ==
        ErrorCode::kInvalidArgument);
  check_pool_clean(front);
}

TEST_CASE("AsyncEngine: a full queue answers kOverloaded at once, and drain finishes the rest",
          "[engine][async_engine]") {
  INFERKIT_NEED_SMOLLM2(m);
  AsyncEngineOptions o = front_options(*m);
  o.engine.scheduler.max_num_seqs = 1;  // one runs, the rest wait
  o.max_queued_requests = 2;
  AsyncEngine front(m->model, m->tokenizer, o);
  CompletionRequest req;
  req.prompt = m->tokenizer.encode(kTexts[3], false);
  req.params.max_new_tokens = kMaxNew;
  std::vector<CompletionHandle> handles;
  bool overloaded = false;
  // The first request is admitted at the engine's next step; at most 1 + 2 are accepted.
  for (int i = 0; i < 5 && !overloaded; ++i) {
    auto [status, handle] = front.submit(req);
    if (status == SubmitStatus::kOverloaded) {
      overloaded = true;
    } else {
      REQUIRE(status == SubmitStatus::kAccepted);
      handles.push_back(*handle);
    }
  }
  CHECK(overloaded);
  CHECK(handles.size() <= 3);
  CHECK(front.metrics().requests_overloaded == 1);
  // All finish by themselves: the deadline only bounds a hang (a loaded CI machine once took
  // 60 s for these 48 tokens).
  CHECK(front.drain(600s));
  for (CompletionHandle& h : handles) {
    CHECK(h.finished());
    CHECK(collect(h).end == CompletionEnd::kLength);
  }
  CHECK(front.submit(req).first == SubmitStatus::kDraining);
  CHECK_FALSE(front.accepting());
  check_pool_clean(front);
}

TEST_CASE("AsyncEngine: a drain deadline cancels what still runs, and shutdown loses no result",
          "[engine][async_engine]") {
  INFERKIT_NEED_SMOLLM2(m);
  std::vector<CompletionHandle> handles;
  {
    AsyncEngine front(m->model, m->tokenizer, front_options(*m));
    CompletionRequest req;
    req.prompt = m->tokenizer.encode(kTexts[4], false);
    req.params.max_new_tokens = 4096;  // would run for minutes
    for (int i = 0; i < 3; ++i) handles.push_back(*front.submit(req).second);
    std::this_thread::sleep_for(50ms);
    CHECK_FALSE(front.drain(0s));
    check_pool_clean(front);
    // Shutdown from several threads at once joins the engine thread once (TSan checks it).
    std::vector<std::thread> closers;
    for (int i = 0; i < 3; ++i) closers.emplace_back([&] { front.shutdown(0s); });
    for (std::thread& t : closers) t.join();
    CHECK_FALSE(front.accepting());
  }  // the engine is gone; its results are not
  for (CompletionHandle& h : handles) {
    CHECK(h.finished());
    CHECK(collect(h).end == CompletionEnd::kCancelled);
    h.cancel();  // harmless after the engine is gone
  }
}

TEST_CASE("AsyncEngine: bad requests are an Error on the caller's thread and change nothing",
          "[engine][async_engine]") {
  INFERKIT_NEED_SMOLLM2(m);
  const auto& solo = solo_outputs(*m);
  AsyncEngine front(m->model, m->tokenizer, front_options(*m));
  const auto submit = [&](const CompletionRequest& r) { (void)front.submit(r); };
  CompletionRequest good;
  good.prompt = m->tokenizer.encode(kTexts[1], false);
  good.params.max_new_tokens = kMaxNew;
  CompletionRequest r = good;
  r.prompt.clear();
  CHECK(test::code_of([&] { submit(r); }) == ErrorCode::kInvalidArgument);
  r = good;
  r.prompt[0] = m->model.config().vocab_size;
  CHECK(test::code_of([&] { submit(r); }) == ErrorCode::kInvalidArgument);
  r = good;
  r.prompt.assign(static_cast<std::size_t>(front.max_prompt_tokens()) + 1, 1);
  std::string message;
  CHECK(test::code_of([&] { submit(r); }, &message) == ErrorCode::kInvalidArgument);
  CHECK(message.find(std::to_string(front.max_prompt_tokens())) != std::string::npos);
  r = good;
  r.params.max_new_tokens = 0;
  CHECK(test::code_of([&] { submit(r); }) == ErrorCode::kInvalidArgument);
  r = good;
  r.params.sampling.top_p = 1.5f;
  CHECK(test::code_of([&] { submit(r); }) == ErrorCode::kInvalidArgument);
  r = good;
  r.stop_strings = {""};
  CHECK(test::code_of([&] { submit(r); }) == ErrorCode::kInvalidArgument);
  r = good;
  r.params.logprobs = true;
  r.params.top_logprobs = kMaxTopLogprobs + 1;
  CHECK(test::code_of([&] { submit(r); }) == ErrorCode::kInvalidArgument);
  CHECK(front.metrics().requests_accepted == 0);
  auto [status, handle] = front.submit(good);
  REQUIRE(status == SubmitStatus::kAccepted);
  CHECK(collect(*handle).tokens == solo[1]);
}
