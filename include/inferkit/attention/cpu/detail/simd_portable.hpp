// SPDX-License-Identifier: Apache-2.0
// The portable SIMD policy of the CPU attention kernels (the baseline path): 4-lane GCC/clang
// generic vectors, which the compiler lowers to the target's own SIMD (SSE2 on any x86-64, ASIMD
// on aarch64, scalar code where there is none), so the kernels vectorize by construction, with
// no intrinsics and no -m flag. The KV conversions are branch-free integer and float lane
// operations (no per-element scalar decode), and exp is a polynomial.
#pragma once

#include <bit>
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

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// Portable policy: 4 floats per vector, register tiles sized for 16 vector registers.
struct SimdPortable {
  static constexpr int kLanes = 4;
  /// No raw e4m3 loads: every e4m3 tile takes load_kv's checked conversion.
  static constexpr bool kRawE4m3 = false;
  static constexpr int kRegisters = 16;
  using V = float __attribute__((vector_size(16)));
  using VI = std::int32_t __attribute__((vector_size(16)));
  using VU = std::uint32_t __attribute__((vector_size(16)));

  /// QK register tile: tokens per step for `rows` rows (rows x tokens accumulators + tokens).
  static constexpr int qk_tokens(int rows) noexcept {
    return rows <= 1 ? 8 : (rows == 2 ? 4 : (rows == 4 ? 3 : 1));
  }
  /// PV register tile: chunks of kLanes dims per pass for `rows` rows.
  static constexpr int pv_chunks(int rows) noexcept { return rows <= 2 ? 4 : (rows == 4 ? 2 : 1); }
  /// Prefill QK: tokens whose dot products one row accumulates at once.
  static constexpr int kPrefillTokens = 8;

  static V zero() noexcept { return set1(0.0f); }
  static V set1(float a) noexcept { return V{a, a, a, a}; }
  static V load(const float* p) noexcept {
    V r;
    std::memcpy(&r, p, sizeof(r));
    return r;
  }
  static void store(float* p, V a) noexcept { std::memcpy(p, &a, sizeof(a)); }
  /// a * b + c (one rounding where the target has FMA and the compiler contracts).
  static V fma(V a, V b, V c) noexcept { return a * b + c; }
  static V mul(V a, V b) noexcept { return a * b; }
  static V add(V a, V b) noexcept { return a + b; }
  static float reduce_max(V a) noexcept {
    const float m01 = a[0] > a[1] ? a[0] : a[1];
    const float m23 = a[2] > a[3] ? a[2] : a[3];
    return m01 > m23 ? m01 : m23;
  }
  static float reduce_add(V a) noexcept { return (a[0] + a[1]) + (a[2] + a[3]); }
  /// Some lane of a is greater than m (NaN lanes are not).
  static bool any_greater(V a, float m) noexcept {
    const VI gt = a > set1(m);
    return (gt[0] | gt[1] | gt[2] | gt[3]) != 0;
  }
  /// All-ones lanes where bit i of `keep` is set.
  static VI lane_mask(std::uint32_t keep) noexcept {
    const VU bits = {1u, 2u, 4u, 8u};
    return (VU{keep, keep, keep, keep} & bits) != VU{0u, 0u, 0u, 0u};
  }
  /// Lanes whose bit in `keep` is 0 become `fill`.
  static V keep_or(V a, std::uint32_t keep, float fill) noexcept {
    const VI m = lane_mask(keep);
    return std::bit_cast<V>((std::bit_cast<VI>(a) & m) | (std::bit_cast<VI>(set1(fill)) & ~m));
  }
  /// exp(x) for x <= 0 (and -inf): 2^n * p(r), x = n ln2 + r, degree-6 polynomial (the AVX-512
  /// policy's, relative error ~2e-7). 2^n is applied as 2^(n + 64) * 2^-64, so results below
  /// FLT_MIN round once into the subnormal range instead of flushing.
  static V exp_nonpositive(V x) noexcept {
    const V lo = set1(-120.0f);  // exp(-120) underflows to 0 below
    x = std::bit_cast<V>((std::bit_cast<VI>(x) & ~(x < lo)) | (std::bit_cast<VI>(lo) & (x < lo)));
    constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const V n = (x * set1(1.44269504088896341f) + set1(kShift)) - set1(kShift);
    V r = x - n * set1(0.693145751953125f);
    r = r - n * set1(1.428606765330187e-06f);
    V p = set1(1.0f / 720.0f);
    p = p * r + set1(1.0f / 120.0f);
    p = p * r + set1(1.0f / 24.0f);
    p = p * r + set1(1.0f / 6.0f);
    p = p * r + set1(0.5f);
    p = p * r + set1(1.0f);
    p = p * r + set1(1.0f);
    const VI e = (__builtin_convertvector(n, VI) + (64 + 127)) << 23;
    return p * std::bit_cast<V>(e) * set1(0x1.0p-64f);
  }
  /// exp(a - m) for lanes in `keep`, 0 elsewhere; m is finite.
  static V exp_shifted(V a, float m, std::uint32_t keep) noexcept {
    return std::bit_cast<V>(std::bit_cast<VI>(exp_nonpositive(a - set1(m))) & lane_mask(keep));
  }
  /// Lane j of the result is the sum of the lanes of acc[j] (4 dot products at once).
  static V reduce_lanes(const V* acc) noexcept {
    return V{reduce_add(acc[0]), reduce_add(acc[1]), reduce_add(acc[2]), reduce_add(acc[3])};
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
      return V{static_cast<float>(p[0] & 0x0Fu), static_cast<float>(p[0] >> 4),
               static_cast<float>(p[1] & 0x0Fu), static_cast<float>(p[1] >> 4)};
    } else if constexpr (std::is_same_v<T, float>) {
      return load(p);
    } else if constexpr (std::is_same_v<T, std::int8_t>) {
      std::int8_t b[kLanes];
      std::memcpy(b, p, sizeof(b));
      return __builtin_convertvector((VI{b[0], b[1], b[2], b[3]}), V);
    } else if constexpr (sizeof(T) == 2) {
      std::uint16_t h[kLanes];
      std::memcpy(h, p, sizeof(h));
      const VU u = {h[0], h[1], h[2], h[3]};
      if constexpr (std::is_same_v<T, bfloat16>) {
        return std::bit_cast<V>(u << 16);
      } else {
        static_assert(std::is_same_v<T, float16>, "unsupported KV storage type");
        return from_half(u);
      }
    } else {
      std::uint8_t b8[kLanes];
      std::memcpy(b8, p, sizeof(b8));
      const VU b = {b8[0], b8[1], b8[2], b8[3]};
      if constexpr (std::is_same_v<T, float8_e5m2>) {
        return from_half(b << 8);  // e5m2 is the top byte of an fp16 with the same bias
      } else {
        static_assert(std::is_same_v<T, float8_e4m3>, "unsupported KV storage type");
        // fp16 bits mag << 7 (sign at 15) are value / 256 exactly, subnormals included;
        // magnitude 0x7F is the format's only NaN.
        const VU mag = b & 0x7Fu;
        const V v = from_half((mag << 7) | ((b & 0x80u) << 8)) * set1(256.0f);
        const VI nan = mag == VU{0x7Fu, 0x7Fu, 0x7Fu, 0x7Fu};
        const VI qnan = std::bit_cast<VI>(set1(std::numeric_limits<float>::quiet_NaN()));
        const VI sign = std::bit_cast<VI>((b & 0x80u) << 24);
        return std::bit_cast<V>((std::bit_cast<VI>(v) & ~nan) | ((qnan | sign) & nan));
      }
    }
  }

  /// fp16 bits (in the low 16 bits of each lane) -> floats, like F16C's vcvtph2ps, with no
  /// denormal float operand (each would cost a microcode assist on x86): the bits are moved into
  /// place and rebiased as integers; subnormals get the smallest normal's exponent and lose it
  /// again by one exact float subtraction (F. Giesen's half_to_float); Inf/NaN get the top
  /// exponent (NaN quiet, payload kept).
  static V from_half(VU h) noexcept {
    const VU sign = (h & 0x8000u) << 16;
    const VU em = h & 0x7FFFu;
    VU o = (em << 13) + (static_cast<std::uint32_t>(127 - 15) << 23);
    const VU exp = em & 0x7C00u;
    const VU top = VU{0x7C00u, 0x7C00u, 0x7C00u, 0x7C00u};
    const VU zero = VU{0u, 0u, 0u, 0u};
    const VI special = exp == top;
    const VI sub = exp == zero;
    const VI nan = special & (em > top);
    o += std::bit_cast<VU>(special & static_cast<std::int32_t>(112u << 23)) +
         std::bit_cast<VU>(sub & (1 << 23));
    o |= std::bit_cast<VU>(nan & 0x00400000);
    const V bias = std::bit_cast<V>(sub & static_cast<std::int32_t>(113u << 23));  // 2^-14 or 0
    return std::bit_cast<V>(std::bit_cast<VU>(std::bit_cast<V>(o) - bias) | sign);
  }
};

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail
