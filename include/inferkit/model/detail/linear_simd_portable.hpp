// SPDX-License-Identifier: Apache-2.0
// Internal: the portable path of the linear-layer kernels (namespace detail::linear_baseline),
// plain C++ on 16-float vectors that the compiler lowers to whatever SIMD the TU targets (GCC/
// clang generic vectors; elsewhere an array it may vectorize); the path of CPUs without AVX2 and
// of other architectures, and INFERKIT_CPU_ISA=baseline. Its multiply-add is `a * b + c`, which
// the compiler fuses or not (per build, the same way in every kernel of this path, so the path
// stays batch-invariant).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/config.hpp>
#include <inferkit/model/detail/linear_job.hpp>
#include <inferkit/model/ggml_type.hpp>
#include <type_traits>

// A 64-byte generic vector passed by value in a TU without AVX-512: g++ notes the ABI change
// (-Wpsabi); these functions are inline and never cross a TU boundary by value.
#if INFERKIT_COMPILER_GCC
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {
namespace linear_baseline {

/// The portable vector policy of linear_kernels-inl.hpp.
struct Simd {
  /// 16 lanes.
  struct V {
#if INFERKIT_HAS_VECTOR_EXT
    float __attribute__((vector_size(64))) v;  ///< lane i is v[i]
#else
    float v[16];  ///< lane i
#endif
  };
  /// Small tiles: an SSE2 baseline has 16 registers of 4 floats, one V each 4 of them.
  static constexpr int kFusedRows = 4;
  static constexpr int kTileRows = 2;
  static constexpr int kTileTokens = 2;
  /// hsum16 is 16 hsums here: no padding of 8 sums to 16.
  static constexpr bool kBatchedHsum = false;
  /// Q4 blocks decode through nibbles (no 16-entry permute in one register).
  static constexpr bool kQ4Lookup = false;

  static V zero() noexcept { return set1(0.0f); }
  static V set1(float a) noexcept {
    V r;
#if INFERKIT_HAS_VECTOR_EXT
    r.v = decltype(r.v){a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a};
#else
    for (float& e : r.v) e = a;
#endif
    return r;
  }
  static V load(const float* p) noexcept {
    V r;
    std::memcpy(&r.v, p, sizeof(r.v));
    return r;
  }
  static V load_partial(const float* p, int n) noexcept {
    V r = zero();
    std::memcpy(&r.v, p, static_cast<std::size_t>(n) * sizeof(float));
    return r;
  }
  static void store(float* p, const V& a) noexcept { std::memcpy(p, &a.v, sizeof(a.v)); }
#if INFERKIT_HAS_VECTOR_EXT
  static V fma(const V& a, const V& b, const V& c) noexcept { return {a.v * b.v + c.v}; }
  static V mul(const V& a, const V& b) noexcept { return {a.v * b.v}; }
  static V add(const V& a, const V& b) noexcept { return {a.v + b.v}; }
#else
  static V fma(const V& a, const V& b, V c) noexcept {
    for (int i = 0; i < 16; ++i) c.v[i] = a.v[i] * b.v[i] + c.v[i];
    return c;
  }
  static V mul(V a, const V& b) noexcept {
    for (int i = 0; i < 16; ++i) a.v[i] *= b.v[i];
    return a;
  }
  static V add(V a, const V& b) noexcept {
    for (int i = 0; i < 16; ++i) a.v[i] += b.v[i];
    return a;
  }
#endif
  /// Lanes (i, i+8), then (i, i+4), (i, i+2), (i, i+1): the order every path uses.
  static float hsum(V a) noexcept {
    for (int width = 8; width >= 1; width /= 2) {
      for (int i = 0; i < width; ++i) a.v[i] += a.v[i + width];
    }
    return a.v[0];
  }
  static void hsum16(const V* a, float* out) noexcept {
    for (int k = 0; k < 16; ++k) out[k] = hsum(a[k]);
  }
  /// fp16 bits to float, exactly as to_float(float16) (NaNs quieted), without its branches:
  /// the exponent and mantissa moved into place read as a float 2^-112 times the value, normal
  /// or subnormal, and one multiplication rescales it; Inf/NaN are patched by a select.
  static float half_bits(std::uint16_t h) noexcept {
    const std::uint32_t magnitude = h & 0x7FFFu;
    const float scaled = std::bit_cast<float>(magnitude << 13) * 0x1p112f;
    const std::uint32_t special =
        0x7F800000u | (magnitude << 13) | (magnitude > 0x7C00u ? 0x00400000u : 0u);
    const std::uint32_t bits =
        magnitude >= 0x7C00u ? special : std::bit_cast<std::uint32_t>(scaled);
    return std::bit_cast<float>(bits | (static_cast<std::uint32_t>(h & 0x8000u) << 16));
  }
  static float half(const std::byte* p) noexcept {
    std::uint16_t bits = 0;
    std::memcpy(&bits, p, sizeof(bits));
    return half_bits(bits);
  }
  static void halfs_to_floats(const std::uint16_t* in, float* out, int count) noexcept {
    for (int i = 0; i < count; ++i) out[i] = half_bits(in[i]);
  }
  /// 16 floats from an array (element stores into a generic vector would go lane by lane).
  static V from(const float (&f)[16]) noexcept {
    V r;
    std::memcpy(&r.v, f, sizeof(r.v));
    return r;
  }
#if INFERKIT_HAS_VECTOR_EXT
  using Bytes = std::uint8_t __attribute__((vector_size(16)));
  using SignedBytes = std::int8_t __attribute__((vector_size(16)));
  static void nibbles(const std::byte* p, V& lo, V& hi) noexcept {
    Bytes q;
    std::memcpy(&q, p, sizeof(q));
    lo.v = __builtin_convertvector(q & 15, decltype(lo.v));
    hi.v = __builtin_convertvector(q >> 4, decltype(hi.v));
  }
  static V int8s(const std::byte* p) noexcept {
    SignedBytes q;
    std::memcpy(&q, p, sizeof(q));
    V r;
    r.v = __builtin_convertvector(q, decltype(r.v));
    return r;
  }
#else
  static void nibbles(const std::byte* p, V& lo, V& hi) noexcept {
    float l[16], h[16];
    for (int i = 0; i < 16; ++i) {
      const auto b = static_cast<unsigned>(p[i]);
      l[i] = static_cast<float>(b & 15u);
      h[i] = static_cast<float>(b >> 4);
    }
    lo = from(l);
    hi = from(h);
  }
  static V int8s(const std::byte* p) noexcept {
    float f[16];
    for (int i = 0; i < 16; ++i) f[i] = static_cast<float>(static_cast<std::int8_t>(p[i]));
    return from(f);
  }
#endif
  static V halfs_partial(const std::byte* p, int n) noexcept {
    float f[16] = {};
    for (std::ptrdiff_t i = 0; i < n; ++i) f[i] = half(p + 2 * i);
    return from(f);
  }
  static V halfs(const std::byte* p) noexcept { return halfs_partial(p, 16); }
  static V bhalfs_partial(const std::byte* p, int n) noexcept {
    float f[16] = {};
    for (std::ptrdiff_t i = 0; i < n; ++i) {
      std::uint16_t bits = 0;
      std::memcpy(&bits, p + 2 * i, sizeof(bits));
      f[i] = std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
    }
    return from(f);
  }
  static V bhalfs(const std::byte* p) noexcept { return bhalfs_partial(p, 16); }
  static V floats_partial(const std::byte* p, int n) noexcept {
    V r = zero();
    std::memcpy(&r.v, p, static_cast<std::size_t>(n) * sizeof(float));
    return r;
  }
  static V floats(const std::byte* p) noexcept { return floats_partial(p, 16); }
  /// Hardware prefetchers follow the row streams; portable code has no prefetch instruction.
  static void prefetch(const std::byte*) noexcept {}
};

}  // namespace linear_baseline
}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

#define INFERKIT_LINEAR_ISA linear_baseline
#include <inferkit/model/detail/linear_kernels-inl.hpp>

#if INFERKIT_COMPILER_GCC
#  pragma GCC diagnostic pop
#endif
