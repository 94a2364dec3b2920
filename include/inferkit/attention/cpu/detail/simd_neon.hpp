// SPDX-License-Identifier: Apache-2.0
// The NEON (AArch64 Advanced SIMD) policy of the CPU attention kernels: 4-lane fp32 vectors,
// FCVTL for fp16, pairwise adds for the lane reductions, register tiles sized for 32 vector
// registers. ASIMD is part of every AArch64 CPU, so this path is chosen at compile time there
// (Apple silicon, Graviton, Ampere); core/cpu_isa.hpp can still force the portable baseline.
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

#if INFERKIT_HAS_NEON
#  include <arm_neon.h>

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// NEON policy.
struct SimdNeon {
  static constexpr int kLanes = 4;
  /// No raw e4m3 loads: every e4m3 tile takes load_kv's checked conversion.
  static constexpr bool kRawE4m3 = false;
  static constexpr int kRegisters = 32;
  using V = float32x4_t;

  /// QK register tile within 32 registers: 1-2 x 8, 4 x 4, 8 x 3 (+ tokens K chunks).
  static constexpr int qk_tokens(int rows) noexcept {
    return rows <= 2 ? 8 : (rows == 8 ? 3 : 16 / rows);
  }
  static constexpr int pv_chunks(int rows) noexcept { return rows <= 4 ? 4 : 3; }
  static constexpr int kPrefillTokens = 16;

  static V zero() noexcept { return vdupq_n_f32(0.0f); }
  static V set1(float a) noexcept { return vdupq_n_f32(a); }
  static V load(const float* p) noexcept { return vld1q_f32(p); }
  static void store(float* p, V a) noexcept { vst1q_f32(p, a); }
  static V fma(V a, V b, V c) noexcept { return vfmaq_f32(c, a, b); }
  static V mul(V a, V b) noexcept { return vmulq_f32(a, b); }
  static V add(V a, V b) noexcept { return vaddq_f32(a, b); }
  static float reduce_max(V a) noexcept { return vmaxvq_f32(a); }
  static float reduce_add(V a) noexcept { return vaddvq_f32(a); }
  static bool any_greater(V a, float m) noexcept {
    return vmaxvq_u32(vcgtq_f32(a, vdupq_n_f32(m))) != 0;
  }
  /// All-ones lanes where bit i of `keep` is set.
  static uint32x4_t lane_mask(std::uint32_t keep) noexcept {
    const std::uint32_t bits[4] = {1u, 2u, 4u, 8u};
    return vtstq_u32(vdupq_n_u32(keep), vld1q_u32(bits));
  }
  static V keep_or(V a, std::uint32_t keep, float fill) noexcept {
    return vbslq_f32(lane_mask(keep), a, vdupq_n_f32(fill));
  }
  /// exp(x) for x <= 0 (and -inf), the AVX-512 policy's polynomial; 2^n applied as
  /// 2^(n + 64) * 2^-64 so subnormal results round once instead of flushing.
  static V exp_nonpositive(V x) noexcept {
    x = vmaxq_f32(x, vdupq_n_f32(-120.0f));
    const V n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    V r = vfmsq_f32(x, n, vdupq_n_f32(0.693145751953125f));
    r = vfmsq_f32(r, n, vdupq_n_f32(1.428606765330187e-06f));
    V p = vdupq_n_f32(1.0f / 720.0f);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(64 + 127)), 23);
    return vmulq_f32(vmulq_f32(p, vreinterpretq_f32_s32(e)), vdupq_n_f32(0x1.0p-64f));
  }
  static V exp_shifted(V a, float m, std::uint32_t keep) noexcept {
    const V e = exp_nonpositive(vsubq_f32(a, vdupq_n_f32(m)));
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(e), lane_mask(keep)));
  }
  /// Lane j = horizontal sum of acc[j]: two levels of pairwise adds.
  static V reduce_lanes(const V* acc) noexcept {
    return vpaddq_f32(vpaddq_f32(acc[0], acc[1]), vpaddq_f32(acc[2], acc[3]));
  }

  /// What load_int4 adds to each packed int4 nibble for a token of zero point `zero`.
  static V int4_offsets(float zero) noexcept { return set1(-zero); }

  /// min(n, kLanes) dims (n even, >= 2) of packed int4 at `p` as nibble - zero (`offsets` from
  /// int4_offsets(zero)); lanes >= n are -zero.
  static V load_int4(const std::uint8_t* p, int n, V offsets) noexcept {
    return add(load_kv(p, n), offsets);
  }

  /// Loads min(n, 4) dims of stored elements (n >= 1; even for packed int4) as floats; lanes
  /// >= n are 0 and never read.
  template <class T>
  static V load_kv(const T* p, int n) noexcept {
    if (n >= kLanes) return load_kv_full(p);
    T tmp[kLanes] = {};
    for (std::ptrdiff_t i = 0; i < kv_elements<T>(n); ++i) tmp[i] = p[i];
    return load_kv_full(tmp);
  }

  /// Loads 4 dims of stored elements as floats.
  template <class T>
  static V load_kv_full(const T* p) noexcept {
    if constexpr (is_packed_int4_v<T>) {
      // Two bytes, the even dim in each low nibble.
      const auto nibble = [p](int i) {
        return static_cast<std::uint32_t>(i % 2 == 0 ? p[i / 2] & 0x0Fu : p[i / 2] >> 4u);
      };
      const uint32x4_t u = {nibble(0), nibble(1), nibble(2), nibble(3)};
      return vcvtq_f32_u32(u);
    } else if constexpr (std::is_same_v<T, float>) {
      return vld1q_f32(p);
    } else if constexpr (sizeof(T) == 2) {
      std::uint16_t h[kLanes];
      std::memcpy(h, p, sizeof(h));
      const uint16x4_t u = vld1_u16(h);
      if constexpr (std::is_same_v<T, float16>) {
        return vcvt_f32_f16(vreinterpret_f16_u16(u));
      } else {
        static_assert(std::is_same_v<T, bfloat16>, "unsupported KV storage type");
        return vreinterpretq_f32_u32(vshll_n_u16(u, 16));
      }
    } else {
      std::uint32_t word = 0;
      std::memcpy(&word, p, sizeof(word));
      const uint8x8_t b8 = vreinterpret_u8_u32(vdup_n_u32(word));
      if constexpr (std::is_same_v<T, std::int8_t>) {
        const int16x8_t w = vmovl_s8(vreinterpret_s8_u8(b8));
        return vcvtq_f32_s32(vmovl_s16(vget_low_s16(w)));
      } else if constexpr (std::is_same_v<T, float8_e5m2>) {
        const uint16x4_t h = vshl_n_u16(vget_low_u16(vmovl_u8(b8)), 8);
        return vcvt_f32_f16(vreinterpret_f16_u16(h));
      } else {
        static_assert(std::is_same_v<T, float8_e4m3>, "unsupported KV storage type");
        const uint32x4_t b = vmovl_u16(vget_low_u16(vmovl_u8(b8)));
        const uint32x4_t mag = vandq_u32(b, vdupq_n_u32(0x7Fu));
        const uint32x4_t sign = vshlq_n_u32(vandq_u32(b, vdupq_n_u32(0x80u)), 24);
        V v = vmulq_f32(vreinterpretq_f32_u32(vshlq_n_u32(mag, 20)), vdupq_n_f32(0x1.0p120f));
        v = vbslq_f32(vceqq_u32(mag, vdupq_n_u32(0x7Fu)),
                      vdupq_n_f32(std::numeric_limits<float>::quiet_NaN()), v);
        return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(v), sign));
      }
    }
  }
};

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

#endif  // INFERKIT_HAS_NEON
