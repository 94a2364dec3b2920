// SPDX-License-Identifier: Apache-2.0
// Internal: the AVX2 paths of the int8-activation products (namespace detail::int8_avx2),
// compiled in function-level target regions whatever the TU's -m flags: with AVX-VNNI
// (vpdpbusd on ymm: Alder Lake and later, Zen 5) or without it (vpmaddubsw + vpmaddwd, any
// AVX2 CPU). A 16-row group is two halves of 8 rows, one ymm each. The integer block dot
// products are exact on both, so the result is int8_linear_portable.hpp's, to the bit:
//   - Q4: a u8 code (<= 15) times an int8 activation pair-summed by vpmaddubsw is at most 3,810,
//     so the 8 quads of a block add up in int16 (<= 30,480) before one vpmaddwd widens them;
//   - Q8_0 without VNNI: the stored code + 128 (up to 255) would overflow vpmaddubsw's int16
//     pairs, so the signed code w (= stored ^ 0x80) is used as |w| times sign(x, w): pairs of at
//     most 2 * 128 * 127 = 32,512, and the dot product comes out without the +128 offset (the
//     same integer the offset path gets after subtracting 128 Σq).
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
#    pragma GCC target("avx2,fma,f16c,avxvnni")
#  else
#    pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#  endif
// clang-format on
INFERKIT_SIMD_WARNINGS_BEGIN

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {
namespace int8_avx2 {

/// Tokens per register tile (16 ymm registers: 8 weight vectors, the scales, 4 accumulators).
inline constexpr int kTileTokens = 4;

INFERKIT_FORCEINLINE __m256i broadcast4(const std::int8_t* p) noexcept {
  std::int32_t v = 0;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

/// Rows 8h..8h+7 of group g x tokens t0..t0+kTokens-1.
template <GgmlType kType, bool kVnni, int kTokens>
inline void half_tile(const Int8Job& job, std::int64_t g, std::int64_t h,
                      std::int64_t t0) noexcept {
  constexpr std::int64_t kQBytes = int8_quant_bytes(kType);
  constexpr std::int64_t kHalves = int8_scale_halves(kType);
  // The stored codes exceed the signed ones by this much; the maddubs Q8_0 path works on the
  // signed codes and needs no correction.
  constexpr std::int32_t kOffset =
      (kType == GgmlType::kQ8_0 && !kVnni) ? 0 : int8_code_offset(kType);
  const std::uint8_t* quants = job.quants + g * job.blocks * kQBytes + 32 * h;
  const std::uint16_t* scales = job.scales + g * job.blocks * kHalves + 8 * h;
  __m256 acc[kTokens];
  INFERKIT_UNROLL
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i sign_bit = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (std::int64_t b = 0; b < job.blocks; ++b) {
    const std::uint8_t* qb = quants + b * kQBytes;
    __m256i w[8];
    if constexpr (kType == GgmlType::kQ8_0) {
      INFERKIT_UNROLL
      for (std::int64_t j = 0; j < 8; ++j) {
        w[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(qb + 64 * j));
        if constexpr (!kVnni) w[j] = _mm256_xor_si256(w[j], sign_bit);  // the signed code
      }
    } else {
      INFERKIT_UNROLL
      for (std::int64_t j = 0; j < 4; ++j) {
        const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(qb + 64 * j));
        w[j] = _mm256_and_si256(raw, low4);
        w[j + 4] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      }
    }
    const __m256 d =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + b * kHalves)));
    __m256 m = _mm256_setzero_ps();
    if constexpr (kType == GgmlType::kQ4_1) {
      m = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + b * kHalves + 16)));
    }
    INFERKIT_UNROLL
    for (int t = 0; t < kTokens; ++t) {
      const std::int64_t token = t0 + t;
      const std::int8_t* xq = job.x.q + token * job.x.cols + b * kInt8BlockValues;
      const std::int64_t s = token * job.blocks + b;
      __m256i dot;
      if constexpr (kVnni) {
        __m256i lo = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w[0], broadcast4(xq));
        __m256i hi = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w[4], broadcast4(xq + 16));
        INFERKIT_UNROLL
        for (std::int64_t j = 1; j < 4; ++j) {
          lo = _mm256_dpbusd_avx_epi32(lo, w[j], broadcast4(xq + 4 * j));
          hi = _mm256_dpbusd_avx_epi32(hi, w[j + 4], broadcast4(xq + 16 + 4 * j));
        }
        dot = _mm256_add_epi32(lo, hi);
      } else if constexpr (kType == GgmlType::kQ8_0) {
        dot = _mm256_setzero_si256();
        INFERKIT_UNROLL
        for (std::int64_t j = 0; j < 8; ++j) {
          const __m256i pairs = _mm256_maddubs_epi16(
              _mm256_abs_epi8(w[j]), _mm256_sign_epi8(broadcast4(xq + 4 * j), w[j]));
          dot = _mm256_add_epi32(dot, _mm256_madd_epi16(pairs, ones16));
        }
      } else {
        __m256i sum16 = _mm256_maddubs_epi16(w[0], broadcast4(xq));
        INFERKIT_UNROLL
        for (std::int64_t j = 1; j < 8; ++j) {
          sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(w[j], broadcast4(xq + 4 * j)));
        }
        dot = _mm256_madd_epi16(sum16, ones16);
      }
      if constexpr (kOffset != 0) {
        dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(kOffset * job.x.sum[s]));
      }
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot),
                               _mm256_mul_ps(d, _mm256_set1_ps(job.x.scale[s])), acc[t]);
      if constexpr (kType == GgmlType::kQ4_1) {
        acc[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(job.x.scaled_sum[s]), acc[t]);
      }
    }
  }
  const std::int64_t r0 = g * kInt8GroupRows + 8 * h;
  const std::int64_t valid = job.rows - r0 < 8 ? job.rows - r0 : 8;
  if (valid <= 0) return;
  INFERKIT_UNROLL
  for (int t = 0; t < kTokens; ++t) {
    float* y = job.y + (t0 + t) * job.rows + r0;
    if (valid == 8) {
      _mm256_storeu_ps(y, acc[t]);
    } else {
      float lanes[8];
      _mm256_storeu_ps(lanes, acc[t]);
      std::memcpy(y, lanes, static_cast<std::size_t>(valid) * sizeof(float));
    }
  }
}

template <GgmlType kType, bool kVnni>
inline void int8_rows_of(const Int8Job& job, std::int64_t g0, std::int64_t g1) noexcept {
  for (std::int64_t g = g0; g < g1; ++g) {
    for (std::int64_t h = 0; h < 2; ++h) {
      if (g * kInt8GroupRows + 8 * h >= job.rows) break;
      std::int64_t t = 0;
      for (; t + kTileTokens <= job.n; t += kTileTokens) {
        half_tile<kType, kVnni, kTileTokens>(job, g, h, t);
      }
      if (job.n - t >= 2) {
        half_tile<kType, kVnni, 2>(job, g, h, t);
        t += 2;
      }
      if (job.n - t >= 1) half_tile<kType, kVnni, 1>(job, g, h, t);
    }
  }
}

/// Groups [g0, g1) of the job, every token; `vnni` only where the CPU has AVX-VNNI.
inline void int8_rows(const Int8Job& job, std::int64_t g0, std::int64_t g1, bool vnni) noexcept {
  switch (job.type) {
    case GgmlType::kQ4_0:
      return vnni ? int8_rows_of<GgmlType::kQ4_0, true>(job, g0, g1)
                  : int8_rows_of<GgmlType::kQ4_0, false>(job, g0, g1);
    case GgmlType::kQ8_0:
      return vnni ? int8_rows_of<GgmlType::kQ8_0, true>(job, g0, g1)
                  : int8_rows_of<GgmlType::kQ8_0, false>(job, g0, g1);
    default:
      return vnni ? int8_rows_of<GgmlType::kQ4_1, true>(job, g0, g1)
                  : int8_rows_of<GgmlType::kQ4_1, false>(job, g0, g1);
  }
}

}  // namespace int8_avx2
}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

INFERKIT_SIMD_WARNINGS_END
#  if INFERKIT_COMPILER_GCC
#    pragma GCC pop_options
#  else
#    pragma clang attribute pop
#  endif

#endif  // INFERKIT_CPU_DISPATCH
