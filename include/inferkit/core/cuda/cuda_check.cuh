// SPDX-License-Identifier: Apache-2.0
// CUDA runtime errors as inferkit errors: `INFERKIT_CUDA_CHECK(expr)` turns a failed
// cudaError_t into `Error{kCuda}` naming the call, the CUDA message and the place, and
// `detail::check_launch` does the same after a kernel launch. Host code of launchers only;
// device code never throws.
// Threads: safe from any host thread; check_launch reads the calling thread's last CUDA error, so
// call it on the thread that launched.
#pragma once

#if !defined(__CUDACC__)
#  error "inferkit/core/cuda/cuda_check.cuh is CUDA code: compile this file with nvcc (a .cu TU)"
#endif

#include <cuda_runtime.h>

#include <inferkit/core/error.hpp>
#include <string>

namespace inferkit::detail {

/// Throws `Error{kCuda}` for a failed `status` of the call spelled `what`.
inline void check_cuda(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess) {
    throw_error(ErrorCode::kCuda,
                concat({what, " failed: ", cudaGetErrorName(status), " (",
                        cudaGetErrorString(status), ") at ", file, ":", std::to_string(line)}));
  }
}

}  // namespace inferkit::detail

/// Evaluates a CUDA runtime call and throws `inferkit::Error{kCuda}` when it fails.
#define INFERKIT_CUDA_CHECK(expr) ::inferkit::detail::check_cuda((expr), #expr, __FILE__, __LINE__)

namespace inferkit::detail {

/// Checks the launch that just happened on this thread (configuration errors, not the run).
inline void check_launch(const char* kernel) {
  check_cuda(cudaGetLastError(), kernel, __FILE__, __LINE__);
}

/// Multiprocessors of the current device (cached per device, since the query is slow).
inline int sm_count() {
  int device = 0;
  INFERKIT_CUDA_CHECK(cudaGetDevice(&device));
  int count = 0;
  INFERKIT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

}  // namespace inferkit::detail
