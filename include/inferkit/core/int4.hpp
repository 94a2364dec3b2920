// SPDX-License-Identifier: Apache-2.0
// Packed 4-bit integers: two values per byte, the even element in the low nibble (the layout of
// GPTQ/AWQ weights and int4 KV caches). Helpers to pack, unpack and sign-extend nibbles; the
// scale/zero-point quantization that uses them lives in kv/.
// Threads: constexpr pure functions; safe from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <inferkit/core/config.hpp>

namespace inferkit {

/// One byte holding `lo` (element 2i, bits 0-3) and `hi` (element 2i+1, bits 4-7). Both should
/// be in [0, 15]; only their low 4 bits are used.
INFERKIT_HOST_DEVICE constexpr std::uint8_t pack_nibbles(std::uint8_t lo,
                                                         std::uint8_t hi) noexcept {
  return static_cast<std::uint8_t>((lo & 0x0Fu) | ((hi & 0x0Fu) << 4));
}

/// The even element of a packed byte, in [0, 15].
INFERKIT_HOST_DEVICE constexpr std::uint8_t low_nibble(std::uint8_t byte) noexcept {
  return static_cast<std::uint8_t>(byte & 0x0Fu);
}

/// The odd element of a packed byte, in [0, 15].
INFERKIT_HOST_DEVICE constexpr std::uint8_t high_nibble(std::uint8_t byte) noexcept {
  return static_cast<std::uint8_t>(byte >> 4);
}

/// A nibble read as two's-complement int4: [0, 7] -> [0, 7], [8, 15] -> [-8, -1]. Bits above
/// the low 4 are ignored.
INFERKIT_HOST_DEVICE constexpr std::int8_t sign_extend_int4(std::uint8_t nibble) noexcept {
  return static_cast<std::int8_t>(static_cast<int>((nibble & 0x0Fu) ^ 0x08u) - 8);
}

/// The two's-complement nibble of a signed int4 `value` in [-8, 7] (inverse of
/// `sign_extend_int4`); only the low 4 bits of `value` are used.
INFERKIT_HOST_DEVICE constexpr std::uint8_t int4_to_nibble(std::int8_t value) noexcept {
  return static_cast<std::uint8_t>(static_cast<unsigned>(value) & 0x0Fu);
}

/// Bytes that `count` packed 4-bit elements occupy: ceil(count / 2).
INFERKIT_HOST_DEVICE constexpr std::size_t packed_int4_bytes(std::size_t count) noexcept {
  return count / 2 + count % 2;
}

}  // namespace inferkit
