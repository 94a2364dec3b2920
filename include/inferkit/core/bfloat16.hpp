// SPDX-License-Identifier: Apache-2.0
// `bfloat16`: the top half of an IEEE binary32 (8 exponent, 7 mantissa bits), the storage type
// of most LLM checkpoints and KV caches. Same range as float, less precision. Scalar, constexpr
// and identical on host and CUDA device; it does no arithmetic: convert to float and back.
// Threads: a value type and constexpr functions; safe from any number of threads.
#pragma once

#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/detail/minifloat.hpp>

namespace inferkit {

/// bfloat16: 1 sign, 8 exponent, 7 mantissa bits, i.e. the high 16 bits of a binary32. Largest
/// finite 0x1.FEp127. Trivially copyable, `sizeof == 2`; default construction leaves `bits`
/// uninitialized (like `float`).
struct bfloat16 {
  /// The raw bfloat16 bits.
  std::uint16_t bits;

  bfloat16() = default;

  /// Rounds `value` to the nearest bfloat16, ties to even. Overflow gives ±Inf, binary32
  /// subnormals round like any other value, NaN stays NaN (quiet, top payload bits kept).
  INFERKIT_HOST_DEVICE explicit constexpr bfloat16(float value) noexcept
      : bits(from_float_bits(detail::float_to_bits(value))) {}

  /// The value whose raw bits are `b`.
  INFERKIT_HOST_DEVICE static constexpr bfloat16 from_bits(std::uint16_t b) noexcept {
    bfloat16 result;
    result.bits = b;
    return result;
  }

  /// The exact binary32 value: the bits shifted into the high half (NaN payloads, including a
  /// signaling NaN's, are kept as they are, as every bfloat16 implementation does).
  INFERKIT_HOST_DEVICE explicit constexpr operator float() const noexcept {
    return detail::bits_to_float(std::uint32_t{bits} << 16);
  }

 private:
  INFERKIT_HOST_DEVICE static constexpr std::uint16_t from_float_bits(std::uint32_t u) noexcept {
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN: set the quiet bit
    }
    // Round to nearest even on the low 16 bits; a carry walks into the exponent (up to Inf).
    const std::uint32_t tie_to_even = 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>((u + tie_to_even) >> 16);
  }
};

static_assert(sizeof(bfloat16) == 2);

/// The exact binary32 value of `x`.
INFERKIT_HOST_DEVICE constexpr float to_float(bfloat16 x) noexcept { return static_cast<float>(x); }

}  // namespace inferkit
