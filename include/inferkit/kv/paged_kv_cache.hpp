// SPDX-License-Identifier: Apache-2.0
// PagedKVCache<T>: the storage behind BlockAllocator/BlockTable. It owns every layer's K and V
// pages (optionally quantized to fp8, int8 or int4), writes new tokens' K/V (fp32, fp16 or bf16,
// packed or read in place from a fused QKV projection) through a slot mapping, copies blocks
// for copy-on-write, gathers a sequence back to contiguous tensors, and hands kernels a
// non-owning PagedKVView per layer. In a step: plan (tables) -> append -> attend.
// Threads: appends to distinct layers may run concurrently (one writer per layer, no reader of it
// meanwhile; large appends use OpenMP inside); copy_block(s) writes every layer, so runs alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/detail/aligned_allocator.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/kv/detail/append_rows.hpp>
#include <inferkit/kv/detail/element_convert.hpp>
#include <inferkit/kv/detail/kv_row_kernels.hpp>
#include <inferkit/kv/detail/span_overlap.hpp>
#include <inferkit/kv/detail/stream_copy.hpp>
#include <inferkit/kv/kv_quantization.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif

namespace inferkit {

/// Sizes of a paged KV cache. All counts are elements or tokens, not bytes.
struct PagedKVCacheShape {
  /// Transformer layers, each with its own K and V pages (>= 1).
  std::int32_t num_layers = 1;
  /// Physical blocks (pages) per layer, >= 1: block ids are [0, num_blocks), the ids a
  /// `BlockAllocator` of the same size hands out.
  std::int32_t num_blocks = 1;
  std::int32_t block_size = 16;  ///< tokens per block
  /// KV heads per layer (>= 1; fewer than query heads under GQA).
  std::int32_t num_kv_heads = 1;
  std::int32_t head_dim = 128;  ///< logical elements per token and head
};

/// Paged K/V storage for every layer, with elements of type `T` (see `KVStorage`).
///
/// Layout, per layer and separately for K and V (the `PagedKVView` layout):
/// `[num_blocks][num_kv_heads][block_size][head_dim]` elements, so one head's tokens in one page
/// are contiguous and a decode kernel streams `block_size * head_dim` elements per (page, head).
/// Packed int4 (`T = std::uint8_t`) stores `head_dim / 2` bytes per token and head.
/// Quantization metadata (see `KVQuantization`):
/// - fp8 (`float8_e4m3`, `float8_e5m2`): a power-of-two scale per (block, head) `[num_blocks]
///   [num_kv_heads]`. Writing slot 0 of a block starts the block afresh; a later token that needs
///   a larger scale rescales the block's earlier slots (exact for normal values).
/// - int8: a scale per (block, head, slot); int4: scale and zero point per (block, head, slot),
///   `[num_blocks][num_kv_heads][block_size]`.
///
/// Storage is zero-initialized. Which slots hold tokens is the block tables' business: gathers
/// read exactly `num_tokens` positions, so new or recycled blocks never expose stale values.
/// Appends (from fp32, or from fp16 / bf16 widened exactly to fp32 first) convert and quantize
/// with the row kernels of the process's instruction-set path (core/cpu_isa.hpp; the members
/// that run them carry the ISA-named ABI tag of core/config.hpp),
/// write pages with non-temporal stores on x86 (the data is read much later; see bench_kv) and
/// fence before returning. Different layers may be appended from
/// different threads; one layer takes one writer at a time.
template <KVStorage T>
class PagedKVCache {
 public:
  /// The storage element type `T` (`std::uint8_t` holds two int4 codes).
  using Element = T;
  /// How stored elements map to values, from `KVStorageTraits<T>`.
  static constexpr KVQuantization kScheme = KVStorageTraits<T>::kScheme;
  /// Whether elements are packed int4: `head_dim / 2` bytes per token and head, plus zero points.
  static constexpr bool kPackedInt4 = kScheme == KVQuantization::kInt4TokenScaleZero;

 private:
  PagedKVCacheShape shape_;
  std::int64_t token_stride_ = 0;  // elements per (token, head)
  std::int64_t layer_elements_ = 0;
  std::int64_t layer_scales_ = 0;
  using Storage = std::vector<T, detail::AlignedAllocator<T, 64>>;
  // Appends stage one token-head vector (token_stride_ elements) on the stack, then stream it to
  // its page; a vector over kStagingBytes bytes is written to the page directly.
  static constexpr std::size_t kStagingBytes = 4096;
  // Elements from which a quantizing append splits its heads over OpenMP threads (a decode step
  // of 256 sequences x 8 heads x 128 is 262K; a 64-sequence step of 2 heads x 64 stays serial).
  static constexpr std::size_t kParallelAppendElements = std::size_t{1} << 16;

  Storage k_;  // 64-byte aligned, so token chunks of 32-byte multiples take streaming stores
  Storage v_;
  std::vector<float> k_scale_;
  std::vector<float> v_scale_;
  std::vector<float> k_zero_;
  std::vector<float> v_zero_;

 public:
  /// Allocates zeroed storage for `shape`. Throws `Error{kInvalidArgument}` for a non-positive
  /// size or an odd head_dim with int4, `Error{kOutOfRange}` if the storage size overflows, and
  /// what `cpu_isa()` throws for a bad INFERKIT_CPU_ISA (the appends, which cannot throw there,
  /// then never run).
  explicit PagedKVCache(const PagedKVCacheShape& shape) : shape_(shape) {
    (void)cpu_isa();
    check_arg(shape.num_layers >= 1, ErrorCode::kInvalidArgument, "num_layers", shape.num_layers,
              "must be >=", 1);
    check_arg(shape.num_blocks >= 1, ErrorCode::kInvalidArgument, "num_blocks", shape.num_blocks,
              "must be >=", 1);
    check_arg(shape.block_size >= 1, ErrorCode::kInvalidArgument, "block_size", shape.block_size,
              "must be >=", 1);
    check_arg(shape.num_kv_heads >= 1, ErrorCode::kInvalidArgument, "num_kv_heads",
              shape.num_kv_heads, "must be >=", 1);
    check_arg(shape.head_dim >= 1 && (!kPackedInt4 || shape.head_dim % 2 == 0),
              ErrorCode::kInvalidArgument, "head_dim", shape.head_dim,
              kPackedInt4 ? "must be even and >=" : "must be >=", kPackedInt4 ? 2 : 1);
    token_stride_ = kPackedInt4 ? shape.head_dim / 2 : shape.head_dim;
    // Overflow-safe sizes: every factor is below 2^31, check before each multiplication.
    constexpr std::int64_t kLimit = std::numeric_limits<std::int64_t>::max() / 64;
    std::int64_t n = token_stride_;
    for (std::int64_t f : {std::int64_t{shape.block_size}, std::int64_t{shape.num_kv_heads},
                           std::int64_t{shape.num_blocks}, std::int64_t{shape.num_layers}}) {
      check_arg(n <= kLimit / f, ErrorCode::kOutOfRange, "KV cache elements", n,
                "times the next extent overflows; limit", kLimit);
      n *= f;
    }
    layer_elements_ = n / shape.num_layers;
    k_.resize(static_cast<std::size_t>(n));
    v_.resize(static_cast<std::size_t>(n));
    std::int64_t scales = std::int64_t{shape.num_blocks} * shape.num_kv_heads;
    if constexpr (kScheme == KVQuantization::kInt8TokenScale || kPackedInt4) {
      scales *= shape.block_size;
    }
    layer_scales_ = kScheme == KVQuantization::kNone ? 0 : scales;
    k_scale_.resize(static_cast<std::size_t>(layer_scales_ * shape.num_layers));
    v_scale_.resize(k_scale_.size());
    if constexpr (kPackedInt4) {
      k_zero_.resize(k_scale_.size());
      v_zero_.resize(k_scale_.size());
    }
  }

  /// The sizes this cache was built with.
  [[nodiscard]] const PagedKVCacheShape& shape() const noexcept { return shape_; }
  /// Slots (tokens) across all blocks: num_blocks * block_size.
  [[nodiscard]] std::int64_t num_slots() const noexcept {
    return std::int64_t{shape_.num_blocks} * shape_.block_size;
  }
  /// Bytes of K+V storage plus quantization metadata, all layers.
  [[nodiscard]] std::int64_t memory_bytes() const noexcept {
    return static_cast<std::int64_t>(
        (k_.size() + v_.size()) * sizeof(T) +
        (k_scale_.size() + v_scale_.size() + k_zero_.size() + v_zero_.size()) * sizeof(float));
  }

  /// The kernel view of layer `layer` (pointers into this cache; valid while it lives).
  /// Throws `Error{kOutOfRange}` for a bad layer.
  PagedKVView<T> view(std::int32_t layer) {
    check_layer(layer);
    PagedKVView<T> v = empty_view<T>();
    v.k = k_.data() + layer * layer_elements_;
    v.v = v_.data() + layer * layer_elements_;
    set_scale_pointers(v, layer);
    return v;
  }
  /// Read-only kernel view of layer `layer`.
  [[nodiscard]] PagedKVView<const T> view(std::int32_t layer) const {
    check_layer(layer);
    PagedKVView<const T> v = empty_view<const T>();
    v.k = k_.data() + layer * layer_elements_;
    v.v = v_.data() + layer * layer_elements_;
    set_scale_pointers(v, layer);
    return v;
  }

  /// Writes the K and V of `slot_mapping.size()` new tokens of layer `layer`, quantizing or
  /// converting from float. `k`, `v`: `[num_tokens][num_kv_heads][head_dim]` floats; token `i`
  /// goes to slot `slot_mapping[i]` (`BlockTable::append_tokens` gives them); slot -1 skips a
  /// padding token. `row_stride` is the distance in elements between consecutive tokens of `k`
  /// and of `v`: 0 means packed (`num_kv_heads * head_dim`, and each span holds exactly the
  /// tokens); otherwise at least `num_kv_heads * head_dim`, and each span must reach its last
  /// token (`(num_tokens - 1) * row_stride + num_kv_heads * head_dim` elements), so that K and V
  /// are read in place from a fused QKV projection `[tokens][(Hq + 2 Hkv) * head_dim]`. `k` and
  /// `v` may be views of this cache's own storage: they are read as they were before the call
  /// (copied first, the only case that allocates). Validates everything before writing.
  /// O(num_tokens * heads * head_dim).
  /// Throws `Error{kOutOfRange}` for a bad layer or slot, `Error{kInvalidArgument}` for sizes or
  /// a row stride below `num_kv_heads * head_dim`.
  INFERKIT_ISA_ABI_TAG
  void append(std::int32_t layer, std::span<const std::int64_t> slot_mapping,
              std::span<const float> k, std::span<const float> v, std::int64_t row_stride = 0) {
    append_rows(layer, slot_mapping, k, v, row_stride);
  }

  /// `append` from fp16 activations (as engines keep them): each element is widened to float,
  /// exactly, and stored as the float `append` stores it, so the cache holds the bits of
  /// converting to float first and appending that. fp16 storage takes the rows as they are (the
  /// same bits for every value but a signalling NaN, which keeps its own). Same arguments,
  /// `row_stride` included, and the same throws as the float `append`.
  INFERKIT_ISA_ABI_TAG
  void append(std::int32_t layer, std::span<const std::int64_t> slot_mapping,
              std::span<const float16> k, std::span<const float16> v, std::int64_t row_stride = 0) {
    append_rows(layer, slot_mapping, k, v, row_stride);
  }

  /// `append` from bf16 activations, as the fp16 one: bit-identical to converting to float
  /// first; bf16 storage takes the rows as they are (every bit pattern kept, NaNs included).
  INFERKIT_ISA_ABI_TAG
  void append(std::int32_t layer, std::span<const std::int64_t> slot_mapping,
              std::span<const bfloat16> k, std::span<const bfloat16> v,
              std::int64_t row_stride = 0) {
    append_rows(layer, slot_mapping, k, v, row_stride);
  }

  /// `append` for unquantized storage from elements already of type `T` (a straight copy per
  /// token and head, the decode-step fast path). `k` and `v` may be views of this cache too.
  INFERKIT_ISA_ABI_TAG
  void append_elements(std::int32_t layer, std::span<const std::int64_t> slot_mapping,
                       std::span<const T> k,
                       std::span<const T> v) requires(kScheme == KVQuantization::kNone) {
    check_append(layer, slot_mapping, k.size(), v.size(), 0);
    if (aliases_storage(k) || aliases_storage(v)) [[unlikely]] {
      const Storage k_copy(k.begin(), k.end());
      const Storage v_copy(v.begin(), v.end());
      append_elements(layer, slot_mapping, k_copy, v_copy);
      return;
    }
    const std::int64_t row = std::int64_t{shape_.num_kv_heads} * shape_.head_dim;
    copy_tokens(layer, slot_mapping, k.data(), row, k_);
    copy_tokens(layer, slot_mapping, v.data(), row, v_);
    detail::stream_fence();
  }

  /// Reads the first `num_tokens` tokens held by `blocks` (logical order) of layer `layer` into
  /// `k_out`, `v_out`: `[num_tokens][num_kv_heads][head_dim]` floats, dequantized.
  /// Throws `Error{kOutOfRange}` for a bad layer/block or `num_tokens > blocks * block_size`,
  /// `Error{kInvalidArgument}` for output sizes or an output that overlaps this cache's storage.
  INFERKIT_ISA_ABI_TAG
  void gather(std::int32_t layer, std::span<const BlockId> blocks, std::int64_t num_tokens,
              std::span<float> k_out, std::span<float> v_out) const {
    check_layer(layer);
    // num_tokens <= blocks * block_size, compared without multiplying (a span may be huge).
    const auto whole = static_cast<std::uint64_t>(num_tokens / shape_.block_size);
    const std::uint64_t pages = whole + (num_tokens % shape_.block_size != 0 ? 1 : 0);
    check_arg(num_tokens >= 0 && pages <= blocks.size(), ErrorCode::kOutOfRange, "num_tokens",
              num_tokens, "must be in [0, blocks * block_size] with blocks =", blocks.size());
    for (BlockId b : blocks) check_block(b, "blocks[i]");
    const std::int64_t row = std::int64_t{shape_.num_kv_heads} * shape_.head_dim;
    detail::check_token_rows("k_out.size()", k_out.size(), static_cast<std::uint64_t>(num_tokens),
                             row, 0);
    detail::check_token_rows("v_out.size()", v_out.size(), static_cast<std::uint64_t>(num_tokens),
                             row, 0);
    if (aliases_storage(std::span<const float>(k_out)) ||
        aliases_storage(std::span<const float>(v_out))) [[unlikely]] {
      detail::throw_error(ErrorCode::kInvalidArgument,
                          "gather: k_out or v_out overlaps this cache's storage; gather into a "
                          "separate buffer");
    }
    read_tokens(layer, blocks, num_tokens, k_, k_scale_, k_zero_, k_out);
    read_tokens(layer, blocks, num_tokens, v_, v_scale_, v_zero_, v_out);
  }

  /// `gather` of a whole sequence.
  INFERKIT_ISA_ABI_TAG
  void gather(std::int32_t layer, const BlockTable& table, std::span<float> k_out,
              std::span<float> v_out) const {
    gather(layer, table.blocks(), table.num_tokens(), k_out, v_out);
  }

  /// Copies the first `num_slots` token slots of block `src` to block `dst` in every layer, K
  /// and V, with their quantization metadata (copy-on-write; see `BlockTable::append_tokens`).
  /// Throws `Error{kOutOfRange}` for bad ids or `num_slots` outside [0, block_size].
  INFERKIT_ISA_ABI_TAG
  void copy_block(BlockId src, BlockId dst, std::int32_t num_slots) {
    check_copy(src, dst, num_slots);
    copy_block_unchecked(src, dst, num_slots);
  }

  /// Runs every copy of a step (vLLM's `blocks_to_copy`), in order. All or nothing: validates
  /// the whole list before copying anything. Throws what `copy_block` throws.
  INFERKIT_ISA_ABI_TAG
  void copy_blocks(std::span<const BlockCopy> copies) {
    for (const BlockCopy& c : copies) check_copy(c.src, c.dst, c.num_slots);
    for (const BlockCopy& c : copies) copy_block_unchecked(c.src, c.dst, c.num_slots);
  }

 private:
  static std::size_t idx(std::int64_t i) noexcept { return static_cast<std::size_t>(i); }

  // The appends: `In` (float, float16, bfloat16) rows `row_stride` elements apart (0: packed).
  template <class In>
  INFERKIT_ISA_ABI_TAG void append_rows(std::int32_t layer, std::span<const std::int64_t> slots,
                                        std::span<const In> k, std::span<const In> v,
                                        std::int64_t row_stride) {
    check_append(layer, slots, k.size(), v.size(), row_stride);
    if (aliases_storage(k) || aliases_storage(v)) [[unlikely]] {
      const std::vector<In> k_copy(k.begin(), k.end());
      const std::vector<In> v_copy(v.begin(), v.end());
      append_rows<In>(layer, slots, k_copy, v_copy, row_stride);
      return;
    }
    const std::int64_t stride =
        row_stride != 0 ? row_stride : std::int64_t{shape_.num_kv_heads} * shape_.head_dim;
    // 16-bit rows into their own storage type are copied as they are (as append_elements);
    // float rows keep write_tokens, which splits large appends over threads.
    if constexpr (std::is_same_v<In, T> && !std::is_same_v<In, float>) {
      copy_tokens(layer, slots, k.data(), stride, k_);
      copy_tokens(layer, slots, v.data(), stride, v_);
    } else {
      write_tokens(layer, slots, k.data(), stride, k_, k_scale_, k_zero_);
      write_tokens(layer, slots, v.data(), stride, v_, v_scale_, v_zero_);
    }
    detail::stream_fence();
  }

  void check_copy(BlockId src, BlockId dst, std::int32_t num_slots) const {
    check_block(src, "src");
    check_block(dst, "dst");
    check_arg(num_slots >= 0 && num_slots <= shape_.block_size, ErrorCode::kOutOfRange, "num_slots",
              num_slots, "must be in [0, block_size] =", shape_.block_size);
  }

  INFERKIT_ISA_ABI_TAG
  void copy_block_unchecked(BlockId src, BlockId dst, std::int32_t num_slots) {
    if (src == dst) return;
    const PagedKVView<T> geometry = empty_view<T>();
    const auto n = static_cast<std::size_t>(num_slots * token_stride_);
    for (std::int32_t layer = 0; layer < shape_.num_layers; ++layer) {
      const std::int64_t base = layer * layer_elements_;
      const std::int64_t sbase = layer * layer_scales_;
      for (std::int32_t h = 0; h < shape_.num_kv_heads; ++h) {
        const std::int64_t from = base + geometry.offset(src, h, 0);
        const std::int64_t to = base + geometry.offset(dst, h, 0);
        std::memcpy(&k_[idx(to)], &k_[idx(from)], n * sizeof(T));
        std::memcpy(&v_[idx(to)], &v_[idx(from)], n * sizeof(T));
        if constexpr (kScheme == KVQuantization::kFp8BlockScale) {
          const std::int64_t hs = sbase + std::int64_t{src} * shape_.num_kv_heads + h;
          const std::int64_t hd = sbase + std::int64_t{dst} * shape_.num_kv_heads + h;
          k_scale_[idx(hd)] = k_scale_[idx(hs)];
          v_scale_[idx(hd)] = v_scale_[idx(hs)];
        } else if constexpr (kScheme != KVQuantization::kNone) {
          const std::int64_t ts = sbase + geometry.token_scale_index(src, h, 0);
          const std::int64_t td = sbase + geometry.token_scale_index(dst, h, 0);
          for (std::int32_t s = 0; s < num_slots; ++s) {
            k_scale_[idx(td + s)] = k_scale_[idx(ts + s)];
            v_scale_[idx(td + s)] = v_scale_[idx(ts + s)];
            if constexpr (kPackedInt4) {
              k_zero_[idx(td + s)] = k_zero_[idx(ts + s)];
              v_zero_[idx(td + s)] = v_zero_[idx(ts + s)];
            }
          }
        }
      }
    }
  }

  template <class U>
  [[nodiscard]] PagedKVView<U> empty_view() const noexcept {
    PagedKVView<U> v;
    v.num_blocks = shape_.num_blocks;
    v.num_kv_heads = shape_.num_kv_heads;
    v.block_size = shape_.block_size;
    v.head_dim = shape_.head_dim;
    v.packed_int4 = kPackedInt4;
    return v;
  }
  template <class View>
  void set_scale_pointers(View& v, std::int32_t layer) const noexcept {
    if constexpr (kScheme != KVQuantization::kNone) {
      v.k_scale = k_scale_.data() + layer * layer_scales_;
      v.v_scale = v_scale_.data() + layer * layer_scales_;
    }
    if constexpr (kPackedInt4) {
      v.k_zero = k_zero_.data() + layer * layer_scales_;
      v.v_zero = v_zero_.data() + layer * layer_scales_;
    }
  }

  void check_layer(std::int32_t layer) const {
    check_arg(layer >= 0 && layer < shape_.num_layers, ErrorCode::kOutOfRange, "layer", layer,
              "must be in [0, num_layers) with num_layers =", shape_.num_layers);
  }
  void check_block(BlockId b, const char* name) const {
    check_arg(b >= 0 && b < shape_.num_blocks, ErrorCode::kOutOfRange, name, b,
              "must be in [0, num_blocks) with num_blocks =", shape_.num_blocks);
  }
  // Whether a span passed in overlaps this cache's storage (a view of it handed back).
  template <class U>
  [[nodiscard]] bool aliases_storage(std::span<const U> x) const noexcept {
    bool hit =
        detail::overlaps(x, std::span<const T>(k_)) || detail::overlaps(x, std::span<const T>(v_));
    for (const std::vector<float>* meta : {&k_scale_, &v_scale_, &k_zero_, &v_zero_}) {
      hit = hit || detail::overlaps(x, std::span<const float>(*meta));
    }
    return hit;
  }
  void check_append(std::int32_t layer, std::span<const std::int64_t> slots, std::size_t k_size,
                    std::size_t v_size, std::int64_t row_stride) const {
    check_layer(layer);
    const std::int64_t row = std::int64_t{shape_.num_kv_heads} * shape_.head_dim;
    detail::check_token_rows("k.size()", k_size, slots.size(), row, row_stride);
    detail::check_token_rows("v.size()", v_size, slots.size(), row, row_stride);
    const std::int64_t limit = num_slots();
    for (std::int64_t s : slots) {
      check_arg(s >= -1 && s < limit, ErrorCode::kOutOfRange, "slot", s,
                "must be -1 (skip) or in [0, num_blocks * block_size) =", limit);
    }
  }

  // Unquantized storage from elements of type T: token i's heads from in + i * row_stride.
  INFERKIT_ISA_ABI_TAG
  void copy_tokens(std::int32_t layer, std::span<const std::int64_t> slots, const T* in,
                   std::int64_t row_stride, Storage& dst) {
    const PagedKVView<T> g = empty_view<T>();
    T* base = dst.data() + layer * layer_elements_;
    const std::size_t bytes = static_cast<std::size_t>(shape_.head_dim) * sizeof(T);
    for (std::int64_t s : slots) {
      if (s >= 0) {
        const auto block = static_cast<std::int32_t>(s / shape_.block_size);
        const auto slot = static_cast<std::int32_t>(s % shape_.block_size);
        T* out = base + g.offset(block, 0, slot);
        for (std::int32_t h = 0; h < shape_.num_kv_heads; ++h) {
          detail::stream_copy(out, in + std::int64_t{h} * shape_.head_dim, bytes);
          out += g.head_stride();
        }
      }
      in += row_stride;
    }
  }

  static std::size_t append_threads() noexcept {
#if INFERKIT_HAS_OPENMP
    return static_cast<std::size_t>(omp_get_max_threads());
#else
    return 1;
#endif
  }
  // Converts or quantizes token i's heads, read from src + i * row_stride as `In` (16-bit rows
  // are widened to float first, exactly, into the calling thread's `widened` row).
  template <class In>
  INFERKIT_ISA_ABI_TAG void write_tokens(std::int32_t layer, std::span<const std::int64_t> slots,
                                         const In* src, std::int64_t row_stride, Storage& dst,
                                         std::vector<float>& scale, std::vector<float>& zero) {
    const PagedKVView<T> g = empty_view<T>();
    const detail::KvRowKernels& kernels = detail::kv_row_kernels();
    T* base = dst.data() + layer * layer_elements_;
    float* scales = scale.empty() ? nullptr : scale.data() + layer * layer_scales_;
    float* zeros = zero.empty() ? nullptr : zero.data() + layer * layer_scales_;
    const auto hd = static_cast<std::size_t>(shape_.head_dim);
    const auto ts = static_cast<std::size_t>(token_stride_);
    const bool staged = ts * sizeof(T) <= kStagingBytes;
    const std::int32_t heads = shape_.num_kv_heads;
    [[maybe_unused]] const bool parallel =
        heads > 1 && slots.size() * idx(heads) * hd >= kParallelAppendElements;
    constexpr bool kWiden = !std::is_same_v<In, float>;
    // Token i, head h: one vector in, one page chunk (and its scale) out; `staging` and
    // `widened` are the calling thread's.
    const auto write_one = [&](std::size_t i, std::int32_t h, unsigned char* staging,
                               float* widened) {
      const auto block = static_cast<std::int32_t>(slots[i] / shape_.block_size);
      const auto slot = static_cast<std::int32_t>(slots[i] % shape_.block_size);
      const In* row =
          src + static_cast<std::int64_t>(i) * row_stride + std::int64_t{h} * shape_.head_dim;
      const float* x = nullptr;
      if constexpr (kWiden) {
        detail::convert_to_float(kernels, row, widened, hd);
        x = widened;
      } else {
        x = row;
      }
      T* const page = base + g.offset(block, h, slot);
      T* const out = staged ? reinterpret_cast<T*>(staging) : page;
      if constexpr (kScheme == KVQuantization::kNone) {
        detail::convert_from_float(kernels, x, 1.0f, out, hd);
      } else if constexpr (kScheme == KVQuantization::kInt8TokenScale) {
        scales[g.token_scale_index(block, h, slot)] = kernels.quantize_int8(x, out, hd);
      } else if constexpr (kPackedInt4) {
        const std::int64_t at = g.token_scale_index(block, h, slot);
        kernels.quantize_int4(x, out, hd, &scales[at], &zeros[at]);
      } else {  // fp8: one scale per (block, head), grown by powers of two
        float& s = scales[std::int64_t{block} * heads + h];
        const float current = slot == 0 ? 0.0f : s;
        const float need = fp8_block_scale(kernels.abs_max(x, hd), KVStorageTraits<T>::kMaxFinite);
        const float use = need > current ? need : current;
        if (slot > 0 && use != current) {
          detail::rescale_fp8_codes(kernels, base + g.offset(block, h, 0), idx(slot) * ts, current,
                                    use);
        }
        s = use;
        detail::convert_from_float(kernels, x, use == 0.0f ? 0.0f : 1.0f / use, out, ts);
      }
      if (staged) detail::stream_copy(page, out, ts * sizeof(T));
    };
    if constexpr (kScheme == KVQuantization::kFp8BlockScale) {
      // A block's tokens must stay in order on one thread (its scale history fixes its codes'
      // bits). Contiguous token chunks, cut at block edges (detail::chunk_begin), read the input in
      // order; where a block still has tokens in two chunks (position-major input, as stacked
      // decode steps), each thread takes the blocks whose line of scales hashes to it instead
      // (slower: it reads rows out of order; splitting a block's heads would share lines).
      const std::size_t chunks = parallel ? append_threads() : 1;
      const bool by_chunk =
          chunks == 1 || detail::blocks_stay_in_chunks(slots, shape_.block_size, chunks);
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel if (parallel)
#endif
      {
        std::size_t team = 1;
        std::size_t id = 0;
#if INFERKIT_HAS_OPENMP
        team = static_cast<std::size_t>(omp_get_num_threads());
        id = static_cast<std::size_t>(omp_get_thread_num());
#endif
        alignas(64) unsigned char staging[kStagingBytes];
        std::vector<float> widened(kWiden ? hd : 0);
        if (by_chunk) {
          for (std::size_t c = id; c < chunks; c += team) {
            const std::size_t end = detail::chunk_begin(slots, shape_.block_size, chunks, c + 1);
            for (std::size_t i = detail::chunk_begin(slots, shape_.block_size, chunks, c); i < end;
                 ++i) {
              if (slots[i] < 0) continue;
              for (std::int32_t h = 0; h < heads; ++h) write_one(i, h, staging, widened.data());
            }
          }
        } else {
          constexpr std::int64_t kScalesPerLine = 64 / sizeof(float);
          for (std::size_t i = 0; i < slots.size(); ++i) {
            if (slots[i] < 0) continue;
            const std::int64_t block = slots[i] / shape_.block_size;
            const auto line = static_cast<std::uint64_t>(block * heads / kScalesPerLine);
            if (team > 1 && ((line * 0x9E3779B97F4A7C15ull) >> 32) % team != id) continue;
            for (std::int32_t h = 0; h < heads; ++h) write_one(i, h, staging, widened.data());
          }
        }
        detail::stream_fence();  // this thread's streaming stores, before the team's barrier
      }
    } else {
      // Every (token, head) is independent: tokens outermost, so each thread reads its share of
      // the input in order (heads outermost read 4 KiB-strided rows, which the hardware
      // prefetcher does not follow across pages: 2x slower in bench_kv).
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel if (parallel)
#endif
      {
        alignas(64) unsigned char staging[kStagingBytes];
        std::vector<float> widened(kWiden ? hd : 0);
#if INFERKIT_HAS_OPENMP
#  pragma omp for schedule(static)
#endif
        for (std::size_t i = 0; i < slots.size(); ++i) {
          if (slots[i] < 0) continue;
          for (std::int32_t h = 0; h < heads; ++h) write_one(i, h, staging, widened.data());
        }
        detail::stream_fence();
      }
    }
  }

  INFERKIT_ISA_ABI_TAG
  void read_tokens(std::int32_t layer, std::span<const BlockId> blocks, std::int64_t num_tokens,
                   const Storage& src, const std::vector<float>& scale,
                   const std::vector<float>& zero, std::span<float> out) const {
    const PagedKVView<T> g = empty_view<T>();
    const T* base = src.data() + layer * layer_elements_;
    const float* scales = scale.empty() ? nullptr : scale.data() + layer * layer_scales_;
    const float* zeros = zero.empty() ? nullptr : zero.data() + layer * layer_scales_;
    const auto hd = static_cast<std::size_t>(shape_.head_dim);
    const auto ts = static_cast<std::size_t>(token_stride_);
    for (std::int64_t p = 0; p < num_tokens; ++p) {
      const BlockId block = blocks[idx(p / shape_.block_size)];
      const auto slot = static_cast<std::int32_t>(p % shape_.block_size);
      for (std::int32_t h = 0; h < shape_.num_kv_heads; ++h) {
        const std::span<float> y =
            out.subspan((idx(p) * idx(shape_.num_kv_heads) + idx(h)) * hd, hd);
        const std::span<const T> q(base + g.offset(block, h, slot), ts);
        if constexpr (kScheme == KVQuantization::kNone) {
          for (std::size_t e = 0; e < hd; ++e) y[e] = static_cast<float>(q[e]);
        } else if constexpr (kScheme == KVQuantization::kInt8TokenScale) {
          dequantize_int8(q, scales[g.token_scale_index(block, h, slot)], y);
        } else if constexpr (kPackedInt4) {
          const std::int64_t at = g.token_scale_index(block, h, slot);
          dequantize_int4(q, Int4Params{scales[at], zeros[at]}, y);
        } else {
          dequantize_fp8(q, scales[std::int64_t{block} * shape_.num_kv_heads + h], y);
        }
      }
    }
  }
};

}  // namespace inferkit
