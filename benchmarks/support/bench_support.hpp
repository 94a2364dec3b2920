// SPDX-License-Identifier: Apache-2.0
// Shared helpers of the benchmark binaries: wall-clock seconds, the OpenMP thread count, and
// buffers on 2 MiB-aligned transparent huge pages (as a serving engine allocates its KV pool or
// a loader maps its weights), which the baselines use too.
#pragma once

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
