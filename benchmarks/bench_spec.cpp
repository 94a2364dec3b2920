// SPDX-License-Identifier: Apache-2.0
// Benchmarks for spec/: chain verification of 64 sequences x K = 5 drafts over a 128K vocabulary
// (fp32 probability rows) and top-p sampling over 128K logits. Verification is a memory-bound pass
// over the rows it touches (p_i and q_i at a rejection, p_{K+1} for a bonus), so it is reported
// against a streaming read (a sum) of exactly those rows, timed in the same run, with the same
// threads. Sampling is reported against the same streaming read and against a full-sort top-p.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/chain_verifier.hpp>
#include <inferkit/spec/sampling.hpp>
#include <numeric>
#include <vector>

namespace {

constexpr std::size_t kVocab = 128 * 1024;
constexpr std::size_t kSeqs = 64;
constexpr std::size_t kDrafts = 5;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Scales `row` to sum to 1 (the verifiers reject rows that are not distributions).
void normalize(float* row, std::size_t vocab) {
  const double sum = std::accumulate(row, row + vocab, 0.0);
  const auto inv = static_cast<float>(1.0 / sum);
  for (std::size_t i = 0; i < vocab; ++i) row[i] *= inv;
}

// Peaked random rows: exp of exponential noise, normalized.
void fill_row(float* row, std::size_t vocab, inferkit::Rng& rng, float scale) {
  for (std::size_t i = 0; i < vocab; ++i) {
    row[i] = std::exp(scale * static_cast<float>(-std::log(1.0 - rng.uniform_double())));
  }
  normalize(row, vocab);
}

struct ChainData {
  std::vector<std::int32_t> offsets;
  std::vector<std::int32_t> drafts;
  std::vector<float> q;  // [seqs * K][vocab]
  std::vector<float> p;  // [seqs * (K + 1)][vocab]
};

// disjoint = false: q is a 70/30 mix of p and noise (acceptance ~0.75 per position);
// disjoint = true: q lives where p is ~0, so every sequence rejects its first draft (worst case).
const ChainData& chain_data(bool disjoint) {
  static ChainData data[2];
  ChainData& d = data[disjoint ? 1 : 0];
  if (!d.p.empty()) return d;
  inferkit::Rng rng(42, disjoint ? 1 : 0);
  d.p.resize(kSeqs * (kDrafts + 1) * kVocab);
  d.q.resize(kSeqs * kDrafts * kVocab);
  for (std::size_t s = 0; s <= kSeqs; ++s)
    d.offsets.push_back(static_cast<std::int32_t>(s * kDrafts));
  std::vector<float> noise(kVocab);
  for (std::size_t s = 0; s < kSeqs; ++s) {
    for (std::size_t i = 0; i <= kDrafts; ++i) {
      float* p = d.p.data() + (s * (kDrafts + 1) + i) * kVocab;
      fill_row(p, kVocab, rng, 1.5f);
      if (disjoint) {
        std::fill(p + kVocab / 2, p + kVocab, 0.0f);
        normalize(p, kVocab);
      }
      if (i == kDrafts) break;
      float* q = d.q.data() + (s * kDrafts + i) * kVocab;
      fill_row(noise.data(), kVocab, rng, 1.5f);
      for (std::size_t x = 0; x < kVocab; ++x) {
        q[x] = disjoint ? (x < kVocab / 2 ? 0.0f : noise[x]) : 0.7f * p[x] + 0.3f * noise[x];
      }
      normalize(q, kVocab);
      d.drafts.push_back(inferkit::sample_categorical(std::span<const float>(q, kVocab), rng));
    }
  }
  return d;
}

void BM_ChainVerify(benchmark::State& state) {
  const bool disjoint = state.range(0) != 0;
  const ChainData& d = chain_data(disjoint);
  const inferkit::ChainBatch batch{kVocab, d.offsets, d.drafts, d.q, d.p};
  std::vector<std::int32_t> tokens(kSeqs * (kDrafts + 1));
  std::vector<std::int32_t> counts(kSeqs);
  std::vector<inferkit::Rng> rngs;
  const auto reset = [&] {
    rngs.clear();
    for (std::size_t s = 0; s < kSeqs; ++s) rngs.emplace_back(7, s);
  };
  // The rows each sequence's verification reads in full: p_i, q_i at a rejection at i, or the
  // bonus row p_{K+1}. Same seeds every iteration, so the same rows.
  reset();
  inferkit::verify_chain_batch(batch, inferkit::VerifyMode::kSample, rngs, {tokens, counts});
  std::vector<std::vector<const float*>> rows(kSeqs);
  std::size_t touched_rows = 0;
  std::size_t accepted = 0;
  for (std::size_t s = 0; s < kSeqs; ++s) {
    const auto n = static_cast<std::size_t>(counts[s]);
    accepted += n - 1;
    rows[s].push_back(d.p.data() + (s * (kDrafts + 1) + n - 1) * kVocab);
    if (n <= kDrafts) rows[s].push_back(d.q.data() + (s * kDrafts + n - 1) * kVocab);
    touched_rows += rows[s].size();
  }
  const double touched_bytes = static_cast<double>(touched_rows * kVocab * sizeof(float));
  // Baseline: a streaming sum of exactly those rows, parallel over sequences like the verifier.
  const auto stream = [&] {
    double total = 0.0;
    const auto n = static_cast<std::int64_t>(kSeqs);
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(dynamic) reduction(+ : total)
#endif
    for (std::int64_t s = 0; s < n; ++s) {
      for (const float* row : rows[static_cast<std::size_t>(s)]) {
        float lanes[16] = {};
        for (std::size_t i = 0; i < kVocab; i += 16) {
          for (std::size_t l = 0; l < 16; ++l) lanes[l] += row[i + l];
        }
        total += static_cast<double>(std::accumulate(lanes, lanes + 16, 0.0f));
      }
    }
    return total;
  };
  double verify_s = 0.0;
  double stream_s = 0.0;
  for (auto _ : state) {
    state.PauseTiming();
    reset();
    state.ResumeTiming();
    const auto t0 = Clock::now();
    inferkit::verify_chain_batch(batch, inferkit::VerifyMode::kSample, rngs, {tokens, counts});
    verify_s += seconds_since(t0);
    benchmark::DoNotOptimize(tokens.data());
    state.PauseTiming();
    const auto t1 = Clock::now();
    benchmark::DoNotOptimize(stream());
    stream_s += seconds_since(t1);
    state.ResumeTiming();
  }
  const auto iters = static_cast<double>(state.iterations());
  const double batch_rows = static_cast<double>(kSeqs * (kDrafts + 1));
  state.counters["rows_per_s"] = batch_rows * iters / verify_s;
  state.counters["touched_rows"] = static_cast<double>(touched_rows);
  state.counters["accepted_per_seq"] = static_cast<double>(accepted) / kSeqs;
  state.counters["verify_GBps"] = touched_bytes * iters / verify_s / 1e9;
  state.counters["stream_GBps"] = touched_bytes * iters / stream_s / 1e9;
  state.counters["ratio_vs_stream"] = stream_s / verify_s;
  state.counters["full_batch_GBps"] =
      static_cast<double>((d.p.size() + d.q.size()) * sizeof(float)) * iters / verify_s / 1e9;
}
BENCHMARK(BM_ChainVerify)->Arg(0)->Arg(1)->ArgNames({"reject_all"})->Unit(benchmark::kMicrosecond);

// Top-p (0.9) at temperature 0.8 over 128K logits, then one categorical draw.
void BM_SampleTopP(benchmark::State& state) {
  inferkit::Rng rng(3);
  std::vector<float> logits(kVocab);
  for (float& x : logits) x = 6.0f * rng.uniform() + static_cast<float>(rng.below(3));
  std::vector<float> probs(kVocab);
  inferkit::SamplingWorkspace ws;
  inferkit::SamplingParams params;
  params.temperature = 0.8f;
  params.top_p = 0.9f;
  const bool full_sort = state.range(0) != 0;
  // Baseline 1: streaming sum of the logits. Baseline 2: top-p by a full descending sort.
  const auto stream = [&] {
    float lanes[16] = {};
    for (std::size_t i = 0; i < kVocab; i += 16) {
      for (std::size_t l = 0; l < 16; ++l) lanes[l] += logits[i + l];
    }
    return std::accumulate(lanes, lanes + 16, 0.0f);
  };
  std::vector<float> sorted(kVocab);
  const auto sort_top_p = [&] {
    inferkit::softmax(logits, probs, params.temperature);
    sorted.assign(probs.begin(), probs.end());
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    double cum = 0.0;
    float cut = 0.0f;
    for (float v : sorted) {
      cum += v;
      cut = v;
      if (cum >= params.top_p) break;
    }
    for (float& p : probs) p = p >= cut ? p : 0.0f;
    return inferkit::sample_categorical(probs, rng);
  };
  double op_s = 0.0;
  double stream_s = 0.0;
  double sort_s = 0.0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    if (full_sort) {
      benchmark::DoNotOptimize(sort_top_p());
    } else {
      inferkit::logits_to_probs(logits, params, probs, ws);
      benchmark::DoNotOptimize(inferkit::sample_categorical(probs, rng));
    }
    op_s += seconds_since(t0);
    state.PauseTiming();
    auto t1 = Clock::now();
    for (int r = 0; r < 8; ++r) benchmark::DoNotOptimize(stream());
    stream_s += seconds_since(t1) / 8;
    if (!full_sort) {
      t1 = Clock::now();
      benchmark::DoNotOptimize(sort_top_p());
      sort_s += seconds_since(t1);
    }
    state.ResumeTiming();
  }
  const auto iters = static_cast<double>(state.iterations());
  const double bytes = static_cast<double>(kVocab * sizeof(float));
  state.counters["rows_per_s"] = iters / op_s;
  state.counters["GBps"] = bytes * iters / op_s / 1e9;
  state.counters["ratio_vs_stream"] = stream_s / op_s;
  if (!full_sort) state.counters["speedup_vs_sort"] = sort_s / op_s;
}
BENCHMARK(BM_SampleTopP)->Arg(0)->Arg(1)->ArgNames({"full_sort"})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
