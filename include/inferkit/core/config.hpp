// SPDX-License-Identifier: Apache-2.0
// Compiler and platform configuration: the ONLY header that reads compiler macros (__CUDACC__,
// __CUDA_ARCH__, compiler versions). Everything else tests the 0/1 switches defined here with
// `#if`, and the build uses -Wundef, so a misspelled switch is an error, not a silent 0.
#pragma once

// INFERKIT_WITH_CUDA: 1 when the CUDA backend is compiled in (set by the inferkit::cuda target).
// fmt's idiom: keep the user's value if they defined it.
#ifndef INFERKIT_WITH_CUDA
#  define INFERKIT_WITH_CUDA 0
#endif

// INFERKIT_CUDA_COMPILER: 1 inside a TU compiled by nvcc; INFERKIT_DEVICE_PASS: 1 in nvcc's
// device pass (the code being compiled runs on the GPU).
#if defined(__CUDACC__)
#  define INFERKIT_CUDA_COMPILER 1
#else
#  define INFERKIT_CUDA_COMPILER 0
#endif
#if defined(__CUDA_ARCH__)
#  define INFERKIT_DEVICE_PASS 1
#else
#  define INFERKIT_DEVICE_PASS 0
#endif

// Function annotations (CuTe style): empty off CUDA, so the same header serves g++ and nvcc.
#if INFERKIT_CUDA_COMPILER
#  define INFERKIT_HOST_DEVICE __host__ __device__
#  define INFERKIT_DEVICE __device__
#  define INFERKIT_FORCEINLINE __forceinline__
#else
#  define INFERKIT_HOST_DEVICE
#  define INFERKIT_DEVICE
#  define INFERKIT_FORCEINLINE inline __attribute__((always_inline))
#endif

// INFERKIT_COMPILER_GCC: 1 for GNU g++ (not clang, which also defines __GNUC__).
#if defined(__GNUC__) && !defined(__clang__)
#  define INFERKIT_COMPILER_GCC 1
#else
#  define INFERKIT_COMPILER_GCC 0
#endif

// GCC 12's AVX-512 intrinsics self-initialize their "undefined" operands (__m512 __Y = __Y),
// which -Wmaybe-uninitialized reports at every inlined use. SIMD headers wrap their bodies in
// INFERKIT_SIMD_WARNINGS_BEGIN / _END to silence exactly that, for g++ only.
#if INFERKIT_COMPILER_GCC
#  define INFERKIT_SIMD_WARNINGS_BEGIN                                                         \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") \
        _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#  define INFERKIT_SIMD_WARNINGS_END _Pragma("GCC diagnostic pop")
#else
#  define INFERKIT_SIMD_WARNINGS_BEGIN
#  define INFERKIT_SIMD_WARNINGS_END
#endif

// INFERKIT_UNROLL: put before a loop with a small constant trip count that must be unrolled
// completely, so the arrays of SIMD registers it indexes stay in registers. g++ -O2 leaves such
// loops rolled and spills the arrays to the stack (measured: the decode kernel ran 2x slower at
// -O2 than at -O3 until its register-tile loops carried this).
#if INFERKIT_COMPILER_GCC
#  define INFERKIT_UNROLL _Pragma("GCC unroll 32")
#elif defined(__clang__)
#  define INFERKIT_UNROLL _Pragma("unroll")
#else
#  define INFERKIT_UNROLL
#endif
// INFERKIT_HAS_OPENMP: 1 when the compiler runs with OpenMP enabled (-fopenmp).
#if defined(_OPENMP)
#  define INFERKIT_HAS_OPENMP 1
#else
#  define INFERKIT_HAS_OPENMP 0
#endif

// INFERKIT_ARCH_X86: 1 on x86 targets.
#if defined(__x86_64__) || defined(__i386__)
#  define INFERKIT_ARCH_X86 1
#else
#  define INFERKIT_ARCH_X86 0
#endif

// INFERKIT_CPU_DISPATCH: 1 where CPU kernels are compiled for several x86 ISAs in every TU
// (function-level target regions: `#pragma GCC target` for g++, `#pragma clang attribute` for
// clang, which is the compiler whenever this is 1 and INFERKIT_COMPILER_GCC is 0) and one is
// chosen at run time by CPUID: x86 with g++ or clang, outside nvcc. Elsewhere only the portable
// path exists.
#if INFERKIT_ARCH_X86 && (defined(__GNUC__) || defined(__clang__)) && !INFERKIT_CUDA_COMPILER
#  define INFERKIT_CPU_DISPATCH 1
#else
#  define INFERKIT_CPU_DISPATCH 0
#endif

// INFERKIT_HAS_VECTOR_EXT: 1 where GCC/clang generic vectors (`__attribute__((vector_size))`)
// exist; portable kernels then use them, which both compilers lower to the TU's widest SIMD.
#if defined(__GNUC__)
#  define INFERKIT_HAS_VECTOR_EXT 1
#else
#  define INFERKIT_HAS_VECTOR_EXT 0
#endif

// INFERKIT_HAS_AVX512: 1 when AVX-512 F/BW/VL are enabled for this TU (for CPU kernels).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#  define INFERKIT_HAS_AVX512 1
#else
#  define INFERKIT_HAS_AVX512 0
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#  define INFERKIT_HAS_AVX2 1
#else
#  define INFERKIT_HAS_AVX2 0
#endif

// INFERKIT_DEBUG_ASSERTS: internal invariants are checked unless NDEBUG (user may override).
#ifndef INFERKIT_DEBUG_ASSERTS
#  if defined(NDEBUG)
#    define INFERKIT_DEBUG_ASSERTS 0
#  else
#    define INFERKIT_DEBUG_ASSERTS 1
#  endif
#endif
