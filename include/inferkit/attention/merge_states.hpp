// SPDX-License-Identifier: Apache-2.0
// Merging partial attention states, the public API: split-KV decode and shared-prefix (cascade)
// attention compute softmax(QK^T)V over disjoint key sets and combine the partial outputs with
// their log-sum-exp (natural log). The CPU overloads come with this header; CUDA ones from
// attention/cuda/*.cuh.
// Threads: merge_states keeps no state; calls from several threads are safe when each writes its
// own outputs, which no other call reads (see the backend headers).
#pragma once

#include <cstdint>
#include <inferkit/core/backend.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/detail/dispatch_value.hpp>
#include <span>

#if !INFERKIT_CUDA_COMPILER
#  include <inferkit/attention/cpu/merge_states.hpp>
#endif

namespace inferkit {

/// Backends without an implementation in this translation unit land here.
template <class Backend>
void merge_states(Backend, std::span<const float>, std::span<const float>, std::int32_t,
                  std::int32_t, std::span<float>, std::span<float> = {}) {
  static_assert(detail::dependent_false_v<Backend>,
                "no merge_states for this backend here: CUDA overloads come from "
                "<inferkit/attention/cuda/merge_states.cuh>, compiled by nvcc in a .cu file");
}

}  // namespace inferkit
