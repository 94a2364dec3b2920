// SPDX-License-Identifier: Apache-2.0
// Backend tags for kernel dispatch (Thrust-style tag dispatch): every kernel entry point takes
// `inferkit::cpu{}` or `inferkit::cuda{stream}` as its first argument. The CUDA tag is declared
// without any CUDA header (cudaStream_t is exactly CUstream_st*), so host code can name it.
// Threads: tag types and constants only; safe from any number of threads.
#pragma once

#include <inferkit/core/config.hpp>

struct CUstream_st;  // cudaStream_t == CUstream_st*; declared here so no CUDA header is needed

namespace inferkit {

/// The host backend: CPU kernels (threaded by OpenMP when enabled), always available.
struct cpu {};

/// The CUDA backend: kernels run on `stream` (nullptr = the legacy default stream). Its overloads
/// come from <inferkit/attention/cuda/…cuh>, compiled by nvcc in a .cu translation unit.
struct cuda {
  CUstream_st* stream = nullptr;  ///< the stream kernels are launched on (a cudaStream_t)
};

/// True for the backend tag types.
template <class T>
inline constexpr bool is_backend_v = false;
/// `cpu` is a backend.
template <>
inline constexpr bool is_backend_v<cpu> = true;
/// `cuda` is a backend.
template <>
inline constexpr bool is_backend_v<cuda> = true;

// default_backend's definition depends on INFERKIT_WITH_CUDA, so it lives in an inline namespace
// named after the configuration: a CPU-only TU and a CUDA TU in one program then see two distinct
// entities rather than a silent ODR violation.
#if INFERKIT_WITH_CUDA
inline namespace cuda_on {
/// The backend kernels use when the caller does not name one: `cuda` when built with CUDA.
using default_backend = ::inferkit::cuda;
}  // namespace cuda_on
#else
inline namespace cuda_off {
/// The backend kernels use when the caller does not name one: `cpu` without CUDA.
using default_backend = ::inferkit::cpu;
}  // namespace cuda_off
#endif

}  // namespace inferkit
