// SPDX-License-Identifier: Apache-2.0
// Internal: one call of the linear-layer kernels as every instruction-set path receives it, and
// the tiling facts that the OpenMP driver (quantized_linear.hpp) and the kernels share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <inferkit/model/ggml_type.hpp>

namespace inferkit::detail {

/// y[n][rows] = x[n][cols] · Wᵀ, W stored as `rows` rows of `row_bytes` bytes of `type`.
struct LinearJob {
  GgmlType type = GgmlType::kF32;  ///< element type of W
  const std::byte* w = nullptr;    ///< [rows][row_bytes]
  std::int64_t rows = 0;           ///< output features
  std::int64_t cols = 0;           ///< input features
  std::int64_t row_bytes = 0;      ///< ggml_row_bytes(type, cols)
  const float* x = nullptr;        ///< [n][cols]
  std::int64_t n = 0;              ///< tokens
  float* y = nullptr;              ///< [n][rows]
};

/// Up to this many tokens, each weight block is decoded in registers and used for all of them
/// at once (decode: the weights stream once, memory-bound); above it, 16-row panels are decoded
/// once to fp32 scratch and reused by register tiles over the tokens (compute-bound).
inline constexpr std::int64_t kLinearFusedMaxTokens = 2;

/// Rows per decoded panel; threads get whole multiples of it, so tiles never straddle threads.
inline constexpr std::int64_t kLinearPanelRows = 16;

/// Floats between consecutive rows of a decoded panel: cols rounded up to whole 16-float vectors
/// (64-byte rows), the tail zero-filled.
constexpr std::int64_t linear_panel_stride(std::int64_t cols) noexcept {
  return (cols + 15) / 16 * 16;
}

/// Tokens per cache block of the panel path: about 512 KiB of activations (the rest of a 1-2 MiB
/// L2 holds the panel and the output lines; fewer tokens would decode each panel more often:
/// at 1536 inputs, 192 KiB blocks cost 5-10% of prefill), a multiple of `tile_tokens`.
constexpr std::int64_t linear_token_block(std::int64_t cols, std::int64_t tile_tokens) noexcept {
  const std::int64_t fit = (std::int64_t{512} << 10) / (4 * (cols > 0 ? cols : 1));
  return fit < tile_tokens ? tile_tokens : fit / tile_tokens * tile_tokens;
}

/// Floats of per-thread scratch a job needs (0: the fused path or f32 weights use none).
constexpr std::int64_t linear_scratch_floats(const LinearJob& job) noexcept {
  if (job.n <= kLinearFusedMaxTokens || job.type == GgmlType::kF32) return 0;
  return kLinearPanelRows * linear_panel_stride(job.cols);
}

}  // namespace inferkit::detail
