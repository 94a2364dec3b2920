// SPDX-License-Identifier: Apache-2.0
// Benchmarks for sched/continuous_scheduler.hpp: the CPU cost of one schedule() + commit() step
// with 256 (and 1,024) running requests of 4K-token contexts, 2,000 more waiting, and the prefix
// cache on. Steady decode steps, and steps with churn (a request leaves every step and the
// next one is admitted through a prefix-cache hit and chunk-prefilled). The same-run baseline
// is what a scheduler that rebuilds its CSR page table each step would pay for that alone:
// copying every running sequence's page ids (O(total pages)). Under churn, every 4th step one
// running request is aborted and a new one queued (outside the timing), so the timed steps admit
// it (a prefix-cache match of its 1K-token system prompt) and prefill its 3K tokens in chunks.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <memory>
#include <vector>

namespace {

using inferkit::BlockAllocator;
using inferkit::ContinuousScheduler;
using inferkit::RadixTree;
using inferkit::Request;
using inferkit::SequenceResult;
using inferkit::StepPlan;
using inferkit::TokenId;
using Clock = std::chrono::steady_clock;

#ifndef PROFILE_ITERS
#  define PROFILE_ITERS 512
#endif
constexpr std::int32_t kBlockSize = 16;
constexpr std::int64_t kContext = 4096;
constexpr std::int64_t kSystemPrompt = 1024;  // shared by every request of a group
constexpr std::int32_t kGroups = 8;
constexpr std::int32_t kWaiting = 2000;

TokenId token(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = (a << 32) ^ b ^ 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<TokenId>((z ^ (z >> 31)) % 128000u);
}

Request make_request(std::int64_t id, std::int64_t max_new) {
  Request r;
  r.id = id;
  const auto group = static_cast<std::uint64_t>(id % kGroups);
  for (std::int64_t i = 0; i < kContext; ++i) {
    r.prompt.push_back(i < kSystemPrompt ? token(group, static_cast<std::uint64_t>(i))
                                         : token(1000 + static_cast<std::uint64_t>(id),
                                                 static_cast<std::uint64_t>(i)));
  }
  r.max_new_tokens = max_new;
  return r;
}

// A scheduler with `running` requests decoding and kWaiting queued behind them.
struct Fixture {
  std::unique_ptr<BlockAllocator> pool;
  std::unique_ptr<RadixTree> tree;
  std::unique_ptr<ContinuousScheduler<>> sched;
  std::vector<TokenId> tokens;
  std::vector<SequenceResult> results;
  double now = 0.0;
  std::int64_t next_id = 0;
  std::int64_t next_victim = 0;

  Fixture(std::int32_t running, bool churn) : next_id(running) {
    const std::int64_t blocks = (running + 4) * (kContext + PROFILE_ITERS + 4096) / kBlockSize +
                                kGroups * kSystemPrompt / kBlockSize;
    pool = std::make_unique<BlockAllocator>(static_cast<std::int32_t>(blocks), kBlockSize);
    tree = std::make_unique<RadixTree>(*pool);
    inferkit::SchedulerConfig config;
    config.max_num_seqs = running;
    config.max_batched_tokens = churn ? 2048 : 8192;
    config.record_step_metrics = false;
    sched = std::make_unique<ContinuousScheduler<>>(*pool, tree.get(), config);
    for (std::int32_t i = 0; i < running; ++i) sched->add(make_request(i, 1 << 20));
    // Prefill everything (outside the timing) until every request decodes.
    while (decoding() < running || sched->num_waiting() > 0) {
    }
    for (std::int32_t i = 0; i < kWaiting; ++i) sched->add(make_request(next_id++, 1 << 20));
    next_victim = 0;
    (void)churn;
  }

  // Between steps: the oldest running request leaves, a new one queues.
  void turn_over() {
    (void)sched->abort(next_victim++, now);
    (void)sched->take_finished();
    sched->add(make_request(next_id++, 1 << 20));
  }

  std::int32_t decoding() {
    const StepPlan& p = sched->schedule(now);
    const std::int32_t d = p.num_decodes;
    commit(p);
    return d;
  }

  void commit(const StepPlan& p) {
    fill_results(p);
    sched->commit(results, now);
    (void)sched->take_finished();
  }

  // One emitted token per sampling sequence, as an engine would hand them back.
  void fill_results(const StepPlan& p) {
    tokens.resize(static_cast<std::size_t>(p.num_seqs()));
    results.resize(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const auto& s = p.sequences[i];
      tokens[i] = static_cast<TokenId>(s.seq_len() % 1000);
      results[i] = {s.request_id, s.samples ? std::span<const TokenId>(&tokens[i], 1)
                                            : std::span<const TokenId>()};
    }
    now += 0.01;
  }
};

// What rebuilding a CSR page table of the plan's sequences costs (the baseline).
std::int64_t csr_rebuild(const StepPlan& p, std::vector<std::int32_t>& indptr,
                         std::vector<std::int32_t>& indices) {
  indptr.resize(static_cast<std::size_t>(p.num_seqs()) + 1);
  indices.clear();
  indptr[0] = 0;
  for (std::int32_t s = 0; s < p.num_seqs(); ++s) {
    const std::span<const std::int32_t> mine = p.sequence_pages(s);
    indices.insert(indices.end(), mine.begin(), mine.end());
    indptr[static_cast<std::size_t>(s) + 1] = static_cast<std::int32_t>(indices.size());
  }
  return static_cast<std::int64_t>(indices.size());
}

void BM_ContinuousScheduler_Step(benchmark::State& state) {
  const auto running = static_cast<std::int32_t>(state.range(0));
  const bool churn = state.range(1) != 0;
  Fixture f(running, churn);
  std::vector<std::int32_t> indptr, indices;
  double step_s = 0.0;
  double csr_s = 0.0;
  std::int64_t pages = 0;
  std::int64_t step = 0;
  for (auto _ : state) {
    // One request leaves every 4 steps: its successor's 3K-token prefill then fits the budget
    // left by the decodes before the next one leaves, so the running set stays full.
    if (churn && step++ % 4 == 0) f.turn_over();
    const auto t0 = Clock::now();
    const StepPlan& p = f.sched->schedule(f.now);
    const auto t1 = Clock::now();
    f.fill_results(p);  // the engine's side, not timed
    const auto t2 = Clock::now();
    f.sched->commit(f.results, f.now);
    const auto t3 = Clock::now();
    // The plan stays readable until the next schedule(): rebuild its page table as CSR.
    pages += csr_rebuild(p, indptr, indices);
    benchmark::DoNotOptimize(indices.data());
    const auto t4 = Clock::now();
    (void)f.sched->take_finished();
    step_s += std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count();
    csr_s += std::chrono::duration<double>(t4 - t3).count();
  }
  const auto iters = static_cast<double>(state.iterations());
  state.counters["step_us"] = 1e6 * step_s / iters;
  state.counters["ns_per_running"] = 1e9 * step_s / iters / running;
  state.counters["csr_rebuild_us"] = 1e6 * csr_s / iters;
  state.counters["step_vs_csr_rebuild"] = step_s / csr_s;
  state.counters["pages_per_step"] = static_cast<double>(pages) / iters;
  state.counters["preemptions"] = static_cast<double>(f.sched->stats().preemptions);
  state.counters["running"] = f.sched->num_running();
  state.counters["waiting"] = f.sched->num_waiting();
}

BENCHMARK(BM_ContinuousScheduler_Step)
    ->ArgNames({"running", "churn"})
    ->Args({256, 0})
    ->Args({256, 1})
    ->Args({1024, 0})
    ->Args({1024, 1})
    // Each iteration grows every context by a token: 512 iterations keep them at 4K-4.6K
    // tokens (and inside the pool) instead of growing them without bound.
    ->Iterations(PROFILE_ITERS)
    ->Repetitions(3)
    ->ReportAggregatesOnly(false)
    ->Unit(benchmark::kMicrosecond);

// The speculative path's per-step call: every running request proposes kDrafts n-gram drafts,
// each checked (check_arg) before it is stored. check_arg formats nothing unless a check fails,
// so this should cost about what copying the drafts costs (the baseline, timed in the same run:
// the same drafts assigned into one vector per request, which propose_drafts also does).
void BM_ContinuousScheduler_ProposeDrafts(benchmark::State& state) {
  constexpr std::int32_t kRunning = 256;
  constexpr std::size_t kDrafts = 8;
  Fixture f(kRunning, false);
  std::vector<std::vector<TokenId>> drafts(kRunning, std::vector<TokenId>(kDrafts));
  for (std::size_t i = 0; i < drafts.size(); ++i) {
    for (std::size_t d = 0; d < kDrafts; ++d) drafts[i][d] = token(i, d);
  }
  std::vector<std::vector<TokenId>> copies(drafts.size());
  double propose_s = 0.0;
  double copy_s = 0.0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < drafts.size(); ++i) {
      f.sched->propose_drafts(static_cast<std::int64_t>(i), drafts[i]);
    }
    const auto t1 = Clock::now();
    for (std::size_t i = 0; i < drafts.size(); ++i) {
      copies[i].assign(drafts[i].begin(), drafts[i].end());
      benchmark::DoNotOptimize(copies[i].data());
    }
    const auto t2 = Clock::now();
    propose_s += std::chrono::duration<double>(t1 - t0).count();
    copy_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double drafts_done = static_cast<double>(state.iterations()) * kRunning * kDrafts;
  state.counters["ns_per_draft"] = 1e9 * propose_s / drafts_done;
  state.counters["copy_ns_per_draft"] = 1e9 * copy_s / drafts_done;
  state.counters["propose_vs_copy"] = propose_s / copy_s;
}

BENCHMARK(BM_ContinuousScheduler_ProposeDrafts)->Repetitions(3)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
