// SPDX-License-Identifier: Apache-2.0
// Internal: bulk float -> storage-element conversions for PagedKVCache's append. The scalar
// storage types (core/float16.hpp, float8.hpp) define the rounding; these loops give the same
// bits faster: F16C for fp16 where the build enables AVX2/F16C, and a branch-light e4m3 encoder.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <type_traits>

#if INFERKIT_HAS_AVX2 && !INFERKIT_CUDA_COMPILER
#  include <immintrin.h>
#endif

namespace inferkit::detail {

/// e4m3 "fn" bits of `x`, round to nearest even, saturating to ±448, NaN -> 0x7F | sign: the
/// same bits as `float8_e4m3(x)`, with fewer branches (tested against it).
inline std::uint8_t e4m3_bits_rne(float x) noexcept {
  const auto u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7FFFFFFFu;
  // All three cases computed, then selected: no data-dependent branches, so loops vectorize.
  // Below 2^-6 (e4m3 subnormal, steps of 2^-9): |x| * 2^9 < 8 is exact, and adding 2^23
  // rounds it to an integer, ties to even.
  const std::uint32_t subnormal =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) * 512.0f + 8388608.0f) - 0x4B000000u;
  // Normal: keep 3 mantissa bits (ties to even) and rebias the exponent 127 -> 7.
  const std::uint32_t rounded = a + 0x7FFFFu + ((a >> 20) & 1u);
  const std::uint32_t normal = (rounded >> 20) - (120u << 3);
  std::uint32_t code = a < 0x3C800000u ? subnormal : normal;
  code = a >= 0x43E00000u ? 0x7Eu : code;  // >= 448 and Inf saturate
  code = a > 0x7F800000u ? 0x7Fu : code;   // NaN
  return static_cast<std::uint8_t>(sign | code);
}

/// `out[i] = T(in[i])` for i < n.
template <class T>
inline void convert_from_float(const float* in, T* out, std::size_t n) noexcept {
  std::size_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; i < n; ++i) out[i] = in[i];
  } else if constexpr (std::is_same_v<T, float8_e4m3>) {
    for (; i < n; ++i) out[i] = float8_e4m3::from_bits(e4m3_bits_rne(in[i]));
  } else {
#if INFERKIT_HAS_AVX2 && !INFERKIT_CUDA_COMPILER
    if constexpr (std::is_same_v<T, float16>) {
      static_assert(sizeof(float16) == 2);
      for (; i + 8 <= n; i += 8) {
        const __m128i h =
            _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
      }
    }
#endif
    for (; i < n; ++i) out[i] = T(in[i]);
  }
}

}  // namespace inferkit::detail
