// SPDX-License-Identifier: Apache-2.0
// Internal: the AVX2+FMA+F16C path of the linear-layer kernels (namespace detail::linear_avx2),
// compiled in a function-level target region whatever the TU's -m flags, and run only when
// linear_isa.hpp says the CPU has AVX2, FMA and F16C. A vector is two ymm holding the same 16
// lanes as an AVX-512 zmm, with the same sum order, so this path computes the same floats.
#pragma once

#include <array>
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
#    pragma GCC target("avx2,fma,f16c")
#  else
#    pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#  endif
// clang-format on
INFERKIT_SIMD_WARNINGS_BEGIN

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {
namespace linear_avx2 {

/// The AVX2 vector policy of linear_kernels-inl.hpp: lanes 0-7 in `lo`, 8-15 in `hi`.
struct Simd {
  struct V {
    __m256 lo;  ///< lanes 0-7
    __m256 hi;  ///< lanes 8-15
  };
  /// 16 ymm registers: 4 fused rows (8 accumulators) and a 2 x 2 panel tile (8 accumulators,
  /// 4 weight and 2 activation registers).
  static constexpr int kFusedRows = 4;
  static constexpr int kTileRows = 2;
  static constexpr int kTileTokens = 2;
  /// hsum16 is 16 hsums here: no padding of 8 sums to 16.
  static constexpr bool kBatchedHsum = false;
  /// Q4 blocks decode through nibbles (no 16-entry permute in one register).
  static constexpr bool kQ4Lookup = false;

  /// All-ones in the first n (0-8) of 8 int lanes: maskload's mask.
  static __m256i first(int n) noexcept {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V zero() noexcept { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static V set1(float a) noexcept { return {_mm256_set1_ps(a), _mm256_set1_ps(a)}; }
  static V load(const float* p) noexcept { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static V load_partial(const float* p, int n) noexcept {
    return {_mm256_maskload_ps(p, first(n < 8 ? n : 8)),
            _mm256_maskload_ps(p + 8, first(n > 8 ? n - 8 : 0))};
  }
  static void store(float* p, V a) noexcept {
    _mm256_storeu_ps(p, a.lo);
    _mm256_storeu_ps(p + 8, a.hi);
  }
  static V fma(V a, V b, V c) noexcept {
    return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
  }
  static V mul(V a, V b) noexcept { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static V add(V a, V b) noexcept { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  /// Lanes (i, i+8), then (i, i+4), (i, i+2), (i, i+1): the order every path uses.
  static float hsum(V a) noexcept {
    const __m256 s8 = _mm256_add_ps(a.lo, a.hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
  }
  static void hsum16(const V* a, float* out) noexcept {
    for (int k = 0; k < 16; ++k) out[k] = hsum(a[k]);
  }
  /// `count` fp16 at `in` to fp32 at `out`.
  static void halfs_to_floats(const std::uint16_t* in, float* out, int count) noexcept {
    int i = 0;
    for (; i + 8 <= count; i += 8) {
      _mm256_storeu_ps(out + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
    }
    for (; i < count; ++i) out[i] = _cvtsh_ss(in[i]);
  }
  /// Bytes 0-7 and 8-15 of `b` as 8 floats each.
  static V widen_u8(__m128i b) noexcept {
    return {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)),
            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(b, b)))};
  }
  static void nibbles(const std::byte* p, V& lo, V& hi) noexcept {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i mask = _mm_set1_epi8(0x0F);
    lo = widen_u8(_mm_and_si128(q, mask));
    hi = widen_u8(_mm_and_si128(_mm_srli_epi16(q, 4), mask));
  }
  static V int8s(const std::byte* p) noexcept {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)),
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(q, q)))};
  }
  static V halfs(const std::byte* p) noexcept {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
  }
  /// 8 bf16 at p (a member, not a lambda: g++ emits a lambda's static invoker outside the
  /// target region).
  static __m256 bhalfs8(const std::byte* p) noexcept {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16));
  }
  static V bhalfs(const std::byte* p) noexcept { return {bhalfs8(p), bhalfs8(p + 16)}; }
  /// The first n (1-15) 2-byte values at p, zero-padded: a copy, then the full conversion.
  static std::array<std::byte, 32> pad16(const std::byte* p, int n) noexcept {
    std::array<std::byte, 32> b{};
    std::memcpy(b.data(), p, static_cast<std::size_t>(n) * 2);
    return b;
  }
  static V halfs_partial(const std::byte* p, int n) noexcept { return halfs(pad16(p, n).data()); }
  static V bhalfs_partial(const std::byte* p, int n) noexcept { return bhalfs(pad16(p, n).data()); }
  static V floats(const std::byte* p) noexcept { return load(reinterpret_cast<const float*>(p)); }
  static V floats_partial(const std::byte* p, int n) noexcept {
    return load_partial(reinterpret_cast<const float*>(p), n);
  }
  static void prefetch(const std::byte* p) noexcept {
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  }
};

}  // namespace linear_avx2
}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

#  define INFERKIT_LINEAR_ISA linear_avx2
#  include <inferkit/model/detail/linear_kernels-inl.hpp>

INFERKIT_SIMD_WARNINGS_END
#  if INFERKIT_COMPILER_GCC
#    pragma GCC pop_options
#  else
#    pragma clang attribute pop
#  endif

#endif  // INFERKIT_CPU_DISPATCH
