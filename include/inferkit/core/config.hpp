// SPDX-License-Identifier: Apache-2.0
// Compiler and platform configuration: the ONLY header that reads compiler macros (__CUDACC__,
// __CUDA_ARCH__, compiler versions). Everything else tests the 0/1 switches defined here with
// `#if`, and the build uses -Wundef, so a misspelled switch is an error, not a silent 0.
// Threads: macros only, no run-time state.
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

// INFERKIT_ARCH_X86 / INFERKIT_ARCH_AARCH64: the target architecture (x86: x86-64 only, whose
// baseline includes SSE2; 32-bit x86 builds take the generic path).
#if defined(__x86_64__)
#  define INFERKIT_ARCH_X86 1
#else
#  define INFERKIT_ARCH_X86 0
#endif
#if defined(__aarch64__)
#  define INFERKIT_ARCH_AARCH64 1
#else
#  define INFERKIT_ARCH_AARCH64 0
#endif

// INFERKIT_CPU_DISPATCH: 1 where the CPU kernels are compiled for several x86 ISAs in every TU
// (function-level target regions, below) and one is chosen at run time (core/cpu_isa.hpp):
// x86 with g++ or clang, outside nvcc. Elsewhere each TU has one path: NEON on aarch64
// (INFERKIT_HAS_NEON), the portable baseline otherwise. A TU may define it 0 to compile only
// the portable path, at its own -m flags (a third of the kernels' compile time; the sanitizer
// tests build that way); the ISA namespace below then has another name.
#if INFERKIT_ARCH_X86 && (defined(__GNUC__) || defined(__clang__)) && !INFERKIT_CUDA_COMPILER
#  define INFERKIT_CPU_CAN_DISPATCH 1
#else
#  define INFERKIT_CPU_CAN_DISPATCH 0
#endif
#if !defined(INFERKIT_CPU_DISPATCH)
#  define INFERKIT_CPU_DISPATCH INFERKIT_CPU_CAN_DISPATCH
#elif INFERKIT_CPU_DISPATCH && !INFERKIT_CPU_CAN_DISPATCH
#  error "INFERKIT_CPU_DISPATCH=1 needs x86 with g++ or clang, outside nvcc"
#endif
#if INFERKIT_ARCH_AARCH64 && !INFERKIT_CUDA_COMPILER
#  define INFERKIT_HAS_NEON 1
#else
#  define INFERKIT_HAS_NEON 0
#endif

// INFERKIT_HAS_VECTOR_EXT: 1 where GCC/clang generic vectors (`__attribute__((vector_size))`)
// exist; portable kernels then use them, which both compilers lower to the TU's widest SIMD.
#if defined(__GNUC__)
#  define INFERKIT_HAS_VECTOR_EXT 1
#else
#  define INFERKIT_HAS_VECTOR_EXT 0
#endif

// INFERKIT_HAS_AVX512 / INFERKIT_HAS_AVX2: 1 when the TU itself is compiled with those ISAs
// (-march=native, -mavx2 -mfma -mf16c): code outside the target regions may then use them
// directly (tests of the SIMD policies do). The kernels do not depend on these.
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

// Function-level target regions (STYLE.md's checked fact): functions and function templates
// *defined* between INFERKIT_TARGET_AVX512_BEGIN (or _AVX2_BEGIN) and INFERKIT_TARGET_END are
// compiled for that ISA wherever they are instantiated, whatever the TU's -m flags; they must only
// run after core/cpu_isa.hpp says the CPU has it. No OpenMP pragma may sit inside a region
// (clang does not give OpenMP's outlined functions the region's target), and g++'s false
// uninitialized warnings from the AVX-512 intrinsics are silenced inside.
// A _Pragma takes exactly one string literal: clang-format must not split these lines.
// clang-format off
#if INFERKIT_CPU_DISPATCH && INFERKIT_COMPILER_GCC
#  define INFERKIT_TARGET_AVX512_BEGIN _Pragma("GCC push_options") \
    _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx2,fma,f16c,bmi,bmi2\")") \
    INFERKIT_SIMD_WARNINGS_BEGIN
#  define INFERKIT_TARGET_AVX2_BEGIN _Pragma("GCC push_options") \
    _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2\")") INFERKIT_SIMD_WARNINGS_BEGIN
#  define INFERKIT_TARGET_END INFERKIT_SIMD_WARNINGS_END _Pragma("GCC pop_options")
#elif INFERKIT_CPU_DISPATCH
#  define INFERKIT_TARGET_AVX512_BEGIN _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx2,fma,f16c,bmi,bmi2\"))), apply_to = function)")
#  define INFERKIT_TARGET_AVX2_BEGIN _Pragma("clang attribute push(__attribute__((target(\"avx2,fma,f16c,bmi,bmi2\"))), apply_to = function)")
#  define INFERKIT_TARGET_END _Pragma("clang attribute pop")
#endif
// clang-format on

// INFERKIT_ISA_ABI: the name of an inline namespace that holds every CPU kernel (and the public
// functions that run them), spelled from the ISA extensions this TU is compiled with, like
// default_backend's cuda_on / cuda_off. Two TUs built with different -m flags then define
// distinct entities, so the linker can never keep one TU's copy (say, with AVX-512 instructions
// in its "baseline" path) for the other. INFERKIT_ISA_ABI_TAG puts the same name into the
// mangled name of a class member that runs kernels (members cannot move into a namespace).
// Each digit is 1 when its macro is defined as 1 (as g++ and clang define them).
#define INFERKIT_PP_CAT_(a, b) a##b
#define INFERKIT_PP_CAT(a, b) INFERKIT_PP_CAT_(a, b)
#define INFERKIT_PP_STR_(x) #x
#define INFERKIT_PP_STR(x) INFERKIT_PP_STR_(x)
#define INFERKIT_PP_SECOND_(a, b, ...) b
#define INFERKIT_PP_SECOND(...) INFERKIT_PP_SECOND_(__VA_ARGS__)
#define INFERKIT_PP_IS_ONE_1 ,
#define INFERKIT_PP_BIT(x) INFERKIT_PP_SECOND(INFERKIT_PP_CAT(INFERKIT_PP_IS_ONE_, x) 1, 0, ~)
#define INFERKIT_PP_JOIN6_(a, b, c, d, e, f) a##b##c##d##e##f
#define INFERKIT_PP_JOIN6(a, b, c, d, e, f) INFERKIT_PP_JOIN6_(a, b, c, d, e, f)
#if INFERKIT_CUDA_COMPILER
#  define INFERKIT_PP_NVCC_BIT 1
#else
#  define INFERKIT_PP_NVCC_BIT 0
#endif
// x86 TUs that compile only the portable path (INFERKIT_CPU_DISPATCH=0 outside nvcc) get their
// own prefix: their entry points have no run-time choice, so they must not merge with the rest.
#if INFERKIT_CPU_CAN_DISPATCH && !INFERKIT_CPU_DISPATCH
#  define INFERKIT_PP_X86_PREFIX isa_x86_static_
#else
#  define INFERKIT_PP_X86_PREFIX isa_x86_
#endif
#if INFERKIT_ARCH_X86
#  define INFERKIT_ISA_ABI                                                                   \
    INFERKIT_PP_JOIN6(                                                                       \
        INFERKIT_PP_X86_PREFIX, INFERKIT_PP_NVCC_BIT,                                        \
        INFERKIT_PP_JOIN6(INFERKIT_PP_BIT(__SSE3__), INFERKIT_PP_BIT(__SSSE3__),             \
                          INFERKIT_PP_BIT(__SSE4_1__), INFERKIT_PP_BIT(__SSE4_2__),          \
                          INFERKIT_PP_BIT(__POPCNT__), INFERKIT_PP_BIT(__AVX__)),            \
        INFERKIT_PP_JOIN6(INFERKIT_PP_BIT(__AVX2__), INFERKIT_PP_BIT(__FMA__),               \
                          INFERKIT_PP_BIT(__F16C__), INFERKIT_PP_BIT(__BMI__),               \
                          INFERKIT_PP_BIT(__BMI2__), INFERKIT_PP_BIT(__LZCNT__)),            \
        INFERKIT_PP_JOIN6(INFERKIT_PP_BIT(__AVX512F__), INFERKIT_PP_BIT(__AVX512BW__),       \
                          INFERKIT_PP_BIT(__AVX512VL__), INFERKIT_PP_BIT(__AVX512DQ__),      \
                          INFERKIT_PP_BIT(__AVX512CD__), INFERKIT_PP_BIT(__AVX512FP16__)),   \
        INFERKIT_PP_JOIN6(INFERKIT_PP_BIT(__AVX512BF16__), INFERKIT_PP_BIT(__AVX512VNNI__),  \
                          INFERKIT_PP_BIT(__AVX512VBMI__), INFERKIT_PP_BIT(__AVX512VBMI2__), \
                          INFERKIT_PP_BIT(__AVXVNNI__), INFERKIT_PP_BIT(__GFNI__)))
#elif INFERKIT_ARCH_AARCH64
#  define INFERKIT_ISA_ABI                                                                     \
    INFERKIT_PP_JOIN6(isa_arm64_, INFERKIT_PP_NVCC_BIT,                                        \
                      INFERKIT_PP_JOIN6(INFERKIT_PP_BIT(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC), \
                                        INFERKIT_PP_BIT(__ARM_FEATURE_DOTPROD),                \
                                        INFERKIT_PP_BIT(__ARM_FEATURE_BF16),                   \
                                        INFERKIT_PP_BIT(__ARM_FEATURE_MATMUL_INT8),            \
                                        INFERKIT_PP_BIT(__ARM_FEATURE_SVE),                    \
                                        INFERKIT_PP_BIT(__ARM_FEATURE_SVE2)),                  \
                      , , )
#else
#  define INFERKIT_ISA_ABI INFERKIT_PP_CAT(isa_generic_, INFERKIT_PP_NVCC_BIT)
#endif
#define INFERKIT_ISA_ABI_TAG [[gnu::abi_tag(INFERKIT_PP_STR(INFERKIT_ISA_ABI))]]

// INFERKIT_DEBUG_ASSERTS: internal invariants are checked unless NDEBUG (user may override).
#ifndef INFERKIT_DEBUG_ASSERTS
#  if defined(NDEBUG)
#    define INFERKIT_DEBUG_ASSERTS 0
#  else
#    define INFERKIT_DEBUG_ASSERTS 1
#  endif
#endif
