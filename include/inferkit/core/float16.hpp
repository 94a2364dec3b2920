// SPDX-License-Identifier: Apache-2.0
// `float16`: IEEE binary16 as a storage type for weights, activations and KV (the common
// "half" of fp16 checkpoints). Scalar, constexpr and identical on host and CUDA device; it does
// no arithmetic: convert to float, compute, convert back. Bulk kernels use SIMD of their own.
// Threads: a value type and constexpr functions; safe from any number of threads.
#pragma once

#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/detail/minifloat.hpp>

namespace inferkit {

namespace detail {
using Float16Format = MiniFloatFormat<5, 10, TopExponent::kInfNan>;
}  // namespace detail

/// IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits. Largest finite 65504, smallest normal
/// 2^-14, smallest subnormal 2^-24. Trivially copyable, `sizeof == 2`; default construction
/// leaves `bits` uninitialized (like `float`).
struct float16 {
  /// The raw binary16 bits.
  std::uint16_t bits;

  float16() = default;

  /// Rounds `value` to the nearest binary16, ties to even. Overflow gives ±Inf, values below half
  /// the smallest subnormal give ±0, NaN stays NaN (quiet, top payload bits kept).
  INFERKIT_HOST_DEVICE explicit constexpr float16(float value) noexcept
      : bits(static_cast<std::uint16_t>(detail::encode_minifloat<detail::Float16Format>(value))) {}

  /// The value whose raw bits are `b`.
  INFERKIT_HOST_DEVICE static constexpr float16 from_bits(std::uint16_t b) noexcept {
    float16 result;
    result.bits = b;
    return result;
  }

  /// The exact binary32 value (a NaN becomes a quiet NaN with the same sign and payload).
  INFERKIT_HOST_DEVICE explicit constexpr operator float() const noexcept {
    return detail::decode_minifloat<detail::Float16Format>(bits);
  }
};

static_assert(sizeof(float16) == 2);

/// The exact binary32 value of `x`.
INFERKIT_HOST_DEVICE constexpr float to_float(float16 x) noexcept { return static_cast<float>(x); }

}  // namespace inferkit
