// SPDX-License-Identifier: Apache-2.0
// Benchmarks of CPU attention over paged KV (Llama-3-8B-like heads: 32 query, 8 KV, head_dim
// 128, fp16 KV, page size 16). Decode reports KV bytes/s and its ratio to a streaming read of
// memory measured in the same process with the same threads, FMA utilization against a measured
// FMA peak, paged (shuffled pages) vs the same kernel on an identity page table, the speedup
// over a naive scalar kernel, and prefill GFLOP/s against an Eigen GEMM of the same shapes.
// Run: OMP_NUM_THREADS=2 ./inferkit_bench_attention
// GCC 12's AVX-512 intrinsics (used by Eigen and below) self-initialize "undefined" operands,
// which -Wmaybe-uninitialized flags at every inlined use: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <benchmarks/support/bench_support.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <inferkit/attention/attention.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/rng.hpp>
#include <memory>
#include <new>
#include <numeric>
#include <utility>
#include <vector>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif
#if INFERKIT_HAS_AVX512
#  include <immintrin.h>
#endif

namespace {

using namespace inferkit;
using bench::Clock;
using bench::HugeBuffer;
using bench::num_threads;
using bench::seconds_since;

constexpr std::int32_t kQoHeads = 32;
constexpr std::int32_t kKvHeads = 8;
constexpr std::int32_t kHeadDim = 128;
constexpr std::int32_t kBlockSize = 16;
// 2 GiB of K+V (1 GiB each): the largest case (32 x 16K) fills it; smaller cases cycle through
// disjoint page sets of it, so every case streams from DRAM, not from the 105 MiB L3.
constexpr std::int32_t kPoolBlocks = 32768;

/// Streaming read bandwidth (bytes/s): the best of several parallel sums over 1 GiB.
/// The streaming-read baseline: a 1 GiB buffer (same allocation as the KV pool) summed by the
/// same OpenMP threads with 512-bit loads.
struct StreamBuffer {
  static constexpr std::size_t kFloats = std::size_t{1} << 28;  // 1 GiB
  static constexpr std::size_t kChunk = 4096;                   // floats per parallel task
  HugeBuffer<float> buf{kFloats};

  StreamBuffer() {
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static)
#endif
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(kFloats); ++i) {
      buf[static_cast<std::size_t>(i)] = static_cast<float>(i & 7);
    }
  }
  static StreamBuffer& get() {
    static StreamBuffer b;
    return b;
  }

  /// Sums chunks [first, first + count) (modulo the buffer), in parallel. A count above the
  /// buffer's size is read in passes of at most one buffer each: split across threads in one
  /// pass, the second thread would read the first one's lines again while they are still in
  /// the last-level cache, and a 2 GiB read would count half its bytes from DRAM.
  double sum_chunks(std::int64_t first, std::int64_t count) const {
    const auto chunks = static_cast<std::int64_t>(kFloats / kChunk);
    double total = 0.0;
    for (std::int64_t done = 0; done < count;) {
      const std::int64_t pass = std::min(count - done, chunks);
      total += sum_distinct_chunks(first + done, pass);
      done += pass;
    }
    return total;
  }

  /// Sums chunks [first, first + count) (modulo the buffer; count <= the buffer), in parallel.
  double sum_distinct_chunks(std::int64_t first, std::int64_t count) const {
    const auto chunks = static_cast<std::int64_t>(kFloats / kChunk);
    double total = 0.0;
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static) reduction(+ : total)
#endif
    for (std::int64_t c = 0; c < count; ++c) {
      const float* p = buf.get() + ((first + c) % chunks) * static_cast<std::int64_t>(kChunk);
#if INFERKIT_HAS_AVX512
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (std::size_t i = 0; i < kChunk; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
      }
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
      for (float x : lanes) total += static_cast<double>(x);
#else
      float s[8] = {};
      for (std::size_t i = 0; i < kChunk; i += 8) {
        for (std::size_t j = 0; j < 8; ++j) s[j] += p[i + j];
      }
      for (float x : s) total += static_cast<double>(x);
#endif
    }
    return total;
  }

  /// Bytes/s of streaming `bytes` per call, calls cycling through the buffer (so small sizes
  /// still come from DRAM), repeated to >= 512 MiB per sample; best of `samples`.
  double bytes_per_second(double bytes, int samples = 3) const {
    const auto per_call =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes / (kChunk * sizeof(float))));
    const std::int64_t calls =
        std::max<std::int64_t>(1, (std::int64_t{512} << 20) / (per_call * 4 * kChunk));
    double best = 0.0;
    std::int64_t first = 0;
    for (int rep = 0; rep < samples; ++rep) {
      const auto t0 = Clock::now();
      for (std::int64_t i = 0; i < calls; ++i) {
        benchmark::DoNotOptimize(sum_chunks(first, per_call));
        first += per_call;
      }
      best = std::max(
          best, static_cast<double>(calls * per_call) * kChunk * sizeof(float) / seconds_since(t0));
    }
    return best;
  }
};

/// Process-wide streaming read bandwidth (1 GiB per sample), measured once.
double stream_bytes_per_second() {
  static const double bw = StreamBuffer::get().bytes_per_second(1024.0 * 1024.0 * 1024.0, 5);
  return bw;
}

/// Peak fp32 FMA rate (multiply-adds per second, all lanes, all threads), measured with
/// independent FMA chains in registers.
double fma_peak_per_second() {
  static const double peak = [] {
#if INFERKIT_HAS_AVX512
    double best = 0.0;
    constexpr std::int64_t kIters = 10'000'000;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = Clock::now();
      float sink = 0.0f;
#  if INFERKIT_HAS_OPENMP
#    pragma omp parallel reduction(+ : sink)
#  endif
      {
        // 16 independent chains (more than FMA latency x ports), kept in registers.
        __m512 acc[16];
        for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
        const __m512 m = _mm512_set1_ps(0.999999f);
        const __m512 a = _mm512_set1_ps(1e-7f);
        for (std::int64_t it = 0; it < kIters; ++it) {
          for (auto& x : acc) x = _mm512_fmadd_ps(x, m, a);
        }
        __m512 s = acc[0];
        for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
        alignas(64) float lanes[16];
        _mm512_store_ps(lanes, s);
        for (float x : lanes) sink += x;
      }
      benchmark::DoNotOptimize(sink);
      best = std::max(
          best, static_cast<double>(kIters) * 16.0 * 16.0 * num_threads() / seconds_since(t0));
    }
    return best;
#else
    return 0.0;
#endif
  }();
  return peak;
}

/// One layer's paged fp16 K/V pool, filled with small finite values.
struct KvPool {
  static constexpr std::size_t kElems = std::size_t{kPoolBlocks} * kKvHeads * kBlockSize * kHeadDim;
  HugeBuffer<float16> k{kElems}, v{kElems};
  PagedKVView<const float16> view;

  KvPool() {
    view.num_blocks = kPoolBlocks;
    view.num_kv_heads = kKvHeads;
    view.block_size = kBlockSize;
    view.head_dim = kHeadDim;
    const std::size_t n = kElems;
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static)
#endif
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) {
      const auto h = static_cast<std::uint32_t>(i) * 2654435761u;
      // sign | exponent 0x3000..0x3BFF: |x| in [2^-3, 1)
      const auto bits =
          static_cast<std::uint16_t>((0x3000u + ((h >> 7) % 0x0C00u)) | (h & 0x8000u));
      k[static_cast<std::size_t>(i)] = float16::from_bits(bits);
      v[static_cast<std::size_t>(i)] =
          float16::from_bits(static_cast<std::uint16_t>(bits ^ 0x8000u));
    }
    view.k = k.get();
    view.v = v.get();
  }
  static KvPool& get() {
    static KvPool pool;
    return pool;
  }
};

/// Page tables for `batch` sequences of `ctx` tokens: `replicas` disjoint sets drawn from a
/// shuffled (or identity) order of the pool's blocks.
struct PageSets {
  std::int32_t replicas = 0;
  std::vector<std::vector<std::int32_t>> indices;
  std::vector<std::int32_t> indptr, last;

  PageSets(std::int32_t batch, std::int32_t ctx, bool shuffled) {
    const std::int32_t pages_per_seq = (ctx + kBlockSize - 1) / kBlockSize;
    const std::int32_t pages = batch * pages_per_seq;
    replicas = std::max(1, kPoolBlocks / pages);
    std::vector<std::int32_t> order(kPoolBlocks);
    std::iota(order.begin(), order.end(), 0);
    if (shuffled) {
      Rng rng(42);
      for (std::size_t i = order.size(); i > 1; --i) {
        std::swap(order[i - 1], order[rng.below(static_cast<std::uint32_t>(i))]);
      }
    }
    for (std::int32_t r = 0; r < replicas; ++r) {
      indices.emplace_back(order.begin() + std::int64_t{r} * pages,
                           order.begin() + std::int64_t{r + 1} * pages);
    }
    for (std::int32_t s = 0; s <= batch; ++s) indptr.push_back(s * pages_per_seq);
    last.assign(static_cast<std::size_t>(batch), ctx - (pages_per_seq - 1) * kBlockSize);
  }
  PageTableView table(std::int32_t r) const {
    return {indptr.data(), indices[static_cast<std::size_t>(r)].data(), last.data(),
            static_cast<std::int32_t>(last.size())};
  }
};

std::vector<float> random_queries(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> q(n);
  for (float& x : q) x = rng.uniform() * 2.0f - 1.0f;
  return q;
}

/// Times `fn(replica)` over the replicas, cycling; returns seconds per call.
template <class Fn>
double time_calls(benchmark::State& state, std::int32_t replicas, Fn&& fn) {
  double total = 0.0;
  std::int64_t calls = 0;
  std::int32_t r = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    fn(r);
    total += seconds_since(t0);
    ++calls;
    r = (r + 1) % replicas;
  }
  return total / static_cast<double>(std::max<std::int64_t>(calls, 1));
}

/// Decode arguments over the pool for queries `q` into `out`; the caller sets `pages`.
PagedDecodeArgs<float16> decode_args(const std::vector<float>& q, std::vector<float>& out,
                                     std::int32_t num_qo_heads = kQoHeads) {
  PagedDecodeArgs<float16> args;
  args.q = q.data();
  args.kv = KvPool::get().view;
  args.num_qo_heads = num_qo_heads;
  args.head_dim = kHeadDim;
  args.out = out.data();
  return args;
}

/// Streams `bytes` per call from the StreamBuffer, continuing where the previous call stopped
/// (so consecutive calls read fresh memory); returns seconds.
struct StreamCursor {
  std::int64_t first = 0;

  double read(double bytes) {
    const auto count = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(bytes / (StreamBuffer::kChunk * sizeof(float))));
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(StreamBuffer::get().sum_chunks(first, count));
    first += count;
    return seconds_since(t0);
  }
};

/// Decode over `batch` sequences of `ctx` tokens. Each iteration times, back to back, the kernel
/// on the case's page tables, a streaming read of the same number of bytes and, for shuffled
/// pages, the same kernel on an identity page table; the ratios are of the summed times, so
/// a shared machine's drift (its bandwidth moves by 20-30% over minutes here) hits all three
/// alike instead of whichever was measured at a bad moment. `group` query heads share each of
/// the 8 KV heads: 4 is Llama-3-8B (the target shape); 8 (Llama-3-70B) doubles the FMAs per
/// byte, and 1 (multi-head) sends 4x the query rows through the same pages one at a time.
void BM_PagedDecode(benchmark::State& state) {
  const auto batch = static_cast<std::int32_t>(state.range(0));
  const auto ctx = static_cast<std::int32_t>(state.range(1));
  const bool shuffled = state.range(2) != 0;
  const auto num_qo_heads = static_cast<std::int32_t>(state.range(3)) * kKvHeads;
  const double stream = stream_bytes_per_second();
  const double fma_peak = fma_peak_per_second();
  const PageSets sets(batch, ctx, shuffled);
  const PageSets identity(batch, ctx, false);
  const auto q = random_queries(static_cast<std::size_t>(batch * num_qo_heads * kHeadDim), 1);
  std::vector<float> out(q.size());
  PagedDecodeArgs<float16> args = decode_args(q, out, num_qo_heads);
  const double bytes = 2.0 * batch * ctx * kKvHeads * kHeadDim * sizeof(float16);
  const auto run = [&](const PageSets& s, std::int32_t r) {
    args.pages = s.table(r % s.replicas);
    const auto t0 = Clock::now();
    paged_decode(cpu{}, args);
    benchmark::DoNotOptimize(out.data());
    return seconds_since(t0);
  };
  StreamCursor cursor;
  double kernel_s = 0.0, stream_s = 0.0, contiguous_s = 0.0;
  std::int64_t calls = 0;
  std::int32_t r = 0;
  for (auto _ : state) {
    kernel_s += run(sets, r);
    state.PauseTiming();
    stream_s += cursor.read(bytes);
    if (shuffled) contiguous_s += run(identity, r);
    state.ResumeTiming();
    ++calls;
    ++r;
  }
  const double sec = kernel_s / static_cast<double>(std::max<std::int64_t>(calls, 1));
  const double bps = bytes / sec;
  const double fmas = 2.0 * batch * ctx * num_qo_heads * kHeadDim;  // QK + PV multiply-adds
  state.counters["kv_bytes_per_second"] = bps;
  state.counters["stream_bytes_per_second"] = bytes * static_cast<double>(calls) / stream_s;
  state.counters["ratio_vs_stream"] = stream_s / kernel_s;
  state.counters["ratio_vs_process_stream"] = bps / stream;
  state.counters["fma_utilization"] = fma_peak > 0.0 ? fmas / sec / fma_peak : 0.0;
  state.counters["working_set_MiB"] =
      bytes * std::min<double>(sets.replicas, 1e9) / (1024.0 * 1024.0);
  if (shuffled) state.counters["ratio_paged_vs_contiguous"] = contiguous_s / kernel_s;
  state.SetLabel(shuffled ? "shuffled pages" : "identity page table");
}

/// The naive kernel: scalar loops, two-pass softmax, OpenMP over (sequence, query head).
void naive_decode(const float* q, const PagedKVView<const float16>& kv, const PageTableView& pt,
                  std::int32_t ctx, float* out) {
  const std::int32_t group = kQoHeads / kKvHeads;
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static)
#endif
  for (std::int32_t sh = 0; sh < pt.num_seqs * kQoHeads; ++sh) {
    const std::int32_t s = sh / kQoHeads;
    const std::int32_t h = sh % kQoHeads;
    const float* qh = q + std::int64_t{sh} * kHeadDim;
    std::vector<float> logits(static_cast<std::size_t>(ctx));
    float m = -INFINITY;
    for (std::int32_t t = 0; t < ctx; ++t) {
      const float16* k =
          kv.k + kv.offset(pt.indices[pt.indptr[s] + t / kBlockSize], h / group, t % kBlockSize);
      float dot = 0.0f;
      for (std::int32_t d = 0; d < kHeadDim; ++d) dot += qh[d] * to_float(k[d]);
      logits[static_cast<std::size_t>(t)] = dot / std::sqrt(static_cast<float>(kHeadDim));
      m = std::max(m, logits[static_cast<std::size_t>(t)]);
    }
    float* o = out + std::int64_t{sh} * kHeadDim;
    std::fill_n(o, kHeadDim, 0.0f);
    float sum = 0.0f;
    for (std::int32_t t = 0; t < ctx; ++t) {
      const float p = std::exp(logits[static_cast<std::size_t>(t)] - m);
      sum += p;
      const float16* v =
          kv.v + kv.offset(pt.indices[pt.indptr[s] + t / kBlockSize], h / group, t % kBlockSize);
      for (std::int32_t d = 0; d < kHeadDim; ++d) o[d] += p * to_float(v[d]);
    }
    for (std::int32_t d = 0; d < kHeadDim; ++d) o[d] /= sum;
  }
}

void BM_NaiveDecode(benchmark::State& state) {
  const auto batch = static_cast<std::int32_t>(state.range(0));
  const auto ctx = static_cast<std::int32_t>(state.range(1));
  KvPool& pool = KvPool::get();
  const PageSets sets(batch, ctx, true);
  const auto q = random_queries(static_cast<std::size_t>(batch * kQoHeads * kHeadDim), 2);
  std::vector<float> out(q.size()), out_kernel(q.size());
  const double naive = time_calls(state, sets.replicas, [&](std::int32_t r) {
    naive_decode(q.data(), pool.view, sets.table(r), ctx, out.data());
    benchmark::DoNotOptimize(out.data());
  });
  // The kernel on the same shape, same replicas, in the same run.
  PagedDecodeArgs<float16> args = decode_args(q, out_kernel);
  const auto t0 = Clock::now();
  constexpr int kReps = 20;
  for (int i = 0; i < kReps; ++i) {
    args.pages = sets.table(i % sets.replicas);
    paged_decode(cpu{}, args);
  }
  const double kernel = seconds_since(t0) / kReps;
  const double bytes = 2.0 * batch * ctx * kKvHeads * kHeadDim * sizeof(float16);
  state.counters["kv_bytes_per_second"] = bytes / naive;
  state.counters["kernel_speedup_vs_naive"] = naive / kernel;
}

/// Prefill: a chunk of `chunk` new tokens over `cached` cached tokens, one sequence; GFLOP/s
/// (useful causal flops) against Eigen GEMMs of the same shapes (per KV head: the group's
/// queries x K^T, then P x V) with the same threads.
void BM_PagedPrefill(benchmark::State& state) {
  const auto chunk = static_cast<std::int32_t>(state.range(0));
  const auto cached = static_cast<std::int32_t>(state.range(1));
  const std::int32_t len = cached + chunk;
  KvPool& pool = KvPool::get();
  const PageSets sets(1, len, true);
  const auto q = random_queries(static_cast<std::size_t>(chunk * kQoHeads * kHeadDim), 3);
  std::vector<float> out(q.size());
  const std::vector<std::int32_t> q_indptr = {0, chunk};
  PagedPrefillArgs<float16> args;
  args.q = q.data();
  args.q_indptr = q_indptr.data();
  args.kv = pool.view;
  args.num_qo_heads = kQoHeads;
  args.head_dim = kHeadDim;
  args.out = out.data();
  const double sec = time_calls(state, sets.replicas, [&](std::int32_t r) {
    args.pages = sets.table(r);
    paged_prefill(cpu{}, args);
    benchmark::DoNotOptimize(out.data());
  });
  double visible = 0.0;  // sum over queries of visible keys
  for (std::int32_t i = 0; i < chunk; ++i) visible += cached + i + 1;
  const double flops = 4.0 * kQoHeads * kHeadDim * visible;

  // Eigen GEMMs of the same shapes.
  const std::int32_t group = kQoHeads / kKvHeads;
  Eigen::MatrixXf qm = Eigen::MatrixXf::Random(group * chunk, kHeadDim);
  Eigen::MatrixXf km = Eigen::MatrixXf::Random(len, kHeadDim);
  Eigen::MatrixXf vm = Eigen::MatrixXf::Random(len, kHeadDim);
  Eigen::MatrixXf sm(group * chunk, len), om(group * chunk, kHeadDim);
  double gemm_sec = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    for (std::int32_t h = 0; h < kKvHeads; ++h) {
      sm.noalias() = qm * km.transpose();
      om.noalias() = sm * vm;
    }
    benchmark::DoNotOptimize(om.data());
    gemm_sec = std::min(gemm_sec, seconds_since(t0));
  }
  const double gemm_flops = 4.0 * kKvHeads * group * chunk * static_cast<double>(len) * kHeadDim;
  state.counters["GFLOP_per_second"] = flops / sec * 1e-9;
  state.counters["eigen_gemm_GFLOP_per_second"] = gemm_flops / gemm_sec * 1e-9;
  state.counters["ratio_vs_eigen_gemm"] = (flops / sec) / (gemm_flops / gemm_sec);
}

void BM_StreamRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(stream_bytes_per_second());
  state.counters["stream_bytes_per_second"] = stream_bytes_per_second();
  state.counters["fma_peak_per_second"] = fma_peak_per_second();
  state.counters["threads"] = num_threads();
}

BENCHMARK(BM_StreamRead)->Iterations(1)->Unit(benchmark::kMillisecond);
// The target shape (GQA 4) over the grid, then GQA 1 and 8 at one shape.
BENCHMARK(BM_PagedDecode)
    ->ArgNames({"batch", "ctx", "shuffled", "group"})
    ->ArgsProduct({{1, 8, 32}, {1024, 4096, 16384}, {0, 1}, {4}})
    ->Args({8, 4096, 1, 1})
    ->Args({8, 4096, 1, 8})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.3)
    ->UseRealTime();
BENCHMARK(BM_NaiveDecode)
    ->ArgNames({"batch", "ctx"})
    ->Args({8, 4096})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PagedPrefill)
    ->ArgNames({"chunk", "cached"})
    ->Args({512, 4096})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
