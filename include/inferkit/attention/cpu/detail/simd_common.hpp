// SPDX-License-Identifier: Apache-2.0
// What every SIMD policy of the CPU attention kernels shares (cpu/detail/simd.hpp lists them):
// the 16-token tile, the KV storage types the kernels read, how many stored elements a run of
// dims takes, and the scalar conversion of one stored element that every bulk conversion must
// match bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <type_traits>

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// Tokens per tile of the kernels: the scores of one row over one tile are 16 floats (one
/// AVX-512 register, two AVX2 ones, four NEON ones), and visibility masks are 16 bits.
inline constexpr int kTileTokens = 16;

/// KV storage types the CPU attention kernels read; `std::uint8_t` is packed int4 (two unsigned
/// nibbles a byte, the even dim in the low one; kv/paged_kv_view.hpp).
template <class T>
inline constexpr bool is_cpu_kv_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16> ||
    std::is_same_v<T, float8_e4m3> || std::is_same_v<T, float8_e5m2> ||
    std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>;

/// Whether `T` is packed int4 storage (two dims a byte).
template <class T>
inline constexpr bool is_packed_int4_v = std::is_same_v<std::remove_const_t<T>, std::uint8_t>;

/// Stored elements that `dims` consecutive dims of a row take: dims, or dims / 2 for packed int4
/// (the kernels only ask for even counts there: int4 head_dim is even, and so is every lane
/// count).
template <class T>
constexpr std::ptrdiff_t kv_elements(std::ptrdiff_t dims) noexcept {
  return is_packed_int4_v<T> ? dims / 2 : dims;
}

/// One stored element -> float (the scalar definition every bulk conversion must match).
template <class T>
inline float kv_to_float(T x) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, std::int8_t>) {
    return static_cast<float>(x);
  } else {
    return to_float(x);
  }
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail
