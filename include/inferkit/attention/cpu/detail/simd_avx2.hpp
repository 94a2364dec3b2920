// SPDX-License-Identifier: Apache-2.0
// The AVX2+FMA+F16C SIMD policy of the CPU attention kernels: 8-lane fp32 vectors, F16C
// conversions, register tiles sized for the 16 ymm registers. Compiled in a target region
// (core/config.hpp), so it exists in every x86 build; it runs only where core/cpu_isa.hpp finds
// AVX2, FMA, F16C and BMI1/2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/attention/cpu/detail/simd_common.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <limits>
#include <type_traits>

#if INFERKIT_CPU_DISPATCH
#  include <immintrin.h>

INFERKIT_TARGET_AVX2_BEGIN

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// AVX2 policy (FMA, F16C vcvtph2ps for fp16 and e5m2).
struct SimdAvx2 {
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 16;
  using V = __m256;

  /// QK register tile (rows x tokens accumulators + tokens converted K chunks, q as a memory
  /// operand of the FMA): 1 x 8, 2 x 4, 4 x 3, 8 x 1 within 16 registers.
  static constexpr int qk_tokens(int rows) noexcept {
    return rows <= 1 ? 8 : (rows == 2 ? 4 : (rows == 4 ? 3 : 1));
  }
  /// PV register tile (rows x chunks accumulators + chunks of V + the broadcast p).
  static constexpr int pv_chunks(int rows) noexcept { return rows <= 2 ? 4 : (rows == 4 ? 2 : 1); }
  static constexpr int kPrefillTokens = 8;

  static V zero() noexcept { return _mm256_setzero_ps(); }
  static V set1(float a) noexcept { return _mm256_set1_ps(a); }
  static V load(const float* p) noexcept { return _mm256_loadu_ps(p); }
  static void store(float* p, V a) noexcept { _mm256_storeu_ps(p, a); }
  static V fma(V a, V b, V c) noexcept { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) noexcept { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) noexcept { return _mm256_add_ps(a, b); }
  static float reduce_max(V a) noexcept {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  static float reduce_add(V a) noexcept {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static bool any_greater(V a, float m) noexcept {
    return _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(m), _CMP_GT_OQ)) != 0;
  }
  /// All-ones lanes where bit i of `keep` is set.
  static __m256i lane_mask(std::uint32_t keep) noexcept {
    const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i k = _mm256_set1_epi32(static_cast<int>(keep));
    return _mm256_cmpeq_epi32(_mm256_and_si256(k, bits), bits);
  }
  static V keep_or(V a, std::uint32_t keep, float fill) noexcept {
    return _mm256_blendv_ps(_mm256_set1_ps(fill), a, _mm256_castsi256_ps(lane_mask(keep)));
  }

  /// exp(x) for x <= 0 (and -inf), as the AVX-512 policy: 2^n * p(r), degree-6 polynomial;
  /// 2^n applied as 2^(n + 64) * 2^-64 so subnormal results round once instead of flushing.
  static V exp_nonpositive(V x) noexcept {
    x = _mm256_max_ps(_mm256_set1_ps(-120.0f), x);  // x second: a NaN stays NaN (vmaxps)
    const V n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    V p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(64 + 127)), 23);
    return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), _mm256_set1_ps(0x1.0p-64f));
  }
  static V exp_shifted(V a, float m, std::uint32_t keep) noexcept {
    const V e = exp_nonpositive(_mm256_sub_ps(a, _mm256_set1_ps(m)));
    return _mm256_and_ps(e, _mm256_castsi256_ps(lane_mask(keep)));
  }

  /// Lane j = horizontal sum of acc[j]: two levels of hadd, then one cross-half add.
  static V reduce_lanes(const V* acc) noexcept {
    const V h01 = _mm256_hadd_ps(acc[0], acc[1]);
    const V h23 = _mm256_hadd_ps(acc[2], acc[3]);
    const V h45 = _mm256_hadd_ps(acc[4], acc[5]);
    const V h67 = _mm256_hadd_ps(acc[6], acc[7]);
    // g0, per 128-bit half: partial sums of acc[0..3] over that half's 4 lanes; g1: acc[4..7].
    const V g0 = _mm256_hadd_ps(h01, h23);
    const V g1 = _mm256_hadd_ps(h45, h67);
    return _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20),
                         _mm256_permute2f128_ps(g0, g1, 0x31));
  }

  /// What load_int4 adds to each packed int4 nibble for a token of zero point `zero`.
  static V int4_offsets(float zero) noexcept { return set1(-zero); }

  /// min(n, kLanes) dims (n even, >= 2) of packed int4 at `p` as nibble - zero (`offsets` from
  /// int4_offsets(zero)); lanes >= n are -zero.
  static V load_int4(const std::uint8_t* p, int n, V offsets) noexcept {
    return add(load_kv(p, n), offsets);
  }

  /// Loads min(n, 8) dims of stored elements (n >= 1; even for packed int4) as floats; lanes
  /// >= n are 0 and never read.
  template <class T>
  static V load_kv(const T* p, int n) noexcept {
    if (n >= kLanes) return load_kv_full(p);
    if constexpr (is_packed_int4_v<T>) {
      std::uint32_t word = 0;
      std::memcpy(&word, p, static_cast<std::size_t>(n / 2));
      return nibbles_to_float(_mm_cvtsi32_si128(static_cast<int>(word)));
    } else if constexpr (std::is_same_v<T, float>) {
      // vmaskmovps: masked-out lanes do not fault.
      const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx));
    } else {
      T tmp[kLanes] = {};
      for (int i = 0; i < n; ++i) tmp[i] = p[i];
      return load_kv_full(tmp);
    }
  }

  /// Loads 8 dims of stored elements as floats.
  template <class T>
  static V load_kv_full(const T* p) noexcept {
    if constexpr (is_packed_int4_v<T>) {
      std::uint32_t word = 0;
      std::memcpy(&word, p, sizeof(word));
      return nibbles_to_float(_mm_cvtsi32_si128(static_cast<int>(word)));
    } else if constexpr (std::is_same_v<T, float>) {
      return _mm256_loadu_ps(p);
    } else if constexpr (std::is_same_v<T, float16>) {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      const __m128i b8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
      if constexpr (std::is_same_v<T, float8_e5m2>) {
        return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b8), 8));
      } else if constexpr (std::is_same_v<T, float8_e4m3>) {
        // As the AVX-512 policy: fp16 bits (mag << 7, sign at 15) = value / 256, widened by F16C
        // (no denormal float operand, so no microcode assists for subnormal codes).
        const __m128i h = e4m3_half_bits(b8);
        const V v = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
        const __m128i nan16 =
            _mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7FFF)), _mm_set1_epi16(0x3F80));
        const V nan = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nan16));
        const V signed_nan = _mm256_or_ps(
            _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)))),
            _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()));
        return _mm256_blendv_ps(v, signed_nan, nan);
      } else {
        static_assert(std::is_same_v<T, std::int8_t>, "unsupported KV storage type");
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b8));
      }
    }
  }

  /// The 8 unsigned nibbles of the low 4 bytes of `b` (packed int4, the even dim in the low
  /// nibble) -> floats in [0, 15], in dim order.
  static V nibbles_to_float(__m128i b) noexcept {
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i even = _mm_and_si128(b, mask);
    const __m128i odd = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpacklo_epi8(even, odd)));
  }

  /// e4m3 bytes -> the fp16 bits of value / 256 (mag << 7, sign at 15).
  static __m128i e4m3_half_bits(__m128i b8) noexcept {
    return _mm_andnot_si128(_mm_set1_epi16(0x4000), _mm_slli_epi16(_mm_cvtepi8_epi16(b8), 7));
  }

  /// Raw e4m3 loads for tiles that hold no NaN code, as the AVX-512 policy's: value / 256
  /// (kE4m3RawDivisor, folded into the caller's scales), without load_kv_full's multiply and
  /// its six-instruction NaN fix-up.
  static constexpr bool kRawE4m3 = true;
  static constexpr float kE4m3RawDivisor = 256.0f;
  static V load_e4m3_raw_full(const float8_e4m3* p) noexcept {
    return _mm256_cvtph_ps(e4m3_half_bits(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static V load_e4m3_raw(const float8_e4m3* p, int n) noexcept {
    if (n >= kLanes) return load_e4m3_raw_full(p);
    float8_e4m3 tmp[kLanes] = {};
    for (int i = 0; i < n; ++i) tmp[i] = p[i];
    return load_e4m3_raw_full(tmp);
  }
  /// Whether any of the rows k[0, count) and v[0, count), each `dim` e4m3 elements, holds a NaN
  /// code (magnitude 0x7F): a running byte max of the magnitudes, 32 bytes at a time, the row
  /// tails byte by byte.
  static INFERKIT_FORCEINLINE bool any_e4m3_nan(const float8_e4m3* const* k,
                                                const float8_e4m3* const* v, int count,
                                                int dim) noexcept {
    const __m256i mag = _mm256_set1_epi8(0x7F);
    __m256i top = _mm256_setzero_si256();
    bool tail_nan = false;
    for (int j = 0; j < count; ++j) {
      const auto* kr = reinterpret_cast<const std::uint8_t*>(k[j]);
      const auto* vr = reinterpret_cast<const std::uint8_t*>(v[j]);
      int d = 0;
      for (; d + 32 <= dim; d += 32) {
        const __m256i kb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kr + d));
        const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vr + d));
        top = _mm256_max_epu8(
            top, _mm256_max_epu8(_mm256_and_si256(kb, mag), _mm256_and_si256(vb, mag)));
      }
      for (; d < dim; ++d) {
        tail_nan = tail_nan || (kr[d] & 0x7Fu) == 0x7Fu || (vr[d] & 0x7Fu) == 0x7Fu;
      }
    }
    return tail_nan || _mm256_movemask_epi8(_mm256_cmpeq_epi8(top, mag)) != 0;
  }
};

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

INFERKIT_TARGET_END

#endif  // INFERKIT_CPU_DISPATCH
