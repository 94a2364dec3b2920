// SPDX-License-Identifier: Apache-2.0
// Internal: bulk float -> storage-element conversion for PagedKVCache's append (and the widening
// of 16-bit source elements to float before it), through the row kernels of the process's
// instruction-set path (kv/detail/kv_row_kernels.hpp). The scalar storage types
// (core/float16.hpp, bfloat16.hpp, float8.hpp) define the rounding; the kernels give the same
// bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/kv/detail/kv_row_kernels.hpp>
#include <type_traits>

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// `out[i] = T(in[i] * inv)` for i < n with the kernels `k` (inv is 1 for unquantized storage;
/// fp8 passes 1 / its block scale). T is float, float16, bfloat16, float8_e4m3 or float8_e5m2.
template <class T>
inline void convert_from_float(const KvRowKernels& k, const float* in, float inv, T* out,
                               std::size_t n) noexcept {
  static_assert(sizeof(T) <= 2 || std::is_same_v<T, float>);
  if constexpr (std::is_same_v<T, float>) {
    if (n != 0) std::memcpy(out, in, n * sizeof(float));
  } else if constexpr (std::is_same_v<T, float16>) {
    k.to_float16(in, inv, reinterpret_cast<std::uint16_t*>(out), n);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    k.to_bfloat16(in, reinterpret_cast<std::uint16_t*>(out), n);
  } else if constexpr (std::is_same_v<T, float8_e4m3>) {
    k.to_e4m3(in, inv, reinterpret_cast<std::uint8_t*>(out), n);
  } else {
    static_assert(std::is_same_v<T, float8_e5m2>, "unsupported KV storage type");
    k.to_e5m2(in, inv, reinterpret_cast<std::uint8_t*>(out), n);
  }
}

/// Re-expresses fp8 codes q[0, n) stored with `old_scale` under `new_scale` (powers of two, new
/// >= old, or old == 0 when the codes are all zero): q = F8(float(q) * old / new).
template <class F8>
inline void rescale_fp8_codes(const KvRowKernels& k, F8* q, std::size_t n, float old_scale,
                              float new_scale) noexcept {
  if (old_scale == 0.0f || old_scale == new_scale) return;
  auto* bits = reinterpret_cast<std::uint8_t*>(q);
  if constexpr (std::is_same_v<F8, float8_e4m3>) {
    k.rescale_e4m3(bits, old_scale / new_scale, n);
  } else {
    static_assert(std::is_same_v<F8, float8_e5m2>, "fp8 storage types only");
    k.rescale_e5m2(bits, old_scale / new_scale, n);
  }
}

/// `out[i] = float(in[i])` for i < n with the kernels `k` (exact): In is float (a copy), float16
/// or bfloat16 (the source elements of a 16-bit append).
template <class In>
inline void convert_to_float(const KvRowKernels& k, const In* in, float* out,
                             std::size_t n) noexcept {
  if constexpr (std::is_same_v<In, float>) {
    if (n != 0) std::memcpy(out, in, n * sizeof(float));
  } else if constexpr (std::is_same_v<In, float16>) {
    k.from_float16(reinterpret_cast<const std::uint16_t*>(in), out, n);
  } else {
    static_assert(std::is_same_v<In, bfloat16>, "append reads float, float16 or bfloat16");
    k.from_bfloat16(reinterpret_cast<const std::uint16_t*>(in), out, n);
  }
}

/// `out[i] = T(in[i])` for i < n, on the process's path.
template <class T>
inline void convert_from_float(const float* in, T* out, std::size_t n) noexcept {
  convert_from_float(kv_row_kernels(), in, 1.0f, out, n);
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail
