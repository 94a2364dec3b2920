// SPDX-License-Identifier: Apache-2.0
// Internal: the portable path of the linear-layer kernels (namespace detail::linear_baseline),
// plain C++ on arrays of 16 floats that the compiler vectorizes for whatever the TU targets; the
// path of CPUs without AVX2 and of other architectures, and INFERKIT_CPU_ISA=baseline. Its
// multiply-add is `a * b + c`, which the compiler fuses or not (per build, the same way in
// every kernel of this path, so the path stays batch-invariant).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/config.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/model/detail/linear_job.hpp>
#include <inferkit/model/ggml_type.hpp>
#include <type_traits>

namespace inferkit::detail::linear_baseline {

/// The portable vector policy of linear_kernels-inl.hpp.
struct Simd {
  /// 16 lanes.
  struct V {
    float v[16];  ///< lane i
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
    for (float& e : r.v) e = a;
    return r;
  }
  static V load(const float* p) noexcept {
    V r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static V load_partial(const float* p, int n) noexcept {
    V r = zero();
    std::memcpy(r.v, p, static_cast<std::size_t>(n) * sizeof(float));
    return r;
  }
  static void store(float* p, const V& a) noexcept { std::memcpy(p, a.v, sizeof(a.v)); }
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
  static float half(const std::byte* p) noexcept {
    std::uint16_t bits = 0;
    std::memcpy(&bits, p, sizeof(bits));
    return to_float(float16::from_bits(bits));
  }
  static void halfs_to_floats(const std::uint16_t* in, float* out, int count) noexcept {
    for (int i = 0; i < count; ++i) out[i] = to_float(float16::from_bits(in[i]));
  }
  static void nibbles(const std::byte* p, V& lo, V& hi) noexcept {
    for (int i = 0; i < 16; ++i) {
      const auto b = static_cast<unsigned>(p[i]);
      lo.v[i] = static_cast<float>(b & 15u);
      hi.v[i] = static_cast<float>(b >> 4);
    }
  }
  static V int8s(const std::byte* p) noexcept {
    V r;
    for (int i = 0; i < 16; ++i) r.v[i] = static_cast<float>(static_cast<std::int8_t>(p[i]));
    return r;
  }
  static V halfs_partial(const std::byte* p, int n) noexcept {
    V r = zero();
    for (int i = 0; i < n; ++i) r.v[i] = half(p + 2 * i);
    return r;
  }
  static V halfs(const std::byte* p) noexcept { return halfs_partial(p, 16); }
  static V bhalfs_partial(const std::byte* p, int n) noexcept {
    V r = zero();
    for (int i = 0; i < n; ++i) {
      std::uint16_t bits = 0;
      std::memcpy(&bits, p + 2 * i, sizeof(bits));
      r.v[i] = std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
    }
    return r;
  }
  static V bhalfs(const std::byte* p) noexcept { return bhalfs_partial(p, 16); }
  static V floats_partial(const std::byte* p, int n) noexcept {
    V r = zero();
    std::memcpy(r.v, p, static_cast<std::size_t>(n) * sizeof(float));
    return r;
  }
  static V floats(const std::byte* p) noexcept { return floats_partial(p, 16); }
  /// Hardware prefetchers follow the row streams; portable code has no prefetch instruction.
  static void prefetch(const std::byte*) noexcept {}
};

}  // namespace inferkit::detail::linear_baseline

#define INFERKIT_LINEAR_ISA linear_baseline
#include <inferkit/model/detail/linear_kernels-inl.hpp>
