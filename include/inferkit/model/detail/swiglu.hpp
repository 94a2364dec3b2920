// SPDX-License-Identifier: Apache-2.0
// Internal: the model's SwiGLU activation, g = silu(g) * u over a row, on the CPU kernel path
// (core/cpu_isa.hpp). silu(x) = x / (1 + exp(-x)) is written through e = exp(-|x|) <= 1:
// x / (1 + e) for x >= 0 and x e / (1 + e) below, so one exp of a nonpositive argument serves
// both signs, nothing overflows, and the exp is a polynomial in registers instead of a libm call
// per element (which made SwiGLU 11% of a 32-sequence int8 decode step). All paths evaluate
// Cephes' expf polynomial (core/detail/exp_nonpositive.hpp): within a few ulp of exact, not
// bit-identical across paths (FMAs contract differently). On each path a value's result depends
// on its place in the row (vector body or scalar tail) and on nothing else, and the model runs
// each token's row from its start: a token's result never depends on its batch.
#pragma once

#include <cmath>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/detail/exp_nonpositive.hpp>

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// silu(x) * y for one element (the portable path, and every path's row tail). NaN x gives NaN;
/// x = -inf gives NaN, as x / (1 + exp(-x)) does.
inline float silu_times(float x, float y) noexcept {
  const float e = exp_nonpositive(x >= 0.0f ? -x : x);  // 0 for NaN
  const float num = x >= 0.0f ? x : x * e;
  return num / (1.0f + e) * y;
}

/// g[i] = silu(g[i]) * u[i] for i < n, one element at a time.
inline void silu_mul_portable(float* g, const float* u, std::int64_t n) noexcept {
  for (std::int64_t i = 0; i < n; ++i) g[i] = silu_times(g[i], u[i]);
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

#if INFERKIT_CPU_DISPATCH
#  include <immintrin.h>

INFERKIT_TARGET_AVX512_BEGIN
namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// silu_mul_portable on AVX-512, 16 elements an iteration (exp through vscalefps).
inline void silu_mul_avx512(float* g, const float* u, std::int64_t n) noexcept {
  const __m512i sign = _mm512_set1_epi32(static_cast<std::int32_t>(0x80000000u));
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(g + i);
    const __m512 z = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), sign));  // -|x|
    const __mmask16 in_range = _mm512_cmp_ps_mask(z, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
    const __m512 z0 = _mm512_maskz_mov_ps(in_range, z);
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(z0, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), z0);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512 e = _mm512_maskz_mov_ps(in_range, _mm512_scalef_ps(y, k));
    const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 num = _mm512_mask_mul_ps(x, negative, x, e);
    const __m512 s = _mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
  }
  silu_mul_portable(g + i, u + i, n - i);
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail
INFERKIT_TARGET_END

INFERKIT_TARGET_AVX2_BEGIN
namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// silu_mul_portable on AVX2 + FMA, 8 elements an iteration (2^k through the exponent bits:
/// k >= -126 here, a normal float).
inline void silu_mul_avx2(float* g, const float* u, std::int64_t n) noexcept {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 z = _mm256_or_ps(x, sign);  // -|x|
    const __m256 in_range = _mm256_cmp_ps(z, _mm256_set1_ps(-87.3f), _CMP_GE_OQ);
    const __m256 z0 = _mm256_and_ps(z, in_range);
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(z0, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), z0);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    const __m256 e = _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(bits)), in_range);
    const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 num = _mm256_blendv_ps(x, _mm256_mul_ps(x, e), negative);
    const __m256 s = _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
  }
  silu_mul_portable(g + i, u + i, n - i);
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail
INFERKIT_TARGET_END
#endif  // INFERKIT_CPU_DISPATCH

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// g[i] = silu(g[i]) * u[i] for i < n on the path `isa` (a path this build and CPU run:
/// cpu_isa() chooses one).
inline void silu_mul(CpuIsa isa, float* g, const float* u, std::int64_t n) noexcept {
#if INFERKIT_CPU_DISPATCH
  if (isa == CpuIsa::kAvx512) return silu_mul_avx512(g, u, n);
  if (isa == CpuIsa::kAvx2) return silu_mul_avx2(g, u, n);
#endif
  (void)isa;
  silu_mul_portable(g, u, n);
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail
