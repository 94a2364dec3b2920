// SPDX-License-Identifier: Apache-2.0
// Internal: the row kernels of KV append (float -> fp16 / bf16 / fp8 conversion, fp16 / bf16 ->
// float widening, int8 and int4 quantization of one token-head vector, fp8 rescaling, |x| max),
// compiled once per
// instruction-set path (kv_row_kernels-inl.hpp: x86 AVX-512, AVX2 and baseline in their target
// regions, NEON on aarch64), each in a namespace named after it, and chosen through a table of
// function pointers by core/cpu_isa.hpp's choice. nvcc TUs get the baseline table only.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/detail/minifloat.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <type_traits>

#if INFERKIT_CPU_DISPATCH
#  include <immintrin.h>
#endif
#if INFERKIT_HAS_NEON
#  include <arm_neon.h>
#endif

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// One path's row kernels (n elements per call; see kv_row_kernels-inl.hpp).
struct KvRowKernels {
  CpuIsa isa;
  float (*abs_max)(const float* x, std::size_t n) noexcept;
  /// Returns the scale (0 for an all-zero row).
  float (*quantize_int8)(const float* x, std::int8_t* q, std::size_t n) noexcept;
  void (*quantize_int4)(const float* x, std::uint8_t* packed, std::size_t n, float* scale,
                        float* zero) noexcept;
  /// Bits of float16(x[i] * inv).
  void (*to_float16)(const float* x, float inv, std::uint16_t* out, std::size_t n) noexcept;
  void (*to_bfloat16)(const float* x, std::uint16_t* out, std::size_t n) noexcept;
  /// Bits of float8_e4m3(x[i] * inv) / float8_e5m2(x[i] * inv).
  void (*to_e4m3)(const float* x, float inv, std::uint8_t* out, std::size_t n) noexcept;
  void (*to_e5m2)(const float* x, float inv, std::uint8_t* out, std::size_t n) noexcept;
  /// q[i] = bits of F8(float(q[i]) * ratio).
  void (*rescale_e4m3)(std::uint8_t* q, float ratio, std::size_t n) noexcept;
  void (*rescale_e5m2)(std::uint8_t* q, float ratio, std::size_t n) noexcept;
  /// out[i] = float(float16 bits in[i]) / float(bfloat16 bits in[i]), exact.
  void (*from_float16)(const std::uint16_t* in, float* out, std::size_t n) noexcept;
  void (*from_bfloat16)(const std::uint16_t* in, float* out, std::size_t n) noexcept;
};

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

#if INFERKIT_CPU_DISPATCH
INFERKIT_TARGET_AVX512_BEGIN
#  define INFERKIT_KV_ISA avx512
#  define INFERKIT_KV_ISA_ID 2
#  define INFERKIT_KV_ISA_CPU_ISA kAvx512
#  define INFERKIT_KV_VECTOR_BYTES 64
#  include <inferkit/kv/detail/kv_row_kernels-inl.hpp>
INFERKIT_TARGET_END
INFERKIT_TARGET_AVX2_BEGIN
#  define INFERKIT_KV_ISA avx2
#  define INFERKIT_KV_ISA_ID 1
#  define INFERKIT_KV_ISA_CPU_ISA kAvx2
#  define INFERKIT_KV_VECTOR_BYTES 32
#  include <inferkit/kv/detail/kv_row_kernels-inl.hpp>
INFERKIT_TARGET_END
#endif
#if INFERKIT_HAS_NEON
#  define INFERKIT_KV_ISA neon
#  define INFERKIT_KV_ISA_ID 3
#  define INFERKIT_KV_ISA_CPU_ISA kNeon
#  define INFERKIT_KV_VECTOR_BYTES 16
#  include <inferkit/kv/detail/kv_row_kernels-inl.hpp>
#endif
#define INFERKIT_KV_ISA baseline
#define INFERKIT_KV_ISA_ID 0
#define INFERKIT_KV_ISA_CPU_ISA kBaseline
#define INFERKIT_KV_VECTOR_BYTES 16
#include <inferkit/kv/detail/kv_row_kernels-inl.hpp>

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// The row kernels of path `isa` (the baseline's where this build lacks it).
inline const KvRowKernels& kv_row_kernels(CpuIsa isa) noexcept {
  switch (isa) {
#if INFERKIT_CPU_DISPATCH
    case CpuIsa::kAvx512:
      return avx512::kKvRowKernels;
    case CpuIsa::kAvx2:
      return avx2::kKvRowKernels;
#endif
#if INFERKIT_HAS_NEON
    case CpuIsa::kNeon:
      return neon::kKvRowKernels;
#endif
    default:
      return baseline::kKvRowKernels;
  }
}

/// The row kernels of the process's path (kernel_isa(): never throws).
inline const KvRowKernels& kv_row_kernels() noexcept { return kv_row_kernels(kernel_isa()); }

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail
