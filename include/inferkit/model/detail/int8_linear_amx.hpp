// SPDX-License-Identifier: Apache-2.0
// Internal: the AMX-INT8 path of the int8-activation products (namespace detail::int8_amx), for
// batches of 16 tokens and more, compiled in a function-level target region whatever the TU's -m
// flags and run only where cpu_has_amx_int8() (the CPU has the tiles and Linux granted their
// state). One tdpbssd multiplies 16 tokens' 32 activation codes of a block by 16 weight rows'
// codes: 8,192 multiply-adds, where a vpdpbusd does 64. The arithmetic is
// int8_linear_portable.hpp's, to the bit.
//
// Tiles (palette 1): C (tmm0-3): 16 tokens x 16 int32 dot products, one block each, four in
// flight so that a product is stored two blocks after its issue and scaled one block later;
// A (tmm4-5): 16 tokens x 32 activation codes (int8, read in place, rows `cols` bytes apart); B
// (tmm6-7): 8 rows of 64 bytes, row k = the codes of inputs 4k..4k+3 of each of the 16 weight rows.
// That is the packed layout's quad-per-lane order already: Q4 only splits the nibbles into bytes
// (codes 0..15 as signed bytes), Q8_0 flips the stored +128 back to the signed code (xor 0x80). So
// the signed x signed product tdpbssd gives Σ x·code exactly: Q4_0 subtracts 8·Σx as the portable
// path does; Q8_0's product is already the signed one. Scaling is per block and per token, as in
// the portable path: acc = fma(float(dot), d·dx, acc) (+ fma(m, dx·Σx, acc) for Q4_1).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/model/detail/int8_linear_portable.hpp>
#include <inferkit/model/ggml_type.hpp>

#if INFERKIT_CPU_DISPATCH && (defined(__x86_64__) || defined(_M_X64))
#  define INFERKIT_HAS_AMX_KERNEL 1
#else
#  define INFERKIT_HAS_AMX_KERNEL 0
#endif

namespace inferkit::detail {

/// Tokens per AMX tile (its 16 rows).
inline constexpr std::int64_t kAmxTileTokens = 16;
/// The smallest batch the AMX path takes (smaller ones run on VNNI). On the 2-core Intel host,
/// with the path tried on smaller batches, the products measured 0.91-0.92 of the VNNI path's
/// speed at 16 tokens and 1.07-1.38 at 32 (BM_Linear_Amx), but a 32-sequence decode step gained
/// nothing (1,061-1,101 against 1,094-1,100 tokens/s) while a 512-token prefill gained 5%:
/// prefill-sized batches only.
inline constexpr std::int64_t kAmxMinTokens = 64;
/// Blocks between a tile product's issue and the store of its result.
inline constexpr std::int64_t kAmxLag = 2;
/// Bytes of one (group, block)'s weight tile: 8 rows of 64.
inline constexpr std::int64_t kAmxWeightTileBytes = 512;

}  // namespace inferkit::detail

#if INFERKIT_HAS_AMX_KERNEL
#  include <immintrin.h>

// clang-format off
#  if INFERKIT_COMPILER_GCC
#    pragma GCC push_options
#    pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8")
#  else
#    pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8"))), apply_to = function)
#  endif
// clang-format on
INFERKIT_SIMD_WARNINGS_BEGIN

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {
namespace int8_amx {

/// The LDTILECFG operand (palette 1).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};  ///< bytes per row of each tile
  std::uint8_t rows[16] = {};    ///< rows of each tile
};

/// Configures this thread's tiles as the file's header describes.
inline void configure_tiles() noexcept {
  TileConfig c;
  for (int t : {0, 1, 2, 3}) {  // C: 16 tokens x 16 int32
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  for (int t : {4, 5}) {  // A: 16 tokens x 32 codes
    c.rows[t] = 16;
    c.colsb[t] = 32;
  }
  for (int t : {6, 7}) {  // B: 8 quads x 16 rows x 4 codes
    c.rows[t] = 8;
    c.colsb[t] = 64;
  }
  // GCC's ldtilecfg and tileloadd asm name only 8 bytes of their operands, or none: a compiler
  // barrier makes every store before it (the configuration, the weight tiles) happen first.
  __asm__ __volatile__("" ::: "memory");
  _tile_loadconfig(&c);
}

/// The B tiles of every block of one group, from its packed quants, into `out`
/// ([blocks][kAmxWeightTileBytes], 64-byte aligned).
template <GgmlType kType>
inline void weight_tiles(const std::uint8_t* quants, std::int64_t blocks,
                         std::uint8_t* out) noexcept {
  constexpr std::int64_t kQBytes = int8_quant_bytes(kType);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::uint8_t* q = quants + b * kQBytes;
    std::uint8_t* o = out + b * kAmxWeightTileBytes;
    if constexpr (kType == GgmlType::kQ8_0) {
      const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
      for (std::int64_t j = 0; j < 8; ++j) {
        _mm512_store_si512(o + 64 * j, _mm512_xor_si512(_mm512_load_si512(q + 64 * j), flip));
      }
    } else {
      const __m512i low = _mm512_set1_epi8(0x0F);
      for (std::int64_t j = 0; j < 4; ++j) {
        const __m512i v = _mm512_load_si512(q + 64 * j);
        _mm512_store_si512(o + 64 * j, _mm512_and_si512(v, low));
        _mm512_store_si512(o + 64 * (4 + j), _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
      }
    }
  }
}

/// acc[t] (lanes: the group's 16 rows) += block b's dot products `c` ([16 tokens][16 rows]) of
/// tokens t0..t0+15, scaled as the portable path scales them.
template <GgmlType kType>
INFERKIT_FORCEINLINE void scale_block(const Int8Job& job, const std::int32_t* c,
                                      const std::uint16_t* scales, std::int64_t t0, std::int64_t b,
                                      __m512* acc) noexcept {
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
  __m512 m = _mm512_setzero_ps();
  if constexpr (kType == GgmlType::kQ4_1) {
    m = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 16)));
  }
  for (std::int64_t t = 0; t < 16; ++t) {
    const std::int64_t xb = (t0 + t) * job.blocks + b;
    __m512i dot = _mm512_load_si512(c + 16 * t);
    if constexpr (kType == GgmlType::kQ4_0) {
      dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(8 * job.x.sum[xb]));
    }
    const __m512 dd = _mm512_mul_ps(d, _mm512_set1_ps(job.x.scale[xb]));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), dd, acc[t]);
    if constexpr (kType == GgmlType::kQ4_1) {
      acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(job.x.scaled_sum[xb]), acc[t]);
    }
  }
}

/// Groups [g0, g1), every token, for job.n >= 1 with the activations padded to whole tiles of
/// 16 tokens (the padding rows readable; their outputs are not written). `tiles` is this
/// thread's scratch for one group's weight tiles ([blocks][512], 64-byte aligned).
template <GgmlType kType>
inline void int8_rows_typed(const Int8Job& job, std::int64_t g0, std::int64_t g1,
                            std::uint8_t* tiles) noexcept {
  constexpr std::int64_t kQBytes = int8_quant_bytes(kType);
  constexpr std::int64_t kHalves = int8_scale_halves(kType);
  alignas(64) std::int32_t c[2 * 16 * 16];  // two blocks' dot products
  const std::int64_t cols = job.x.cols;
  const std::int64_t blocks = job.blocks;
  for (std::int64_t g = g0; g < g1; ++g) {
    weight_tiles<kType>(job.quants + g * blocks * kQBytes, blocks, tiles);
    __asm__ __volatile__("" ::: "memory");  // (see configure_tiles)
    const std::uint16_t* scales = job.scales + g * blocks * kHalves;
    const std::int64_t rows_here = std::min<std::int64_t>(16, job.rows - g * kInt8GroupRows);
    const auto row_mask = static_cast<__mmask16>((1u << rows_here) - 1u);
    for (std::int64_t t0 = 0; t0 < job.n; t0 += kAmxTileTokens) {
      const std::int8_t* xq = job.x.q + t0 * cols;
      __m512 acc[16];
      for (__m512& a : acc) a = _mm512_setzero_ps();
      // Block b's product goes to C(b % 4) from A(4 + b % 2) and B(6 + b % 2), and is stored and
      // scaled two blocks later: a tile product's latency is about three of its issue
      // intervals, so storing it at once would stall the unit.
      for (std::int64_t b = 0; b < blocks + kAmxLag + 1; ++b) {
        if (b < blocks) {
          const std::int8_t* a = xq + b * kInt8BlockValues;
          const std::uint8_t* w = tiles + b * kAmxWeightTileBytes;
          switch (b & 3) {
            case 0:
              _tile_loadd(4, a, cols);
              _tile_loadd(6, w, 64);
              _tile_zero(0);
              _tile_dpbssd(0, 4, 6);
              break;
            case 1:
              _tile_loadd(5, a, cols);
              _tile_loadd(7, w, 64);
              _tile_zero(1);
              _tile_dpbssd(1, 5, 7);
              break;
            case 2:
              _tile_loadd(4, a, cols);
              _tile_loadd(6, w, 64);
              _tile_zero(2);
              _tile_dpbssd(2, 4, 6);
              break;
            default:
              _tile_loadd(5, a, cols);
              _tile_loadd(7, w, 64);
              _tile_zero(3);
              _tile_dpbssd(3, 5, 7);
              break;
          }
        }
        // Block s = b - kAmxLag is stored to c[s % 2]; block s - 1, stored an iteration ago, is
        // scaled: reading a tile store back at once waits for it to complete.
        const std::int64_t s = b - kAmxLag;
        if (s >= 0 && s < blocks) {
          std::int32_t* dst = c + (s & 1) * 256;
          switch (s & 3) {
            case 0:
              _tile_stored(0, dst, 64);
              break;
            case 1:
              _tile_stored(1, dst, 64);
              break;
            case 2:
              _tile_stored(2, dst, 64);
              break;
            default:
              _tile_stored(3, dst, 64);
              break;
          }
        }
        if (s >= 1) {
          scale_block<kType>(job, c + ((s - 1) & 1) * 256, scales + (s - 1) * kHalves, t0, s - 1,
                             acc);
        }
      }
      const std::int64_t tokens_here = std::min<std::int64_t>(16, job.n - t0);
      for (std::int64_t t = 0; t < tokens_here; ++t) {
        _mm512_mask_storeu_ps(job.y + (t0 + t) * job.rows + g * kInt8GroupRows, row_mask, acc[t]);
      }
    }
  }
}

/// int8_rows_typed for job.type; configures this thread's tiles and releases them after.
inline void int8_rows(const Int8Job& job, std::int64_t g0, std::int64_t g1,
                      std::uint8_t* tiles) noexcept {
  configure_tiles();
  switch (job.type) {
    case GgmlType::kQ4_0:
      int8_rows_typed<GgmlType::kQ4_0>(job, g0, g1, tiles);
      break;
    case GgmlType::kQ8_0:
      int8_rows_typed<GgmlType::kQ8_0>(job, g0, g1, tiles);
      break;
    default:
      int8_rows_typed<GgmlType::kQ4_1>(job, g0, g1, tiles);
      break;
  }
  _tile_release();
}

}  // namespace int8_amx
}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

INFERKIT_SIMD_WARNINGS_END
#  if INFERKIT_COMPILER_GCC
#    pragma GCC pop_options
#  else
#    pragma clang attribute pop
#  endif
#endif  // INFERKIT_HAS_AMX_KERNEL
