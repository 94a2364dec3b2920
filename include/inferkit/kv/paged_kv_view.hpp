// SPDX-License-Identifier: Apache-2.0
// Plain views that cross into kernels (CPU today, CUDA unchanged): one layer's paged K/V storage
// and a batch's page tables in CSR form. No CUDA headers, no ownership: pointers, strides and
// sizes only, so the same struct is a kernel argument on host and device.
// Threads: plain value types; safe from any number of threads (the memory they point to follows
// its owner's rule).
#pragma once

#include <cstdint>
#include <inferkit/core/config.hpp>
#include <type_traits>

namespace inferkit {

/// One layer's paged K and V. Layout of each of K and V, in elements of `T`:
/// `[num_blocks][num_kv_heads][block_size][head_dim]` (one head's tokens of one page are
/// contiguous, so a kernel streams `block_size * head_dim` elements per (page, head)).
/// For packed int4 storage (`T` = std::uint8_t holding two values) the last extent is
/// `head_dim / 2` bytes; `head_dim` always counts logical elements.
///
/// Quantized storage carries scales (nullptr for fp32/fp16/bf16):
/// - fp8: one scale per (block, head): `k_scale[block * num_kv_heads + head]`, value = q * scale.
/// - int8: one scale per (block, head, slot): `k_scale[(block * num_kv_heads + head) *
///   block_size + slot]`, value = q * scale.
/// - int4 (unsigned nibbles, low nibble = even element): scale and zero point per (block, head,
///   slot) at the same index: value = (q - zero) * scale.
template <class T>
struct PagedKVView {
  T* k = nullptr;                  ///< [num_blocks][num_kv_heads][block_size][head_dim]
  T* v = nullptr;                  ///< same layout as k
  const float* k_scale = nullptr;  ///< quantization scales for K (see above), else nullptr
  const float* v_scale = nullptr;  ///< quantization scales for V (same index), else nullptr
  const float* k_zero = nullptr;   ///< int4 zero points for K, else nullptr
  const float* v_zero = nullptr;   ///< int4 zero points for V, else nullptr
  /// Physical blocks (pages) in the layer; block ids are [0, num_blocks).
  std::int32_t num_blocks = 0;
  /// KV heads per block (fewer than query heads under GQA).
  std::int32_t num_kv_heads = 0;
  std::int32_t block_size = 0;  ///< tokens per block (page)
  std::int32_t head_dim = 0;    ///< logical elements per token and head
  bool packed_int4 = false;     ///< T = std::uint8_t holding two 4-bit values per byte

  /// A writable view converts to a read-only one (kernels take `PagedKVView<const T>`), as
  /// `std::span<T>` converts to `std::span<const T>`. (A template, so that no conversion of
  /// PagedKVView<const T> to itself is declared, which nvcc warns about.)
  template <class U>
  requires(std::is_same_v<U, T> && !std::is_const_v<U>) INFERKIT_HOST_DEVICE constexpr
  operator PagedKVView<const U>() const noexcept {
    return {k,          v,        k_scale,    v_scale, k_zero, v_zero, num_blocks, num_kv_heads,
            block_size, head_dim, packed_int4};
  }

  /// Storage elements of `T` per token and head (head_dim, or head_dim / 2 for packed int4).
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr std::int64_t token_stride() const noexcept {
    return packed_int4 ? head_dim / 2 : head_dim;
  }
  /// Elements between consecutive heads of one block.
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr std::int64_t head_stride() const noexcept {
    return token_stride() * block_size;
  }
  /// Elements between consecutive blocks.
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr std::int64_t block_stride() const noexcept {
    return head_stride() * num_kv_heads;
  }
  /// Offset (in elements) of token slot `slot` of head `head` in block `block`.
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr std::int64_t offset(
      std::int32_t block, std::int32_t head, std::int32_t slot) const noexcept {
    return block * block_stride() + head * head_stride() + slot * token_stride();
  }
  /// Index of the (block, head, slot) entry in per-token scale arrays (int8, int4).
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr std::int64_t token_scale_index(
      std::int32_t block, std::int32_t head, std::int32_t slot) const noexcept {
    return (std::int64_t{block} * num_kv_heads + head) * block_size + slot;
  }
};

/// A batch's page tables (FlashInfer's paged_kv_indptr / indices / last_page_len): sequence `s`
/// owns pages `indices[page_begin(s), page_end(s))` in logical order, and the last of them
/// holds `last_page_len[s]` valid tokens (1..block_size). A sequence with no pages has
/// `page_begin(s) == page_end(s)` and 0 tokens. Its length in tokens is
/// `(num_pages - 1) * block_size + last_page_len` for num_pages >= 1.
///
/// Two layouts share the type:
/// - **CSR** (`indptr_end == nullptr`): `indptr` has num_seqs + 1 offsets, `indptr[0] == 0`, and
///   sequence s ends where s + 1 begins (`page_end(s) == indptr[s + 1]`).
/// - **Begin/end** (`indptr_end != nullptr`): `indptr[s]` and `indptr_end[s]` bound sequence s on
///   their own, so `indices` may hold gaps and sequences in any order. A scheduler keeps each
///   sequence's pages in place across steps and writes only the pages that changed (vLLM keeps a
///   persistent block table for the same reason), instead of rebuilding O(total pages) a step.
///   Any sub-range of sequences is again a valid view (offset the three per-sequence arrays).
struct PageTableView {
  const std::int32_t* indptr = nullptr;         ///< [num_seqs + 1] (CSR) or [num_seqs] (begin)
  const std::int32_t* indices = nullptr;        ///< physical block ids
  const std::int32_t* last_page_len = nullptr;  ///< [num_seqs]
  /// Sequences in the batch (>= 0): the entries of `last_page_len`.
  std::int32_t num_seqs = 0;
  const std::int32_t* indptr_end = nullptr;  ///< optional [num_seqs] end offsets (begin/end)

  /// Whether the begin/end layout is used (`indptr_end` set).
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr bool has_gaps() const noexcept {
    return indptr_end != nullptr;
  }
  /// Offset in `indices` of sequence `s`'s first page.
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr std::int32_t page_begin(
      std::int32_t s) const noexcept {
    return indptr[s];
  }
  /// Offset in `indices` one past sequence `s`'s last page.
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr std::int32_t page_end(
      std::int32_t s) const noexcept {
    return indptr_end != nullptr ? indptr_end[s] : indptr[s + 1];
  }
  /// Pages owned by sequence `s`.
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr std::int32_t num_pages(
      std::int32_t s) const noexcept {
    return page_end(s) - page_begin(s);
  }
  /// Tokens held by sequence `s`, given the block size.
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr std::int64_t seq_len(
      std::int32_t s, std::int32_t block_size) const noexcept {
    const std::int32_t pages = num_pages(s);
    return pages == 0 ? 0 : std::int64_t{pages - 1} * block_size + last_page_len[s];
  }
};

}  // namespace inferkit
