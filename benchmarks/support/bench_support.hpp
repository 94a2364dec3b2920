// SPDX-License-Identifier: Apache-2.0
// Shared helpers of the benchmark binaries: wall-clock seconds, the OpenMP thread count, the
// same-run peak microkernels' timing, and buffers on 2 MiB-aligned transparent huge pages (as a
// serving engine allocates its KV pool or a loader maps its weights), which the baselines use too.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <inferkit/core/config.hpp>
#include <memory>
#include <new>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif
#if defined(__linux__)
#  include <sys/mman.h>
#endif

namespace inferkit::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// OpenMP's thread count for the next parallel region (1 without OpenMP).
inline int num_threads() {
#if INFERKIT_HAS_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// The rate of a peak microkernel on every thread: `run()` (its result kept from the optimizer)
/// on each OpenMP thread at once, best of 3 trials, as `ops_per_thread` operations per thread per
/// second. The benchmarks report their kernels against these same-run peaks.
template <class Run>
double peak_rate(double ops_per_thread, const Run& run) {
  double best = 0.0;
  for (int trial = 0; trial < 3; ++trial) {
    const auto t0 = Clock::now();
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel
#endif
    {
      auto result = run();
      benchmark::DoNotOptimize(result);
    }
    best = std::max(best, ops_per_thread * num_threads() / seconds_since(t0));
  }
  return best;
}

/// A buffer of `n` T aligned to 2 MiB and, on Linux, backed by transparent huge pages when the
/// system allows it: with 4 KiB pages a scattered or pooled access pattern costs a TLB miss per
/// page, which measures the OS more than the kernel.
template <class T>
struct HugeBuffer {
  struct Free {
    void operator()(T* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<T[], Free> data;

  explicit HugeBuffer(std::size_t n) {
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    const std::size_t bytes = (n * sizeof(T) + kHuge - 1) / kHuge * kHuge;
    data.reset(static_cast<T*>(std::aligned_alloc(kHuge, bytes)));
    if (!data) throw std::bad_alloc();
#if defined(__linux__)
    madvise(data.get(), bytes, MADV_HUGEPAGE);
#endif
  }
  T* get() const noexcept { return data.get(); }
  T& operator[](std::size_t i) const noexcept { return data[i]; }
};

}  // namespace inferkit::bench
