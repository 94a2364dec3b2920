// SPDX-License-Identifier: Apache-2.0
// Internal: the layout of weights repacked for int8-activation products, one call as every path
// receives it, and the portable path (namespace detail::int8_baseline): plain scalar C++ that
// computes exactly what the AVX-512 VNNI path computes, bit for bit, so it is both the reference
// the tests hold the fast path to and the path of CPUs without VNNI.
//
// Layout. Rows go in groups of 16 (the 16 int32 lanes of a zmm; the last group is padded with
// zero rows). For group g and block b (32 inputs), the quants of the 16 rows sit together, a quad
// (4 consecutive inputs of one row) per 32-bit lane, so that one vpdpbusd multiplies a quad of
// all 16 rows by the same 4 activations (broadcast):
//   Q4_0 / Q4_1: 256 bytes, 4 vectors; vector j, lane r = bytes 4j..4j+3 of row r's ggml block:
//                their low nibbles are inputs 4j..4j+3, their high nibbles 16+4j..16+4j+3, so the
//                ggml block is used as stored, only transposed by 32-bit words;
//   Q8_0:        512 bytes, 8 vectors; vector j, lane r = inputs 4j..4j+3 of row r, plus 128
//                (the unsigned operand of vpdpbusd).
// The block scales, as the file stores them (fp16), follow in their own array: d of the 16 rows,
// then (Q4_1) m of the 16 rows.
//
// Arithmetic, per (row, token), the contract that makes every path and every batch agree:
// activations are quantized per token and block of 32 to int8 (amax/127 scale, round to nearest
// even); per block the integer dot product of the codes (exact), minus 8·Σq (Q4_0) or 128·Σq
// (Q8_0, undoing the +128) is converted to float and accumulated by one fused multiply-add with
// scale d·dx (rounded once); Q4_1 adds its m term by a second FMA with dx·Σq. Blocks in order.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/config.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/model/ggml_type.hpp>

namespace inferkit::detail {

/// Rows per group (the lanes of one 512-bit vector of int32).
inline constexpr std::int64_t kInt8GroupRows = 16;
/// Inputs per block: ggml's block size, and the unit of activation quantization.
inline constexpr std::int64_t kInt8BlockValues = 32;

/// Bytes of quants of one (group, block): 16 rows x 32 inputs, 4 or 8 bits each.
constexpr std::int64_t int8_quant_bytes(GgmlType type) noexcept {
  return type == GgmlType::kQ8_0 ? 512 : 256;
}
/// fp16 scales of one (group, block): d of 16 rows, and m of 16 rows for Q4_1.
constexpr std::int64_t int8_scale_halves(GgmlType type) noexcept {
  return type == GgmlType::kQ4_1 ? 32 : 16;
}
/// What the stored code exceeds the signed weight code by: 8 (Q4_0), 128 (Q8_0 after +128), 0.
constexpr std::int32_t int8_code_offset(GgmlType type) noexcept {
  return type == GgmlType::kQ4_0 ? 8 : (type == GgmlType::kQ8_0 ? 128 : 0);
}

/// Activations quantized per token and block: x ≈ q · scale.
struct Int8ActivationsView {
  std::int8_t* q = nullptr;     ///< [n][cols] codes in [-127, 127]
  float* scale = nullptr;       ///< [n][blocks] amax / 127 (0 for an all-zero block)
  std::int32_t* sum = nullptr;  ///< [n][blocks] Σ q
  float* scaled_sum = nullptr;  ///< [n][blocks] scale · Σ q (Q4_1's m term)
  std::int64_t cols = 0;
  std::int64_t blocks = 0;
};

/// y[n][rows] = x[n][cols] · Wᵀ for W repacked as above, x quantized in `x`.
struct Int8Job {
  GgmlType type = GgmlType::kQ4_1;
  const std::uint8_t* quants = nullptr;   ///< [groups][blocks][int8_quant_bytes]
  const std::uint16_t* scales = nullptr;  ///< [groups][blocks][int8_scale_halves] fp16 bits
  std::int64_t rows = 0;
  std::int64_t blocks = 0;
  Int8ActivationsView x;
  std::int64_t n = 0;
  float* y = nullptr;  ///< [n][rows]
};

inline namespace INFERKIT_ISA_ABI {
namespace int8_baseline {

/// One token's `cols` activations at `x` into codes, scales and sums (token `t` of `a`). NaN
/// becomes the code -128's neighbour the vector path gives (saturated conversion); finite
/// inputs are what the contract says.
inline void quantize_token(const float* x, const Int8ActivationsView& a, std::int64_t t) noexcept {
  for (std::int64_t b = 0; b < a.blocks; ++b) {
    const float* xb = x + b * kInt8BlockValues;
    float amax = 0.0f;
    for (std::int64_t i = 0; i < kInt8BlockValues; ++i) {
      const float v = std::fabs(xb[i]);
      amax = v > amax ? v : amax;
    }
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    std::int8_t* q = a.q + t * a.cols + b * kInt8BlockValues;
    std::int32_t sum = 0;
    for (std::int64_t i = 0; i < kInt8BlockValues; ++i) {
      const float r = std::nearbyint(xb[i] * inv);
      // The vector path's conversion: out-of-range and NaN saturate (cvtps2dq gives INT_MIN for
      // both, then a signed saturating narrow).
      const std::int32_t c =
          r >= 127.0f ? 127 : (r >= -128.0f ? static_cast<std::int32_t>(r) : -128);
      q[i] = static_cast<std::int8_t>(c);
      sum += c;
    }
    const float scale = amax / 127.0f;
    a.scale[t * a.blocks + b] = scale;
    a.sum[t * a.blocks + b] = sum;
    a.scaled_sum[t * a.blocks + b] = scale * static_cast<float>(sum);
  }
}

/// The unsigned code of input k (0-31) of row r (0-15) in a (group, block)'s quants.
inline std::int32_t code(GgmlType type, const std::uint8_t* quants, std::int64_t r,
                         std::int64_t k) noexcept {
  const std::int64_t j = k / 4;
  const std::int64_t i = k % 4;
  if (type == GgmlType::kQ8_0) return quants[64 * j + 4 * r + i];
  const std::uint8_t byte = quants[64 * (j % 4) + 4 * r + i];
  return j < 4 ? (byte & 15) : (byte >> 4);
}

/// Groups [g0, g1) of the job, every token.
inline void int8_rows(const Int8Job& job, std::int64_t g0, std::int64_t g1) noexcept {
  const std::int64_t qbytes = int8_quant_bytes(job.type);
  const std::int64_t halves = int8_scale_halves(job.type);
  const std::int32_t offset = int8_code_offset(job.type);
  for (std::int64_t g = g0; g < g1; ++g) {
    for (std::int64_t t = 0; t < job.n; ++t) {
      for (std::int64_t r = 0; r < kInt8GroupRows && g * kInt8GroupRows + r < job.rows; ++r) {
        float acc = 0.0f;
        for (std::int64_t b = 0; b < job.blocks; ++b) {
          const std::uint8_t* quants = job.quants + (g * job.blocks + b) * qbytes;
          const std::uint16_t* scales = job.scales + (g * job.blocks + b) * halves;
          const std::int8_t* xq = job.x.q + t * job.x.cols + b * kInt8BlockValues;
          std::int32_t dot = 0;
          for (std::int64_t k = 0; k < kInt8BlockValues; ++k)
            dot += code(job.type, quants, r, k) * xq[k];
          dot -= offset * job.x.sum[t * job.blocks + b];
          const float d = static_cast<float>(float16::from_bits(scales[r]));
          acc = std::fma(static_cast<float>(dot), d * job.x.scale[t * job.blocks + b], acc);
          if (job.type == GgmlType::kQ4_1) {
            const float m = static_cast<float>(float16::from_bits(scales[16 + r]));
            acc = std::fma(m, job.x.scaled_sum[t * job.blocks + b], acc);
          }
        }
        job.y[t * job.rows + g * kInt8GroupRows + r] = acc;
      }
    }
  }
}

}  // namespace int8_baseline
}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail
