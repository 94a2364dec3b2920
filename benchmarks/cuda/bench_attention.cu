// SPDX-License-Identifier: Apache-2.0
// GPU attention benchmarks, each a ratio to a baseline timed in the same run (cudaEvent timing,
// Google Benchmark's manual time):
// - decode: KV bytes read per second as a fraction of a device-to-device cudaMemcpy's bandwidth
//   (counted as bytes read + written) on the same number of bytes; long contexts, GQA 4 and 8,
//   batch 1/16/64, page 16 and 128, and a skewed batch (one 32K sequence among 63 of 512).
// - prefill: causal attention TFLOP/s as a fraction of a cuBLAS fp16 GEMM of the same FLOPs
//   (M = N = tokens, K = query heads x head_dim).
// bf16 KV and q/out for decode, fp16 for prefill, head_dim 128, 8 KV heads.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <inferkit/attention/attention.hpp>
#include <inferkit/attention/cuda/paged_attention.cuh>
#include <inferkit/core/cuda/device_buffer.cuh>
#include <numeric>
#include <vector>

namespace {

using namespace inferkit;

constexpr std::int32_t kHeadDim = 128;
constexpr std::int32_t kKvHeads = 8;

/// Milliseconds of `fn` on the default stream, the best of `reps` runs (after one warm-up).
template <class Fn>
float time_ms(Fn&& fn, int reps = 5) {
  cudaEvent_t start;
  cudaEvent_t stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  fn();
  float best = 1e30f;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(start);
    fn();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    best = ms < best ? ms : best;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

/// A batch of sequences over paged KV in device memory (pages in order; values are zeros:
/// timing does not depend on them).
template <class KV>
struct PagedBatch {
  std::vector<std::int32_t> indptr, indices, last;
  DeviceBuffer<KV> k, v;
  DeviceBuffer<std::int32_t> d_indptr, d_indices, d_last;
  std::int32_t block_size = 16;
  std::int64_t tokens = 0;

  PagedBatch(const std::vector<std::int64_t>& lens, std::int32_t page) : block_size(page) {
    indptr.push_back(0);
    for (std::int64_t len : lens) {
      const auto pages = static_cast<std::int32_t>((len + page - 1) / page);
      for (std::int32_t p = 0; p < pages; ++p)
        indices.push_back(static_cast<std::int32_t>(indices.size()));
      indptr.push_back(static_cast<std::int32_t>(indices.size()));
      last.push_back(static_cast<std::int32_t>(len - std::int64_t{pages - 1} * page));
      tokens += len;
    }
    const auto elems = indices.size() * static_cast<std::size_t>(page) * kKvHeads * kHeadDim;
    k = DeviceBuffer<KV>(elems);
    v = DeviceBuffer<KV>(elems);
    k.fill_bytes(0);
    v.fill_bytes(0);
    d_indptr = DeviceBuffer<std::int32_t>(indptr);
    d_indices = DeviceBuffer<std::int32_t>(indices);
    d_last = DeviceBuffer<std::int32_t>(last);
  }
  PagedKVView<const KV> view() const {
    PagedKVView<const KV> out;
    out.k = k.data();
    out.v = v.data();
    out.num_blocks = static_cast<std::int32_t>(indices.size());
    out.num_kv_heads = kKvHeads;
    out.block_size = block_size;
    out.head_dim = kHeadDim;
    return out;
  }
  PageTableView pages() const {
    return {d_indptr.data(), d_indices.data(), d_last.data(),
            static_cast<std::int32_t>(last.size())};
  }
  PageTableView host_pages() const {
    return {indptr.data(), indices.data(), last.data(), static_cast<std::int32_t>(last.size())};
  }
  std::int64_t kv_bytes() const {
    return tokens * kKvHeads * kHeadDim * 2 * std::int64_t{sizeof(KV)};
  }
};

void run_decode(benchmark::State& state, const std::vector<std::int64_t>& lens, std::int32_t group,
                std::int32_t page) {
  const PagedBatch<bfloat16> batch(lens, page);
  const auto rows = static_cast<std::size_t>(lens.size()) * kKvHeads * group * kHeadDim;
  DeviceBuffer<bfloat16> q(rows);
  DeviceBuffer<bfloat16> out(rows);
  q.fill_bytes(0);
  PagedDecodeArgs<bfloat16, bfloat16> args;
  args.q = q.data();
  args.out = out.data();
  args.kv = batch.view();
  args.pages = batch.pages();
  args.host_pages = batch.host_pages();
  args.num_qo_heads = kKvHeads * group;
  args.head_dim = kHeadDim;
  const auto bytes = static_cast<std::size_t>(batch.kv_bytes());
  DeviceBuffer<std::uint8_t> src(bytes);
  DeviceBuffer<std::uint8_t> dst(bytes);
  const float copy_ms =
      time_ms([&] { cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice); });
  float decode_ms = 0.0f;
  for (auto _ : state) {
    decode_ms = time_ms([&] { paged_decode(cuda{}, args); }, 3);
    state.SetIterationTime(decode_ms / 1e3);
  }
  const double decode_bw = static_cast<double>(bytes) / (decode_ms / 1e3);
  const double copy_bw = 2.0 * static_cast<double>(bytes) / (copy_ms / 1e3);
  state.counters["kv_GBps"] = decode_bw / 1e9;
  state.counters["memcpy_GBps"] = copy_bw / 1e9;
  state.counters["fraction_of_memcpy"] = decode_bw / copy_bw;
}

void BM_PagedDecode_Long(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  run_decode(state, std::vector<std::int64_t>(batch, state.range(1)),
             static_cast<std::int32_t>(state.range(2)), static_cast<std::int32_t>(state.range(3)));
}
// {batch, context, GQA group, page size}
BENCHMARK(BM_PagedDecode_Long)
    ->ArgNames({"batch", "ctx", "gqa", "page"})
    ->Args({1, 32768, 4, 16})
    ->Args({1, 32768, 4, 128})
    ->Args({1, 32768, 8, 16})
    ->Args({1, 32768, 8, 128})
    ->Args({16, 8192, 8, 16})
    ->Args({16, 8192, 8, 128})
    ->Args({64, 4096, 4, 16})
    ->Args({64, 4096, 8, 16})
    ->Args({64, 4096, 8, 128})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

void BM_PagedDecode_Skewed(benchmark::State& state) {
  std::vector<std::int64_t> lens(64, 512);
  lens[0] = 32768;
  run_decode(state, lens, static_cast<std::int32_t>(state.range(0)), 16);
}
BENCHMARK(BM_PagedDecode_Skewed)
    ->ArgName("gqa")
    ->Arg(4)
    ->Arg(8)
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

void BM_PagedPrefill(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const auto group = static_cast<std::int32_t>(state.range(1));
  const PagedBatch<float16> batch({n}, 16);
  const std::int32_t qo_heads = kKvHeads * group;
  const auto elems = static_cast<std::size_t>(n) * qo_heads * kHeadDim;
  DeviceBuffer<float16> q(elems);
  DeviceBuffer<float16> out(elems);
  q.fill_bytes(0);
  const std::vector<std::int32_t> q_indptr = {0, static_cast<std::int32_t>(n)};
  const DeviceBuffer<std::int32_t> d_q_indptr(q_indptr);
  PagedPrefillArgs<float16, float16> args;
  args.q = q.data();
  args.out = out.data();
  args.q_indptr = d_q_indptr.data();
  args.host_q_indptr = q_indptr.data();
  args.kv = batch.view();
  args.pages = batch.pages();
  args.host_pages = batch.host_pages();
  args.num_qo_heads = qo_heads;
  args.head_dim = kHeadDim;
  // Causal attention: 2 (QK^T and PV) x 2 flops x n^2 / 2 pairs x heads x head_dim.
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * qo_heads * kHeadDim;
  // The GEMM of the same flops: M = N = n, K = qo_heads * head_dim.
  const int m = static_cast<int>(n);
  const int kdim = qo_heads * kHeadDim;
  DeviceBuffer<float16> a(static_cast<std::size_t>(m) * kdim);
  DeviceBuffer<float16> b(static_cast<std::size_t>(m) * kdim);
  DeviceBuffer<float16> c(static_cast<std::size_t>(m) * m);
  a.fill_bytes(0);
  b.fill_bytes(0);
  cublasHandle_t handle = nullptr;
  cublasCreate(&handle);
  const float one = 1.0f;
  const float zero = 0.0f;
  const float gemm_ms = time_ms([&] {
    cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, m, kdim, &one, a.data(), CUDA_R_16F, kdim,
                 b.data(), CUDA_R_16F, kdim, &zero, c.data(), CUDA_R_16F, m, CUBLAS_COMPUTE_32F,
                 CUBLAS_GEMM_DEFAULT);
  });
  cublasDestroy(handle);
  float prefill_ms = 0.0f;
  for (auto _ : state) {
    prefill_ms = time_ms([&] { paged_prefill(cuda{}, args); }, 3);
    state.SetIterationTime(prefill_ms / 1e3);
  }
  const double tflops = flops / (prefill_ms / 1e3) / 1e12;
  const double gemm_tflops = 2.0 * m * static_cast<double>(m) * kdim / (gemm_ms / 1e3) / 1e12;
  state.counters["TFLOPs"] = tflops;
  state.counters["cublas_TFLOPs"] = gemm_tflops;
  state.counters["fraction_of_cublas"] = tflops / gemm_tflops;
}
BENCHMARK(BM_PagedPrefill)
    ->ArgNames({"tokens", "gqa"})
    ->Args({4096, 4})
    ->Args({8192, 4})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("inferkit_bench_cuda_attention: no CUDA device, nothing to measure\n");
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
