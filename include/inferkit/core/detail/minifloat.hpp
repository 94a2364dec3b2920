// SPDX-License-Identifier: Apache-2.0
// Internal: bit-exact conversions between binary32 and the narrow float formats (fp16, fp8 e4m3,
// fp8 e5m2), written once for any exponent/mantissa split in portable integer arithmetic. The
// public storage types (float16.hpp, float8.hpp) are thin wrappers; kernels that convert in bulk
// use SIMD or hardware instructions of their own and are tested against these.
#pragma once

#include <bit>
#include <cstdint>
#include <inferkit/core/config.hpp>

namespace inferkit::detail {

// std::bit_cast is constexpr on the host and, with nvcc 13's --expt-relaxed-constexpr, also
// callable in device code (it lowers to __builtin_bit_cast, no memcpy, no union punning).
INFERKIT_HOST_DEVICE constexpr std::uint32_t float_to_bits(float value) noexcept {
  return std::bit_cast<std::uint32_t>(value);
}
INFERKIT_HOST_DEVICE constexpr float bits_to_float(std::uint32_t bits) noexcept {
  return std::bit_cast<float>(bits);
}

/// How a format spends its top exponent code.
enum class TopExponent : std::uint8_t {
  kInfNan,      ///< IEEE: all-ones exponent is Inf (mantissa 0) or NaN; overflow rounds to Inf
  kNoInfinity,  ///< OCP e4m3 "fn": all-ones exponent is finite except the all-ones mantissa
                ///< (NaN); no Inf, out-of-range values saturate to the largest finite value
};

/// A narrow binary float format with `kExpBits` exponent and `kManBits` mantissa bits, one sign
/// bit on top, stored in the low 1 + kExpBits + kManBits bits of an integer.
template <int kExpBits, int kManBits, TopExponent kTop>
struct MiniFloatFormat {
  static_assert(kExpBits >= 2 && kExpBits <= 5 && kManBits >= 1 && kManBits <= 10,
                "narrow formats only: binary32 subnormals must round to zero in them");
  static constexpr int kExponentBits = kExpBits;
  static constexpr int kMantissaBits = kManBits;
  static constexpr bool kIeee = kTop == TopExponent::kInfNan;
  static constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  static constexpr int kMinNormalExp = 1 - kBias;  // unbiased exponent of the smallest normal
  static constexpr std::uint32_t kSignBit = 1u << (kExpBits + kManBits);
  static constexpr std::uint32_t kExpMask = ((1u << kExpBits) - 1u) << kManBits;
  static constexpr std::uint32_t kManMask = (1u << kManBits) - 1u;
  static constexpr std::uint32_t kQuietBit = 1u << (kManBits - 1);
  /// Magnitude bits of the largest finite value.
  static constexpr std::uint32_t kMaxFinite = kIeee ? kExpMask - 1u : kExpMask | (kManMask - 1u);
  /// Magnitude bits of the canonical NaN.
  static constexpr std::uint32_t kNan = kIeee ? kExpMask | kQuietBit : kExpMask | kManMask;
};

/// Rounds `value >> shift` to nearest, ties to even (`shift` in [1, 31]).
INFERKIT_HOST_DEVICE constexpr std::uint32_t shift_right_round_even(std::uint32_t value,
                                                                    int shift) noexcept {
  const std::uint32_t kept = value >> shift;
  const std::uint32_t rest = value & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u) != 0u)) ? 1u : 0u);
}

/// binary32 -> narrow format bits, round to nearest even. IEEE formats: overflow gives Inf and a
/// NaN stays a quiet NaN keeping the top payload bits. e4m3fn: overflow and ±Inf saturate to
/// ±max, NaN gives the NaN code with the input's sign.
template <class Format>
INFERKIT_HOST_DEVICE constexpr std::uint32_t encode_minifloat(float value) noexcept {
  constexpr int kManBits = Format::kMantissaBits;
  constexpr int kDroppedBits = 23 - kManBits;
  const std::uint32_t u = float_to_bits(value);
  const std::uint32_t sign = (u >> 31) != 0u ? Format::kSignBit : 0u;
  const std::uint32_t magnitude = u & 0x7FFFFFFFu;
  const std::uint32_t float_man = magnitude & 0x007FFFFFu;

  if (magnitude > 0x7F800000u) {  // NaN
    if constexpr (Format::kIeee) {
      return sign | Format::kNan | (float_man >> kDroppedBits);
    } else {
      return sign | Format::kNan;
    }
  }
  const auto overflow = [&]() -> std::uint32_t {
    return sign | (Format::kIeee ? Format::kExpMask : Format::kMaxFinite);  // Inf or saturate
  };
  if (magnitude == 0x7F800000u) return overflow();

  const int exp = static_cast<int>(magnitude >> 23) - 127;  // unbiased; -127 for zero/subnormal
  if (exp >= Format::kMinNormalExp) {
    // Normal in the target: re-bias the exponent, round the mantissa. A mantissa carry moves into
    // the exponent field on its own, which is exactly the next binade (or Inf/overflow).
    const std::uint32_t biased =
        (static_cast<std::uint32_t>(exp + Format::kBias) << 23) | float_man;
    const std::uint32_t rounded = shift_right_round_even(biased, kDroppedBits);
    return rounded > Format::kMaxFinite ? overflow() : sign | rounded;
  }
  // Subnormal (or zero) in the target: count units of 2^(kMinNormalExp - kManBits). The value is
  // significand * 2^(exp - 23); the shift below is >= 24 - kManBits.
  const int shift = Format::kMinNormalExp - kManBits - exp + 23;
  if (shift > 24) return sign;  // below half the smallest subnormal (binary32 subnormals too)
  const std::uint32_t significand = float_man | 0x00800000u;
  return sign | shift_right_round_even(significand, shift);  // may round up to the min normal
}

/// Narrow format bits -> binary32, exact. A NaN decodes to a quiet NaN with the same sign and
/// the payload bits moved to the top of the binary32 mantissa (IEEE formats).
template <class Format>
INFERKIT_HOST_DEVICE constexpr float decode_minifloat(std::uint32_t bits) noexcept {
  constexpr int kManBits = Format::kMantissaBits;
  constexpr int kDroppedBits = 23 - kManBits;
  const std::uint32_t sign = (bits & Format::kSignBit) != 0u ? 0x80000000u : 0u;
  const std::uint32_t magnitude = bits & (Format::kExpMask | Format::kManMask);
  const std::uint32_t man = magnitude & Format::kManMask;
  const std::uint32_t exp_field = magnitude >> kManBits;

  if (magnitude > Format::kMaxFinite) {
    if constexpr (Format::kIeee) {
      if (man == 0u) return bits_to_float(sign | 0x7F800000u);           // Inf
      return bits_to_float(sign | 0x7FC00000u | (man << kDroppedBits));  // NaN, payload kept
    } else {
      return bits_to_float(sign | 0x7FC00000u);  // the format's only NaN
    }
  }
  if (exp_field == 0u) {
    // Subnormal or zero: man * 2^(kMinNormalExp - kManBits), exact in binary32 (a small integer
    // times a power of two well inside binary32's normal range).
    constexpr std::uint32_t kUnitBits =
        static_cast<std::uint32_t>(127 + Format::kMinNormalExp - kManBits) << 23;
    const float mag = static_cast<float>(man) * bits_to_float(kUnitBits);
    return bits_to_float(sign | float_to_bits(mag));
  }
  const std::uint32_t float_exp =
      exp_field + static_cast<std::uint32_t>(127 - Format::kBias);  // re-bias to binary32's 127
  return bits_to_float(sign | (float_exp << 23) | (man << kDroppedBits));
}

}  // namespace inferkit::detail
