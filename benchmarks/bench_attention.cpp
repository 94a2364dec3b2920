// SPDX-License-Identifier: Apache-2.0
// Benchmarks of CPU attention over paged KV (Llama-3-8B-like heads: 32 query, 8 KV, head_dim
// 128, fp16 KV, page size 16). Decode reports KV bytes/s and its ratio to a streaming read of
// memory measured in the same process with the same threads, and to a read of the same bytes
// through the same page tables without the attention arithmetic (the paged read, the roofline
// a scattered page pool allows), FMA utilization against a measured FMA peak, paged (shuffled
// pages) vs the same kernel on an identity page table, the speedup
// over a naive scalar kernel, and prefill GFLOP/s against an Eigen GEMM of the same shapes; also
// fp8 e4m3 and int8 KV (bytes read: codes plus scales), and a "plain consumer": the same kernels
// compiled in a TU with no -m flag (plain_consumer.cpp, always built as a distribution builds),
// timed in the same iterations as this TU's, so ratio_plain_vs_this_build says what a user who
// does not pass -march=native gets; and one layer of a step whose q, k and v come from a fused
// QKV projection, read in place through the strides against copied out first (the copy time
// the strides remove). The kernels take the path core/cpu_isa.hpp picks:
// INFERKIT_CPU_ISA=avx512|avx2|baseline forces one (BM_StreamRead's label says which ran).
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
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <memory>
#include <new>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif
#if INFERKIT_ARCH_X86
#  include <immintrin.h>
#endif

#ifndef INFERKIT_BENCH_PLAIN_CONSUMER
#  define INFERKIT_BENCH_PLAIN_CONSUMER 0  // set by CMake where plain_consumer.cpp is built
#endif
#if INFERKIT_BENCH_PLAIN_CONSUMER
#  include "plain_consumer.hpp"
#endif

namespace {

using namespace inferkit;
using bench::Clock;
using bench::HugeBuffer;
using bench::num_threads;
using bench::peak_rate;
using bench::seconds_since;

constexpr std::int32_t kQoHeads = 32;
constexpr std::int32_t kKvHeads = 8;
constexpr std::int32_t kHeadDim = 128;
constexpr std::int32_t kBlockSize = 16;
// 2 GiB of K+V (1 GiB each): the largest case (32 x 16K) fills it; smaller cases cycle through
// disjoint page sets of it, so every case streams from DRAM, not from the 105 MiB L3.
constexpr std::int32_t kPoolBlocks = 32768;

// The baselines (streaming read, FMA peak) use the widest vectors the CPU has whatever this TU's
// flags, so a build without -march=native measures the same machine.
#if INFERKIT_ARCH_X86
/// Sum of `n` floats (n a multiple of 64) with 512-bit loads.
__attribute__((target("avx512f"))) double sum_floats_avx512(const float* p, std::size_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::size_t i = 0; i < n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  double total = 0.0;
  for (float x : lanes) total += static_cast<double>(x);
  return total;
}
#endif

/// Sum of `n` floats (n a multiple of 8), in lanes the compiler may vectorize.
double sum_floats_portable(const float* p, std::size_t n) {
  float s[8] = {};
  for (std::size_t i = 0; i < n; i += 8) {
    for (std::size_t j = 0; j < 8; ++j) s[j] += p[i + j];
  }
  double total = 0.0;
  for (float x : s) total += static_cast<double>(x);
  return total;
}

/// The widest streaming sum this CPU runs.
double (*stream_sum())(const float*, std::size_t) {
#if INFERKIT_ARCH_X86
  if (cpu_isa_supported(CpuIsa::kAvx512)) return &sum_floats_avx512;
#endif
  return &sum_floats_portable;
}

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
    const auto sum = stream_sum();
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static) reduction(+ : total)
#endif
    for (std::int64_t c = 0; c < count; ++c) {
      total += sum(buf.get() + ((first + c) % chunks) * static_cast<std::int64_t>(kChunk), kChunk);
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

#if INFERKIT_ARCH_X86
/// Lane-FMAs per second of one thread running `iters` steps of 16 independent 512-bit FMA chains
/// (more than FMA latency x ports), kept in registers.
__attribute__((target("avx512f,fma"))) float fma_chains_avx512(std::int64_t iters) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 m = _mm512_set1_ps(0.999999f);
  const __m512 a = _mm512_set1_ps(1e-7f);
  for (std::int64_t it = 0; it < iters; ++it) {
    // Unrolled, so the chains live in registers: a plain -O2 build left the array on the stack,
    // and the store-to-load latency of each chain measured a fifth of the peak.
    INFERKIT_UNROLL
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float sink = 0.0f;
  for (float x : lanes) sink += x;
  return sink;
}
#endif

#if INFERKIT_ARCH_X86
/// fma_chains_avx512 on 256-bit vectors (12 chains: the 16 ymm registers hold them and the two
/// operands), for the AVX2 path's bound.
__attribute__((target("avx2,fma"))) float fma_chains_avx2(std::int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 m = _mm256_set1_ps(0.999999f);
  const __m256 a = _mm256_set1_ps(1e-7f);
  for (std::int64_t it = 0; it < iters; ++it) {
    INFERKIT_UNROLL
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float sink = 0.0f;
  for (float x : lanes) sink += x;
  return sink;
}
#endif

/// Peak fp32 FMA rate (multiply-adds per second, all lanes, all threads) of the CPU's widest
/// vectors, measured with independent FMA chains in registers; 0 where it has no AVX-512.
double fma_peak_per_second() {
  static const double peak = [] {
#if INFERKIT_ARCH_X86
    if (!cpu_isa_supported(CpuIsa::kAvx512)) return 0.0;
    constexpr std::int64_t kIters = 10'000'000;
    return peak_rate(static_cast<double>(kIters) * 16.0 * 16.0,
                     [] { return fma_chains_avx512(kIters); });
#else
    return 0.0;
#endif
  }();
  return peak;
}

/// The FMA bound of the process's kernel path (cpu_isa(): INFERKIT_CPU_ISA or the best), in
/// lane multiply-adds per second over all threads: fma_peak_per_second on avx512, 12 chains of
/// 256-bit FMAs on avx2 (both ports of a core busy), 0 elsewhere. Measured once.
double fma_bound_per_second() {
  static const double bound = [] {
#if INFERKIT_ARCH_X86
    if (cpu_isa() == CpuIsa::kAvx512) return fma_peak_per_second();
    if (cpu_isa() != CpuIsa::kAvx2) return 0.0;
    constexpr std::int64_t kIters = 10'000'000;
    return peak_rate(static_cast<double>(kIters) * 12.0 * 8.0,
                     [] { return fma_chains_avx2(kIters); });
#else
    return 0.0;
#endif
  }();
  return bound;
}

/// Element `i` of a pool of T, a small finite value from a hash: fp16 |x| in [2^-3, 1); fp8 e4m3
/// |x| in [2^-4, 16) with one code in 20 subnormal (as a quantized cache holds for its smallest
/// values); int8 any code in [-127, 127]; packed int4 (std::uint8_t) any two nibbles. V gets K's
/// negation.
template <class T>
T pool_element(std::uint32_t i, bool v) {
  const std::uint32_t h = i * 2654435761u;
  const std::uint32_t sign = v ? (h & 0x8000u) ^ 0x8000u : h & 0x8000u;
  if constexpr (std::is_same_v<T, float16>) {
    return float16::from_bits(static_cast<std::uint16_t>((0x3000u + ((h >> 7) % 0x0C00u)) | sign));
  } else if constexpr (std::is_same_v<T, float8_e4m3>) {
    const std::uint32_t exp = (h >> 9) % 20 == 0 ? 0u : 3u + (h >> 11) % 8u;
    const std::uint32_t man = exp == 0 ? 1u + (h >> 14) % 7u : (h >> 14) & 7u;
    return float8_e4m3::from_bits(static_cast<std::uint8_t>((sign >> 8) | (exp << 3) | man));
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    const auto byte = static_cast<std::uint8_t>(h >> 9);
    return v ? static_cast<std::uint8_t>(~byte) : byte;
  } else {
    static_assert(std::is_same_v<T, std::int8_t>);
    const auto code = static_cast<std::int32_t>((h >> 9) % 255u) - 127;
    return static_cast<std::int8_t>(v ? -code : code);
  }
}

/// One layer's paged K/V pool of T (fp16, fp8 e4m3 with a scale per block and head, int8 with a
/// scale per token and head, or packed int4, std::uint8_t, with a scale and a zero point per
/// token and head), filled with small finite values.
template <class T>
struct KvPool {
  static constexpr bool kInt4 = std::is_same_v<T, std::uint8_t>;
  static constexpr bool kPerToken = std::is_same_v<T, std::int8_t> || kInt4;
  static constexpr std::size_t kElems =
      std::size_t{kPoolBlocks} * kKvHeads * kBlockSize * (kInt4 ? kHeadDim / 2 : kHeadDim);
  static constexpr std::size_t kScales =
      kPerToken ? std::size_t{kPoolBlocks} * kKvHeads * kBlockSize
                : (std::is_same_v<T, float16> ? 0 : std::size_t{kPoolBlocks} * kKvHeads);
  HugeBuffer<T> k{kElems}, v{kElems};
  std::vector<float> k_scale, v_scale;
  std::vector<float> k_zero, v_zero;  // int4 only
  PagedKVView<const T> view;

  KvPool() : k_scale(kScales, 1.0f / 8.0f), v_scale(kScales, 1.0f / 4.0f) {
    if constexpr (std::is_same_v<T, std::int8_t>) {
      std::fill(k_scale.begin(), k_scale.end(), 1.0f / 127.0f);
      std::fill(v_scale.begin(), v_scale.end(), 1.0f / 127.0f);
    } else if constexpr (kInt4) {
      std::fill(k_scale.begin(), k_scale.end(), 1.0f / 7.5f);
      std::fill(v_scale.begin(), v_scale.end(), 1.0f / 7.5f);
      k_zero.assign(kScales, 7.5f);
      v_zero.assign(kScales, 7.5f);
      view.k_zero = k_zero.data();
      view.v_zero = v_zero.data();
      view.packed_int4 = true;
    }
    view.num_blocks = kPoolBlocks;
    view.num_kv_heads = kKvHeads;
    view.block_size = kBlockSize;
    view.head_dim = kHeadDim;
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static)
#endif
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(kElems); ++i) {
      k[static_cast<std::size_t>(i)] = pool_element<T>(static_cast<std::uint32_t>(i), false);
      v[static_cast<std::size_t>(i)] = pool_element<T>(static_cast<std::uint32_t>(i), true);
    }
    view.k = k.get();
    view.v = v.get();
    if (kScales != 0) {
      view.k_scale = k_scale.data();
      view.v_scale = v_scale.data();
    }
  }
  static KvPool& get() {
    static KvPool pool;
    return pool;
  }
  /// Bytes a decode over `tokens` tokens of `pages` pages reads: K and V codes, scales and int4
  /// zero points.
  static double bytes_read(double tokens, double pages) {
    const double codes = 2.0 * tokens * kKvHeads * (kInt4 ? kHeadDim / 2 : kHeadDim) * sizeof(T);
    if constexpr (kInt4) return codes + 2.0 * tokens * kKvHeads * 8.0;
    if constexpr (std::is_same_v<T, std::int8_t>) return codes + 2.0 * tokens * kKvHeads * 4.0;
    if constexpr (std::is_same_v<T, float16>) return codes;
    return codes + 2.0 * pages * kKvHeads * 4.0;
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

/// Sum of the K and V spans of one page and head (`words` 8-byte words each, a multiple of 8) in
/// 8 independent lanes the compiler vectorizes, with the same lines of the next page's spans
/// prefetched one line pair per line pair read (next_k == nullptr: the last page).
std::uint64_t sum_page_head(const std::uint64_t* k, const std::uint64_t* v, std::size_t words,
                            const char* next_k, const char* next_v) {
  std::uint64_t lanes[8] = {};
  for (std::size_t i = 0; i < words; i += 8) {
    if (next_k != nullptr) {
      __builtin_prefetch(next_k + i * sizeof(std::uint64_t), 0, 3);
      __builtin_prefetch(next_v + i * sizeof(std::uint64_t), 0, 3);
    }
    for (std::size_t j = 0; j < 8; ++j) lanes[j] += k[i + j] ^ v[i + j];
  }
  std::uint64_t total = 0;
  for (const std::uint64_t x : lanes) total += x;
  return total;
}

/// The paged-read baseline: every byte a decode through `pt` reads (each sequence's K and V rows
/// and their scales, page by page, one KV head at a time), summed by the same OpenMP threads,
/// the next page's rows prefetched while a page is read (scattered pages defeat the hardware
/// prefetchers). No attention arithmetic, so its time is the floor any kernel reading this pool
/// through these tables meets: shuffled 4 KiB page spans read slower than one sequential stream
/// (each core's L1 miss buffers, not DRAM, set the pace when every page needs a software
/// prefetch). Returns the bytes read (so that the caller can check them against its count) and
/// their sum in `sink`.
template <class T>
double paged_read(const PagedKVView<const T>& kv, const PageTableView& pt, std::uint64_t& sink) {
  static_assert(kHeadDim / 2 * sizeof(T) % 64 == 0, "rows are whole lines of 8-byte words");
  const std::int32_t items = pt.num_seqs * kv.num_kv_heads;
  double bytes = 0.0;
  std::uint64_t total = 0;
  double scale_total = 0.0;
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static) reduction(+ : bytes, total, scale_total)
#endif
  for (std::int32_t item = 0; item < items; ++item) {
    const std::int32_t s = item / kv.num_kv_heads;
    const std::int32_t h = item % kv.num_kv_heads;
    const std::int32_t first = pt.page_begin(s);
    const std::int32_t pages = pt.num_pages(s);
    for (std::int32_t p = 0; p < pages; ++p) {
      const std::int32_t block = pt.indices[first + p];
      const std::int32_t tokens = p + 1 < pages ? kv.block_size : pt.last_page_len[s];
      const std::int64_t off = kv.offset(block, h, 0);
      const char* next_k = nullptr;
      const char* next_v = nullptr;
      if (p + 1 < pages) {
        const std::int64_t next = kv.offset(pt.indices[first + p + 1], h, 0);
        next_k = reinterpret_cast<const char*>(kv.k + next);
        next_v = reinterpret_cast<const char*>(kv.v + next);
      }
      const auto span = static_cast<std::size_t>(tokens * kv.token_stride()) * sizeof(T);
      total += sum_page_head(reinterpret_cast<const std::uint64_t*>(kv.k + off),
                             reinterpret_cast<const std::uint64_t*>(kv.v + off),
                             span / sizeof(std::uint64_t), next_k, next_v);
      bytes += 2.0 * static_cast<double>(span);
      if (kv.k_scale != nullptr) {
        // int8 and int4: a scale (int4: and a zero point) per token, a contiguous run per page
        // and head; fp8: one scale per page and head.
        constexpr bool kPerToken = KvPool<T>::kPerToken;
        constexpr bool kZeros = KvPool<T>::kInt4;
        const auto scale_index = [&](std::int32_t b) {
          return kPerToken ? kv.token_scale_index(b, h, 0) : std::int64_t{b} * kv.num_kv_heads + h;
        };
        if (p + 1 < pages) {  // the next page's run: its first and last float (two lines at most)
          const std::int64_t next = scale_index(pt.indices[first + p + 1]);
          const std::int64_t last = next + (kPerToken ? kv.block_size - 1 : 0);
          for (const float* scale : {kv.k_scale, kv.v_scale, kv.k_zero, kv.v_zero}) {
            if (scale == nullptr) continue;
            __builtin_prefetch(scale + next, 0, 3);
            __builtin_prefetch(scale + last, 0, 3);
          }
        }
        const std::int64_t first_scale = scale_index(block);
        const std::int32_t scales = kPerToken ? tokens : 1;
        for (std::int32_t i = 0; i < scales; ++i) {
          scale_total += kv.k_scale[first_scale + i] + kv.v_scale[first_scale + i];
          if constexpr (kZeros)
            scale_total += kv.k_zero[first_scale + i] + kv.v_zero[first_scale + i];
        }
        bytes += (kZeros ? 4.0 : 2.0) * scales * sizeof(float);
      }
    }
  }
  sink += total + static_cast<std::uint64_t>(scale_total);
  return bytes;
}

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

/// Decode arguments over the pool of T for queries `q` into `out`; the caller sets `pages`.
template <class T = float16>
PagedDecodeArgs<T> decode_args(const std::vector<float>& q, std::vector<float>& out,
                               std::int32_t num_qo_heads = kQoHeads) {
  PagedDecodeArgs<T> args;
  args.q = q.data();
  args.kv = KvPool<T>::get().view;
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
/// alike instead of whichever was measured at a bad moment. The paged read of the same bytes
/// (paged_read) is timed in the same iterations: ratio_vs_paged_read says how close the kernel
/// comes to what the page pool lets any kernel read, paged_read_vs_stream what scattering the
/// pages costs by itself. `group` query heads share each of
/// the 8 KV heads: 4 is Llama-3-8B (the target shape); 8 (Llama-3-70B) doubles the FMAs per
/// byte, and 1 (multi-head) sends 4x the query rows through the same pages one at a time.
template <class KV>
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
  PagedDecodeArgs<KV> args = decode_args<KV>(q, out, num_qo_heads);
  const double bytes = KvPool<KV>::bytes_read(static_cast<double>(batch) * ctx,
                                              static_cast<double>(sets.indptr.back()));
  const auto run = [&](const PageSets& s, std::int32_t r) {
    args.pages = s.table(r % s.replicas);
    const auto t0 = Clock::now();
    paged_decode(cpu{}, args);
    benchmark::DoNotOptimize(out.data());
    return seconds_since(t0);
  };
  StreamCursor cursor;
  double kernel_s = 0.0, stream_s = 0.0, contiguous_s = 0.0, paged_read_s = 0.0;
  std::uint64_t sink = 0;
  std::int64_t calls = 0;
  std::int32_t r = 0;
  for (auto _ : state) {
    kernel_s += run(sets, r);
    state.PauseTiming();
    stream_s += cursor.read(bytes);
    if (shuffled) contiguous_s += run(identity, r);
    // Half the replicas on from the kernel's: its pages may still sit in the L3, and what the
    // read leaves there is evicted before the kernel comes to these tables.
    const auto t0 = Clock::now();
    const double read =
        paged_read(args.kv, sets.table((r + std::max(1, sets.replicas / 2)) % sets.replicas), sink);
    paged_read_s += seconds_since(t0);
    state.ResumeTiming();
    if (read != bytes) {
      state.SkipWithError("the paged read's byte count differs from the kernel's");
      break;
    }
    ++calls;
    ++r;
  }
  benchmark::DoNotOptimize(sink);
  const double sec = kernel_s / static_cast<double>(std::max<std::int64_t>(calls, 1));
  const double bps = bytes / sec;
  const double fmas = 2.0 * batch * ctx * num_qo_heads * kHeadDim;  // QK + PV multiply-adds
  state.counters["kv_bytes_per_second"] = bps;
  state.counters["stream_bytes_per_second"] = bytes * static_cast<double>(calls) / stream_s;
  state.counters["ratio_vs_stream"] = stream_s / kernel_s;
  state.counters["ratio_vs_process_stream"] = bps / stream;
  state.counters["ratio_vs_paged_read"] = paged_read_s / kernel_s;
  state.counters["paged_read_vs_stream"] = stream_s / paged_read_s;
  state.counters["fma_utilization"] = fma_peak > 0.0 ? fmas / sec / fma_peak : 0.0;
  // The same FMAs against the bound of the path that ran (on avx2: two 256-bit FMA ports).
  const double fma_bound = fma_bound_per_second();
  state.counters["ratio_vs_fma_bound"] = fma_bound > 0.0 ? fmas / sec / fma_bound : 0.0;
  // The highest ratio_vs_paged_read these fp32 multiply-adds allow: the paged read's time over
  // the time the FMAs take at the bound. Below 1 (int4's quarter of fp16's bytes on 2 cores), no
  // kernel that computes QK and PV on fp32 FMAs reaches the paged read, however it loads.
  if (fma_bound > 0.0 && calls > 0) {
    state.counters["fma_ceiling_vs_paged_read"] =
        paged_read_s / static_cast<double>(calls) / (fmas / fma_bound);
  }
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
  KvPool<float16>& pool = KvPool<float16>::get();
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
  KvPool<float16>& pool = KvPool<float16>::get();
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

/// One layer of a step whose q, k and v come from one fused QKV projection [tokens][(32 + 2 * 8)
/// * 128] fp32 (as an engine computes them): the K/V append into an fp16 PagedKVCache, then
/// paged_prefill over `seqs` sequences of `ctx` tokens, `new_tokens` new each (1: a decode
/// batch; more: a prefill chunk). Each iteration times, alternately first, the copy path (q, k
/// and v copied out of the fused rows into packed buffers, the pre-strides way) and the in-place
/// path (append through row_stride, attention through q_row_stride), which store and compute
/// the same bits. ratio_in_place_vs_copy = copy path time / in-place time; copy_fraction = the
/// copies' share of the copy path (timed alone in the same iterations); us_saved_per_layer.
void BM_FusedQkv_InPlaceVsCopy(benchmark::State& state) {
  const auto seqs = static_cast<std::int32_t>(state.range(0));
  const auto new_tokens = static_cast<std::int32_t>(state.range(1));
  const auto ctx = static_cast<std::int32_t>(state.range(2));
  const std::int32_t tokens = seqs * new_tokens;
  const std::int64_t q_width = std::int64_t{kQoHeads} * kHeadDim;
  const std::int64_t kv_width = std::int64_t{kKvHeads} * kHeadDim;
  const std::int64_t row = q_width + 2 * kv_width;
  const std::int32_t pages_per_seq = (ctx + kBlockSize - 1) / kBlockSize;
  PagedKVCache<float16> cache(
      PagedKVCacheShape{1, seqs * pages_per_seq, kBlockSize, kKvHeads, kHeadDim});
  // Sequence s owns blocks [s * pages_per_seq, (s + 1) * pages_per_seq); its cached tokens hold
  // random K/V, the step's tokens go to its last new_tokens slots.
  std::vector<std::int32_t> indptr, indices, last_page_len, q_indptr = {0};
  std::vector<std::int64_t> slots, cached_slots;
  for (std::int32_t s = 0; s < seqs; ++s) {
    indptr.push_back(s * pages_per_seq);
    for (std::int32_t p = 0; p < pages_per_seq; ++p) indices.push_back(s * pages_per_seq + p);
    last_page_len.push_back(ctx - (pages_per_seq - 1) * kBlockSize);
    q_indptr.push_back(q_indptr.back() + new_tokens);
    for (std::int32_t t = 0; t < ctx; ++t) {
      (t < ctx - new_tokens ? cached_slots : slots)
          .push_back(std::int64_t{s} * pages_per_seq * kBlockSize + t);
    }
  }
  indptr.push_back(seqs * pages_per_seq);
  const auto cached_kv =
      random_queries(cached_slots.size() * static_cast<std::size_t>(kv_width), 5);
  cache.append(0, cached_slots, cached_kv, cached_kv);
  const auto fused = random_queries(static_cast<std::size_t>(tokens * row), 6);
  std::vector<float> q(static_cast<std::size_t>(tokens * q_width));
  std::vector<float> k(static_cast<std::size_t>(tokens * kv_width)), v(k.size());
  std::vector<float> out(q.size());
  PagedPrefillArgs<float16> args;
  args.q_indptr = q_indptr.data();
  args.kv = std::as_const(cache).view(0);
  args.pages = PageTableView{indptr.data(), indices.data(), last_page_len.data(), seqs};
  args.num_qo_heads = kQoHeads;
  args.head_dim = kHeadDim;
  args.out = out.data();
  const auto part = [&](std::vector<float>& dst, std::int64_t offset, std::int64_t width) {
    for (std::int64_t t = 0; t < tokens; ++t) {
      std::memcpy(dst.data() + t * width, fused.data() + t * row + offset,
                  static_cast<std::size_t>(width) * sizeof(float));
    }
  };
  const auto copies = [&] {
    part(q, 0, q_width);
    part(k, q_width, kv_width);
    part(v, q_width + kv_width, kv_width);
  };
  const auto copy_path = [&] {
    copies();
    cache.append(0, slots, k, v);
    args.q = q.data();
    args.q_row_stride = 0;
    paged_prefill(cpu{}, args);
    benchmark::DoNotOptimize(out.data());
  };
  const auto extent = static_cast<std::size_t>((tokens - 1) * row + kv_width);
  const auto in_place = [&] {
    cache.append(0, slots, std::span<const float>(fused.data() + q_width, extent),
                 std::span<const float>(fused.data() + q_width + kv_width, extent), row);
    args.q = fused.data();
    args.q_row_stride = row;
    paged_prefill(cpu{}, args);
    benchmark::DoNotOptimize(out.data());
  };
  double copy_s = 0.0, in_place_s = 0.0, copies_s = 0.0;
  bool in_place_first = false;
  for (auto _ : state) {
    for (int i = 0; i < 2; ++i) {
      const bool run_in_place = (i == 0) == in_place_first;
      const auto t0 = Clock::now();
      if (run_in_place) {
        in_place();
      } else {
        copy_path();
      }
      (run_in_place ? in_place_s : copy_s) += seconds_since(t0);
    }
    const auto t0 = Clock::now();
    copies();
    benchmark::DoNotOptimize(q.data());
    copies_s += seconds_since(t0);
    in_place_first = !in_place_first;
  }
  const auto iterations =
      static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.counters["ratio_in_place_vs_copy"] = copy_s / in_place_s;
  state.counters["copy_fraction"] = copies_s / copy_s;
  state.counters["us_saved_per_layer"] = (copy_s - in_place_s) / iterations * 1e6;
  state.counters["copy_path_ms"] = copy_s / iterations * 1e3;
  state.counters["threads"] = num_threads();
}

void BM_StreamRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(stream_bytes_per_second());
  state.counters["stream_bytes_per_second"] = stream_bytes_per_second();
  state.counters["fma_peak_per_second"] = fma_peak_per_second();
  state.counters["threads"] = num_threads();
  std::string label = "cpu_isa=" + std::string(to_string(cpu_isa())) +
                      " kernels=" + INFERKIT_PP_STR(INFERKIT_ISA_ABI);
#if INFERKIT_BENCH_PLAIN_CONSUMER
  label += " plain_consumer=" + std::string(plain_consumer::isa_abi());
#endif
  state.SetLabel(label);
}

#if INFERKIT_BENCH_PLAIN_CONSUMER
/// Times `mine()` and `plain()` alternately (which goes first alternates too) in every
/// iteration; reports ratio_plain_vs_this_build = time of mine / time of plain.
template <class Mine, class Plain>
void time_against_plain(benchmark::State& state, Mine&& mine, Plain&& plain) {
  double mine_s = 0.0, plain_s = 0.0;
  bool plain_first = false;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    if (plain_first)
      plain();
    else
      mine();
    const auto t1 = Clock::now();
    if (plain_first)
      mine();
    else
      plain();
    const auto t2 = Clock::now();
    const double first = std::chrono::duration<double>(t1 - t0).count();
    const double second = std::chrono::duration<double>(t2 - t1).count();
    mine_s += plain_first ? second : first;
    plain_s += plain_first ? first : second;
    plain_first = !plain_first;
  }
  state.counters["ratio_plain_vs_this_build"] = mine_s / plain_s;
}

/// Decode (batch x ctx, shuffled pages, group query heads per KV head) through this TU's
/// kernels and through plain_consumer.cpp's (no -m flag), alternately.
void BM_PlainConsumerDecode(benchmark::State& state) {
  const auto batch = static_cast<std::int32_t>(state.range(0));
  const auto ctx = static_cast<std::int32_t>(state.range(1));
  const auto num_qo_heads = static_cast<std::int32_t>(state.range(2)) * kKvHeads;
  const PageSets sets(batch, ctx, true);
  const auto q = random_queries(static_cast<std::size_t>(batch * num_qo_heads * kHeadDim), 1);
  std::vector<float> out(q.size());
  PagedDecodeArgs<float16> args = decode_args(q, out, num_qo_heads);
  std::int32_t r = 0;
  time_against_plain(
      state,
      [&] {
        args.pages = sets.table(r++ % sets.replicas);
        paged_decode(cpu{}, args);
      },
      [&] {
        args.pages = sets.table(r++ % sets.replicas);
        plain_consumer::paged_decode(args);
      });
}

/// Prefill (a chunk over cached tokens, one sequence) the same way.
void BM_PlainConsumerPrefill(benchmark::State& state) {
  const auto chunk = static_cast<std::int32_t>(state.range(0));
  const auto cached = static_cast<std::int32_t>(state.range(1));
  const PageSets sets(1, cached + chunk, true);
  const auto q = random_queries(static_cast<std::size_t>(chunk * kQoHeads * kHeadDim), 3);
  std::vector<float> out(q.size());
  const std::vector<std::int32_t> q_indptr = {0, chunk};
  PagedPrefillArgs<float16> args;
  args.q = q.data();
  args.q_indptr = q_indptr.data();
  args.kv = KvPool<float16>::get().view;
  args.num_qo_heads = kQoHeads;
  args.head_dim = kHeadDim;
  args.out = out.data();
  std::int32_t r = 0;
  time_against_plain(
      state,
      [&] {
        args.pages = sets.table(r++ % sets.replicas);
        paged_prefill(cpu{}, args);
      },
      [&] {
        args.pages = sets.table(r++ % sets.replicas);
        plain_consumer::paged_prefill(args);
      });
}
#endif

BENCHMARK(BM_StreamRead)->Iterations(1)->Unit(benchmark::kMillisecond);
// The target shape (GQA 4) over the grid, then GQA 1 and 8 at one shape.
BENCHMARK(BM_PagedDecode<float16>)
    ->Name("BM_PagedDecode")
    ->ArgNames({"batch", "ctx", "shuffled", "group"})
    ->ArgsProduct({{1, 8, 32}, {1024, 4096, 16384}, {0, 1}, {4}})
    ->Args({8, 4096, 1, 1})
    ->Args({8, 4096, 1, 3})  // GQA 3 (SmolLM2's ratio): 3 rows on the 4-row register tiles
    ->Args({8, 4096, 1, 8})
    ->Args({32, 4096, 1, 8})
    ->Args({8, 16384, 1, 8})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.3)
    ->UseRealTime();
// Quantized KV at the target shape: bytes are codes plus scales.
BENCHMARK(BM_PagedDecode<float8_e4m3>)
    ->Name("BM_PagedDecode_fp8_e4m3")
    ->ArgNames({"batch", "ctx", "shuffled", "group"})
    ->Args({8, 4096, 1, 4})
    ->Args({32, 4096, 1, 4})
    ->Args({8, 16384, 1, 4})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.3)
    ->UseRealTime();
BENCHMARK(BM_PagedDecode<std::int8_t>)
    ->Name("BM_PagedDecode_int8")
    ->ArgNames({"batch", "ctx", "shuffled", "group"})
    ->Args({8, 4096, 1, 4})
    ->Args({32, 4096, 1, 4})
    ->Args({8, 16384, 1, 4})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.3)
    ->UseRealTime();
// Packed int4 (issue 33: int4 KV that attention reads): a quarter of fp16's code bytes, plus a
// scale and a zero point per token and head.
BENCHMARK(BM_PagedDecode<std::uint8_t>)
    ->Name("BM_PagedDecode_int4")
    ->ArgNames({"batch", "ctx", "shuffled", "group"})
    ->Args({8, 4096, 1, 4})
    ->Args({32, 4096, 1, 4})
    ->Args({8, 16384, 1, 4})
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
// A decode batch and a prefill chunk of Llama-3-8B-like heads.
BENCHMARK(BM_FusedQkv_InPlaceVsCopy)
    ->ArgNames({"seqs", "new_tokens", "ctx"})
    ->Args({32, 1, 1024})
    ->Args({1, 512, 512})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.3)
    ->UseRealTime();
#if INFERKIT_BENCH_PLAIN_CONSUMER
BENCHMARK(BM_PlainConsumerDecode)
    ->ArgNames({"batch", "ctx", "group"})
    ->Args({8, 4096, 4})
    ->Args({8, 4096, 8})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();
BENCHMARK(BM_PlainConsumerPrefill)
    ->ArgNames({"chunk", "cached"})
    ->Args({512, 4096})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
