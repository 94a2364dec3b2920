// SPDX-License-Identifier: Apache-2.0
// serve_bench: the engine serving a real model under load, each technique switched on in turn.
// N requests share a system prompt and arrive by a Poisson process in real time; they run with
// static batching, then continuous batching, then continuous batching with the prefix cache, then
// with n-gram speculative decoding too. For each: throughput, time to first token and inter-token
// latency percentiles, prefix hit rate and draft acceptance, measured, beside what sim/ predicts
// for the same workload with a step cost fitted to this machine's measured steps.
//
// --kv-sweep serves the workload instead once per KV format (fp16, fp8, int8, int4) in the same
// KV memory (--kv-memory-mb), continuous batching without the prefix cache, so that each user holds
// its whole context: the users served at once, measured, grow as the bytes per token shrink
// (kv_capacity's formula, on the real model), and each format's greedy tokens are compared with
// fp16's, the quality its memory costs.
//
//   serve_bench [--requests 32] [--rate 4] [--max-tokens 48] [--batch 16] [--seed 1]
//               [--model FILE.gguf] [--kv-dtype fp16] [--kv-memory-mb MB] [--kv-sweep] [--json]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <examples/support/cli_main.hpp>
#include <examples/support/json_out.hpp>
#include <examples/support/model.hpp>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/engine/engine.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <inferkit/sched/serving_metrics.hpp>
#include <inferkit/sched/static_scheduler.hpp>
#include <inferkit/sim/linear_cost_model.hpp>
#include <inferkit/sim/simulator.hpp>
#include <inferkit/sim/workload.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Flags {
  long long requests = 32;
  double rate = 4.0;
  long long max_tokens = 48;
  long long batch = 16;
  long long seed = 1;
  std::string model;
  std::string activations = "fp32";
  std::string kv_dtype = "fp16";
  double kv_memory_mb = 0.0;  // 0: 4096 KV pages whatever their format
  bool kv_sweep = false;
  bool json = false;
};

constexpr const char* kUsage =
    "usage: serve_bench [--requests N] [--rate R] [--max-tokens N] [--batch N] [--seed N]\n"
    "                   [--model FILE.gguf] [--activations fp32|int8]\n"
    "                   [--kv-dtype fp16|bf16|fp8|fp8_e5m2|int8|int4] [--kv-memory-mb MB]\n"
    "                   [--kv-sweep] [--json]\n"
    "defaults: --requests 32 --rate 4 (requests/s, Poisson) --max-tokens 48 (every request\n"
    "generates exactly this many) --batch 16 (most sequences per step) --seed 1 --kv-dtype fp16,\n"
    "4096 KV pages of 16 tokens unless --kv-memory-mb sizes the pool in MB (2^20 bytes).\n"
    "--kv-sweep: the same requests once per KV format (fp16, fp8, int8, int4) in --kv-memory-mb\n"
    "(default 32) of KV, without the prefix cache: users served at once, throughput, and tokens\n"
    "equal to fp16's.\n";

void add_flags(CLI::App& app, Flags& f) {
  using inferkit::examples::integer_in;
  app.add_option("--requests", f.requests)->transform(integer_in(1LL, 4096LL));
  app.add_option("--rate", f.rate)->transform(inferkit::examples::number_in(0.01, 1000.0));
  app.add_option("--max-tokens", f.max_tokens)->transform(integer_in(1LL, 2048LL));
  app.add_option("--batch", f.batch)->transform(integer_in(1LL, 256LL));
  app.add_option("--seed", f.seed)->transform(integer_in(0LL, 1LL << 62));
  app.add_option("--model", f.model);
  app.add_option("--activations", f.activations)
      ->check(inferkit::examples::one_of({"fp32", "int8"}));
  app.add_option("--kv-dtype", f.kv_dtype)
      ->check(inferkit::examples::one_of(inferkit::examples::kKvDtypeChoices));
  app.add_option("--kv-memory-mb", f.kv_memory_mb)
      ->transform(inferkit::examples::number_in(0.1, 1 << 20));
  app.add_flag("--kv-sweep", f.kv_sweep);
  app.add_flag("--json", f.json);
}

// A system prompt of a few hundred tokens, as deployed assistants carry: the part of every
// request the prefix cache computes once.
constexpr const char* kSystem =
    "<|im_start|>system\nYou are a helpful assistant for engineers who build and operate "
    "inference servers for large language models. Your readers know C++ and Python, have read "
    "the papers on PagedAttention, FlashAttention and speculative decoding, and run models from "
    "a hundred million to a few hundred billion parameters on CPUs and GPUs. Answer in a few "
    "sentences, plainly and precisely. Prefer numbers to adjectives: give memory in bytes, time "
    "in milliseconds, throughput in tokens per second, and say what they were measured on. When "
    "a question depends on the hardware, the model or the workload, say which and how the "
    "answer changes. When you are not sure, say so, and say what measurement would settle it. "
    "Do not invent benchmark results, citations or version numbers. If a question is ambiguous, "
    "answer the most likely reading and name the other. Use the terms of the field (prefill, "
    "decode, KV cache, block table, batch, chunk, draft, acceptance rate) as the papers define "
    "them, and define any other term you use. Keep code short and compilable, and explain the "
    "one idea it shows rather than every line.<|im_end|>\n";
constexpr const char* kTopics[] = {"paged attention",
                                   "continuous batching",
                                   "a KV cache",
                                   "speculative decoding",
                                   "prefix caching",
                                   "tensor parallelism",
                                   "quantization",
                                   "the roofline model",
                                   "flash attention",
                                   "chunked prefill",
                                   "RoPE",
                                   "grouped-query attention",
                                   "a radix tree",
                                   "preemption",
                                   "memory bandwidth",
                                   "batch size"};

struct Workload {
  std::vector<std::vector<inferkit::TokenId>> prompts;
  std::vector<double> arrivals;  // seconds after the start
  std::int64_t system_tokens = 0;
};

Workload make_workload(const Flags& f, const inferkit::BpeTokenizer& tok) {
  Workload w;
  const std::vector<inferkit::TokenId> system = tok.encode(kSystem, true);
  w.system_tokens = static_cast<std::int64_t>(system.size());
  inferkit::Rng rng(static_cast<std::uint64_t>(f.seed));
  double t = 0.0;
  for (long long i = 0; i < f.requests; ++i) {
    const std::string q = "<|im_start|>user\nRequest " + std::to_string(i) + ": explain " +
                          kTopics[i % 16] + " in one paragraph.<|im_end|>\n<|im_start|>assistant\n";
    std::vector<inferkit::TokenId> p = system;
    const auto u = tok.encode(q, true);
    p.insert(p.end(), u.begin(), u.end());
    w.prompts.push_back(p);
    w.arrivals.push_back(t);
    t += inferkit::sample_gap(inferkit::ArrivalProcess::poisson(f.rate), rng);
  }
  return w;
}

struct Figures {
  inferkit::ServingSummary summary;
  double prefix_hit_rate = 0.0;
  double acceptance = -1.0;  // accepted / drafted, -1 without speculation
  double elapsed_s = 0.0;
  std::int32_t peak_running = 0;  // most requests holding KV at once
  std::int64_t preemptions = 0;
  std::vector<std::vector<inferkit::TokenId>> outputs;  // by request index
};

constexpr std::int32_t kBlockSize = 16;  // tokens per KV page (EngineOptions' default)

// How the KV pages are stored, what one takes and how many there are.
struct KvPool {
  inferkit::DType dtype = inferkit::DType::kFloat16;
  std::int64_t page_bytes = 0;  // Engine::kv_page_bytes
  std::int32_t num_blocks = 4096;
};

// The pool of `dtype` pages that `flags.kv_memory_mb` holds (4096 pages when it is 0).
KvPool kv_pool(const inferkit::LlamaModel& model, inferkit::DType dtype, const Flags& flags) {
  KvPool pool{dtype, inferkit::Engine::kv_page_bytes(model, dtype, kBlockSize), 4096};
  if (flags.kv_memory_mb > 0) {
    const double bytes = flags.kv_memory_mb * 1048576.0;
    pool.num_blocks = static_cast<std::int32_t>(
        std::max(1.0, std::floor(bytes / static_cast<double>(pool.page_bytes))));
  }
  return pool;
}

struct Config {
  const char* name;
  bool static_batching;
  bool prefix_cache;
  bool spec;
};

inferkit::SchedulerConfig scheduler_of(const Config& c, const Flags& f) {
  if (c.static_batching) {
    inferkit::StaticSchedulerOptions so;
    so.max_batch_size = static_cast<std::int32_t>(f.batch);
    return inferkit::static_batching_config(so);
  }
  inferkit::SchedulerConfig s;
  s.max_num_seqs = static_cast<std::int32_t>(f.batch);
  s.max_batched_tokens = 1024;
  return s;
}

// Runs the workload through the engine in real time; appends its steps to `samples`.
Figures measure(const inferkit::examples::LoadedModel& m, const Workload& w, const Config& c,
                const Flags& f, const KvPool& kv, std::vector<inferkit::StepSample>& samples) {
  inferkit::EngineOptions o;
  o.num_blocks = kv.num_blocks;
  o.block_size = kBlockSize;
  o.kv_dtype = kv.dtype;
  o.scheduler = scheduler_of(c, f);
  o.prefix_cache = c.prefix_cache;
  o.ngram_speculation = c.spec;
  inferkit::Engine engine(m.model, o);
  inferkit::GenerationParams p;
  p.max_new_tokens = f.max_tokens;
  p.stop_at_eos = false;  // every request generates exactly max_tokens: comparable runs
  std::size_t next = 0;
  std::vector<inferkit::RequestOutcome> done;
  std::vector<inferkit::RequestId> ids;
  while (done.size() < w.prompts.size()) {
    while (next < w.prompts.size() && w.arrivals[next] <= engine.now()) {
      ids.push_back(engine.submit(w.prompts[next++], p));
    }
    if (!engine.step() && next < w.prompts.size()) {
      std::this_thread::sleep_for(std::chrono::duration<double>(w.arrivals[next] - engine.now()));
    }
    for (inferkit::RequestOutcome& r : engine.take_finished()) done.push_back(std::move(r));
  }
  Figures fig;
  fig.summary = inferkit::summarize(done);
  fig.prefix_hit_rate = engine.scheduler_stats().prefix_hit_rate();
  if (c.spec && engine.stats().drafted_tokens > 0) {
    fig.acceptance = static_cast<double>(engine.stats().accepted_tokens) /
                     static_cast<double>(engine.stats().drafted_tokens);
  }
  fig.elapsed_s = engine.now();
  for (const inferkit::StepMetrics& s : engine.step_metrics()) {
    samples.push_back({s.num_tokens, s.num_seqs, s.context_tokens, s.committed_s - s.scheduled_s});
    fig.peak_running = std::max(fig.peak_running, s.num_running);
  }
  fig.preemptions = engine.scheduler_stats().preemptions;
  fig.outputs.resize(w.prompts.size());
  for (inferkit::RequestOutcome& r : done) {
    const auto at = std::find(ids.begin(), ids.end(), r.id) - ids.begin();
    fig.outputs[static_cast<std::size_t>(at)] = std::move(r.output);
  }
  return fig;
}

// The same workload through the simulator, priced by `cost`.
inferkit::ServingSummary predict(const Workload& w, const Config& c, const Flags& f,
                                 const KvPool& kv, const inferkit::LinearStepCostModel& cost) {
  std::vector<inferkit::SimRequestSpec> specs;
  for (std::size_t i = 0; i < w.prompts.size(); ++i) {
    inferkit::SimRequestSpec s;
    s.arrival_s = w.arrivals[i];
    s.prompt_tokens = static_cast<std::int64_t>(w.prompts[i].size());
    s.output_tokens = f.max_tokens;
    s.prefix_group = 0;
    s.prefix_tokens = w.system_tokens;
    specs.push_back(s);
  }
  inferkit::BlockAllocator pool(kv.num_blocks, kBlockSize);
  std::optional<inferkit::RadixTree> tree;
  if (c.prefix_cache) tree.emplace(pool);
  inferkit::ContinuousScheduler<> sched(pool, tree ? &*tree : nullptr, scheduler_of(c, f));
  inferkit::SimulationOptions so;
  so.vocab_size = 49152;
  return inferkit::simulate(sched, cost, specs, so).summary;
}

// Tokens each request shares with its fp16 output before the first difference, over all of
// fp16's tokens.
double agreement(const Figures& fig, const Figures& fp16) {
  std::size_t same = 0;
  std::size_t total = 0;
  for (std::size_t i = 0; i < fp16.outputs.size(); ++i) {
    const auto& a = fig.outputs[i];
    const auto& b = fp16.outputs[i];
    std::size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    same += n;
    total += b.size();
  }
  return total > 0 ? static_cast<double>(same) / static_cast<double>(total) : 1.0;
}

// --kv-sweep: the workload once per KV format in the same KV memory (see the file comment).
int kv_sweep(const inferkit::examples::LoadedModel& m, const Workload& w, Flags f) {
  if (f.kv_memory_mb <= 0) f.kv_memory_mb = 32;
  const inferkit::DType dtypes[] = {inferkit::DType::kFloat16, inferkit::DType::kFloat8E4M3,
                                    inferkit::DType::kInt8, inferkit::DType::kInt4};
  const Config config{"continuous", false, false, false};
  std::vector<KvPool> pools;
  std::vector<Figures> figs;
  for (const inferkit::DType dtype : dtypes) {
    std::vector<inferkit::StepSample> samples;
    pools.push_back(kv_pool(m.model, dtype, f));
    figs.push_back(measure(m, w, config, f, pools.back(), samples));
  }
  const auto bytes_per_token = [](const KvPool& pool) {
    return static_cast<double>(pool.page_bytes) / kBlockSize;
  };
  if (f.json) {
    using inferkit::examples::fixed;
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < figs.size(); ++i) {
      const auto& s = figs[i].summary;
      rows.push_back({
          {"kv_dtype", std::string(inferkit::to_string(pools[i].dtype))},
          {"bytes_per_token", fixed(bytes_per_token(pools[i]), 1)},
          {"kv_pages", pools[i].num_blocks},
          {"peak_running", figs[i].peak_running},
          {"preemptions", figs[i].preemptions},
          {"throughput", fixed(s.output_tokens_per_s, 2)},
          {"ttft_p50", fixed(s.ttft.p50, 4)},
          {"ttft_p99", fixed(s.ttft.p99, 4)},
          {"itl_p50", fixed(s.itl.p50, 4)},
          {"agreement_with_fp16", fixed(agreement(figs[i], figs[0]), 4)},
      });
    }
    inferkit::examples::print_json(
        {{"requests", f.requests},
         {"rate", inferkit::examples::significant(f.rate, 6)},
         {"max_tokens", f.max_tokens},
         {"batch", f.batch},
         {"kv_memory_mb", inferkit::examples::significant(f.kv_memory_mb, 6)},
         {"formats", rows}});
    return 0;
  }
  std::printf(
      "serve_bench --kv-sweep: %lld requests of %lld+ prompt tokens, %lld output tokens each, "
      "at most %lld\nsequences per step, %.1f MB of KV pages (16 tokens), continuous batching "
      "without the prefix cache, %s.\n\n",
      f.requests, static_cast<long long>(w.prompts[0].size()), f.max_tokens, f.batch,
      f.kv_memory_mb, m.model.config().name.c_str());
  std::printf("%-9s %11s %9s %13s %11s %9s %9s %9s %14s\n", "KV", "bytes/token", "KV pages",
              "users at once", "preemptions", "tokens/s", "TTFT p50", "ITL p50", "same as fp16");
  for (std::size_t i = 0; i < figs.size(); ++i) {
    const auto& s = figs[i].summary;
    std::printf("%-9s %11.0f %9d %13d %11lld %9.1f %8.3fs %8.4fs %13.1f%%\n",
                std::string(inferkit::to_string(pools[i].dtype)).c_str(), bytes_per_token(pools[i]),
                pools[i].num_blocks, figs[i].peak_running,
                static_cast<long long>(figs[i].preemptions), s.output_tokens_per_s, s.ttft.p50,
                s.itl.p50, 100.0 * agreement(figs[i], figs[0]));
  }
  std::printf(
      "\nusers at once: the most requests holding KV pages in one step, measured. same as fp16: "
      "each\nrequest's greedy tokens before its first difference from fp16 KV's, over all "
      "tokens.\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return inferkit::examples::run_main("serve_bench", kUsage, [&](CLI::App& app) {
    Flags f;
    add_flags(app, f);
    app.parse(argc, argv);
    const inferkit::examples::LoadedModel m(
        inferkit::examples::model_path(f.model),
        inferkit::examples::activation_precision(f.activations));
    const Workload w = make_workload(f, m.tokenizer);
    if (f.kv_sweep) return kv_sweep(m, w, f);
    const KvPool pool = kv_pool(m.model, inferkit::examples::kv_dtype(f.kv_dtype), f);
    const Config configs[] = {{"static", true, false, false},
                              {"continuous", false, false, false},
                              {"continuous+prefix", false, true, false},
                              {"continuous+prefix+ngram", false, true, true}};
    std::vector<inferkit::StepSample> samples;
    std::vector<Figures> measured;
    for (const Config& c : configs) measured.push_back(measure(m, w, c, f, pool, samples));
    // One cost model for every configuration, fitted to all measured steps (speculative steps
    // included: their rows are tokens like any other).
    const inferkit::LinearStepCostModel cost = inferkit::fit_linear_cost_model(samples);
    std::vector<inferkit::ServingSummary> predicted;
    for (const Config& c : configs) predicted.push_back(predict(w, c, f, pool, cost));
    if (f.json) {
      using inferkit::examples::fixed;
      using inferkit::examples::significant;
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      for (std::size_t i = 0; i < measured.size(); ++i) {
        const auto& s = measured[i].summary;
        rows.push_back({
            {"name", configs[i].name},
            {"throughput", fixed(s.output_tokens_per_s, 2)},
            {"ttft_p50", fixed(s.ttft.p50, 4)},
            {"ttft_p99", fixed(s.ttft.p99, 4)},
            {"itl_p50", fixed(s.itl.p50, 4)},
            {"itl_p99", fixed(s.itl.p99, 4)},
            {"prefix_hit_rate", fixed(measured[i].prefix_hit_rate, 4)},
            {"acceptance", fixed(measured[i].acceptance, 4)},  // -1: no speculation
            {"predicted_throughput", fixed(predicted[i].output_tokens_per_s, 2)},
            {"predicted_ttft_p50", fixed(predicted[i].ttft.p50, 4)},
            {"predicted_itl_p50", fixed(predicted[i].itl.p50, 4)},
        });
      }
      inferkit::examples::print_json({
          {"requests", f.requests},
          {"rate", significant(f.rate, 6)},
          {"max_tokens", f.max_tokens},
          {"cost_model",
           {
               {"fixed_s", significant(cost.fixed_s, 6)},
               {"per_token_s", significant(cost.per_token_s, 6)},
               {"per_sequence_s", significant(cost.per_sequence_s, 6)},
               {"per_context_token_s", significant(cost.per_context_token_s, 6)},
           }},
          {"kv_dtype", std::string(inferkit::to_string(pool.dtype))},
          {"kv_pages", pool.num_blocks},
          {"configs", rows},
      });
      return 0;
    }
    std::printf(
        "serve_bench: %lld requests sharing a %lld-token system prompt, Poisson arrivals at "
        "%g/s,\n%lld output tokens each, at most %lld sequences per step, %s, %d %s KV "
        "pages.\n\n",
        f.requests, static_cast<long long>(w.system_tokens), f.rate, f.max_tokens, f.batch,
        m.model.config().name.c_str(), pool.num_blocks,
        std::string(inferkit::to_string(pool.dtype)).c_str());
    std::printf("%-24s %9s %9s %9s %9s %9s %7s %7s | %9s %9s %9s\n", "", "tokens/s", "TTFT p50",
                "TTFT p99", "ITL p50", "ITL p99", "prefix", "accept", "sim tok/s", "sim TTFT",
                "sim ITL");
    for (std::size_t i = 0; i < measured.size(); ++i) {
      const auto& s = measured[i].summary;
      char accept[16] = "-";
      if (measured[i].acceptance >= 0) {
        std::snprintf(accept, sizeof accept, "%.0f%%", 100.0 * measured[i].acceptance);
      }
      std::printf("%-24s %9.1f %8.3fs %8.3fs %8.4fs %8.4fs %6.0f%% %7s | %9.1f %8.3fs %8.4fs\n",
                  configs[i].name, s.output_tokens_per_s, s.ttft.p50, s.ttft.p99, s.itl.p50,
                  s.itl.p99, 100.0 * measured[i].prefix_hit_rate, accept,
                  predicted[i].output_tokens_per_s, predicted[i].ttft.p50, predicted[i].itl.p50);
    }
    std::printf(
        "\nsim: the same requests through the simulator with a step cost fitted to the %zu steps "
        "measured\nabove: %.2f ms a step + %.1f us a token + %.1f us a sequence + %.3f us per 1K "
        "cached tokens read\n(speculation is not simulated: its row predicts the same engine "
        "without drafts).\n",
        samples.size(), 1e3 * cost.fixed_s, 1e6 * cost.per_token_s, 1e6 * cost.per_sequence_s,
        1e9 * cost.per_context_token_s);
    return 0;
  });
}
