// SPDX-License-Identifier: Apache-2.0
// The AVX-512 SIMD policy of the CPU attention kernels (F/BW/VL): 16-lane fp32 vectors, masked
// loads for row tails, fp16 via vcvtph2ps, register tiles sized for 32 zmm registers. Compiled in
// a target region (core/config.hpp), so it exists in every x86 build; it runs only where
// core/cpu_isa.hpp finds AVX-512 F/BW/VL (and AVX2, FMA, F16C, BMI1/2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <inferkit/attention/cpu/detail/simd_common.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <limits>
#include <type_traits>

#if INFERKIT_CPU_DISPATCH
#  include <immintrin.h>

INFERKIT_TARGET_AVX512_BEGIN

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// AVX-512 policy (F/BW/VL; fp16 conversion via F16C-in-AVX-512 vcvtph2ps).
struct SimdAvx512 {
  static constexpr int kLanes = 16;
  static constexpr int kRegisters = 32;
  using V = __m512;

  /// QK register tile: rows x tokens accumulators plus tokens converted K chunks within the 32
  /// registers (8 rows: 24 + 3; measured 6% faster than 8 x 2 tiles, which spend a load of q
  /// per 2 FMAs).
  static constexpr int qk_tokens(int rows) noexcept {
    return rows <= 2 ? 8 : (rows == 8 ? 3 : 16 / rows);
  }
  /// PV register tile: chunks of 16 dims per pass (rows x chunks accumulators + chunks of V).
  static constexpr int pv_chunks(int rows) noexcept { return rows <= 4 ? 4 : 3; }
  static constexpr int kPrefillTokens = 16;

  static V zero() noexcept { return _mm512_setzero_ps(); }
  static V set1(float a) noexcept { return _mm512_set1_ps(a); }
  static V load(const float* p) noexcept { return _mm512_loadu_ps(p); }
  static void store(float* p, V a) noexcept { _mm512_storeu_ps(p, a); }
  static V fma(V a, V b, V c) noexcept { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) noexcept { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) noexcept { return _mm512_add_ps(a, b); }
  static float reduce_max(V a) noexcept { return _mm512_reduce_max_ps(a); }
  static float reduce_add(V a) noexcept { return _mm512_reduce_add_ps(a); }
  static bool any_greater(V a, float m) noexcept {
    return _mm512_cmp_ps_mask(a, _mm512_set1_ps(m), _CMP_GT_OQ) != 0;
  }
  static V keep_or(V a, std::uint32_t keep, float fill) noexcept {
    return _mm512_mask_blend_ps(static_cast<__mmask16>(keep), _mm512_set1_ps(fill), a);
  }

  /// exp(x) for x <= 0 (and -inf): 2^n * p(r), x = n ln2 + r, |r| <= ln2/2, degree-6 Taylor
  /// polynomial (relative error ~2e-7, below fp32 accumulation noise).
  static V exp_nonpositive(V x) noexcept {
    // exp(-120) underflows to 0 below. vmaxps returns its second operand when either is NaN:
    // x second, so a NaN score (a NaN key) stays NaN, as in exact arithmetic.
    x = _mm512_max_ps(_mm512_set1_ps(-120.0f), x);
    const V n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    V p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
  }
  static V exp_shifted(V a, float m, std::uint32_t keep) noexcept {
    const V e = exp_nonpositive(_mm512_sub_ps(a, _mm512_set1_ps(m)));
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(keep), e);
  }

  /// Lane j = horizontal sum of acc[j]: a 4-level shuffle/add tree (46 ops for 16 sums).
  static V reduce_lanes(const V* acc) noexcept {
    V t[8];
    // t[k], per 128-bit lane: [a0+a2, a1+a3, b0+b2, b1+b3] of a = acc[2k], b = acc[2k + 1].
    INFERKIT_UNROLL for (std::ptrdiff_t k = 0; k < 8; ++k) {
      const V a = acc[2 * k];
      const V b = acc[2 * k + 1];
      t[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    }
    V u[4];
    // u[k], 128-bit lane i: 4 partials of token 4k + i.
    INFERKIT_UNROLL for (std::ptrdiff_t k = 0; k < 4; ++k) {
      const V a = t[2 * k];
      const V b = t[2 * k + 1];
      u[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
    }
    V x[2];
    INFERKIT_UNROLL for (std::ptrdiff_t k = 0; k < 2; ++k) {
      const V a = u[2 * k];
      const V b = u[2 * k + 1];
      x[k] = _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE));
    }
    const V s =
        _mm512_add_ps(_mm512_shuffle_ps(x[0], x[1], 0x88), _mm512_shuffle_ps(x[0], x[1], 0xDD));
    // s lane 4i + k holds token 4k + i; put token j in lane j.
    const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(perm, s);
  }

  /// Loads min(n, 16) dims of stored elements (n >= 1; even for packed int4) as floats; lanes
  /// >= n are 0 and never read.
  template <class T>
  static V load_kv(const T* p, int n) noexcept {
    if (n >= kLanes) return load_kv_full(p);
    const auto m = static_cast<__mmask16>((1u << n) - 1u);
    if constexpr (is_packed_int4_v<T>) {
      const auto bytes = static_cast<__mmask16>((1u << (n / 2)) - 1u);  // two dims a byte
      return nibbles_to_float(_mm_maskz_loadu_epi8(bytes, p));
    } else if constexpr (std::is_same_v<T, float>) {
      return _mm512_maskz_loadu_ps(m, p);
    } else if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
      return convert(_mm256_maskz_loadu_epi16(m, p), p);
    } else {
      return convert(_mm_maskz_loadu_epi8(m, p), p);
    }
  }

  /// Loads 16 dims of stored elements as floats (unmasked, so conversions can take memory
  /// operands).
  template <class T>
  static V load_kv_full(const T* p) noexcept {
    if constexpr (is_packed_int4_v<T>) {
      return nibbles_to_float(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    } else if constexpr (std::is_same_v<T, float>) {
      return _mm512_loadu_ps(p);
    } else if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
      return convert(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), p);
    } else {
      return convert(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), p);
    }
  }

  /// 16 raw 16-bit elements -> floats.
  template <class T>
  static V convert(__m256i h, const T*) noexcept {
    if constexpr (std::is_same_v<T, float16>) {
      return _mm512_cvtph_ps(h);
    } else {
      static_assert(std::is_same_v<T, bfloat16>);
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }

  /// 16 raw 8-bit elements -> floats.
  template <class T>
  static V convert(__m128i b8, const T*) noexcept {
    if constexpr (std::is_same_v<T, float8_e5m2>) {
      // e5m2 is the top byte of an fp16 with the same exponent bias.
      return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b8), 8));
    } else if constexpr (std::is_same_v<T, float8_e4m3>) {
      // Exponent+mantissa at fp16 bits 7..13 give value / 256 exactly, subnormals included
      // (fp16 has 5 exponent bits to e4m3's 4); F16C widens them with no denormal operand (a
      // float multiply of the subnormal codes would take a microcode assist each: 14x slower
      // measured). Sign-extended to 16 bits and shifted by 7, the byte's sign lands on bits 14
      // and 15: clearing 14 leaves the fp16. 0x7F (magnitude) is the format's only NaN: the
      // only code whose fp16 has magnitude bits 0x3F80.
      const __m256i h = e4m3_half_bits(b8);
      const V v = _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
      const __mmask16 nan = _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)),
                                                    _mm256_set1_epi16(0x3F80));
      // NaN lanes: (v & sign) | quiet NaN.
      return _mm512_castsi512_ps(_mm512_mask_ternarylogic_epi32(
          _mm512_castps_si512(v), nan, _mm512_set1_epi32(static_cast<int>(0x80000000u)),
          _mm512_set1_epi32(0x7FC00000), 0xEA));
    } else {
      static_assert(std::is_same_v<T, std::int8_t>, "unsupported KV storage type");
      return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b8));
    }
  }

  /// What load_int4 reads packed int4 nibbles through for a token of zero point `zero`: the
  /// table {0 - zero, 1 - zero, ..., 15 - zero} (each entry rounded as the scalar nibble - zero).
  static V int4_offsets(float zero) noexcept {
    return _mm512_sub_ps(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_ps(zero));
  }

  /// min(n, 16) dims (n even, >= 2) of packed int4 at `p` as nibble - zero, `table` from
  /// int4_offsets(zero); lanes >= n are table[0]. Each nibble indexes the table (vpermps reads an
  /// index's low 4 bits): 4 instructions for 16 dims, where converting and subtracting take 7.
  static V load_int4(const std::uint8_t* p, int n, V table) noexcept {
    const __m128i b = n >= kLanes
                          ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))
                          : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << (n / 2)) - 1u), p);
    // Lanes 2j and 2j + 1 both get byte j; the odd lane's is shifted down to its high nibble.
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(b, b));
    const __m512i idx =
        _mm512_srlv_epi32(bytes, _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4));
    return _mm512_permutexvar_ps(idx, table);
  }

  /// The 16 unsigned nibbles of the low 8 bytes of `b` (packed int4, the even dim in the low
  /// nibble) -> floats in [0, 15], in dim order.
  static V nibbles_to_float(__m128i b) noexcept {
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i even = _mm_and_si128(b, mask);
    const __m128i odd = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(even, odd)));
  }

  /// e4m3 bytes -> the fp16 bits of value / 256 (see convert): sign-extended, shifted by 7, bit
  /// 14 cleared.
  static __m256i e4m3_half_bits(__m128i b8) noexcept {
    return _mm256_andnot_si256(_mm256_set1_epi16(0x4000),
                               _mm256_slli_epi16(_mm256_cvtepi8_epi16(b8), 7));
  }

  /// Raw e4m3 loads for tiles that hold no NaN code (any_e4m3_nan is false): convert's widening
  /// without its multiply by 256 and its three-instruction NaN fix-up. They return value / 256
  /// (kE4m3RawDivisor), which the caller folds into its per-token scales: a power of two, so the
  /// dot products and weighted sums keep their bits (unless a product falls below 2^-118).
  static constexpr bool kRawE4m3 = true;
  static constexpr float kE4m3RawDivisor = 256.0f;
  static V load_e4m3_raw_full(const float8_e4m3* p) noexcept {
    return _mm512_cvtph_ps(e4m3_half_bits(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static V load_e4m3_raw(const float8_e4m3* p, int n) noexcept {
    if (n >= kLanes) return load_e4m3_raw_full(p);
    return _mm512_cvtph_ps(
        e4m3_half_bits(_mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << n) - 1u), p)));
  }
  /// Whether any of the rows k[0, count) and v[0, count), each `dim` e4m3 elements, holds a NaN
  /// code (magnitude 0x7F): a running byte max of the magnitudes, 64 bytes per two instructions,
  /// tested once.
  static INFERKIT_FORCEINLINE bool any_e4m3_nan(const float8_e4m3* const* k,
                                                const float8_e4m3* const* v, int count,
                                                int dim) noexcept {
    const __m512i mag = _mm512_set1_epi8(0x7F);
    __m512i top = _mm512_setzero_si512();
    const int tail = dim % 64;
    const auto tail_mask = static_cast<__mmask64>((std::uint64_t{1} << tail) - 1u);
    for (int j = 0; j < count; ++j) {
      const auto* kr = reinterpret_cast<const std::uint8_t*>(k[j]);
      const auto* vr = reinterpret_cast<const std::uint8_t*>(v[j]);
      int d = 0;
      for (; d + 64 <= dim; d += 64) {
        top = _mm512_max_epu8(top, _mm512_and_si512(_mm512_loadu_si512(kr + d), mag));
        top = _mm512_max_epu8(top, _mm512_and_si512(_mm512_loadu_si512(vr + d), mag));
      }
      if (tail > 0) {
        top =
            _mm512_max_epu8(top, _mm512_and_si512(_mm512_maskz_loadu_epi8(tail_mask, kr + d), mag));
        top =
            _mm512_max_epu8(top, _mm512_and_si512(_mm512_maskz_loadu_epi8(tail_mask, vr + d), mag));
      }
    }
    return _mm512_cmpeq_epi8_mask(top, mag) != 0;
  }
};

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

INFERKIT_TARGET_END

#endif  // INFERKIT_CPU_DISPATCH
