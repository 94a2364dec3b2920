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

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {
namespace linear_avx512 {

/// The AVX-512 vector policy of linear_kernels-inl.hpp.
struct Simd {
  using V = __m512;
  /// Rows of the one-token fused tile (independent FMA chains: 8 hide the FMA latency), and the
  /// panel register tile: 4 rows x 6 tokens = 24 accumulators + 4 weight vectors + 1 activation
  /// of the 32 registers; 10 loads feed 24 FMAs (measured: 4 x 6 beat 4 x 4, 6 x 4, 8 x 2, 2 x 8
  /// and 3 x 8 at n = 512).
  static constexpr int kFusedRows = 8;
  static constexpr int kTileRows = 4;
  static constexpr int kTileTokens = 6;
  /// hsum16 costs 46 instructions for 16 sums (hsum: 8 for one), worth padding 8 sums to 16.
  static constexpr bool kBatchedHsum = true;
  /// Q4 blocks decode by q4_lookup (2 permutes) instead of nibbles (2 conversions + 2 masks).
  static constexpr bool kQ4Lookup = true;

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
  /// out[k] = hsum(a[k]) for k < 16: the same additions as hsum, transposed so that each
  /// instruction adds pairs of 16 sums at once: (i, i+8) of two accumulators per add, then
  /// (i, i+4) of four, (i, i+2) of eight, (i, i+1) of all sixteen.
  static void hsum16(const V* a, float* out) noexcept {
    V b[8], c[4], d[2];
    // [a[2k] lanes 0-7 | a[2k+1] lanes 0-7] + [lanes 8-15]
    for (std::ptrdiff_t k = 0; k < 8; ++k) {
      b[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    for (std::ptrdiff_t k = 0; k < 4; ++k) {  // 128-bit lane q: (i, i+4) of a[4k + q]
      c[k] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * k], b[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(b[2 * k], b[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
    // lane q: (i, i+2) of a[8k + q], then of a[8k + 4 + q]
    for (std::ptrdiff_t k = 0; k < 2; ++k) {
      d[k] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * k], c[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(c[2 * k], c[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    // Lane 4q + j: the sum of a[4j + q]; the permutation puts sum k at lane k.
    const V e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, e));
  }
  /// `count` fp16 at `in` to fp32 at `out`.
  static void halfs_to_floats(const std::uint16_t* in, float* out, int count) noexcept {
    int i = 0;
    for (; i + 16 <= count; i += 16) {
      _mm512_storeu_ps(
          out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
    }
    if (i < count) {
      const __mmask16 m = first(count - i);
      _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, in + i)));
    }
  }
  /// Q4 blocks by table lookup: vpermps reads the low 4 bits of each index lane, so the zero-
  /// extended bytes index the low nibbles directly and, shifted by 4, the high ones; `table`
  /// holds the 16 dequantized values, computed as the other paths compute each weight. lo gets
  /// elements 0-15 (low nibbles), hi 16-31.
  static void q4_lookup(const std::byte* qs, V table, V& lo, V& hi) noexcept {
    const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    lo = _mm512_permutexvar_ps(q, table);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
  }
  /// The 16 levels of a Q4 code before scaling: q - 8 (Q4_0, times d) and q (Q4_1, times d
  /// plus m).
  static V q4_0_levels() noexcept {
    return _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  }
  static V q4_1_levels() noexcept {
    return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  }
  /// 16 int8 at p as floats.
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

}  // namespace linear_avx512
}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

#  define INFERKIT_LINEAR_ISA linear_avx512
#  include <inferkit/model/detail/linear_kernels-inl.hpp>

INFERKIT_SIMD_WARNINGS_END
#  if INFERKIT_COMPILER_GCC
#    pragma GCC pop_options
#  else
#    pragma clang attribute pop
#  endif

#endif  // INFERKIT_CPU_DISPATCH
