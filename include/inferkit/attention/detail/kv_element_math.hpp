// SPDX-License-Identifier: Apache-2.0
// How GPU attention kernels read stored K/V, as plain integer and float math tested on the CPU:
// fp8 codes widened to fp16 bit patterns by shifts (e5m2 is the top byte of an fp16; e4m3 lands
// scaled by 2^-8, which `kDequantFold` folds back into the per-page scale, so no per-element
// multiply remains), packed int4 codes taken from a word by position, the per-page scale of a
// (block, head), the address of a token's row in the pages, and the XOR swizzle that makes
// tensor-core tile loads bank-conflict free.
#pragma once

#include <cstdint>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <type_traits>

namespace inferkit::detail {

/// The fp16 bits of an e4m3 code, whose value is the e4m3 value times 2^-8 (exact, subnormals
/// included: e4m3's bias 7 against fp16's 15). NaN codes (0x7F, 0xFF) map to finite values:
/// kernels never read a slot that does not hold a token.
INFERKIT_HOST_DEVICE constexpr std::uint16_t e4m3_to_half_bits(std::uint8_t code) noexcept {
  return static_cast<std::uint16_t>(((code & 0x80u) << 8) | ((code & 0x7Fu) << 7));
}
/// The fp16 bits of an e5m2 code: the same value (e5m2 is fp16 with 8 fewer mantissa bits).
INFERKIT_HOST_DEVICE constexpr std::uint16_t e5m2_to_half_bits(std::uint8_t code) noexcept {
  return static_cast<std::uint16_t>(code << 8);
}
/// Two fp8 codes (low byte first) to two fp16 bit patterns (low half first) in one word.
template <class F8>
INFERKIT_HOST_DEVICE constexpr std::uint32_t fp8x2_to_half2_bits(std::uint32_t two) noexcept {
  if constexpr (std::is_same_v<F8, float8_e4m3>) {
    return ((two & 0x80u) << 8) | ((two & 0x7Fu) << 7) | ((two & 0x8000u) << 16) |
           ((two & 0x7F00u) << 15);
  } else {
    static_assert(std::is_same_v<F8, float8_e5m2>, "fp8x2_to_half2_bits: an fp8 type");
    return ((two & 0xFFu) << 8) | ((two & 0xFF00u) << 16);
  }
}

/// Element `i` (0..7) of a little-endian 32-bit word of packed int4 KV (two dims a byte, the
/// even dim in the low nibble): bits 4i..4i+3, an unsigned code 0..15 (value = (code - zero) *
/// scale, with the token's zero point and scale).
INFERKIT_HOST_DEVICE constexpr std::uint32_t int4_nibble(std::uint32_t word, int i) noexcept {
  return (word >> (4 * i)) & 0xFu;
}

/// The factor between a stored element as the kernels widen it and its value before the
/// page's scale: 2^8 for e4m3 (see e4m3_to_half_bits), 1 otherwise.
template <class KV>
inline constexpr float kDequantFold = std::is_same_v<KV, float8_e4m3> ? 256.0f : 1.0f;

/// The factor a (block, head) page contributes to its dot products or values: its fp8 scale
/// (1 without scales) times `kDequantFold`.
template <class KV>
INFERKIT_HOST_DEVICE constexpr float page_scale(const float* scales, std::int32_t block,
                                                std::int32_t num_kv_heads,
                                                std::int32_t head) noexcept {
  const float s = scales != nullptr ? scales[std::int64_t{block} * num_kv_heads + head] : 1.0f;
  return s * kDequantFold<KV>;
}

/// Where token `pos` of sequence `seq` sits: its physical block and the element offset of its
/// row of head `head` in `kv.k` / `kv.v`.
struct TokenAddress {
  std::int32_t block = 0;
  std::int64_t offset = 0;
};
template <class T>
INFERKIT_HOST_DEVICE constexpr TokenAddress token_address(const PagedKVView<T>& kv,
                                                          const PageTableView& pages,
                                                          std::int32_t seq, std::int32_t head,
                                                          std::int64_t pos) noexcept {
  const auto page = static_cast<std::int32_t>(pos / kv.block_size);
  const auto slot = static_cast<std::int32_t>(pos - std::int64_t{page} * kv.block_size);
  const std::int32_t block = pages.indices[pages.page_begin(seq) + page];
  return {block, kv.offset(block, head, slot)};
}

/// The 16-byte chunk that holds chunk `chunk` of row `row` in a swizzled shared-memory tile
/// whose rows are `chunks_per_row` (a multiple of 8) chunks: chunk XOR (row mod 8), so that the
/// 8 rows an ldmatrix phase reads at one column fall in 8 different bank groups.
INFERKIT_HOST_DEVICE constexpr std::int32_t swizzled_chunk(std::int32_t row,
                                                           std::int32_t chunk) noexcept {
  return chunk ^ (row & 7);
}

}  // namespace inferkit::detail
