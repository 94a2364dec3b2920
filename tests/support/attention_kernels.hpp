// SPDX-License-Identifier: Apache-2.0
// The CPU attention kernels the attention tests run, declared `extern template` so that every
// test TU that calls paged_decode / paged_prefill links to one instantiation, compiled by
// tests/attention/instantiate_kernels_*.cpp, instead of compiling its own. One instantiation is
// every head_dim x row-count specialization of the tile kernel for one KV type and one
// instruction-set path (all paths are compiled; core/cpu_isa.hpp picks one): compiling them
// in both the decode and the prefill test was the largest cost of a CI run (about 450 s per TU
// under ASan). Include it after the library headers, in every TU that runs a kernel.
#pragma once

#include <cstdint>
#include <inferkit/attention/attention.hpp>
#include <inferkit/attention/cpu/detail/attention_tile.hpp>
#include <inferkit/attention/cpu/paged_attention.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>

// The paths this build compiles (core/cpu_isa.hpp); each instantiate_kernels_*.cpp compiles its
// two KV types on every one of them (the sanitizer build has only the portable path: it
// defines INFERKIT_CPU_DISPATCH=0, see CMakePresets.json).
#if INFERKIT_CPU_DISPATCH
#  define INFERKIT_TEST_FOR_EACH_PATH(X, KV) \
    X(avx512, KV)                            \
    X(avx2, KV)                              \
    X(baseline, KV)
#elif INFERKIT_HAS_NEON
#  define INFERKIT_TEST_FOR_EACH_PATH(X, KV) \
    X(neon, KV)                              \
    X(baseline, KV)
#else
#  define INFERKIT_TEST_FOR_EACH_PATH(X, KV) X(baseline, KV)
#endif
#define INFERKIT_TEST_DECLARE_KERNEL(path, KV)                         \
  extern template void dispatch_paged_attention<path::IsaKernels, KV>( \
      const PagedAttentionProblem<KV>&);
#define INFERKIT_TEST_DEFINE_KERNEL(path, KV) \
  template void dispatch_paged_attention<path::IsaKernels, KV>(const PagedAttentionProblem<KV>&);

namespace inferkit::detail {

INFERKIT_TEST_FOR_EACH_PATH(INFERKIT_TEST_DECLARE_KERNEL, float)
INFERKIT_TEST_FOR_EACH_PATH(INFERKIT_TEST_DECLARE_KERNEL, float16)
INFERKIT_TEST_FOR_EACH_PATH(INFERKIT_TEST_DECLARE_KERNEL, bfloat16)
INFERKIT_TEST_FOR_EACH_PATH(INFERKIT_TEST_DECLARE_KERNEL, float8_e4m3)
INFERKIT_TEST_FOR_EACH_PATH(INFERKIT_TEST_DECLARE_KERNEL, float8_e5m2)
INFERKIT_TEST_FOR_EACH_PATH(INFERKIT_TEST_DECLARE_KERNEL, std::int8_t)

}  // namespace inferkit::detail
