// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels once per program instead of once per translation unit.
// paged_decode / paged_prefill over one KV type instantiate every head_dim specialization of the
// tile kernel on every instruction-set path this build has (core/cpu_isa.hpp): about half of the
// compile time of a TU that runs LlamaModel's forward (examples/generate.cpp at -O2: 79 s alone,
// 37 s with its float16 kernels declared extern). A program with several such TUs declares the
// KV types it runs extern in each of them and instantiates them in one TU of its own:
//
//     // in every TU that calls the kernels (directly or through LlamaModel):
//     #include <inferkit/attention/cpu/kernel_instances.hpp>
//     INFERKIT_CPU_ATTENTION_EXTERN(inferkit::float16)
//
//     // in exactly one TU, with the same compile flags for the instruction-set paths:
//     #include <inferkit/attention/cpu/kernel_instances.hpp>
//     INFERKIT_CPU_ATTENTION_INSTANTIATE(inferkit::float16)
//
// Both macros are used at namespace scope, outside any namespace. A KV type declared extern but
// instantiated nowhere fails at link time, naming dispatch_paged_attention. Nothing else changes:
// without these macros every TU compiles its own copy, as before.
// Threads: declarations only; the kernels' own rules are cpu/paged_attention.hpp's.
#pragma once

#include <cstdint>
#include <inferkit/attention/cpu/paged_attention.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>

/// INFERKIT_CPU_ATTENTION_FOR_EACH_PATH(X, KV): `X(path, KV)` for each instruction-set path
/// paged_attention_kernel() can return in this build (core/cpu_isa.hpp): AVX-512, AVX2 and the
/// portable path where the build dispatches at run time, NEON and the portable path on Arm, the
/// portable path alone otherwise (the sanitizer builds: INFERKIT_CPU_DISPATCH=0).
#if INFERKIT_CPU_DISPATCH
#  define INFERKIT_CPU_ATTENTION_FOR_EACH_PATH(X, KV) \
    X(avx512, KV)                                     \
    X(avx2, KV)                                       \
    X(baseline, KV)
#elif INFERKIT_HAS_NEON
#  define INFERKIT_CPU_ATTENTION_FOR_EACH_PATH(X, KV) \
    X(neon, KV)                                       \
    X(baseline, KV)
#else
#  define INFERKIT_CPU_ATTENTION_FOR_EACH_PATH(X, KV) X(baseline, KV)
#endif

/// One path's kernel for KV type `KV`, declared instantiated in another TU.
#define INFERKIT_CPU_ATTENTION_DECLARE_PATH(path, KV)                  \
  extern template void dispatch_paged_attention<path::IsaKernels, KV>( \
      const PagedAttentionProblem<KV>&);
/// One path's kernel for KV type `KV`, instantiated here.
#define INFERKIT_CPU_ATTENTION_DEFINE_PATH(path, KV) \
  template void dispatch_paged_attention<path::IsaKernels, KV>(const PagedAttentionProblem<KV>&);

/// Declares the CPU attention kernels of KV type `KV` (float, inferkit::float16, bfloat16,
/// float8_e4m3, float8_e5m2, std::int8_t or std::uint8_t, packed int4) instantiated in another TU
/// of the program.
#define INFERKIT_CPU_ATTENTION_EXTERN(KV)                                       \
  namespace inferkit::detail {                                                  \
  INFERKIT_CPU_ATTENTION_FOR_EACH_PATH(INFERKIT_CPU_ATTENTION_DECLARE_PATH, KV) \
  }
/// INFERKIT_CPU_ATTENTION_ENGINE_KV_TYPES(X): `X(KV)` for each KV storage type an Engine serves
/// (engine/engine.hpp's kEngineKVDTypes), for a program that builds engines:
/// `INFERKIT_CPU_ATTENTION_ENGINE_KV_TYPES(INFERKIT_CPU_ATTENTION_EXTERN)` in every TU.
#define INFERKIT_CPU_ATTENTION_ENGINE_KV_TYPES(X) \
  X(inferkit::float16)                            \
  X(inferkit::bfloat16)                           \
  X(inferkit::float8_e4m3) X(inferkit::float8_e5m2) X(std::int8_t) X(std::uint8_t)

/// Instantiates the CPU attention kernels of KV type `KV` on every path of this build; one TU
/// of the program does this for each KV type that INFERKIT_CPU_ATTENTION_EXTERN names.
#define INFERKIT_CPU_ATTENTION_INSTANTIATE(KV)                                 \
  namespace inferkit::detail {                                                 \
  INFERKIT_CPU_ATTENTION_FOR_EACH_PATH(INFERKIT_CPU_ATTENTION_DEFINE_PATH, KV) \
  }
