// SPDX-License-Identifier: Apache-2.0
// Test oracle for the narrow float storage types (float16, bfloat16, float8_e4m3, float8_e5m2):
// a decoder written from the format definition with std::ldexp in double, and an encoder that
// picks the nearest representable value (ties to even) from the table of all decoded values.
// It shares no code with include/inferkit/core/detail/minifloat.hpp on purpose.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <inferkit/core/rng.hpp>
#include <limits>
#include <string>
#include <vector>

namespace inferkit::test {

/// A narrow binary float format: 1 sign bit, `exp_bits`, `man_bits`. `ieee` formats spend the
/// all-ones exponent on Inf/NaN; the others (OCP e4m3 "fn") only the all-ones code on NaN.
struct FloatFormatSpec {
  int exp_bits;
  int man_bits;
  bool ieee;

  int total_bits() const { return 1 + exp_bits + man_bits; }
  std::uint32_t sign_bit() const { return 1u << (exp_bits + man_bits); }
  std::uint32_t code_count() const { return 1u << total_bits(); }
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
};

inline constexpr FloatFormatSpec kFloat16Spec{5, 10, true};
inline constexpr FloatFormatSpec kBFloat16Spec{8, 7, true};
inline constexpr FloatFormatSpec kFloat8E4M3Spec{4, 3, false};
inline constexpr FloatFormatSpec kFloat8E5M2Spec{5, 2, true};

/// The value of `bits` in `spec`, computed in double from sign, exponent and mantissa.
inline double reference_decode(const FloatFormatSpec& spec, std::uint32_t bits) {
  const bool negative = (bits & spec.sign_bit()) != 0;
  const std::uint32_t man = bits & ((1u << spec.man_bits) - 1u);
  const std::uint32_t exp = (bits >> spec.man_bits) & ((1u << spec.exp_bits) - 1u);
  const std::uint32_t exp_all_ones = (1u << spec.exp_bits) - 1u;
  const std::uint32_t man_all_ones = (1u << spec.man_bits) - 1u;
  double magnitude = 0.0;
  if (spec.ieee && exp == exp_all_ones) {
    magnitude = man == 0 ? std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  } else if (!spec.ieee && exp == exp_all_ones && man == man_all_ones) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    magnitude = std::ldexp(static_cast<double>(man), 1 - spec.bias() - spec.man_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>((1u << spec.man_bits) + man),
                           static_cast<int>(exp) - spec.bias() - spec.man_bits);
  }
  return negative ? -magnitude : magnitude;
}

/// Nearest-even rounding by table lookup over every finite magnitude of a format.
class ReferenceEncoder {
 public:
  explicit ReferenceEncoder(const FloatFormatSpec& spec) : spec_(spec) {
    for (std::uint32_t code = 0; code < spec.sign_bit(); ++code) {
      const double value = reference_decode(spec, code);
      if (!std::isfinite(value)) break;  // magnitudes grow with the code up to the specials
      magnitudes_.push_back(value);
    }
  }

  /// Finite magnitudes in code order (code == index), strictly increasing.
  const std::vector<double>& magnitudes() const { return magnitudes_; }

  /// Where a value stops rounding to the largest finite magnitude: max + half its ulp.
  double overflow_threshold() const {
    const double max = magnitudes_.back();
    return max + (max - magnitudes_[magnitudes_.size() - 2]) / 2.0;
  }

  /// The code nearest to `value` (ties to the even code); overflow gives Inf for IEEE formats
  /// and saturates to the largest finite value otherwise. `value` must not be NaN.
  std::uint32_t encode(double value) const {
    const std::uint32_t sign = std::signbit(value) ? spec_.sign_bit() : 0u;
    const double magnitude = std::fabs(value);
    const auto max_code = static_cast<std::uint32_t>(magnitudes_.size() - 1);
    if (magnitude >= magnitudes_.back()) {
      const bool to_inf = spec_.ieee && magnitude >= overflow_threshold();  // tie: Inf is even
      return sign | (to_inf ? max_code + 1u : max_code);
    }
    const auto above = std::upper_bound(magnitudes_.begin(), magnitudes_.end(), magnitude);
    const auto hi = static_cast<std::uint32_t>(above - magnitudes_.begin());
    const std::uint32_t lo = hi - 1u;
    const double below_distance = magnitude - magnitudes_[lo];
    const double above_distance = magnitudes_[hi] - magnitude;
    if (below_distance < above_distance) return sign | lo;
    if (above_distance < below_distance) return sign | hi;
    return sign | ((lo % 2u == 0u) ? lo : hi);
  }

 private:
  FloatFormatSpec spec_;
  std::vector<double> magnitudes_;
};

/// Counts mismatches and keeps the first few as text for the test's failure message.
class MismatchLog {
 public:
  void add(const char* what, std::uint32_t input_bits, std::uint32_t got, std::uint32_t expected) {
    if (count_++ < 5) {
      char line[160];
      std::snprintf(line, sizeof line, "%s: input 0x%08x -> 0x%x, expected 0x%x\n", what,
                    input_bits, got, expected);
      text_ += line;
    }
  }
  long count() const { return count_; }
  /// Empty when nothing mismatched.
  std::string report() const {
    return count_ == 0 ? std::string() : std::to_string(count_) + " mismatches\n" + text_;
  }

 private:
  long count_ = 0;
  std::string text_;
};

inline std::uint32_t float_bits(float value) { return std::bit_cast<std::uint32_t>(value); }

/// Every code of `T`: `to_float` against `reference_decode` (value, sign of zero, NaN-ness).
template <class T>
std::string decode_mismatches(const FloatFormatSpec& spec) {
  using Bits = decltype(T::bits);
  MismatchLog log;
  for (std::uint32_t code = 0; code < spec.code_count(); ++code) {
    const float got = to_float(T::from_bits(static_cast<Bits>(code)));
    const double expected = reference_decode(spec, code);
    const bool ok =
        std::isnan(expected)
            ? std::isnan(got) && std::signbit(got) == ((code & spec.sign_bit()) != 0)
            : static_cast<double>(got) == expected && std::signbit(got) == std::signbit(expected);
    if (!ok) log.add("decode", code, float_bits(got), 0);
  }
  return log.report();
}

/// Every finite code survives float -> T exactly; every NaN code stays a NaN of the same sign.
template <class T>
std::string round_trip_mismatches(const FloatFormatSpec& spec) {
  using Bits = decltype(T::bits);
  MismatchLog log;
  for (std::uint32_t code = 0; code < spec.code_count(); ++code) {
    const float value = to_float(T::from_bits(static_cast<Bits>(code)));
    const std::uint32_t back = T(value).bits;
    if (std::isnan(value)) {
      const bool ok = std::isnan(to_float(T::from_bits(static_cast<Bits>(back)))) &&
                      (back & spec.sign_bit()) == (code & spec.sign_bit());
      if (!ok) log.add("round trip NaN", code, back, code);
    } else if (back != code) {
      log.add("round trip", code, back, code);
    }
  }
  return log.report();
}

/// Encodes `value` with `T` and with the reference; logs a difference.
template <class T>
void compare_encode(const ReferenceEncoder& reference, float value, MismatchLog& log) {
  const std::uint32_t got = T(value).bits;
  const std::uint32_t expected = reference.encode(static_cast<double>(value));
  if (got != expected) log.add("encode", float_bits(value), got, expected);
}

/// Every midpoint between consecutive magnitudes (and the overflow threshold), and the floats
/// right beside it, with both signs: T(x) against the nearest-even reference.
template <class T>
std::string midpoint_mismatches(const FloatFormatSpec& spec) {
  const ReferenceEncoder reference(spec);
  const std::vector<double>& magnitudes = reference.magnitudes();
  std::vector<double> midpoints;
  for (std::size_t i = 0; i + 1 < magnitudes.size(); ++i) {
    midpoints.push_back((magnitudes[i] + magnitudes[i + 1]) / 2.0);
  }
  midpoints.push_back(reference.overflow_threshold());
  MismatchLog log;
  for (const double midpoint : midpoints) {
    const auto mid = static_cast<float>(midpoint);
    if (static_cast<double>(mid) != midpoint) {  // the test relies on exact float midpoints
      log.add("midpoint not a float", float_bits(mid), 0, 0);
      continue;
    }
    const float inf = std::numeric_limits<float>::infinity();
    for (const float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, inf)}) {
      compare_encode<T>(reference, x, log);
      compare_encode<T>(reference, -x, log);
    }
  }
  return log.report();
}

/// `count` random floats (fixed seed): half uniform over all bit patterns, half with exponents
/// around the format's range, T(x) against the reference. NaN inputs must give a NaN of the
/// same sign.
template <class T>
std::string random_mismatches(const FloatFormatSpec& spec, std::uint64_t seed, int count) {
  using Bits = decltype(T::bits);
  const ReferenceEncoder reference(spec);
  // Biased binary32 exponents from below the smallest subnormal to above the largest finite.
  const int low = std::max(0, 127 + 1 - spec.bias() - spec.man_bits - 3);
  const int high = std::min(254, 127 + (1 << spec.exp_bits) - 1 - spec.bias() + 2);
  Rng rng(seed);
  MismatchLog log;
  for (int i = 0; i < count; ++i) {
    std::uint32_t u = rng.next_u32();
    if (i % 2 == 1) {
      const auto exp =
          static_cast<std::uint32_t>(low) + rng.below(static_cast<std::uint32_t>(high - low + 1));
      u = (u & 0x807FFFFFu) | (exp << 23);
    }
    const float x = std::bit_cast<float>(u);
    if (std::isnan(x)) {
      const std::uint32_t got = T(x).bits;
      const bool ok = std::isnan(to_float(T::from_bits(static_cast<Bits>(got)))) &&
                      ((got & spec.sign_bit()) != 0) == std::signbit(x);
      if (!ok) log.add("encode NaN", u, got, 0);
    } else {
      compare_encode<T>(reference, x, log);
    }
  }
  return log.report();
}

/// Loop counts shrink under the sanitizer build (same assertions, fewer trials).
inline int scaled_trials(int trials) {
#if defined(INFERKIT_TEST_SANITIZED)
  return trials / 10;
#else
  return trials;
#endif
}

}  // namespace inferkit::test
