// SPDX-License-Identifier: Apache-2.0
// How the CPU attention kernels address one KV head of one sequence in paged KV: the page
// table, strides, quantization scales and int4 zero points (KvHeadSource), and the row
// addresses of a 16-token tile gathered along the page table (TileRows).
#pragma once

#include <algorithm>
#include <cstdint>
#include <inferkit/attention/cpu/detail/simd_common.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <type_traits>

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// How stored K/V values are scaled: not at all, one scale per (block, head) (fp8), or one per
/// (block, head, slot) (int8, and int4 with a zero point per slot as well).
enum class KvScaleMode : std::uint8_t { kNone, kPerBlockHead, kPerToken };

/// One KV head of one sequence: the pages it owns and how to address a token in them.
template <class KV>
struct KvHeadSource {
  const KV* k = nullptr;  ///< view.k + head * head_stride (add block * block_stride)
  const KV* v = nullptr;
  const float* k_scale = nullptr;  ///< nullptr: scale 1
  const float* v_scale = nullptr;
  const float* k_zero = nullptr;  ///< packed int4: value = (nibble - zero) * scale; else nullptr
  const float* v_zero = nullptr;
  KvScaleMode scale_mode = KvScaleMode::kNone;
  const std::int32_t* pages = nullptr;  ///< the sequence's physical block ids, logical order
  std::int64_t block_stride = 0;        ///< stored elements (bytes for packed int4)
  std::int64_t token_stride = 0;        ///< stored elements (bytes for packed int4)
  std::int32_t block_size = 0;
  std::int32_t num_kv_heads = 0;
  std::int32_t head = 0;

  [[nodiscard]] std::int64_t scale_index(std::int32_t block, std::int32_t slot) const noexcept {
    return scale_mode == KvScaleMode::kPerToken
               ? (std::int64_t{block} * num_kv_heads + head) * block_size + slot
               : std::int64_t{block} * num_kv_heads + head;
  }
};

/// The scale mode of a storage type: per token for int8 and int4, per (block, head) for fp8,
/// none else.
template <class KV>
constexpr KvScaleMode scale_mode_of() noexcept {
  using Stored = std::remove_const_t<KV>;
  if constexpr (std::is_same_v<Stored, std::int8_t> || is_packed_int4_v<Stored>) {
    return KvScaleMode::kPerToken;
  } else if constexpr (std::is_same_v<Stored, float8_e4m3> || std::is_same_v<Stored, float8_e5m2>) {
    return KvScaleMode::kPerBlockHead;
  } else {
    return KvScaleMode::kNone;
  }
}

/// KV head `head` of the sequence whose physical block ids (logical order) start at `pages`.
template <class KV>
KvHeadSource<KV> make_kv_head_source(const PagedKVView<KV>& kv, const std::int32_t* pages,
                                     std::int32_t head) noexcept {
  KvHeadSource<KV> src;
  src.k = kv.k + head * kv.head_stride();
  src.v = kv.v + head * kv.head_stride();
  src.k_scale = kv.k_scale;
  src.v_scale = kv.v_scale;
  src.k_zero = kv.k_zero;
  src.v_zero = kv.v_zero;
  src.scale_mode = scale_mode_of<KV>();
  src.pages = pages;
  src.block_stride = kv.block_stride();
  src.token_stride = kv.token_stride();
  src.block_size = kv.block_size;
  src.num_kv_heads = kv.num_kv_heads;
  src.head = head;
  return src;
}

/// Addresses (and quantization scales, and int4 zero points) of the K/V rows of tokens [tok0,
/// tok0 + count) of `src`, walking the page table; lanes >= count are never dereferenced, and
/// get scale 1 (zero point 0) when the source is scaled (scales are read only then).
template <class KV>
struct TileRows {
  /// Packed int4: value = (nibble - zero) * scale, with a zero point per token as well.
  static constexpr bool kZeroPoints = is_packed_int4_v<KV>;

  const KV* k[kTileTokens];
  const KV* v[kTileTokens];
  alignas(64) float k_scale[kTileTokens];
  alignas(64) float v_scale[kTileTokens];
  alignas(64) float k_zero[kZeroPoints ? kTileTokens : 1];
  alignas(64) float v_zero[kZeroPoints ? kTileTokens : 1];

  void gather(const KvHeadSource<KV>& src, std::int64_t tok0, std::int32_t count) noexcept {
    std::int64_t page = tok0 / src.block_size;
    auto slot = static_cast<std::int32_t>(tok0 - page * src.block_size);
    if (slot + count <= src.block_size) {
      // The whole tile lies in one page: rows are token_stride apart, and its scales are one
      // (block, head) scale or count consecutive per-token ones.
      const std::int32_t block = src.pages[page];
      const std::int64_t off = block * src.block_stride + slot * src.token_stride;
      for (std::int32_t j = 0; j < count; ++j) {
        k[j] = src.k + off + j * src.token_stride;
        v[j] = src.v + off + j * src.token_stride;
      }
      if (src.scale_mode != KvScaleMode::kNone) {
        const std::int64_t si = src.scale_index(block, slot);
        const bool per_token = src.scale_mode == KvScaleMode::kPerToken;
        copy_scales(src.k_scale, si, per_token, count, k_scale);
        copy_scales(src.v_scale, si, per_token, count, v_scale);
        if constexpr (kZeroPoints) {
          std::copy_n(src.k_zero + si, count, k_zero);
          std::copy_n(src.v_zero + si, count, v_zero);
        }
        pad_scales(count);
      }
      return;
    }
    for (std::int32_t j = 0; j < count; ++j) {
      const std::int32_t block = src.pages[page];
      const std::int64_t off = block * src.block_stride + slot * src.token_stride;
      k[j] = src.k + off;
      v[j] = src.v + off;
      if (src.scale_mode != KvScaleMode::kNone) {
        const std::int64_t si = src.scale_index(block, slot);
        k_scale[j] = src.k_scale != nullptr ? src.k_scale[si] : 1.0f;
        v_scale[j] = src.v_scale != nullptr ? src.v_scale[si] : 1.0f;
        if constexpr (kZeroPoints) {
          k_zero[j] = src.k_zero[si];
          v_zero[j] = src.v_zero[si];
        }
      }
      if (++slot == src.block_size) {
        slot = 0;
        ++page;
      }
    }
    pad_scales(count);
  }

 private:
  /// out[j] = scales[first + j] (per_token) or scales[first], for j < count; 1 where there are
  /// no scales.
  static void copy_scales(const float* scales, std::int64_t first, bool per_token,
                          std::int32_t count, float* out) noexcept {
    if (scales == nullptr) {
      std::fill_n(out, count, 1.0f);
    } else if (!per_token) {
      std::fill_n(out, count, scales[first]);
    } else {
      std::copy_n(scales + first, count, out);
    }
  }

  void pad_scales(std::int32_t count) noexcept {
    std::fill(k_scale + count, k_scale + kTileTokens, 1.0f);
    std::fill(v_scale + count, v_scale + kTileTokens, 1.0f);
    if constexpr (kZeroPoints) {
      std::fill(k_zero + count, k_zero + kTileTokens, 0.0f);
      std::fill(v_zero + count, v_zero + kTileTokens, 0.0f);
    }
  }
};

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail
