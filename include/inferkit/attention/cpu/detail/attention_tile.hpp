// SPDX-License-Identifier: Apache-2.0
// The CPU attention inner kernel: a block of query rows (the query heads of one GQA group, times
// a few query tokens) runs an online softmax over a range of one sequence's paged K/V for one KV
// head. This header holds what every instruction set shares (the row block, the per-thread
// scratch, the visibility mask) and compiles the kernel itself, attention_tile-inl.hpp, once per
// path: detail::avx512, detail::avx2 and detail::baseline on x86 (each in its target region),
// detail::neon and detail::baseline on aarch64. Each namespace's IsaKernels is the entry.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/attention/cpu/detail/kv_head_source.hpp>
#include <inferkit/attention/cpu/detail/simd.hpp>
#include <inferkit/attention/cpu/detail/spread_prefetcher.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/detail/aligned_allocator.hpp>
#include <inferkit/core/error.hpp>
#include <limits>
#include <type_traits>
#include <vector>

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// A block of query rows: row r is query token t = r / group, group member g = r % group. Row
/// (t, g) reads q + t * q_token_stride + g * q_head_stride, and writes out + t *
/// out_token_stride + g * head_dim (lse likewise, packed).
struct QueryRowBlock {
  std::int32_t num_tokens = 0;
  std::int32_t group = 1;
  const float* q = nullptr;
  std::int64_t q_token_stride = 0;
  std::int64_t q_head_stride = 0;      ///< elements between the group's heads in q; 0: head_dim
  std::int64_t first_position = 0;     ///< position of token 0; token t is at first_position + t
  const std::uint8_t* mask = nullptr;  ///< token t's row: mask + t * mask_stride ([kv_len]); opt.
  std::int64_t mask_stride = 0;
  float* out = nullptr;
  std::int64_t out_token_stride = 0;
  float* lse = nullptr;  ///< optional; row (t, g) at lse + t * lse_token_stride + g
  std::int64_t lse_token_stride = 0;

  [[nodiscard]] std::int32_t num_rows() const noexcept { return num_tokens * group; }
};

/// Largest row count that takes the direct (register) path; see attend_rows.
inline constexpr std::int32_t kMaxDirectRows = 8;

/// The rows the direct path computes for a block of `rows` (<= kMaxDirectRows): its register
/// tiles exist for 1, 2, 4 and 8 rows, and other counts run as the next one up with zero queries
/// in the extra rows (GQA 3, SmolLM2's, runs as 4: 4/3 of the FMAs, measured faster than the
/// scratch path it took before); 0 for more rows (the scratch path).
constexpr std::int32_t direct_path_rows(std::int32_t rows) noexcept {
  if (rows <= 2) return rows;
  if (rows <= 4) return 4;
  return rows <= kMaxDirectRows ? kMaxDirectRows : 0;
}

/// Row stride of the fp32 scratch rows (q, o, K/V tiles): head_dim rounded up to a whole tile of
/// 16, which every policy's lane count divides. The same for every instruction set.
constexpr std::int32_t padded_head_dim(std::int32_t head_dim) noexcept {
  return (head_dim + kTileTokens - 1) / kTileTokens * kTileTokens;
}

/// Index into a scratch vector, from an offset computed in 64 bits.
constexpr std::size_t scratch_index(std::int64_t i) noexcept { return static_cast<std::size_t>(i); }

/// Per-thread scratch, sized for `rows` rows of `padded_dim` floats; reused across work items.
/// 64-byte aligned, so that no vector load or store of a row straddles two cache lines: with
/// malloc's 16-byte alignment, AVX-512 GQA-8 decode reached 0.50-0.54 of the streaming read
/// instead of 0.60-0.62 (bench_attention).
struct AttentionScratch {
  using Floats = std::vector<float, AlignedAllocator<float, 64>>;
  Floats q, o, p, acc, k_tile, v_tile, row_max, row_sum, alpha;
  std::vector<std::uint32_t> keep;  ///< scratch path: per row, the current tile's keys it sees
  bool rescale = false;  ///< some row's alpha != 1 in the current tile (o must be scaled)

  void reserve(std::int32_t rows, std::int32_t padded_dim) {
    // Blocks of up to `rows` rows, each computed as direct_path_rows() of them where that is more.
    const auto r = static_cast<std::size_t>(std::max(rows, direct_path_rows(rows)));
    const auto d = static_cast<std::size_t>(padded_dim);
    q.resize(r * d);
    o.resize(r * d);
    p.resize(r * kTileTokens);
    row_max.resize(r);
    row_sum.resize(r * kTileTokens);  // lane-partial sums: reduced once, at the end
    alpha.resize(r);
    keep.resize(r);
    // Direct path: lane-partial dot products of up to kMaxDirectRows rows ([row][token][lane],
    // at most 16 lanes).
    acc.resize(std::min(r, static_cast<std::size_t>(kMaxDirectRows)) * kTileTokens * kTileTokens);
    // Scratch path: fp32 tiles, zeroed so that token rows never written hold finite values.
    k_tile.assign(kTileTokens * d, 0.0f);
    v_tile.assign(kTileTokens * d, 0.0f);
  }
};

/// Bits 0 .. count - 1: every key of a tile of `count` (<= 16) keys.
constexpr std::uint32_t all_keys(std::int32_t count) noexcept {
  return count >= kTileTokens ? 0xFFFFu : (1u << count) - 1u;
}

/// Whether bit j (a key of the tile) is set in `keep`.
constexpr bool sees(std::uint32_t keep, std::int32_t j) noexcept { return ((keep >> j) & 1u) != 0; }

/// Bit j set when key tok0 + j (j < count) is visible to the query at `position`.
inline std::uint32_t visible_lanes(const AttentionParams& params, std::int64_t position,
                                   std::int64_t tok0, std::int32_t count,
                                   const std::uint8_t* mask_row) noexcept {
  std::uint32_t keep = all_keys(count);
  if (params.causal) {
    const std::int64_t n = std::clamp<std::int64_t>(position - tok0 + 1, 0, kTileTokens);
    keep &= all_keys(static_cast<std::int32_t>(n));
  }
  if (params.window_left >= 0) {
    const std::int64_t first =
        std::clamp<std::int64_t>(position - params.window_left - tok0, 0, kTileTokens);
    keep &= first >= kTileTokens ? 0u : ~((1u << first) - 1u);
  }
  if (mask_row != nullptr && keep != 0) {
    for (std::int32_t j = 0; j < count; ++j) {
      if (mask_row[tok0 + j] == 0) keep &= ~(1u << j);
    }
  }
  return keep;
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

// The kernel, once per path. INFERKIT_TILE_ISA names the namespace, INFERKIT_TILE_SIMD the
// policy, INFERKIT_TILE_CPU_ISA the CpuIsa value.
#if INFERKIT_CPU_DISPATCH
INFERKIT_TARGET_AVX512_BEGIN
#  define INFERKIT_TILE_ISA avx512
#  define INFERKIT_TILE_SIMD SimdAvx512
#  define INFERKIT_TILE_CPU_ISA kAvx512
#  include <inferkit/attention/cpu/detail/attention_tile-inl.hpp>
INFERKIT_TARGET_END
INFERKIT_TARGET_AVX2_BEGIN
#  define INFERKIT_TILE_ISA avx2
#  define INFERKIT_TILE_SIMD SimdAvx2
#  define INFERKIT_TILE_CPU_ISA kAvx2
#  include <inferkit/attention/cpu/detail/attention_tile-inl.hpp>
INFERKIT_TARGET_END
#endif
#if INFERKIT_HAS_NEON
#  define INFERKIT_TILE_ISA neon
#  define INFERKIT_TILE_SIMD SimdNeon
#  define INFERKIT_TILE_CPU_ISA kNeon
#  include <inferkit/attention/cpu/detail/attention_tile-inl.hpp>
#endif
#define INFERKIT_TILE_ISA baseline
#define INFERKIT_TILE_SIMD SimdPortable
#define INFERKIT_TILE_CPU_ISA kBaseline
#include <inferkit/attention/cpu/detail/attention_tile-inl.hpp>
