// SPDX-License-Identifier: Apache-2.0
// KV memory planner: bytes of KV cache per token and per sequence for a ModelShape and a KV
// format (fp32 … int4, with optional quantization scales), the budget of G GPUs of M GB each
// (weights, runtime overhead, the KV pool left, max tokens, max concurrent users), and the saving
// of grouped-query attention. It sizes the BlockAllocator's pool before serving starts.
//
// Units: GPU memory is given in bytes: from GB = 10^9 bytes (`gb_to_bytes`), GiB = 2^30 bytes
// (`gib_to_bytes`; an "80GB" A100 or H100 holds 80 GiB) or a hardware preset's memory_bytes;
// every result is in bytes, so nothing mixes the two.
//
// Threads: value types and pure functions; safe from any number of threads.
#pragma once

#include <cmath>
#include <cstdint>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/model_shape.hpp>
#include <inferkit/perf/hardware.hpp>
#include <limits>
#include <string>

namespace inferkit {

/// Where a quantized KV cache keeps its dequantization scales.
enum class KVScaleLayout : std::uint8_t {
  kNone,          ///< no per-token metadata (plain fp/bf16, or a per-tensor scale: negligible)
  kPerTokenHead,  ///< one scale per token, per KV head, per layer, for K and for V
  kPerBlockHead,  ///< one scale per block of `scale_block_tokens` tokens, per head, layer, K/V
};

/// How KV is stored: element type and scale layout. Scales are fp32 (4 bytes); int4 is taken as
/// asymmetric and also stores an fp32 zero point next to each scale. Scales are only stored for
/// dtypes narrower than 16 bits; for fp32/fp16/bf16 `scales` is ignored.
struct KVCacheFormat {
  DType dtype = DType::kBFloat16;               ///< element type of K and V
  KVScaleLayout scales = KVScaleLayout::kNone;  ///< scale metadata layout
  std::int64_t scale_block_tokens = 16;         ///< tokens per scale group for kPerBlockHead
};

/// Bytes of scale metadata per scale group: fp32 scale, plus fp32 zero point for int4; 0 when
/// `format` stores no scales.
constexpr std::int64_t kv_scale_group_bytes(const KVCacheFormat& format) noexcept {
  if (format.scales == KVScaleLayout::kNone || bits_per_element(format.dtype) >= 16) return 0;
  return format.dtype == DType::kInt4 ? 8 : 4;
}

/// The format inferkit's PagedKVCache stores `dtype` in, with pages of `block_size` tokens:
/// fp8 (e4m3, e5m2) a scale per page and head, int8 a scale per token and head, int4 a scale and
/// a zero point per token and head, none for fp32 / fp16 / bf16 (kv/paged_kv_cache.hpp; the
/// perf tests check the bytes against the cache's own). kv_capacity --kv-scales inferkit plans
/// with it.
constexpr KVCacheFormat paged_kv_cache_format(DType dtype, std::int64_t block_size) noexcept {
  switch (dtype) {
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
      return {dtype, KVScaleLayout::kPerBlockHead, block_size};
    case DType::kInt8:
    case DType::kInt4:
      return {dtype, KVScaleLayout::kPerTokenHead, block_size};
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
      break;
  }
  return {dtype, KVScaleLayout::kNone, block_size};
}

namespace detail {

inline void validate_kv_format(const KVCacheFormat& format) {
  check_arg(format.scale_block_tokens >= 1, ErrorCode::kInvalidArgument, "scale_block_tokens",
            format.scale_block_tokens, "must be >=", 1);
}

/// Bytes of one token's K (or V) row in one head: head_dim elements, rounded up to whole bytes.
inline std::int64_t kv_row_bytes(const ModelShape& shape, DType dtype) {
  return (std::int64_t{shape.head_dim} * bits_per_element(dtype) + 7) / 8;
}

/// K and V rows per token across the model: 2 * layers * kv_heads.
inline std::int64_t kv_rows_per_token(const ModelShape& shape) {
  return 2 * std::int64_t{shape.num_layers} * shape.num_kv_heads;
}

}  // namespace detail

/// KV bytes for `tokens` tokens of ONE sequence: 2 (K and V) * layers * kv_heads * tokens *
/// head_dim * bytes per element, plus scale metadata (per-block groups are rounded up to whole
/// blocks). Exact integer. Throws `Error{kInvalidArgument}` for an invalid shape or format or
/// tokens < 0, and `Error{kOutOfRange}` when the byte count would overflow int64.
inline std::int64_t kv_bytes_for_tokens(const ModelShape& shape, const KVCacheFormat& format,
                                        std::int64_t tokens) {
  validate(shape);
  detail::validate_kv_format(format);
  check_arg(tokens >= 0, ErrorCode::kInvalidArgument, "tokens", tokens, "must be >=", 0);
  const std::int64_t rows = detail::kv_rows_per_token(shape);
  const std::int64_t row_bytes = detail::kv_row_bytes(shape, format.dtype);
  const std::int64_t max_tokens = std::numeric_limits<std::int64_t>::max() /
                                  (rows * (row_bytes + kv_scale_group_bytes(format)));
  check_arg(tokens <= max_tokens, ErrorCode::kOutOfRange, "tokens", tokens,
            "must be <= (int64 byte count limit)", max_tokens);
  const std::int64_t data = rows * tokens * row_bytes;
  std::int64_t scale_groups = 0;
  if (format.scales == KVScaleLayout::kPerTokenHead) scale_groups = tokens;
  if (format.scales == KVScaleLayout::kPerBlockHead) {
    scale_groups = (tokens + format.scale_block_tokens - 1) / format.scale_block_tokens;
  }
  return data + rows * scale_groups * kv_scale_group_bytes(format);
}

/// KV bytes one token adds, averaged over a full scale block (exact, and an integer, unless the
/// layout is kPerBlockHead). Llama-3-70B in bf16: 2 * 80 * 8 * 128 * 2 = 327,680. Throws as
/// `kv_bytes_for_tokens`.
inline double kv_bytes_per_token(const ModelShape& shape, const KVCacheFormat& format) {
  validate(shape);
  detail::validate_kv_format(format);
  const std::int64_t rows = detail::kv_rows_per_token(shape);
  auto per_token = static_cast<double>(rows * detail::kv_row_bytes(shape, format.dtype));
  const auto meta = static_cast<double>(rows * kv_scale_group_bytes(format));
  if (format.scales == KVScaleLayout::kPerTokenHead) per_token += meta;
  if (format.scales == KVScaleLayout::kPerBlockHead) {
    per_token += meta / static_cast<double>(format.scale_block_tokens);
  }
  return per_token;
}

/// What grouped-query attention saves: the model's KV against the same model with as many KV
/// heads as query heads (plain multi-head attention).
struct GqaSaving {
  double gqa_bytes_per_token = 0.0;  ///< with the model's num_kv_heads
  double mha_bytes_per_token = 0.0;  ///< with num_kv_heads = num_q_heads
  double ratio = 0.0;                ///< mha / gqa = num_q_heads / num_kv_heads (8 for Llama-3-70B)
};

/// The KV saving of GQA for `shape` stored as `format`. Throws as `kv_bytes_per_token`.
inline GqaSaving gqa_saving(const ModelShape& shape, const KVCacheFormat& format) {
  ModelShape mha = shape;
  mha.num_kv_heads = shape.num_q_heads;
  GqaSaving saving;
  saving.gqa_bytes_per_token = kv_bytes_per_token(shape, format);
  saving.mha_bytes_per_token = kv_bytes_per_token(mha, format);
  saving.ratio = saving.mha_bytes_per_token / saving.gqa_bytes_per_token;
  return saving;
}

/// A serving deployment to plan: G identical GPUs holding one copy of the model (tensor
/// parallel: weights and KV are split across them, so only totals matter).
struct MemoryBudgetOptions {
  int num_gpus = 1;                                   ///< GPUs holding the model, >= 1
  std::int64_t gpu_memory_bytes = 80 * kBytesPerGiB;  ///< per GPU (default: an A100-80GB, 80 GiB)
  DType weights_dtype = DType::kBFloat16;             ///< element type of the weights
  double overhead_fraction = 0.1;  ///< share of memory for activations, CUDA context…, [0, 1)
  KVCacheFormat kv{};              ///< how KV is stored
};

/// The outcome of planning. A model that does not fit is a normal result: `fits` is false and
/// the KV pool, tokens and users are all 0.
struct MemoryBudget {
  ModelShape model;                     ///< the model planned for
  MemoryBudgetOptions options;          ///< the options planned with
  std::int64_t total_memory_bytes = 0;  ///< num_gpus * gpu_memory_bytes
  std::int64_t weights_bytes = 0;       ///< parameter_count * weight bits / 8, rounded up
  std::int64_t overhead_bytes = 0;      ///< overhead_fraction * total, to the nearest byte
  std::int64_t kv_pool_bytes = 0;       ///< what is left for KV, >= 0
  bool fits = false;                    ///< weights + overhead < total memory
  double kv_bytes_per_token = 0.0;      ///< as `kv_bytes_per_token`
  std::int64_t max_total_tokens =
      0;  ///< KV tokens the pool holds (whole scale blocks if per-block)

  /// Sequences of `context_tokens` tokens each that fit in the pool at once:
  /// floor(kv_pool_bytes / kv_bytes_for_tokens(context_tokens)). Throws
  /// `Error{kInvalidArgument}` when context_tokens < 1.
  [[nodiscard]] std::int64_t max_users(std::int64_t context_tokens) const {
    check_arg(context_tokens >= 1, ErrorCode::kInvalidArgument, "context_tokens", context_tokens,
              "must be >=", 1);
    return kv_pool_bytes / kv_bytes_for_tokens(model, options.kv, context_tokens);
  }
};

/// Plans KV memory for `shape` on the deployment `options`: total = G * M bytes; weights =
/// parameters at `weights_dtype`; overhead = fraction * total; the KV pool is the rest (0 when
/// negative). Throws `Error{kInvalidArgument}` naming the argument for num_gpus < 1,
/// gpu_memory_bytes <= 0, overhead_fraction outside [0, 1), or an invalid shape or KV format;
/// `Error{kOutOfRange}` when num_gpus * gpu_memory_bytes overflows int64.
inline MemoryBudget plan_kv_memory(const ModelShape& shape, const MemoryBudgetOptions& options) {
  validate(shape);
  detail::validate_kv_format(options.kv);
  check_arg(options.num_gpus >= 1, ErrorCode::kInvalidArgument, "num_gpus", options.num_gpus,
            "must be >=", 1);
  check_arg(options.gpu_memory_bytes > 0, ErrorCode::kInvalidArgument, "gpu_memory_bytes",
            options.gpu_memory_bytes, "must be >", 0);
  check_arg(options.gpu_memory_bytes <= std::numeric_limits<std::int64_t>::max() / options.num_gpus,
            ErrorCode::kOutOfRange, "gpu_memory_bytes", options.gpu_memory_bytes,
            "times num_gpus overflows int64; must be <=",
            std::numeric_limits<std::int64_t>::max() / options.num_gpus);
  if (!(options.overhead_fraction >= 0.0 && options.overhead_fraction < 1.0)) {
    detail::throw_error(
        ErrorCode::kInvalidArgument,
        "overhead_fraction = " + std::to_string(options.overhead_fraction) + " must be in [0, 1)");
  }
  MemoryBudget budget;
  budget.model = shape;
  budget.options = options;
  budget.total_memory_bytes = options.gpu_memory_bytes * options.num_gpus;
  budget.weights_bytes = (parameter_count(shape) * bits_per_element(options.weights_dtype) + 7) / 8;
  budget.overhead_bytes =
      std::llround(options.overhead_fraction * static_cast<double>(budget.total_memory_bytes));
  budget.kv_bytes_per_token = kv_bytes_per_token(shape, options.kv);
  const std::int64_t left =
      budget.total_memory_bytes - budget.weights_bytes - budget.overhead_bytes;
  budget.fits = left > 0;
  if (!budget.fits) return budget;
  budget.kv_pool_bytes = left;
  if (options.kv.scales == KVScaleLayout::kPerBlockHead) {
    // Whole scale blocks only: a partly filled block already carries its scales.
    const std::int64_t block_bytes =
        kv_bytes_for_tokens(shape, options.kv, options.kv.scale_block_tokens);
    budget.max_total_tokens = left / block_bytes * options.kv.scale_block_tokens;
  } else {
    budget.max_total_tokens = left / kv_bytes_for_tokens(shape, options.kv, 1);  // exact integer
  }
  return budget;
}

}  // namespace inferkit
