// SPDX-License-Identifier: Apache-2.0
// A scalar exp for arguments <= 0 that compilers vectorize: the sampler's and the verifiers'
// softmax rows and the model's SwiGLU (which writes silu through exp(-|g|)) share it.
#pragma once

#include <bit>
#include <cstdint>

namespace inferkit::detail {

/// exp(z) for z <= 0 in float, within ~2 ulp (Cephes expf: range reduction by ln 2 and a degree-6
/// polynomial), branch-free so softmax loops vectorize (std::exp does not without -ffast-math).
/// Returns 0 for z < -87.3 (below the normal range) and for NaN.
inline float exp_nonpositive(float z) noexcept {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kMin = -87.3f;
  const bool in_range = z >= kMin;  // false for NaN
  const float x0 = in_range ? z : 0.0f;
  // Round to nearest by the 1.5 * 2^23 shift: std::floor would not vectorize under trapping math.
  constexpr float kShift = 12582912.0f;
  const float n = (x0 * kLog2e + kShift) - kShift;
  const float x = (x0 - n * kLn2Hi) - n * kLn2Lo;
  float y = 1.9875691500e-4f;
  y = y * x + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * (x * x) + x + 1.0f;
  // Scale by 2^n through the exponent bits (n >= -126 here, so 2^n is a normal float).
  const auto scale = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  return in_range ? y * scale : 0.0f;
}

}  // namespace inferkit::detail
