// SPDX-License-Identifier: Apache-2.0
// Internal: the AVX-512 VNNI path of the int8-activation products (namespace
// detail::int8_avx512), compiled in a function-level target region whatever the TU's -m flags and
// run only where cpu_has_avx512_vnni(). One vpdpbusd multiplies a quad of 16 rows' 4-bit or 8-bit
// codes by 4 broadcast activation codes: 64 multiply-adds an instruction, 4x an fp32 FMA's 16.
// The arithmetic is int8_linear_portable.hpp's, to the bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/config.hpp>
#include <inferkit/model/detail/int8_linear_portable.hpp>
#include <inferkit/model/ggml_type.hpp>

#if INFERKIT_CPU_DISPATCH
#  include <immintrin.h>

// clang-format off
#  if INFERKIT_COMPILER_GCC
#    pragma GCC push_options
#    pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
#  else
#    pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#  endif
// clang-format on
INFERKIT_SIMD_WARNINGS_BEGIN

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {
namespace int8_avx512 {

/// Tokens per register tile: 8 float accumulators, 8 weight vectors, the scales and the dot
/// products' temporaries fit the 32 registers.
inline constexpr int kTileTokens = 8;

/// One token's activations quantized as int8_baseline::quantize_token does, 32 at a time.
inline void quantize_token(const float* x, const Int8ActivationsView& a, std::int64_t t) noexcept {
  for (std::int64_t b = 0; b < a.blocks; ++b) {
    const float* xb = x + b * kInt8BlockValues;
    const __m512 lo = _mm512_loadu_ps(xb);
    const __m512 hi = _mm512_loadu_ps(xb + 16);
    // max(v, acc) keeps acc where v is NaN, as the portable `v > amax ? v : amax` does.
    const __m512 m =
        _mm512_max_ps(_mm512_abs_ps(hi), _mm512_max_ps(_mm512_abs_ps(lo), _mm512_setzero_ps()));
    const float amax = _mm512_reduce_max_ps(m);
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, vinv));
    const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, vinv));
    std::int8_t* q = a.q + t * a.cols + b * kInt8BlockValues;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(qlo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(qhi));
    // The sum of the stored (saturated) codes, as the portable path sums them.
    const __m512i slo = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
    const __m512i shi =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16)));
    const std::int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(slo, shi));
    const float scale = amax / 127.0f;
    a.scale[t * a.blocks + b] = scale;
    a.sum[t * a.blocks + b] = sum;
    a.scaled_sum[t * a.blocks + b] = scale * static_cast<float>(sum);
  }
}

INFERKIT_FORCEINLINE __m512i broadcast4(const std::int8_t* p) noexcept {
  std::int32_t v = 0;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

/// Group g (16 rows) x tokens t0..t0+kTokens-1 (all real).
template <GgmlType kType, int kTokens>
inline void group_tile(const Int8Job& job, std::int64_t g, std::int64_t t0) noexcept {
  constexpr std::int64_t kQBytes = int8_quant_bytes(kType);
  constexpr std::int64_t kHalves = int8_scale_halves(kType);
  constexpr std::int32_t kOffset = int8_code_offset(kType);
  const std::uint8_t* quants = job.quants + g * job.blocks * kQBytes;
  const std::uint16_t* scales = job.scales + g * job.blocks * kHalves;
  __m512 acc[kTokens];
  INFERKIT_UNROLL
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  // Decode-sized tiles stream the weights once: fetch the next group's block as this one is used
  // (prefetches never fault; past the last group they are skipped).
  const bool ahead = kTokens <= 2 && (g + 1) * kInt8GroupRows < job.rows;
  const std::int64_t group_bytes = job.blocks * kQBytes;
  for (std::int64_t b = 0; b < job.blocks; ++b) {
    const std::uint8_t* qb = quants + b * kQBytes;
    if (ahead) {
      INFERKIT_UNROLL
      for (std::int64_t line = 0; line < kQBytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(qb + group_bytes + line), _MM_HINT_T0);
      }
      _mm_prefetch(reinterpret_cast<const char*>(scales + (job.blocks + b) * kHalves), _MM_HINT_T0);
    }
    __m512i w[8];
    if constexpr (kType == GgmlType::kQ8_0) {
      INFERKIT_UNROLL
      for (std::int64_t j = 0; j < 8; ++j) w[j] = _mm512_load_si512(qb + 64 * j);
    } else {
      INFERKIT_UNROLL
      for (std::int64_t j = 0; j < 4; ++j) {
        const __m512i raw = _mm512_load_si512(qb + 64 * j);
        w[j] = _mm512_and_si512(raw, low4);
        w[j + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
      }
    }
    const __m512 d =
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales + b * kHalves)));
    __m512 m = _mm512_setzero_ps();
    if constexpr (kType == GgmlType::kQ4_1) {
      m = _mm512_cvtph_ps(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(scales + b * kHalves + 16)));
    }
    INFERKIT_UNROLL
    for (int t = 0; t < kTokens; ++t) {
      const std::int64_t token = t0 + t;
      const std::int8_t* xq = job.x.q + token * job.x.cols + b * kInt8BlockValues;
      const std::int64_t s = token * job.blocks + b;
      // Two chains of four: the integer sum is exact in any order.
      __m512i lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], broadcast4(xq));
      __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[4], broadcast4(xq + 16));
      INFERKIT_UNROLL
      for (std::int64_t j = 1; j < 4; ++j) {
        lo = _mm512_dpbusd_epi32(lo, w[j], broadcast4(xq + 4 * j));
        hi = _mm512_dpbusd_epi32(hi, w[j + 4], broadcast4(xq + 16 + 4 * j));
      }
      __m512i dot = _mm512_add_epi32(lo, hi);
      if constexpr (kOffset != 0) {
        dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(kOffset * job.x.sum[s]));
      }
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                               _mm512_mul_ps(d, _mm512_set1_ps(job.x.scale[s])), acc[t]);
      if constexpr (kType == GgmlType::kQ4_1) {
        acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(job.x.scaled_sum[s]), acc[t]);
      }
    }
  }
  const std::int64_t r0 = g * kInt8GroupRows;
  const std::int64_t valid = job.rows - r0 < kInt8GroupRows ? job.rows - r0 : kInt8GroupRows;
  const auto mask = static_cast<__mmask16>((1u << valid) - 1u);
  INFERKIT_UNROLL
  for (int t = 0; t < kTokens; ++t) {
    _mm512_mask_storeu_ps(job.y + (t0 + t) * job.rows + r0, mask, acc[t]);
  }
}

template <GgmlType kType>
inline void int8_rows_of(const Int8Job& job, std::int64_t g0, std::int64_t g1) noexcept {
  for (std::int64_t g = g0; g < g1; ++g) {
    std::int64_t t = 0;
    for (; t + kTileTokens <= job.n; t += kTileTokens) group_tile<kType, kTileTokens>(job, g, t);
    if (job.n - t >= 4) {
      group_tile<kType, 4>(job, g, t);
      t += 4;
    }
    if (job.n - t >= 2) {
      group_tile<kType, 2>(job, g, t);
      t += 2;
    }
    if (job.n - t >= 1) group_tile<kType, 1>(job, g, t);
  }
}

/// Groups [g0, g1) of the job, every token.
inline void int8_rows(const Int8Job& job, std::int64_t g0, std::int64_t g1) noexcept {
  switch (job.type) {
    case GgmlType::kQ4_0:
      return int8_rows_of<GgmlType::kQ4_0>(job, g0, g1);
    case GgmlType::kQ8_0:
      return int8_rows_of<GgmlType::kQ8_0>(job, g0, g1);
    default:
      return int8_rows_of<GgmlType::kQ4_1>(job, g0, g1);
  }
}

}  // namespace int8_avx512
}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

INFERKIT_SIMD_WARNINGS_END
#  if INFERKIT_COMPILER_GCC
#    pragma GCC pop_options
#  else
#    pragma clang attribute pop
#  endif

#endif  // INFERKIT_CPU_DISPATCH
