// SPDX-License-Identifier: Apache-2.0
// Internal: the AVX-512 path of the linear-layer kernels (namespace detail::linear_avx512),
// compiled in a function-level target region whatever the TU's -m flags, and run only when
// linear_isa.hpp says the CPU has AVX-512 F/BW/VL. A vector is one zmm of 16 floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/config.hpp>
#include <inferkit/model/detail/linear_job.hpp>
#include <inferkit/model/ggml_type.hpp>
#include <type_traits>

#if INFERKIT_CPU_DISPATCH
#  include <immintrin.h>

// clang-format off
#  if INFERKIT_COMPILER_GCC
#    pragma GCC push_options
#    pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#  else
#    pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))), apply_to = function)
#  endif
// clang-format on
INFERKIT_SIMD_WARNINGS_BEGIN

namespace inferkit::detail::linear_avx512 {

/// The AVX-512 vector policy of linear_kernels-inl.hpp.
struct Simd {
  using V = __m512;
  /// Rows of the one-token fused tile (independent FMA chains: 8 hide the FMA latency), and the
  /// panel register tile: 4 rows x 6 tokens = 24 accumulators + 4 weight vectors + 1 activation.
  static constexpr int kFusedRows = 8;
  static constexpr int kTileRows = 4;
  static constexpr int kTileTokens = 6;

  static __mmask16 first(int n) noexcept { return static_cast<__mmask16>((1u << n) - 1u); }
  static V zero() noexcept { return _mm512_setzero_ps(); }
  static V set1(float a) noexcept { return _mm512_set1_ps(a); }
  static V load(const float* p) noexcept { return _mm512_loadu_ps(p); }
  static V load_partial(const float* p, int n) noexcept {
    return _mm512_maskz_loadu_ps(first(n), p);
  }
  static void store(float* p, V a) noexcept { _mm512_storeu_ps(p, a); }
  static V fma(V a, V b, V c) noexcept { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) noexcept { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) noexcept { return _mm512_add_ps(a, b); }
  /// Lanes (i, i+8), then (i, i+4), (i, i+2), (i, i+1): the order every path uses.
  static float hsum(V a) noexcept {
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
  }
  /// The fp16 value at p (unaligned).
  static float half(const std::byte* p) noexcept {
    std::uint16_t bits = 0;
    std::memcpy(&bits, p, sizeof(bits));
    return _cvtsh_ss(bits);
  }
  /// 16 bytes at p as nibbles: lo = byte & 15 (elements 0-15), hi = byte >> 4 (16-31).
  static void nibbles(const std::byte* p, V& lo, V& hi) noexcept {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i mask = _mm_set1_epi8(0x0F);
    lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(q, mask)));
    hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), mask)));
  }
  /// 16 int8 at p.
  static V int8s(const std::byte* p) noexcept {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static V halfs(const std::byte* p) noexcept {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static V halfs_partial(const std::byte* p, int n) noexcept {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first(n), p));
  }
  static V bhalfs(const std::byte* p) noexcept {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
  static V bhalfs_partial(const std::byte* p, int n) noexcept {
    const __m256i b = _mm256_maskz_loadu_epi16(first(n), p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
  static V floats(const std::byte* p) noexcept { return _mm512_loadu_ps(p); }
  static V floats_partial(const std::byte* p, int n) noexcept {
    return _mm512_maskz_loadu_ps(first(n), p);
  }
  static void prefetch(const std::byte* p) noexcept {
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  }
};

}  // namespace inferkit::detail::linear_avx512

#  define INFERKIT_LINEAR_ISA linear_avx512
#  include <inferkit/model/detail/linear_kernels-inl.hpp>

INFERKIT_SIMD_WARNINGS_END
#  if INFERKIT_COMPILER_GCC
#    pragma GCC pop_options
#  else
#    pragma clang attribute pop
#  endif

#endif  // INFERKIT_CPU_DISPATCH
