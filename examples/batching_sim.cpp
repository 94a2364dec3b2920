// SPDX-License-Identifier: Apache-2.0
// batching_sim: static vs continuous (iteration-level) batching on the same requests, the
// exercise of tracking batch-slot utilization with output lengths drawn from Pareto(1.5, 20).
// Both run on inferkit's schedulers through the serving simulator with a cost model of one time
// unit per step, so a step is one token for every running request, as in the step-counting
// simulators of the batching literature (Orca, Yu et al., OSDI '22).
//
//   batching_sim [--requests 50] [--batch 8] [--shape 1.5] [--scale 20] [--max-output 2000]
//                [--rate 0] [--seed 1] [--plot FILE.png] [--json]
//
// Static batching admits a batch and waits for its longest member: finished members' slots sit
// idle. Continuous batching refills a slot the step after it frees. The gap grows with the
// spread of output lengths: Pareto(1.5) is heavy-tailed, like real chat outputs.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <examples/support/cli.hpp>
#include <examples/support/json.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <inferkit/sched/static_scheduler.hpp>
#include <inferkit/sim/simulator.hpp>
#include <inferkit/sim/workload.hpp>
#include <string>
#include <vector>

namespace {

using inferkit::examples::UsageError;

struct Flags {
  long long requests = 50;
  long long batch = 8;
  double shape = 1.5;
  double scale = 20.0;
  long long max_output = 2000;
  double rate = 0.0;  // requests per step; 0: all at step 0
  long long seed = 1;
  std::string plot;
  bool json = false;
};

constexpr const char* kUsage =
    "usage: batching_sim [--requests N] [--batch N] [--shape A] [--scale S] [--max-output N]\n"
    "                    [--rate R] [--seed N] [--plot FILE.png] [--json]\n"
    "defaults: --requests 50 --batch 8 --shape 1.5 --scale 20 --max-output 2000 --rate 0\n"
    "          (0: every request arrives at step 0; R > 0: Poisson, R per step) --seed 1\n"
    "--plot writes FILE.csv (utilization per step) and draws FILE.png with\n"
    "scripts/plot_batching.py (python3 + matplotlib; scripts/demo.sh installs them).\n";

Flags parse_flags(int argc, char** argv) {
  Flags f;
  inferkit::examples::ArgParser args(argc, argv, kUsage);
  while (args.next()) {
    const std::string& flag = args.flag();
    if (flag == "--json")
      f.json = true;
    else if (flag == "--requests")
      f.requests = args.integer<long long>(1, 100000);
    else if (flag == "--batch")
      f.batch = args.integer<long long>(1, 4096);
    else if (flag == "--shape")
      f.shape = args.number(0.01, 100.0);
    else if (flag == "--scale")
      f.scale = args.number(1.0, 1e5);
    else if (flag == "--max-output")
      f.max_output = args.integer<long long>(1, 1000000);
    else if (flag == "--rate")
      f.rate = args.number(0.0, 1e6);
    else if (flag == "--seed")
      f.seed = args.integer<long long>(0, 1LL << 62);
    else if (flag == "--plot")
      f.plot = args.value();
    else
      args.unknown_flag();
  }
  return f;
}

/// One time unit per step: a step is one token for every running request.
struct OneUnitPerStep {
  [[nodiscard]] double step_seconds(std::span<const inferkit::SequenceWork> work) const {
    return work.empty() ? 0.0 : 1.0;
  }
};

// Slot utilization two ways: while requests are queued (the period a batching rule decides:
// an idle slot then is the rule's waste) and over the whole run, whose end (the drain, when
// fewer requests remain than slots) no rule can fill.
struct Run {
  inferkit::SimulationResult result;
  double utilization_waiting = 0.0;  // mean over the steps where requests were queued
  double utilization = 0.0;          // mean over every step
  double drain_steps = 0.0;          // steps after the last request was admitted
};

Run measure(inferkit::SimulationResult result, long long batch) {
  Run r;
  double filled = 0.0;
  double steps = 0.0;
  for (const inferkit::SimStep& s : result.steps) {
    if (s.num_waiting == 0) continue;
    filled += s.num_seqs;
    steps += 1.0;
  }
  r.utilization = result.slot_utilization(static_cast<std::int32_t>(batch));
  r.utilization_waiting = steps > 0.0 ? filled / (steps * static_cast<double>(batch)) : 0.0;
  double last_admission = 0.0;
  for (const inferkit::RequestOutcome& o : result.outcomes) {
    last_admission = std::max(last_admission, o.metrics.first_scheduled_s);
  }
  r.drain_steps = result.end_s - last_admission;
  r.result = std::move(result);
  return r;
}

double throughput(const Run& r) {
  return static_cast<double>(r.result.summary.output_tokens) / r.result.end_s;
}

void write_plot(const Flags& f, const Run& st, const Run& co) {
  std::string stem = f.plot;
  if (stem.size() > 4 && stem.substr(stem.size() - 4) == ".png") stem.resize(stem.size() - 4);
  const std::string csv = stem + ".csv";
  std::FILE* out = std::fopen(csv.c_str(), "w");
  if (out == nullptr) throw UsageError{"--plot: cannot write " + csv};
  std::fprintf(out, "step,static_utilization,continuous_utilization\n");
  const std::size_t n = std::max(st.result.steps.size(), co.result.steps.size());
  for (std::size_t i = 0; i < n; ++i) {
    std::fprintf(out, "%zu,", i);
    if (i < st.result.steps.size()) {
      std::fprintf(out, "%.4f", st.result.steps[i].num_seqs / static_cast<double>(f.batch));
    }
    std::fprintf(out, ",");
    if (i < co.result.steps.size()) {
      std::fprintf(out, "%.4f", co.result.steps[i].num_seqs / static_cast<double>(f.batch));
    }
    std::fprintf(out, "\n");
  }
  std::fclose(out);
  const std::string cmd = "python3 \"" INFERKIT_SOURCE_DIR "/scripts/plot_batching.py\" \"" + csv +
                          "\" \"" + f.plot + "\"";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr,
                 "batching_sim: could not draw %s (python3 with matplotlib is needed; "
                 "scripts/demo.sh installs it); the data is in %s\n",
                 f.plot.c_str(), csv.c_str());
  } else if (!f.json) {
    std::printf("plot: %s (data: %s)\n", f.plot.c_str(), csv.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  return inferkit::examples::run_main("batching_sim", [&] {
    const Flags f = parse_flags(argc, argv);
    inferkit::WorkloadOptions w;
    w.num_requests = f.requests;
    w.arrivals = f.rate > 0.0 ? inferkit::ArrivalProcess::poisson(f.rate)
                              : inferkit::ArrivalProcess::all_at_once();
    w.prompt = inferkit::LengthDistribution::fixed(1);  // the step counts only output tokens
    w.output = inferkit::LengthDistribution::pareto(f.shape, f.scale).clamped(1, f.max_output);
    w.seed = static_cast<std::uint64_t>(f.seed);
    const std::vector<inferkit::SimRequestSpec> requests = inferkit::generate_workload(w);
    // A pool large enough that memory never binds: this example isolates the batching rule.
    std::int64_t tokens = 0;
    std::int64_t longest = 0;
    for (const auto& r : requests) {
      tokens += r.output_tokens;
      longest = std::max(longest, r.output_tokens);
    }
    const auto blocks = static_cast<std::int32_t>(f.batch * (longest + 2) / 16 + f.batch + 16);
    inferkit::BlockAllocator static_pool(blocks, 16);
    inferkit::StaticSchedulerOptions so;
    so.max_batch_size = static_cast<std::int32_t>(f.batch);
    inferkit::StaticScheduler static_sched(static_pool, so);
    const Run st = measure(inferkit::simulate(static_sched, OneUnitPerStep{}, requests), f.batch);
    inferkit::BlockAllocator cont_pool(blocks, 16);
    inferkit::SchedulerConfig cc;
    cc.max_num_seqs = static_cast<std::int32_t>(f.batch);
    inferkit::ContinuousScheduler<> cont_sched(cont_pool, nullptr, cc);
    const Run co = measure(inferkit::simulate(cont_sched, OneUnitPerStep{}, requests), f.batch);
    const double ratio = throughput(co) / throughput(st);
    const auto& ss = st.result.summary;
    const auto& cs = co.result.summary;
    if (f.json) {
      inferkit::examples::Json j;
      j.begin();
      const auto system = [&](const char* name, const Run& r) {
        j.begin(name)
            .field("utilization", r.utilization_waiting, "%.4f")
            .field("utilization_whole_run", r.utilization, "%.4f")
            .field("drain_steps", r.drain_steps, "%.0f")
            .field("throughput", throughput(r), "%.4f")
            .field("steps", r.result.end_s, "%.0f")
            .field("p50", r.result.summary.e2e.p50, "%.1f")
            .field("p99", r.result.summary.e2e.p99, "%.1f")
            .end();
      };
      system("static", st);
      system("continuous", co);
      j.field("throughput_ratio", ratio, "%.4f")
          .field("requests", f.requests)
          .field("batch", f.batch)
          .field("output_tokens", tokens)
          .field("longest_output", longest)
          .field("continuous_above_80_percent", co.utilization_waiting > 0.8)
          .end();
      std::puts(j.str().c_str());
    } else {
      std::printf(
          "batching_sim: %lld requests, output lengths Pareto(shape %g, scale %g) clamped to "
          "[1, %lld]:\n  %lld tokens, mean %.1f, longest %lld; batch of %lld; one step = one "
          "token per running request\n\n",
          f.requests, f.shape, f.scale, f.max_output, static_cast<long long>(tokens),
          static_cast<double>(tokens) / static_cast<double>(f.requests),
          static_cast<long long>(longest), f.batch);
      std::printf("%-34s %12s %12s\n", "", "static", "continuous");
      std::printf("%-34s %12.0f %12.0f\n", "steps to serve every request", st.result.end_s,
                  co.result.end_s);
      std::printf("%-34s %11.1f%% %11.1f%%\n", "slot utilization while requests wait",
                  100.0 * st.utilization_waiting, 100.0 * co.utilization_waiting);
      std::printf("%-34s %11.1f%% %11.1f%%\n", "slot utilization over the whole run",
                  100.0 * st.utilization, 100.0 * co.utilization);
      std::printf("%-34s %12.0f %12.0f\n", "  of which drain steps (no one waits)", st.drain_steps,
                  co.drain_steps);
      std::printf("%-34s %12.2f %12.2f\n", "throughput, tokens per step", throughput(st),
                  throughput(co));
      std::printf("%-34s %12.1f %12.1f\n", "latency p50, steps (arrival->done)", ss.e2e.p50,
                  cs.e2e.p50);
      std::printf("%-34s %12.1f %12.1f\n", "latency p99, steps", ss.e2e.p99, cs.e2e.p99);
      std::printf("\ncontinuous / static throughput: %.2fx\n", ratio);
      std::printf("continuous batching holds slot utilization above 80%% while requests wait: %s\n",
                  co.utilization_waiting > 0.8 ? "yes" : "no");
      std::printf(
          "The whole-run figure also counts the drain: once the queue is empty, fewer requests "
          "remain than\nslots, and the longest output (%lld tokens here) runs on nearly alone; "
          "no batching rule can fill\nthose slots, and with heavy-tailed lengths that tail is "
          "a large share of a 50-request run.\n",
          static_cast<long long>(longest));
    }
    if (!f.plot.empty()) write_plot(f, st, co);
    return 0;
  });
}
