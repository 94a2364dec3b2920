// SPDX-License-Identifier: Apache-2.0
// Benchmarks of the quantized linear layers (model/quantized_linear.hpp) on SmolLM2-135M's
// shapes (hidden 576, MLP 1536, vocab 49,152; Q4_1 projections, the Q8_0 output projection).
// Matrix-vector (decode): weight bytes/s as a fraction of a streaming read of the same number of
// bytes, timed alongside in the same iterations from the same pool of weight copies, so both see
// the same memory level. Batched matmul (batched decode, prefill): GFLOP/s against Eigen's fp32
// GEMM of the same shape with the same threads, also timed alongside. Rates are from median
// iteration times; each ratio is given from the sums and from the medians (`_median`).
// Whole model (needs $INFERKIT_MODEL, the file scripts/fetch-model.sh prints; skipped without):
// decode steps of the Engine at batch 1/8/32 against a streaming read of all the weight bytes a
// step reads (batch 1's floor) and against batch-1 steps timed alongside; decode over long
// contexts in each KV format against fp16 KV timed alongside; prefill of a prompt
// chunk against those batch-1 steps; batch-1 decode beside a busy-loop process against quiet
// 1-thread decode (the shared-host case).
// Run: OMP_NUM_THREADS=2 ./inferkit_bench_model (and OMP_NUM_THREADS=1).
// GCC 12's AVX-512 intrinsics (used by Eigen) self-initialize "undefined" operands, which
// -Wmaybe-uninitialized flags at every inlined use: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <benchmark/benchmark.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <Eigen/Core>
#if defined(__x86_64__)
#  include <immintrin.h>  // the VNNI peak microkernel
#endif
#include <algorithm>
#include <benchmarks/support/bench_support.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/engine/engine.hpp>
#include <inferkit/model/gguf.hpp>
#include <inferkit/model/int8_linear.hpp>
#include <inferkit/model/llama_model.hpp>
#include <inferkit/model/quantized_linear.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif
#if INFERKIT_CPU_DISPATCH
#  include <immintrin.h>
#endif

namespace {

using namespace inferkit;
using bench::Clock;
using bench::HugeBuffer;
using bench::num_threads;
using bench::peak_rate;
using bench::seconds_since;

/// Sums 64-byte vectors [v0, v1) at p as floats, 4 independent accumulators: the streaming-read
/// loop, at the widest loads this CPU has whatever the build's -m flags (so the baseline is
/// never slower than the kernels, which dispatch the same way).
float sum_portable(const std::byte* p, std::int64_t v0, std::int64_t v1) {
  float a[4][16] = {};
  for (std::int64_t v = v0; v < v1; ++v) {
    float x[16];
    std::memcpy(x, p + v * 64, 64);
    for (int i = 0; i < 16; ++i) a[v % 4][i] += x[i];
  }
  float total = 0.0f;
  for (const auto& lanes : a) {
    for (float x : lanes) total += x;
  }
  return total;
}
#if INFERKIT_CPU_DISPATCH
__attribute__((target("avx512f"))) float sum_avx512(const std::byte* p, std::int64_t v0,
                                                    std::int64_t v1) {
  __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                 _mm512_setzero_ps()};
  std::int64_t v = v0;
  for (; v + 4 <= v1; v += 4) {
    for (int k = 0; k < 4; ++k) a[k] = _mm512_add_ps(a[k], _mm512_loadu_ps(p + (v + k) * 64));
  }
  for (; v < v1; ++v) a[0] = _mm512_add_ps(a[0], _mm512_loadu_ps(p + v * 64));
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
}
__attribute__((target("avx2"))) float sum_avx2(const std::byte* p, std::int64_t v0,
                                               std::int64_t v1) {
  __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                 _mm256_setzero_ps()};
  std::int64_t v = v0;
  for (; v + 2 <= v1; v += 2) {
    for (int k = 0; k < 4; ++k) {
      a[k] =
          _mm256_add_ps(a[k], _mm256_loadu_ps(reinterpret_cast<const float*>(p + v * 64) + 8 * k));
    }
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  float total = sum_portable(p, v, v1);
  for (float x : lanes) total += x;
  return total;
}
#endif

using SumFn = float (*)(const std::byte*, std::int64_t, std::int64_t);

/// The widest sum this CPU runs (the choice the kernels make, by the same CPUID test).
SumFn stream_sum() {
  static const SumFn fn = [] {
#if INFERKIT_CPU_DISPATCH
    const detail::LinearIsa isa = detail::linear_isa();
    if (isa == detail::LinearIsa::kAvx512) return &sum_avx512;
    if (isa == detail::LinearIsa::kAvx2) return &sum_avx2;
#endif
    return &sum_portable;
  }();
  return fn;
}

/// The streaming-read baseline: sums `bytes` at `p` as floats with the same threads and the same
/// contiguous split of the bytes that linear() gives its threads.
float stream_read(const std::byte* p, std::int64_t bytes) {
  const std::int64_t vectors = bytes / 64;
  const SumFn sum = stream_sum();
  float total = 0.0f;
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel reduction(+ : total)
#endif
  {
#if INFERKIT_HAS_OPENMP
    const std::int64_t threads = omp_get_num_threads(), id = omp_get_thread_num();
#else
    const std::int64_t threads = 1, id = 0;
#endif
    total += sum(p, vectors * id / threads, vectors * (id + 1) / threads);
  }
  return total;
}

/// fp16 bits of a scale in [2^-9, 2^-6) (the range of SmolLM2's block scales), random sign.
std::uint16_t scale_bits(Rng& rng) {
  return static_cast<std::uint16_t>((rng.below(2) << 15) | ((6u + rng.below(3)) << 10) |
                                    rng.below(1024));
}

/// One random rows x cols matrix of `type` (finite, model-like scales), as GGUF stores it.
std::vector<std::byte> random_matrix(GgmlType type, std::int64_t rows, std::int64_t cols) {
  Rng rng(1234);
  const std::int64_t row_bytes = ggml_row_bytes(type, cols);
  std::vector<std::byte> m(static_cast<std::size_t>(rows * row_bytes));
  const std::int64_t block_bytes = ggml_type_layout(type)->block_bytes;
  const int scales = type == GgmlType::kQ4_1 ? 2 : 1;
  for (std::size_t b = 0; b + static_cast<std::size_t>(block_bytes) <= m.size();
       b += static_cast<std::size_t>(block_bytes)) {
    for (int s = 0; s < scales; ++s) {
      const std::uint16_t bits = scale_bits(rng);
      std::memcpy(&m[b + 2 * static_cast<std::size_t>(s)], &bits, 2);
    }
    for (std::int64_t i = 2 * scales; i < block_bytes; ++i) {
      m[b + static_cast<std::size_t>(i)] = static_cast<std::byte>(rng.below(256));
    }
  }
  return m;
}

std::vector<float> random_floats(std::int64_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = rng.uniform() * 2.0f - 1.0f;
  return x;
}

/// Copies of one matrix filling about `pool_mib` MiB (at least 2 copies; 0: a single copy that
/// stays in cache), 4 KiB-aligned apart.
struct WeightPool {
  std::int64_t matrix_bytes = 0;
  std::int64_t stride = 0;
  std::int64_t copies = 0;
  HugeBuffer<std::byte> buffer;

  static std::int64_t copies_for(std::int64_t bytes, std::int64_t pool_mib) {
    if (pool_mib == 0) return 1;
    const std::int64_t stride = (bytes + 4095) / 4096 * 4096;
    return std::max<std::int64_t>(2, (pool_mib << 20) / stride);
  }
  WeightPool(const std::vector<std::byte>& m, std::int64_t pool_mib)
      : matrix_bytes(static_cast<std::int64_t>(m.size())),
        stride((matrix_bytes + 4095) / 4096 * 4096),
        copies(copies_for(matrix_bytes, pool_mib)),
        buffer(static_cast<std::size_t>(stride * copies)) {
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static)
#endif
    for (std::int64_t c = 0; c < copies; ++c) {
      std::memcpy(buffer.get() + c * stride, m.data(), m.size());
    }
  }
  const std::byte* copy(std::int64_t c) const { return buffer.get() + (c % copies) * stride; }
};

/// Per-iteration seconds of a kernel and of its baseline, timed back to back. Reports the ratio
/// of the sums (the style of the other benchmarks) and of the medians: on a shared machine a
/// preempted iteration inflates a sum, while the median of hundreds of pairs stays put.
struct PairedTimes {
  std::vector<double> kernel, baseline;

  static double median(std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  }
  static double sum(const std::vector<double>& v) {
    double s = 0.0;
    for (double x : v) s += x;
    return s;
  }
  /// Sets `<name>` (sums) and `<name>_median`, and returns the kernel's median seconds.
  double report(benchmark::State& state, const std::string& name) const {
    state.counters[name] = sum(baseline) / sum(kernel);
    const double k = median(kernel);
    state.counters[name + "_median"] = median(baseline) / k;
    return k;
  }
};

/// Matrix-vector y = W x for a rows x cols matrix of `type`, drawn round robin from a pool of
/// `pool_mib` MiB of copies (1024: from DRAM; 96: the size of all of SmolLM2's weights, one
/// decode step's working set, which stays in a large L3; 0: one hot copy). Each iteration times
/// the kernel on one copy and a streaming read of the next copy (so neither finds the other's
/// lines in cache); the ratio is of the summed times.
void BM_Linear_Matvec(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const std::int64_t rows = state.range(1), cols = state.range(2), pool_mib = state.range(3);
  const WeightPool pool(random_matrix(type, rows, cols), pool_mib);
  const std::vector<float> x = random_floats(cols, 5);
  std::vector<float> y(static_cast<std::size_t>(rows));
  PairedTimes times;
  std::int64_t c = 0;
  for (auto _ : state) {
    const LinearWeights w{type, rows, cols, pool.copy(c)};
    const auto t0 = Clock::now();
    linear(w, x.data(), 1, y.data());
    benchmark::DoNotOptimize(y.data());
    times.kernel.push_back(seconds_since(t0));
    state.PauseTiming();
    const std::byte* next = pool.copy(pool.copies > 1 ? c + 1 : c);
    const auto t1 = Clock::now();
    benchmark::DoNotOptimize(stream_read(next, pool.matrix_bytes));
    times.baseline.push_back(seconds_since(t1));
    state.ResumeTiming();
    c += pool.copies > 1 ? 2 : 0;
  }
  const auto bytes = static_cast<double>(pool.matrix_bytes);
  const double kernel_s = times.report(state, "ratio_vs_stream");
  state.counters["weight_GB_per_s"] = bytes / kernel_s * 1e-9;
  state.counters["stream_GB_per_s"] = bytes / PairedTimes::median(times.baseline) * 1e-9;
  state.counters["us_per_call"] = kernel_s * 1e6;
  state.counters["threads"] = num_threads();
  state.SetLabel(std::string(ggml_type_layout(type)->name) +
                 (pool_mib == 0 ? " hot" : " pool " + std::to_string(pool_mib) + " MiB"));
}

/// Batched y[n][rows] = x[n][cols] · Wᵀ (batched decode at n = 8, 32; prefill at 512): GFLOP/s
/// (2 rows cols n per call) against Eigen's fp32 GEMM of the same shape (row-major X times the
/// transpose of row-major fp32 W, the layout of these weights) with the same threads, timed
/// alongside in every iteration.
void BM_Linear_Matmul(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const std::int64_t rows = state.range(1), cols = state.range(2), n = state.range(3);
  const std::vector<std::byte> m = random_matrix(type, rows, cols);
  const LinearWeights w{type, rows, cols, m.data()};
  const std::vector<float> x = random_floats(n * cols, 6);
  std::vector<float> y(static_cast<std::size_t>(n * rows));
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  RowMajor wf(rows, cols), xf(n, cols), yf(n, rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    dequantize_row(type, m.data() + r * ggml_row_bytes(type, cols), cols, wf.row(r).data());
  }
  std::memcpy(xf.data(), x.data(), x.size() * sizeof(float));
  PairedTimes times;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    linear(w, x.data(), n, y.data());
    benchmark::DoNotOptimize(y.data());
    times.kernel.push_back(seconds_since(t0));
    state.PauseTiming();
    const auto t1 = Clock::now();
    yf.noalias() = xf * wf.transpose();
    benchmark::DoNotOptimize(yf.data());
    times.baseline.push_back(seconds_since(t1));
    state.ResumeTiming();
  }
  const double flops = 2.0 * static_cast<double>(rows * cols * n);
  const double kernel_s = times.report(state, "ratio_vs_eigen_gemm");
  state.counters["GFLOP_per_s"] = flops / kernel_s * 1e-9;
  state.counters["eigen_GFLOP_per_s"] = flops / PairedTimes::median(times.baseline) * 1e-9;
  state.counters["threads"] = num_threads();
  state.SetLabel(std::string(ggml_type_layout(type)->name));
}

/// SmolLM2 from $INFERKIT_MODEL, loaded once per activation precision; nullptr (and the
/// benchmark skips) without it.
struct LoadedModel {
  GgufFile file;
  LlamaModel model;
  LoadedModel(const std::string& path, ActivationPrecision activations)
      : file(GgufFile::open(path)), model(file, LlamaModelOptions{activations}) {}
};
std::unique_ptr<LoadedModel> load_model(ActivationPrecision activations) {
  const char* path = std::getenv("INFERKIT_MODEL");
  if (path == nullptr || *path == '\0') return nullptr;
  return std::make_unique<LoadedModel>(path, activations);
}
const LoadedModel* loaded_model(bool int8 = false) {
  static const std::unique_ptr<LoadedModel> fp32 = load_model(ActivationPrecision::kFp32);
  if (!int8) return fp32.get();
  static const std::unique_ptr<LoadedModel> q8 = load_model(ActivationPrecision::kInt8);
  return q8.get();
}

/// " int8" for the int8-activation model's runs (the benchmark's `int8` argument).
std::string precision_label(bool int8) { return int8 ? "int8 activations" : "fp32 activations"; }

/// An engine for `max_seqs` requests with a `budget`-token step and room for `kv_tokens` of
/// context (never a preemption), without a prefix cache.
std::unique_ptr<Engine> bench_engine(const LlamaModel& model, std::int32_t max_seqs,
                                     std::int64_t budget, std::int64_t kv_tokens,
                                     bool adaptive_threads = true, bool time_phases = false,
                                     DType kv_dtype = DType::kFloat16) {
  EngineOptions o;
  o.kv_dtype = kv_dtype;
  o.adaptive_threads = adaptive_threads;
  o.time_forward_phases = time_phases;
  o.num_blocks = static_cast<std::int32_t>(kv_tokens / o.block_size + max_seqs + 1);
  o.prefix_cache = false;
  o.scheduler.max_num_seqs = max_seqs;
  o.scheduler.max_batched_tokens = budget;
  o.scheduler.record_step_metrics = false;
  return std::make_unique<Engine>(model, o);
}

/// An engine with `batch` requests of distinct `prompt_tokens`-token prompts, run until every
/// prompt is prefilled, so that each further step() is one decode row per request.
std::unique_ptr<Engine> decoding_engine(const LlamaModel& model, std::int32_t batch,
                                        std::int32_t prompt_tokens, bool adaptive_threads = true,
                                        bool time_phases = false,
                                        DType kv_dtype = DType::kFloat16) {
  auto engine = bench_engine(model, batch, 2048, std::int64_t{batch} * (prompt_tokens + 1536),
                             adaptive_threads, time_phases, kv_dtype);
  GenerationParams p;
  p.max_new_tokens = 1536;
  p.stop_at_eos = false;
  Rng rng(99);
  for (std::int32_t b = 0; b < batch; ++b) {
    std::vector<TokenId> prompt(static_cast<std::size_t>(prompt_tokens));
    for (TokenId& t : prompt) t = static_cast<TokenId>(rng.below(49152));
    (void)engine->submit(std::move(prompt), p);
  }
  while (engine->stats().prefill_tokens < std::int64_t{batch} * prompt_tokens) {
    (void)engine->step();
  }
  return engine;
}

/// Seconds of one engine step.
double timed_step(Engine& engine) {
  const auto t0 = Clock::now();
  (void)engine.step();
  return seconds_since(t0);
}

/// Decode at `batch` requests (64-token prompts, contexts growing from 64): tokens/s, the
/// fraction of the weight-bandwidth floor (a streaming read of all the weights, timed after each
/// step) and, for batch > 1, the speedup over batch-1 steps timed alongside.
void BM_Model_Decode(benchmark::State& state) {
  const bool int8 = state.range(1) != 0;
  const LoadedModel* m = loaded_model(int8);
  if (m == nullptr) {
    state.SkipWithError("set INFERKIT_MODEL to the file scripts/fetch-model.sh prints");
    return;
  }
  const auto batch = static_cast<std::int32_t>(state.range(0));
  const std::span<const std::byte> weights = m->file.bytes().subspan(m->file.data_offset());
  const auto weight_bytes = static_cast<std::int64_t>(weights.size());
  std::unique_ptr<Engine> engine = decoding_engine(m->model, batch, 64);
  std::unique_ptr<Engine> single = batch > 1 ? decoding_engine(m->model, 1, 64) : nullptr;
  PairedTimes vs_stream, vs_single;
  for (auto _ : state) {
    const double step_s = timed_step(*engine);
    vs_stream.kernel.push_back(step_s);
    vs_single.kernel.push_back(step_s / batch);
    state.PauseTiming();
    const auto t1 = Clock::now();
    benchmark::DoNotOptimize(stream_read(weights.data(), weight_bytes));
    vs_stream.baseline.push_back(seconds_since(t1));
    if (single) vs_single.baseline.push_back(timed_step(*single));
    state.ResumeTiming();
  }
  const double step_s = vs_stream.report(state, "ratio_vs_weight_stream");
  if (single) (void)vs_single.report(state, "speedup_vs_batch1");
  state.counters["tokens_per_s"] = batch / step_s;
  state.counters["ms_per_step"] = step_s * 1e3;
  state.counters["threads"] = num_threads();
  state.SetLabel(precision_label(int8));
}

/// Decode where the KV is read more than the weights (16 requests over 512-token prompts: about
/// twice the weights' bytes in fp16 KV per step) with K/V stored as kEngineKVDTypes[kv], int8
/// activations: tokens/s, and the speedup over the same step on fp16 pages timed alongside
/// (`speedup_vs_fp16`), what a smaller KV format buys the engine beside the memory it saves.
void BM_Model_Decode_KV(benchmark::State& state) {
  const LoadedModel* m = loaded_model(true);
  if (m == nullptr) {
    state.SkipWithError("set INFERKIT_MODEL to the file scripts/fetch-model.sh prints");
    return;
  }
  const DType dtype = kEngineKVDTypes[static_cast<std::size_t>(state.range(0))];
  constexpr std::int32_t kBatch = 16;
  constexpr std::int32_t kPrompt = 512;
  std::unique_ptr<Engine> engine = decoding_engine(m->model, kBatch, kPrompt, true, false, dtype);
  std::unique_ptr<Engine> fp16 = decoding_engine(m->model, kBatch, kPrompt);
  PairedTimes vs_fp16;
  for (auto _ : state) {
    vs_fp16.kernel.push_back(timed_step(*engine));
    state.PauseTiming();
    vs_fp16.baseline.push_back(timed_step(*fp16));
    state.ResumeTiming();
  }
  const double step_s = vs_fp16.report(state, "speedup_vs_fp16");
  state.counters["tokens_per_s"] = kBatch / step_s;
  state.counters["kv_bytes_per_token"] =
      static_cast<double>(Engine::kv_page_bytes(m->model, dtype, 16)) / 16.0;
  state.counters["threads"] = num_threads();
  state.SetLabel("kv " + std::string(to_string(dtype)) + ", int8 activations");
}

/// Where a decode step's time goes: each forward phase's share of the step (`share_<phase>`,
/// LlamaPhase; EngineOptions::time_forward_phases), `share_outside_forward` (scheduling,
/// sampling, the engine's bookkeeping), and the step's time against a streaming read of all the
/// weights timed after it (`ratio_vs_weight_stream`, as BM_Model_Decode).
void BM_Model_Decode_Phases(benchmark::State& state) {
  const bool int8 = state.range(1) != 0;
  const LoadedModel* m = loaded_model(int8);
  if (m == nullptr) {
    state.SkipWithError("set INFERKIT_MODEL to the file scripts/fetch-model.sh prints");
    return;
  }
  const auto batch = static_cast<std::int32_t>(state.range(0));
  const std::span<const std::byte> weights = m->file.bytes().subspan(m->file.data_offset());
  std::unique_ptr<Engine> engine = decoding_engine(m->model, batch, 64, true, true);
  const EngineStats before = engine->stats();
  PairedTimes vs_stream;
  double step_total = 0.0;
  for (auto _ : state) {
    const double step_s = timed_step(*engine);
    vs_stream.kernel.push_back(step_s);
    step_total += step_s;
    state.PauseTiming();
    const auto t1 = Clock::now();
    benchmark::DoNotOptimize(
        stream_read(weights.data(), static_cast<std::int64_t>(weights.size())));
    vs_stream.baseline.push_back(seconds_since(t1));
    state.ResumeTiming();
  }
  const EngineStats& after = engine->stats();
  for (std::size_t p = 0; p < kLlamaPhaseCount; ++p) {
    const double s = after.forward_phase_seconds[p] - before.forward_phase_seconds[p];
    state.counters["share_" + std::string(to_string(static_cast<LlamaPhase>(p)))] = s / step_total;
  }
  state.counters["share_outside_forward"] =
      1.0 - (after.forward_seconds - before.forward_seconds) / step_total;
  const double step_s = vs_stream.report(state, "ratio_vs_weight_stream");
  state.counters["tokens_per_s"] = batch / step_s;
  state.counters["threads"] = num_threads();
  state.SetLabel(precision_label(int8));
}

/// A busy-loop child process, the "other process on one of the cores" of a shared host: started
/// by the constructor, killed by the destructor.
class BusyNeighbour {
 public:
  BusyNeighbour() : pid_(fork()) {
    if (pid_ == 0) {
      volatile std::uint64_t spin = 0;
      for (;;) spin = spin + 1;  // never returns; the parent kills it
    }
  }
  ~BusyNeighbour() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  BusyNeighbour(const BusyNeighbour&) = delete;
  BusyNeighbour& operator=(const BusyNeighbour&) = delete;
  bool running() const { return pid_ > 0; }

 private:
  pid_t pid_;
};

/// Batch-1 decode while another process spins on one of the cores, with every thread the process
/// has (OMP_NUM_THREADS), against batch-1 decode on one thread with the machine quiet, timed in
/// alternating rounds of 32 steps each so both see the same host: `ratio_vs_quiet_1thread` (the
/// issue's target: 0.8) and tokens/s under the neighbour, from the second round on, and the
/// first round's tokens/s (the adaptive team learning of the neighbour). adaptive 1: the engine's
/// default team, learnt by ThreadTuner (perf/thread_tuner.hpp); adaptive 0: every step on all
/// threads, whose waits at each barrier for the thread that lost its core are what collapses.
/// OMP_WAIT_POLICY=passive (threads sleep instead of spinning) is the other known remedy: run it
/// both ways, and BM_Model_Decode for what passive costs a quiet host.
void BM_Model_Decode_BusyNeighbour(benchmark::State& state) {
  const LoadedModel* m = loaded_model();
  if (m == nullptr) {
    state.SkipWithError("set INFERKIT_MODEL to the file scripts/fetch-model.sh prints");
    return;
  }
  constexpr int kRoundSteps = 32;
  std::unique_ptr<Engine> engine = decoding_engine(m->model, 1, 64, state.range(0) != 0);
  std::unique_ptr<Engine> quiet = decoding_engine(m->model, 1, 64);
  const int threads = num_threads();
  PairedTimes times;
  double first_round_s = 0.0;  // the round in which the adaptive team learns of the neighbour
  std::int64_t rounds = 0;
  for (auto _ : state) {
    state.PauseTiming();
#if INFERKIT_HAS_OPENMP
    omp_set_num_threads(1);
#endif
    for (int i = 0; i < kRoundSteps; ++i) times.baseline.push_back(timed_step(*quiet));
#if INFERKIT_HAS_OPENMP
    omp_set_num_threads(threads);
#endif
    {
      const BusyNeighbour neighbour;
      if (!neighbour.running()) {
        state.SkipWithError("fork() failed: no neighbour process");
        break;
      }
      state.ResumeTiming();
      for (int i = 0; i < kRoundSteps; ++i) {
        const double step_s = timed_step(*engine);
        if (rounds == 0) {
          first_round_s += step_s;
        } else {
          times.kernel.push_back(step_s);
        }
      }
      state.PauseTiming();
    }
    if (rounds++ == 0) times.baseline.clear();  // paired with the rounds after the first
    state.ResumeTiming();
  }
  if (times.kernel.empty()) {
    state.SkipWithError("one round only: raise the Iterations");
    return;
  }
  // From the second round on: the steady state. The first round, where the adaptive team starts
  // at every thread and must see the neighbour before it leaves, is its own counter.
  const double step_s = times.report(state, "ratio_vs_quiet_1thread");
  state.counters["first_round_tokens_per_s"] = kRoundSteps / first_round_s;
  state.counters["tokens_per_s"] = 1.0 / step_s;
  state.counters["quiet_1thread_tokens_per_s"] = 1.0 / PairedTimes::median(times.baseline);
  state.counters["threads"] = threads;
  state.counters["team_last_step"] = engine->stats().step_threads;
  state.counters["team_switches"] = static_cast<double>(engine->stats().thread_switches);
}

/// Prefill of one `chunk`-token prompt (a fresh engine per iteration, not timed): prompt
/// tokens/s and the speedup per token over batch-1 decode steps timed alongside.
void BM_Model_Prefill(benchmark::State& state) {
  const bool int8 = state.range(1) != 0;
  const LoadedModel* m = loaded_model(int8);
  if (m == nullptr) {
    state.SkipWithError("set INFERKIT_MODEL to the file scripts/fetch-model.sh prints");
    return;
  }
  const auto chunk = static_cast<std::int32_t>(state.range(0));
  std::unique_ptr<Engine> single = decoding_engine(m->model, 1, 64);
  PairedTimes times;
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<Engine> engine = bench_engine(m->model, 1, chunk, chunk + 16);
    GenerationParams p;
    p.max_new_tokens = 1;
    p.stop_at_eos = false;
    Rng rng(7);
    std::vector<TokenId> prompt(static_cast<std::size_t>(chunk));
    for (TokenId& t : prompt) t = static_cast<TokenId>(rng.below(49152));
    (void)engine->submit(std::move(prompt), p);
    state.ResumeTiming();
    times.kernel.push_back(timed_step(*engine) / chunk);  // the whole prompt in one step
    state.PauseTiming();
    times.baseline.push_back(timed_step(*single));
    state.ResumeTiming();
  }
  const double token_s = times.report(state, "speedup_vs_batch1_decode");
  state.counters["tokens_per_s"] = 1.0 / token_s;
  state.counters["threads"] = num_threads();
  state.SetLabel(precision_label(int8));
}

/// Int8 activations against fp32 ones on the same host in the same run: steps of two engines on
/// the two models, alternated (`speedup_vs_fp32`, per step: decode at `batch` requests, or with
/// `prefill` a whole `batch`-token prompt).
void BM_Model_Int8_Speedup(benchmark::State& state) {
  const LoadedModel* fp32 = loaded_model(false);
  const LoadedModel* int8 = loaded_model(true);
  if (fp32 == nullptr || int8 == nullptr) {
    state.SkipWithError("set INFERKIT_MODEL to the file scripts/fetch-model.sh prints");
    return;
  }
  const auto batch = static_cast<std::int32_t>(state.range(0));
  const bool prefill = state.range(1) != 0;
  const auto prefilling = [&](const LlamaModel& model) {
    std::unique_ptr<Engine> engine = bench_engine(model, 1, batch, batch + 16);
    GenerationParams p;
    p.max_new_tokens = 1;
    p.stop_at_eos = false;
    Rng rng(7);
    std::vector<TokenId> prompt(static_cast<std::size_t>(batch));
    for (TokenId& t : prompt) t = static_cast<TokenId>(rng.below(49152));
    (void)engine->submit(std::move(prompt), p);
    return engine;
  };
  std::unique_ptr<Engine> a = prefill ? nullptr : decoding_engine(int8->model, batch, 64);
  std::unique_ptr<Engine> b = prefill ? nullptr : decoding_engine(fp32->model, batch, 64);
  PairedTimes times;
  for (auto _ : state) {
    if (prefill) {
      state.PauseTiming();
      a = prefilling(int8->model);
      b = prefilling(fp32->model);
      state.ResumeTiming();
    }
    times.kernel.push_back(timed_step(*a));
    state.PauseTiming();
    times.baseline.push_back(timed_step(*b));
    state.ResumeTiming();
  }
  const double step_s = times.report(state, "speedup_vs_fp32");
  state.counters["tokens_per_s"] = batch / step_s;
  state.counters["fp32_tokens_per_s"] = batch / PairedTimes::median(times.baseline);
  state.counters["threads"] = num_threads();
  state.SetLabel(prefill ? "prefill" : "decode");
}

/// The int8 dot-product peak of this host with every thread, in GOP/s (a multiply-add is 2): the
/// best of three microkernels of independent vpdpbusd chains in registers, timed over 2^22 steps:
/// 12 and 24 chains of 512 bits, and 12 of 256 bits (EVEX). One shape does not fit every core: the
/// Intel host reaches its peak with 12 512-bit chains, while a Zen 4 host measured 153-163 GOP/s a
/// thread there, 228-232 with 24 chains and 351-426 with 256-bit chains, below what the product
/// kernels themselves reached (ratio_vs_vnni_peak read 1.1-1.4). 0 where the CPU has no AVX-512
/// VNNI.
#if INFERKIT_CPU_DISPATCH
template <int kChains>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) std::int64_t vnni_chains_512(
    std::int64_t steps) {
  const __m512i a = _mm512_set1_epi8(3);
  const __m512i b = _mm512_set1_epi8(-2);
  __m512i acc[kChains];
  INFERKIT_UNROLL  // in registers: an array the loops do not unroll would live on the stack
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  for (std::int64_t s = 0; s < steps; ++s) {
    INFERKIT_UNROLL
    for (int i = 0; i < kChains; ++i) {
      acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
      __asm__ volatile("" : "+v"(acc[i]));  // every step's instructions stay
    }
  }
  __m512i sum = acc[0];
  INFERKIT_UNROLL
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  return _mm512_reduce_add_epi32(sum);
}
__attribute__((target("avx512f,avx512vl,avx512vnni"))) std::int64_t vnni_chains_256(
    std::int64_t steps) {
  constexpr int kChains = 12;
  const __m256i a = _mm256_set1_epi8(3);
  const __m256i b = _mm256_set1_epi8(-2);
  __m256i acc[kChains];
  INFERKIT_UNROLL
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi32(i);
  for (std::int64_t s = 0; s < steps; ++s) {
    INFERKIT_UNROLL
    for (int i = 0; i < kChains; ++i) {
      acc[i] = _mm256_dpbusd_epi32(acc[i], a, b);
      __asm__ volatile("" : "+v"(acc[i]));
    }
  }
  __m256i sum = acc[0];
  INFERKIT_UNROLL
  for (int i = 1; i < kChains; ++i) sum = _mm256_add_epi32(sum, acc[i]);
  return _mm256_extract_epi32(sum, 0);
}
#endif
double vnni_peak_gops() {
#if INFERKIT_CPU_DISPATCH
  if (!cpu_has_avx512_vnni()) return 0.0;
  constexpr std::int64_t kSteps = std::int64_t{1} << 22;
  constexpr auto kOps = 2.0 * static_cast<double>(kSteps);  // per lane-byte pair and chain
  const double zmm12 = peak_rate(kOps * 64 * 12, [] { return vnni_chains_512<12>(kSteps); });
  const double zmm24 = peak_rate(kOps * 64 * 24, [] { return vnni_chains_512<24>(kSteps); });
  const double ymm12 = peak_rate(kOps * 32 * 12, [] { return vnni_chains_256(kSteps); });
  return std::max({zmm12, zmm24, ymm12}) * 1e-9;
#else
  return 0.0;
#endif
}

/// Products of n tokens by a rows x cols matrix: `kernel()` and `baseline()` timed in alternate
/// iterations, reported as the kernel's GOP/s, its speedup over the baseline (`speedup_name`)
/// and, when `peak_gops` > 0, its share of that same-run peak (`ratio_vs_<unit>_peak`).
template <class Kernel, class Baseline>
void time_products(benchmark::State& state, GgmlType type, std::int64_t rows, std::int64_t cols,
                   std::int64_t n, const Kernel& kernel, const Baseline& baseline,
                   const std::string& speedup_name, const std::string& unit, double peak_gops) {
  PairedTimes times;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    kernel();
    times.kernel.push_back(seconds_since(t0));
    state.PauseTiming();
    const auto t1 = Clock::now();
    baseline();
    times.baseline.push_back(seconds_since(t1));
    state.ResumeTiming();
  }
  const double ops = 2.0 * static_cast<double>(rows * cols * n);
  const double gops = ops / times.report(state, speedup_name) * 1e-9;
  state.counters["GOP_per_s"] = gops;
  if (peak_gops > 0.0) {
    state.counters["ratio_vs_" + unit + "_peak"] = gops / peak_gops;
    state.counters[unit + "_peak_GOP_per_s"] = peak_gops;
  }
  state.counters["threads"] = num_threads();
  state.SetLabel(std::string(ggml_type_layout(type)->name));
}

/// Batched int8-activation products (model/int8_linear.hpp) against the fp32-activation linear()
/// of the same weights, timed alongside (`speedup_vs_fp32`), and GOP/s as a fraction of the
/// VNNI peak measured in the same run (`ratio_vs_vnni_peak`).
void BM_Linear_Int8(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const std::int64_t rows = state.range(1), cols = state.range(2), n = state.range(3);
  const std::vector<std::byte> m = random_matrix(type, rows, cols);
  const LinearWeights w{type, rows, cols, m.data()};
  const Int8LinearWeights packed(w);
  const std::vector<float> x = random_floats(n * cols, 6);
  std::vector<float> y(static_cast<std::size_t>(n * rows));
  static const double peak = vnni_peak_gops();
  time_products(
      state, type, rows, cols, n,
      [&] {
        linear_int8(packed, x.data(), n, y.data());
        benchmark::DoNotOptimize(y.data());
      },
      [&] {
        linear(w, x.data(), n, y.data());
        benchmark::DoNotOptimize(y.data());
      },
      "speedup_vs_fp32", "vnni", peak);
}

/// The AMX-INT8 peak of this host with every thread, in GOP/s: back-to-back tdpbssd on four
/// independent 16 x 16 accumulator tiles from full 16 x 64-byte operand tiles (16,384
/// multiply-adds each), no loads or stores in the loop. 0 where the process cannot run AMX.
#if INFERKIT_CPU_DISPATCH && defined(__x86_64__)
__attribute__((target("amx-tile,amx-int8"))) std::int32_t amx_chains(std::int64_t steps) {
  alignas(64) detail::int8_amx::TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  alignas(64) static const std::int8_t kOperand[16 * 64] = {1, 2, 3};
  __asm__ __volatile__("" ::: "memory");
  _tile_loadconfig(&c);
  _tile_loadd(4, kOperand, 64);
  _tile_loadd(5, kOperand, 64);
  _tile_loadd(6, kOperand, 64);
  _tile_loadd(7, kOperand, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (std::int64_t s = 0; s < steps; ++s) {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  alignas(64) std::int32_t out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}
#endif
double amx_peak_gops() {
#if INFERKIT_CPU_DISPATCH && defined(__x86_64__)
  if (!detail::int8_isa_supported(detail::Int8Isa::kAmxInt8)) return 0.0;
  constexpr std::int64_t kSteps = std::int64_t{1} << 18;
  return peak_rate(2.0 * 16384.0 * 4.0 * static_cast<double>(kSteps),
                   [] { return amx_chains(kSteps); }) *
         1e-9;
#else
  return 0.0;
#endif
}

/// The AMX-INT8 path of the int8-activation products against the AVX-512 VNNI path, timed
/// alongside (`speedup_vs_vnni`; the same bits), and GOP/s as a fraction of the AMX peak measured
/// in the same run (`ratio_vs_amx_peak`). Skipped where the process cannot run AMX.
void BM_Linear_Amx(benchmark::State& state) {
  if (!detail::int8_isa_supported(detail::Int8Isa::kAmxInt8)) {
    state.SkipWithError("this CPU or OS runs no AMX-INT8 (or INFERKIT_AMX=off)");
    return;
  }
  const auto type = static_cast<GgmlType>(state.range(0));
  const std::int64_t rows = state.range(1), cols = state.range(2), n = state.range(3);
  const std::vector<std::byte> m = random_matrix(type, rows, cols);
  const Int8LinearWeights packed(LinearWeights{type, rows, cols, m.data()});
  const std::vector<float> x = random_floats(n * cols, 6);
  std::vector<float> y(static_cast<std::size_t>(n * rows));
  static const double peak = amx_peak_gops();
  time_products(
      state, type, rows, cols, n,
      [&] {
        detail::linear_int8_on(detail::Int8Isa::kAmxInt8, packed, x.data(), n, y.data());
        benchmark::DoNotOptimize(y.data());
      },
      [&] {
        detail::linear_int8_on(detail::Int8Isa::kAvx512Vnni, packed, x.data(), n, y.data());
        benchmark::DoNotOptimize(y.data());
      },
      "speedup_vs_vnni", "amx", peak);
}

constexpr auto kQ4_1 = static_cast<std::int64_t>(GgmlType::kQ4_1);
constexpr auto kQ8_0 = static_cast<std::int64_t>(GgmlType::kQ8_0);

BENCHMARK(BM_Linear_Matvec)
    ->ArgNames({"type", "rows", "cols", "pool_MiB"})
    ->ArgsProduct({{kQ4_1, kQ8_0}, {576}, {576}, {1024, 96, 0}})
    ->ArgsProduct({{kQ4_1, kQ8_0}, {576}, {1536}, {1024, 96, 0}})
    ->ArgsProduct({{kQ4_1, kQ8_0}, {1536}, {576}, {1024, 96, 0}})
    ->ArgsProduct({{kQ4_1, kQ8_0}, {49152}, {576}, {1024, 96, 0}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2)
    ->UseRealTime();
BENCHMARK(BM_Linear_Matmul)
    ->ArgNames({"type", "rows", "cols", "n"})
    ->ArgsProduct({{kQ4_1, kQ8_0}, {576}, {576}, {8, 32, 512}})
    ->ArgsProduct({{kQ4_1, kQ8_0}, {576}, {1536}, {8, 32, 512}})
    ->ArgsProduct({{kQ4_1, kQ8_0}, {1536}, {576}, {8, 32, 512}})
    ->ArgsProduct({{kQ8_0}, {49152}, {576}, {8, 32}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2)
    ->UseRealTime();

BENCHMARK(BM_Linear_Int8)
    ->ArgNames({"type", "rows", "cols", "n"})
    ->ArgsProduct({{kQ4_1}, {576}, {576}, {1, 32, 512}})
    ->ArgsProduct({{kQ4_1}, {1536}, {576}, {1, 32, 512}})
    ->ArgsProduct({{kQ4_1}, {576}, {1536}, {1, 32, 512}})
    ->ArgsProduct({{kQ8_0}, {49152}, {576}, {1, 32}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->UseRealTime();
BENCHMARK(BM_Linear_Amx)
    ->ArgNames({"type", "rows", "cols", "n"})
    ->ArgsProduct({{kQ4_1}, {576}, {576}, {64, 512}})  // AMX runs from kAmxMinTokens = 64
    ->ArgsProduct({{kQ4_1}, {1536}, {576}, {64, 512}})
    ->ArgsProduct({{kQ4_1}, {576}, {1536}, {64, 512}})
    ->ArgsProduct({{kQ8_0}, {49152}, {576}, {64}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->UseRealTime();
BENCHMARK(BM_Model_Int8_Speedup)
    ->ArgNames({"tokens", "prefill"})
    ->Args({1, 0})
    ->Args({32, 0})
    ->Args({512, 1})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
BENCHMARK(BM_Model_Decode)
    ->ArgNames({"batch", "int8"})
    ->ArgsProduct({{1, 8, 32}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->UseRealTime();
BENCHMARK(BM_Model_Decode_Phases)
    ->ArgNames({"batch", "int8"})
    ->ArgsProduct({{1, 32}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->UseRealTime();
BENCHMARK(BM_Model_Decode_KV)
    ->ArgName("kv")
    ->DenseRange(1, static_cast<int>(kEngineKVDTypes.size()) - 1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->UseRealTime();
BENCHMARK(BM_Model_Decode_BusyNeighbour)
    ->ArgNames({"adaptive"})
    ->Arg(1)
    ->Arg(0)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(4)  // rounds; the first is reported apart
    ->UseRealTime();
BENCHMARK(BM_Model_Prefill)
    ->ArgNames({"tokens", "int8"})
    ->ArgsProduct({{128, 512}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
