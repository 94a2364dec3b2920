// SPDX-License-Identifier: Apache-2.0
// The CPU kernel paths a white-box test runs (core/cpu_isa.hpp): every IsaKernels this build
// compiles, as a type list for TEMPLATE_TEST_CASE, and the SIMD policies the test TU itself may
// call directly (those its own -m flags enable, plus the portable one). A path the CPU cannot
// run is skipped at run time with a warning.
#pragma once

#include <catch2/catch.hpp>
#include <inferkit/attention/cpu/detail/attention_tile.hpp>
#include <inferkit/attention/cpu/detail/simd.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/cpu_isa.hpp>
#include <string>

#if INFERKIT_CPU_DISPATCH
#  define INFERKIT_TEST_CPU_PATHS                                               \
    inferkit::detail::baseline::IsaKernels, inferkit::detail::avx2::IsaKernels, \
        inferkit::detail::avx512::IsaKernels
#elif INFERKIT_HAS_NEON
#  define INFERKIT_TEST_CPU_PATHS \
    inferkit::detail::baseline::IsaKernels, inferkit::detail::neon::IsaKernels
#else
#  define INFERKIT_TEST_CPU_PATHS inferkit::detail::baseline::IsaKernels
#endif

// (The x86 policies exist only where the build dispatches: INFERKIT_CPU_DISPATCH=0 has the
// portable path alone.)
#if INFERKIT_CPU_DISPATCH && INFERKIT_HAS_AVX512
#  define INFERKIT_TEST_SIMD_POLICIES \
    inferkit::detail::SimdPortable, inferkit::detail::SimdAvx2, inferkit::detail::SimdAvx512
#elif INFERKIT_CPU_DISPATCH && INFERKIT_HAS_AVX2
#  define INFERKIT_TEST_SIMD_POLICIES inferkit::detail::SimdPortable, inferkit::detail::SimdAvx2
#elif INFERKIT_HAS_NEON
#  define INFERKIT_TEST_SIMD_POLICIES inferkit::detail::SimdPortable, inferkit::detail::SimdNeon
#else
#  define INFERKIT_TEST_SIMD_POLICIES inferkit::detail::SimdPortable
#endif

namespace inferkit::test {

/// Whether this CPU runs the path `Kernels` (an IsaKernels); warns when it does not.
template <class Kernels>
bool path_runs_here() {
  if (cpu_isa_supported(Kernels::kIsa)) return true;
  WARN("path " << std::string(to_string(Kernels::kIsa)) << " not supported by this CPU: skipped");
  return false;
}

}  // namespace inferkit::test
