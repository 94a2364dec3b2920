// SPDX-License-Identifier: Apache-2.0
// The serving simulator, top floor beside engine/: drives any scheduler (ContinuousScheduler,
// StaticScheduler) step by step against a StepCostModel instead of a GPU. Requests arrive from a
// workload (open loop by arrival time, or closed loop with N clients), each step's plan is
// priced by the cost model, the clock advances by that time, and a fake model emits tokens, so
// the scheduler's metrics (TTFT, inter-token latency, throughput, preemptions, prefix hits)
// come out as a real engine would report them.
// Threads: simulate drives the scheduler (so its allocator and tree) for the whole run: one run per
// scheduler at a time; the cost model is only read (const) and may be shared.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <inferkit/core/error.hpp>
#include <inferkit/core/token_id.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/sched/request.hpp>
#include <inferkit/sched/serving_metrics.hpp>
#include <inferkit/sim/cost_model.hpp>
#include <inferkit/sim/workload.hpp>
#include <span>
#include <string>
#include <vector>

namespace inferkit {

/// How the simulator feeds requests.
struct SimulationOptions {
  std::int32_t vocab_size = 32000;  ///< token ids of the simulated prompts, >= 2
  std::uint64_t seed = 0;           ///< for the prompt tokens
  /// > 0: closed loop with this many clients: each sends its next request (the workload's
  /// requests in order) `think_time_s` after its previous one finished, and arrival_s is
  /// ignored. 0: open loop, requests arrive at their arrival_s.
  std::int32_t concurrency = 0;
  double think_time_s = 0.0;  ///< closed loop: a client's pause between requests, seconds
  std::int64_t max_steps = std::int64_t{1} << 32;  ///< safety stop, >= 1
};

/// One step of a simulated run.
struct SimStep {
  double start_s = 0.0;                 ///< the clock when the step started
  double seconds = 0.0;                 ///< the cost model's price of the step
  std::int32_t num_seqs = 0;            ///< batch size
  std::int32_t num_decodes = 0;         ///< of which decodes
  std::int32_t num_tokens = 0;          ///< tokens computed
  std::int32_t num_running = 0;         ///< requests holding KV
  std::int32_t num_waiting = 0;         ///< requests queued
  std::int32_t kv_blocks_used = 0;      ///< allocator blocks in use
  std::int32_t kv_blocks_reserved = 0;  ///< used + promised to running requests
  std::int32_t preemptions = 0;         ///< requests preempted while planning it
};

/// What a simulated run produced.
struct SimulationResult {
  std::vector<RequestOutcome> outcomes;  ///< every request, in finishing order
  ServingSummary summary;                ///< latency and throughput of the run
  std::vector<SimStep> steps;            ///< one per computed step, in order
  double end_s = 0.0;                    ///< the clock when the last request finished
  std::int64_t preemptions = 0;          ///< the scheduler's total
  double prefix_hit_rate = 0.0;          ///< scheduler's: cached prompt tokens / prompt tokens

  /// Batch slots filled, weighted by step time: sum(num_seqs * seconds) / (max_seqs * sum
  /// seconds), over the steps that started before `until_s` (all by default). 0 without steps.
  [[nodiscard]] double slot_utilization(std::int32_t max_seqs,
                                        double until_s = 1e300) const noexcept {
    double filled = 0.0;
    double total = 0.0;
    for (const SimStep& s : steps) {
      if (s.start_s >= until_s) break;
      filled += static_cast<double>(s.num_seqs) * s.seconds;
      total += s.seconds;
    }
    return total > 0.0 ? filled / (static_cast<double>(max_seqs) * total) : 0.0;
  }
};

/// A fake model's token: any id works (requests stop by length), but it varies with the request
/// and position so outputs are not constant.
inline TokenId simulated_token(RequestId id, std::int64_t position, std::int32_t vocab) noexcept {
  const auto h = static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ull +
                 static_cast<std::uint64_t>(position) * 0xBF58476D1CE4E5B9ull;
  return static_cast<TokenId>((h >> 33) % static_cast<std::uint64_t>(vocab));
}

/// Runs `workload` through `scheduler` priced by `cost` until every request finished. Request
/// i gets id i, its spec's prompt (make_prompt_tokens) and max_new_tokens = output_tokens.
/// The scheduler must be fresh (no requests). Throws `Error{kInvalidArgument}` for bad options,
/// `Error{kInvalidState}` if the scheduler stalls (nothing runs, nothing can arrive) or
/// max_steps is reached, and what the scheduler or the cost model throw.
template <class Scheduler, StepCostModel Cost>
SimulationResult simulate(Scheduler& scheduler, const Cost& cost,
                          std::span<const SimRequestSpec> workload,
                          const SimulationOptions& options = {}) {
  check_arg(options.vocab_size >= 2, ErrorCode::kInvalidArgument, "vocab_size", options.vocab_size,
            "must be >=", 2);
  check_arg(options.concurrency >= 0, ErrorCode::kInvalidArgument, "concurrency",
            options.concurrency, "must be >=", 0);
  check_arg(options.think_time_s >= 0.0, ErrorCode::kInvalidArgument, "think_time_s",
            options.think_time_s, "must be >=", 0);
  check_arg(options.max_steps >= 1, ErrorCode::kInvalidArgument, "max_steps", options.max_steps,
            "must be >=", 1);
  INFERKIT_CHECK(!scheduler.has_unfinished(), ErrorCode::kInvalidState,
                 std::string("simulate: the scheduler already holds requests"));
  SimulationResult result;
  const bool closed = options.concurrency > 0;
  const auto n = static_cast<std::int64_t>(workload.size());
  // Arrival time of each request as it becomes known (closed loop: when a client frees up).
  std::vector<double> arrival(workload.size(), -1.0);
  std::int64_t next = 0;  // index in `workload` of the next request to add
  for (std::size_t i = 0; i < workload.size(); ++i) {
    if (!closed) {
      arrival[i] = workload[i].arrival_s;
    } else if (static_cast<std::int64_t>(i) < options.concurrency) {
      arrival[i] = 0.0;  // the first clients all start at once
    }
  }
  std::int64_t released = closed ? std::min<std::int64_t>(n, options.concurrency) : n;
  double clock = 0.0;
  std::vector<SequenceWork> work;
  std::vector<TokenId> tokens;
  std::vector<SequenceResult> results;
  std::int64_t step = 0;
  const auto add_arrived = [&] {
    while (next < released && arrival[static_cast<std::size_t>(next)] <= clock) {
      const SimRequestSpec& spec = workload[static_cast<std::size_t>(next)];
      Request r;
      r.id = next;
      r.prompt = make_prompt_tokens(spec, next, options.vocab_size, options.seed);
      r.max_new_tokens = spec.output_tokens;
      r.arrival_s = arrival[static_cast<std::size_t>(next)];
      r.priority = spec.priority;
      scheduler.add(std::move(r));
      ++next;
    }
  };
  const auto collect = [&] {
    for (RequestOutcome& o : scheduler.take_finished()) {
      if (closed && released < n) {
        arrival[static_cast<std::size_t>(released++)] = o.metrics.finish_s + options.think_time_s;
      }
      result.outcomes.push_back(std::move(o));
    }
  };
  while (static_cast<std::int64_t>(result.outcomes.size()) < n) {
    add_arrived();
    collect();  // requests that can never fit finish at once
    const StepPlan& plan = scheduler.schedule(clock);
    if (plan.empty()) {
      collect();
      INFERKIT_CHECK(scheduler.num_waiting() == 0 || scheduler.num_running() > 0,
                     ErrorCode::kInvalidState,
                     std::string("simulate: requests wait but the scheduler runs nothing"));
      if (next < released) {
        clock = std::max(clock, arrival[static_cast<std::size_t>(next)]);
        continue;
      }
      INFERKIT_CHECK(static_cast<std::int64_t>(result.outcomes.size()) == n,
                     ErrorCode::kInvalidState,
                     std::string("simulate: requests remain but nothing can run or arrive"));
      break;
    }
    INFERKIT_CHECK(++step <= options.max_steps, ErrorCode::kInvalidState,
                   "simulate: max_steps = " + std::to_string(options.max_steps) + " reached");
    plan_work(plan, work);
    const double seconds = cost.step_seconds(work);
    SimStep s;
    s.start_s = clock;
    s.seconds = seconds;
    s.num_seqs = plan.num_seqs();
    s.num_decodes = plan.num_decodes;
    s.num_tokens = plan.num_tokens();
    s.num_running = scheduler.num_running();
    s.num_waiting = scheduler.num_waiting();
    if (!scheduler.step_metrics().empty()) {
      s.kv_blocks_used = scheduler.step_metrics().back().kv_blocks_used;
      s.kv_blocks_reserved = scheduler.step_metrics().back().kv_blocks_reserved;
    }
    s.preemptions = static_cast<std::int32_t>(plan.preempted.size());
    result.steps.push_back(s);
    clock += seconds;
    tokens.clear();
    for (const ScheduledSequence& seq : plan.sequences) {
      tokens.push_back(simulated_token(seq.request_id, seq.seq_len(), options.vocab_size));
    }
    results.clear();
    const TokenId* token = tokens.data();
    for (const ScheduledSequence& seq : plan.sequences) {
      results.push_back(SequenceResult{seq.request_id, seq.samples
                                                           ? std::span<const TokenId>(token, 1)
                                                           : std::span<const TokenId>()});
      ++token;
    }
    scheduler.commit(results, clock);
    collect();
  }
  result.end_s = clock;
  result.summary = summarize(result.outcomes);
  result.preemptions = scheduler.stats().preemptions;
  result.prefix_hit_rate = scheduler.stats().prefix_hit_rate();
  return result;
}

/// The per-step timeline as CSV (header + one line per step): start_s, seconds, batch size,
/// decodes, tokens, running, waiting, KV blocks used and reserved, their share of
/// `num_kv_blocks`, slot utilization (batch / max_seqs), preemptions.
inline std::string timeline_csv(const SimulationResult& result, std::int32_t max_seqs,
                                std::int32_t num_kv_blocks) {
  std::string out =
      "start_s,seconds,num_seqs,num_decodes,num_tokens,running,waiting,kv_blocks_used,"
      "kv_blocks_reserved,kv_utilization,slot_utilization,preemptions\n";
  char line[256];
  for (const SimStep& s : result.steps) {
    const double kv = num_kv_blocks > 0 ? static_cast<double>(s.kv_blocks_used) / num_kv_blocks : 0;
    const double slots = max_seqs > 0 ? static_cast<double>(s.num_seqs) / max_seqs : 0;
    std::snprintf(line, sizeof line, "%.6f,%.6f,%d,%d,%d,%d,%d,%d,%d,%.4f,%.4f,%d\n", s.start_s,
                  s.seconds, s.num_seqs, s.num_decodes, s.num_tokens, s.num_running, s.num_waiting,
                  s.kv_blocks_used, s.kv_blocks_reserved, kv, slots, s.preemptions);
    out += line;
  }
  return out;
}

}  // namespace inferkit
