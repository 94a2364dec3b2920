// SPDX-License-Identifier: Apache-2.0
// The two OCP 8-bit float storage types: `float8_e4m3` (e4m3 "fn": more precision, no Inf,
// saturating) for weights and KV caches, and `float8_e5m2` (IEEE-like, more range) for
// gradients and outliers. Scalar, constexpr and identical on host and CUDA device; KV
// quantization (kv/) scales values into range before converting.
// Threads: value types and constexpr functions; safe from any number of threads.
#pragma once

#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/detail/minifloat.hpp>

namespace inferkit {

namespace detail {
using Float8E4M3Format = MiniFloatFormat<4, 3, TopExponent::kNoInfinity>;
using Float8E5M2Format = MiniFloatFormat<5, 2, TopExponent::kInfNan>;
}  // namespace detail

/// OCP fp8 e4m3 "fn": 1 sign, 4 exponent (bias 7), 3 mantissa bits. No infinities; 0x7F and
/// 0xFF are NaN; largest finite ±448, smallest subnormal 2^-9. Trivially copyable, `sizeof ==
/// 1`; default construction leaves `bits` uninitialized.
struct float8_e4m3 {
  /// The raw fp8 bits.
  std::uint8_t bits;

  float8_e4m3() = default;

  /// Rounds `value` to the nearest e4m3, ties to even, and SATURATES: anything beyond ±448,
  /// ±Inf included, gives ±448. NaN gives 0x7F with the input's sign bit (0xFF when negative).
  INFERKIT_HOST_DEVICE explicit constexpr float8_e4m3(float value) noexcept
      : bits(static_cast<std::uint8_t>(detail::encode_minifloat<detail::Float8E4M3Format>(value))) {
  }

  /// The value whose raw bits are `b`.
  INFERKIT_HOST_DEVICE static constexpr float8_e4m3 from_bits(std::uint8_t b) noexcept {
    float8_e4m3 result;
    result.bits = b;
    return result;
  }

  /// The exact binary32 value (NaN codes give a quiet NaN with the same sign).
  INFERKIT_HOST_DEVICE explicit constexpr operator float() const noexcept {
    return detail::decode_minifloat<detail::Float8E4M3Format>(bits);
  }
};

/// OCP fp8 e5m2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE special values: ±Inf are
/// 0x7C/0xFC, NaNs above them. Largest finite ±57344, smallest subnormal 2^-16. Trivially
/// copyable, `sizeof == 1`; default construction leaves `bits` uninitialized.
struct float8_e5m2 {
  /// The raw fp8 bits.
  std::uint8_t bits;

  float8_e5m2() = default;

  /// Rounds `value` to the nearest e5m2, ties to even. Overflow gives ±Inf, NaN stays NaN
  /// (quiet, top payload bit kept).
  INFERKIT_HOST_DEVICE explicit constexpr float8_e5m2(float value) noexcept
      : bits(static_cast<std::uint8_t>(detail::encode_minifloat<detail::Float8E5M2Format>(value))) {
  }

  /// The value whose raw bits are `b`.
  INFERKIT_HOST_DEVICE static constexpr float8_e5m2 from_bits(std::uint8_t b) noexcept {
    float8_e5m2 result;
    result.bits = b;
    return result;
  }

  /// The exact binary32 value (a NaN becomes a quiet NaN with the same sign and payload).
  INFERKIT_HOST_DEVICE explicit constexpr operator float() const noexcept {
    return detail::decode_minifloat<detail::Float8E5M2Format>(bits);
  }
};

static_assert(sizeof(float8_e4m3) == 1 && sizeof(float8_e5m2) == 1);

/// The exact binary32 value of `x`.
INFERKIT_HOST_DEVICE constexpr float to_float(float8_e4m3 x) noexcept {
  return static_cast<float>(x);
}

/// The exact binary32 value of `x`.
INFERKIT_HOST_DEVICE constexpr float to_float(float8_e5m2 x) noexcept {
  return static_cast<float>(x);
}

}  // namespace inferkit
