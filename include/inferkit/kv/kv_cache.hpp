// SPDX-License-Identifier: Apache-2.0
// KVCache: the contiguous key/value cache of one sequence. Prefill appends the prompt's K/V as one
// chunk per layer, each decode step appends one token per layer, and attention reads the first
// `length(layer)` positions back. It stores KV heads only (GQA-aware). The paged alternative for
// many sequences is PagedKVCache; this one is the simple baseline and the teaching model.
// Threads: one thread at a time per cache while anything mutates it (append, truncate, clear);
// const calls (views, gather) may run concurrently; distinct caches are independent.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/kv/detail/span_overlap.hpp>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace inferkit {

/// A plain view of one layer of a `KVCache` (pointers and sizes only, so it can be a kernel
/// argument). K and V each have layout `[num_kv_heads][capacity_tokens][head_dim]`: one head's
/// positions are contiguous; positions `[0, length_tokens)` are valid.
template <class T>
struct KVCacheLayerView {
  const T* k = nullptr;  ///< [num_kv_heads][capacity_tokens][head_dim]
  const T* v = nullptr;  ///< same layout as k
  /// KV heads (the outer dimension of `k` and `v`); 0 in an empty view.
  std::int32_t num_kv_heads = 0;
  /// Positions allocated per head, in tokens: the stride between heads is
  /// `capacity_tokens * head_dim` elements.
  std::int32_t capacity_tokens = 0;
  /// Elements per head vector (one position of one head).
  std::int32_t head_dim = 0;
  std::int32_t length_tokens = 0;  ///< valid positions

  /// Offset (in elements) of position `pos` of head `head`.
  [[nodiscard]] INFERKIT_HOST_DEVICE constexpr std::int64_t offset(
      std::int32_t head, std::int32_t pos) const noexcept {
    return (std::int64_t{head} * capacity_tokens + pos) * head_dim;
  }
};

/// Contiguous KV cache for one sequence: `num_layers` layers, each holding K and V with layout
/// `[num_kv_heads][capacity_tokens][head_dim]` (one head's positions contiguous, so attention over
/// a head streams `length * head_dim` elements). All storage is allocated (and zeroed) up front:
/// `bytes_allocated() = 2 * num_layers * num_kv_heads * capacity_tokens * head_dim * sizeof(T)`.
/// Each layer has its own length, because a forward pass appends layer by layer.
///
/// `T` is the storage element: `float` or `double`, or any trivially copyable type such as
/// `float16` (the cache copies elements; it does no arithmetic).
template <class T>
class KVCache {
  static_assert(std::is_trivially_copyable_v<T>, "KVCache stores trivially copyable elements");

 public:
  /// The storage element type `T`.
  using value_type = T;

  /// An empty cache. Throws `Error{kInvalidArgument}` when a size is < 1 or the total element
  /// count overflows `std::size_t`.
  KVCache(std::int32_t num_layers, std::int32_t num_kv_heads, std::int32_t head_dim,
          std::int32_t capacity_tokens) {
    check_arg(num_layers >= 1, ErrorCode::kInvalidArgument, "num_layers", num_layers,
              "must be >=", 1);
    check_arg(num_kv_heads >= 1, ErrorCode::kInvalidArgument, "num_kv_heads", num_kv_heads,
              "must be >=", 1);
    check_arg(head_dim >= 1, ErrorCode::kInvalidArgument, "head_dim", head_dim, "must be >=", 1);
    check_arg(capacity_tokens >= 1, ErrorCode::kInvalidArgument, "capacity_tokens", capacity_tokens,
              "must be >=", 1);
    // Total elements of K (or V), checked against overflow one factor at a time.
    const std::size_t limit = std::numeric_limits<std::size_t>::max() / sizeof(T);
    std::size_t total = 1;
    for (const std::int32_t factor : {num_kv_heads, capacity_tokens, head_dim, num_layers}) {
      check_arg(static_cast<std::size_t>(factor) <= limit / total, ErrorCode::kInvalidArgument,
                "num_layers * num_kv_heads * capacity_tokens * head_dim", "(product)",
                "must fit in size_t elements, at most", limit);
      total *= static_cast<std::size_t>(factor);
    }
    const std::size_t layer_elems = total / static_cast<std::size_t>(num_layers);
    num_layers_ = num_layers;
    num_kv_heads_ = num_kv_heads;
    head_dim_ = head_dim;
    capacity_tokens_ = capacity_tokens;
    layer_elems_ = layer_elems;
    k_.assign(layer_elems * static_cast<std::size_t>(num_layers), T{});
    v_.assign(layer_elems * static_cast<std::size_t>(num_layers), T{});
    length_.assign(static_cast<std::size_t>(num_layers), 0);
  }

  /// Layers, each with its own K, V and length (>= 1).
  [[nodiscard]] std::int32_t num_layers() const noexcept { return num_layers_; }
  /// KV heads per layer (>= 1; fewer than query heads under GQA).
  [[nodiscard]] std::int32_t num_kv_heads() const noexcept { return num_kv_heads_; }
  /// Elements per head vector (>= 1).
  [[nodiscard]] std::int32_t head_dim() const noexcept { return head_dim_; }
  /// Positions each layer can hold.
  [[nodiscard]] std::int32_t capacity_tokens() const noexcept { return capacity_tokens_; }

  /// Positions stored in `layer`. Throws `Error{kOutOfRange}` for a bad layer.
  [[nodiscard]] std::int32_t length(std::int32_t layer) const {
    check_layer(layer);
    return length_[static_cast<std::size_t>(layer)];
  }

  /// Elements of one token's K (or V) in one layer: `num_kv_heads * head_dim`.
  [[nodiscard]] std::int64_t token_elems() const noexcept {
    return std::int64_t{num_kv_heads_} * head_dim_;
  }

  /// Appends `n` tokens (a prefill chunk, or 1 for decode) to `layer`. `k_chunk` and `v_chunk`
  /// have layout `[n][num_kv_heads][head_dim]`; they may be views of this cache (`k_head`,
  /// `layer_view`): they are read as they were before the call (copied first, the only case
  /// that allocates). O(n * num_kv_heads * head_dim).
  /// Throws, leaving the cache unchanged: `Error{kOutOfRange}` for a bad layer or when
  /// `length(layer) + n > capacity_tokens()` (the message names the layer, length and capacity);
  /// `Error{kInvalidArgument}` for `n < 0` or a chunk whose size is not `n * token_elems()`.
  void append(std::int32_t layer, std::span<const T> k_chunk, std::span<const T> v_chunk,
              std::int32_t n) {
    check_layer(layer);
    check_arg(n >= 0, ErrorCode::kInvalidArgument, "n", n, "must be >=", 0);
    check_chunk("k_chunk.size()", k_chunk.size(), n);
    check_chunk("v_chunk.size()", v_chunk.size(), n);
    const std::int32_t len = length_[static_cast<std::size_t>(layer)];
    if (std::int64_t{len} + n > capacity_tokens_) {
      detail::throw_error(ErrorCode::kOutOfRange,
                          "append of n = " + std::to_string(n) + " tokens to layer " +
                              std::to_string(layer) + " with length " + std::to_string(len) +
                              " exceeds capacity_tokens = " + std::to_string(capacity_tokens_));
    }
    if (aliases_storage(k_chunk) || aliases_storage(v_chunk)) [[unlikely]] {
      const std::vector<T> k_copy(k_chunk.begin(), k_chunk.end());
      const std::vector<T> v_copy(v_chunk.begin(), v_chunk.end());
      append(layer, k_copy, v_copy, n);
      return;
    }
    const auto dim = static_cast<std::size_t>(head_dim_);
    for (std::int32_t t = 0; t < n; ++t) {
      for (std::int32_t h = 0; h < num_kv_heads_; ++h) {
        const std::size_t src =
            (static_cast<std::size_t>(t) * static_cast<std::size_t>(num_kv_heads_) +
             static_cast<std::size_t>(h)) *
            dim;
        const std::size_t dst = element_index(layer, h, len + t);
        std::copy_n(k_chunk.data() + src, dim, k_.data() + dst);
        std::copy_n(v_chunk.data() + src, dim, v_.data() + dst);
      }
    }
    length_[static_cast<std::size_t>(layer)] = len + n;
  }

  /// K of head `head` in `layer`, positions `[0, length(layer))`: `[length][head_dim]`.
  /// Throws `Error{kOutOfRange}` for a bad layer or head.
  std::span<const T> k_head(std::int32_t layer, std::int32_t head) const {
    return head_span(k_, layer, head);
  }
  /// V of head `head` in `layer`, positions `[0, length(layer))`: `[length][head_dim]`.
  std::span<const T> v_head(std::int32_t layer, std::int32_t head) const {
    return head_span(v_, layer, head);
  }

  /// Copies the first `n` positions of `layer` into token-major `[n][num_kv_heads][head_dim]`
  /// buffers (the layout `reference_attention` takes). Throws `Error{kOutOfRange}` for a bad layer
  /// or `n` outside `[0, length(layer)]`, `Error{kInvalidArgument}` for an output of the wrong
  /// size or one that overlaps this cache's storage; nothing is written then.
  void gather(std::int32_t layer, std::int32_t n, std::span<T> k_out, std::span<T> v_out) const {
    check_layer(layer);
    const std::int32_t len = length_[static_cast<std::size_t>(layer)];
    check_arg(n >= 0 && n <= len, ErrorCode::kOutOfRange, "n", n,
              "must be in [0, length(layer)], length =", len);
    check_chunk("k_out.size()", k_out.size(), n);
    check_chunk("v_out.size()", v_out.size(), n);
    if (aliases_storage(std::span<const T>(k_out)) || aliases_storage(std::span<const T>(v_out)))
        [[unlikely]] {
      detail::throw_error(ErrorCode::kInvalidArgument,
                          "gather: k_out or v_out overlaps this cache's storage; gather into a "
                          "separate buffer");
    }
    const auto dim = static_cast<std::size_t>(head_dim_);
    for (std::int32_t t = 0; t < n; ++t) {
      for (std::int32_t h = 0; h < num_kv_heads_; ++h) {
        const std::size_t dst =
            (static_cast<std::size_t>(t) * static_cast<std::size_t>(num_kv_heads_) +
             static_cast<std::size_t>(h)) *
            dim;
        const std::size_t src = element_index(layer, h, t);
        std::copy_n(k_.data() + src, dim, k_out.data() + dst);
        std::copy_n(v_.data() + src, dim, v_out.data() + dst);
      }
    }
  }

  /// A plain view of `layer` (valid until the cache is destroyed; its length is a snapshot).
  /// Throws `Error{kOutOfRange}` for a bad layer.
  KVCacheLayerView<T> layer_view(std::int32_t layer) const {
    check_layer(layer);
    const std::size_t base = static_cast<std::size_t>(layer) * layer_elems_;
    return {k_.data() + base, v_.data() + base, num_kv_heads_,
            capacity_tokens_, head_dim_,        length_[static_cast<std::size_t>(layer)]};
  }

  /// Drops positions `[new_length, length(layer))` of `layer` (e.g. rejected speculative tokens).
  /// Throws `Error{kOutOfRange}` for a bad layer or `new_length` outside `[0, length(layer)]`.
  void truncate(std::int32_t layer, std::int32_t new_length) {
    check_layer(layer);
    const std::int32_t len = length_[static_cast<std::size_t>(layer)];
    check_arg(new_length >= 0 && new_length <= len, ErrorCode::kOutOfRange, "new_length",
              new_length, "must be in [0, length(layer)], length =", len);
    length_[static_cast<std::size_t>(layer)] = new_length;
  }

  /// Empties every layer (storage stays allocated; stale values are never read).
  void clear() noexcept { std::fill(length_.begin(), length_.end(), 0); }

  /// Bytes of K and V storage allocated (all layers, full capacity).
  [[nodiscard]] std::size_t bytes_allocated() const noexcept { return 2 * k_.size() * sizeof(T); }

  /// Bytes of K and V holding valid positions (sum over layers of the lengths).
  [[nodiscard]] std::size_t bytes_used() const noexcept {
    std::size_t tokens = 0;
    for (const std::int32_t len : length_) tokens += static_cast<std::size_t>(len);
    return 2 * tokens * static_cast<std::size_t>(token_elems()) * sizeof(T);
  }

 private:
  void check_layer(std::int32_t layer) const {
    check_arg(layer >= 0 && layer < num_layers_, ErrorCode::kOutOfRange, "layer", layer,
              "must be in [0, num_layers), num_layers =", num_layers_);
  }

  // size == n * token_elems(), checked by division so that no product overflows.
  void check_chunk(const char* name, std::size_t size, std::int32_t n) const {
    const auto row = static_cast<std::size_t>(token_elems());
    if (size % row != 0 || size / row != static_cast<std::size_t>(n)) [[unlikely]] {
      detail::throw_error(
          ErrorCode::kInvalidArgument,
          std::string(name) + " = " + std::to_string(size) +
              " must equal n * num_kv_heads * head_dim with n = " + std::to_string(n) +
              " and num_kv_heads * head_dim = " + std::to_string(row));
    }
  }
  [[nodiscard]] bool aliases_storage(std::span<const T> x) const noexcept {
    return detail::overlaps(x, std::span<const T>(k_)) ||
           detail::overlaps(x, std::span<const T>(v_));
  }

  [[nodiscard]] std::size_t element_index(std::int32_t layer, std::int32_t head,
                                          std::int32_t pos) const {
    return static_cast<std::size_t>(layer) * layer_elems_ +
           (static_cast<std::size_t>(head) * static_cast<std::size_t>(capacity_tokens_) +
            static_cast<std::size_t>(pos)) *
               static_cast<std::size_t>(head_dim_);
  }

  std::span<const T> head_span(const std::vector<T>& store, std::int32_t layer,
                               std::int32_t head) const {
    check_layer(layer);
    check_arg(head >= 0 && head < num_kv_heads_, ErrorCode::kOutOfRange, "head", head,
              "must be in [0, num_kv_heads), num_kv_heads =", num_kv_heads_);
    const auto len = static_cast<std::size_t>(length_[static_cast<std::size_t>(layer)]);
    return {store.data() + element_index(layer, head, 0),
            len * static_cast<std::size_t>(head_dim_)};
  }

  std::vector<T> k_;                  // [num_layers][num_kv_heads][capacity_tokens][head_dim]
  std::vector<T> v_;                  // same layout as k_
  std::vector<std::int32_t> length_;  // [num_layers] valid positions per layer
  std::size_t layer_elems_ = 0;       // num_kv_heads * capacity_tokens * head_dim
  std::int32_t num_layers_ = 0;
  std::int32_t num_kv_heads_ = 0;
  std::int32_t head_dim_ = 0;
  std::int32_t capacity_tokens_ = 0;
};

}  // namespace inferkit
