// SPDX-License-Identifier: Apache-2.0
// Internal: what PagedKVCache's append and gather check and plan over the token rows they are
// given: that a buffer holds its tokens' rows (packed, or `row_stride` elements apart, as K and
// V slices of a fused QKV projection are), and how a large append's tokens are cut into chunks
// for threads without two threads writing one block.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace inferkit::detail {

/// Checks that a buffer of `size` elements holds `tokens` rows of `row` elements: exactly
/// (tokens * row, by division so that no product overflows) when `row_stride` is 0, else
/// through the last row read, (tokens - 1) * row_stride + row (`row_stride` >= row checked by
/// the caller). Throws `Error{kInvalidArgument}` naming `name`, the size and the limits.
inline void check_token_rows(const char* name, std::size_t size, std::uint64_t tokens,
                             std::int64_t row, std::int64_t row_stride) {
  const auto r = static_cast<std::uint64_t>(row);
  if (row_stride == 0) {
    if (size % r != 0 || size / r != tokens) [[unlikely]] {
      throw_error(ErrorCode::kInvalidArgument,
                  std::string(name) + " = " + std::to_string(size) +
                      " must equal num_tokens * num_kv_heads * head_dim with num_tokens = " +
                      std::to_string(tokens) +
                      " and num_kv_heads * head_dim = " + std::to_string(r));
    }
    return;
  }
  check_arg(row_stride >= row, ErrorCode::kInvalidArgument, "row_stride", row_stride,
            "must be 0 (packed) or >= num_kv_heads * head_dim =", row);
  const auto stride = static_cast<std::uint64_t>(row_stride);
  if (tokens != 0 && (size < r || (size - r) / stride < tokens - 1)) [[unlikely]] {
    throw_error(ErrorCode::kInvalidArgument,
                std::string(name) + " = " + std::to_string(size) +
                    " must be >= (num_tokens - 1) * row_stride + num_kv_heads * head_dim with "
                    "num_tokens = " +
                    std::to_string(tokens) + ", row_stride = " + std::to_string(row_stride) +
                    " and num_kv_heads * head_dim = " + std::to_string(r));
  }
}

/// Where chunk c of `chunks` contiguous chunks of `slots` starts: at n * c / chunks, moved on
/// past the tokens that share a block (of `block_size` slots) with the one before (a prefill's
/// consecutive slots), so that a chunk boundary never cuts a run of one block's tokens.
/// Monotone in c: the chunks partition the slots (some may be empty).
inline std::size_t chunk_begin(std::span<const std::int64_t> slots, std::int32_t block_size,
                               std::size_t chunks, std::size_t c) noexcept {
  std::size_t i = slots.size() * c / chunks;
  const auto same_block = [&](std::size_t j) {
    return slots[j] >= 0 && slots[j - 1] >= 0 && slots[j] / block_size == slots[j - 1] / block_size;
  };
  while (i > 0 && i < slots.size() && same_block(i)) ++i;
  return i;
}

/// Whether no block has tokens in two of `chunks` contiguous chunks of `slots` (sorts the
/// (block, chunk) pairs: O(n log n), small beside the n * num_kv_heads conversions).
inline bool blocks_stay_in_chunks(std::span<const std::int64_t> slots, std::int32_t block_size,
                                  std::size_t chunks) {
  std::vector<std::pair<std::int64_t, std::size_t>> owner;
  owner.reserve(slots.size());
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t end = chunk_begin(slots, block_size, chunks, c + 1);
    for (std::size_t i = chunk_begin(slots, block_size, chunks, c); i < end; ++i) {
      if (slots[i] >= 0) owner.emplace_back(slots[i] / block_size, c);
    }
  }
  std::sort(owner.begin(), owner.end());
  for (std::size_t j = 1; j < owner.size(); ++j) {
    if (owner[j].first == owner[j - 1].first && owner[j].second != owner[j - 1].second) {
      return false;
    }
  }
  return true;
}

}  // namespace inferkit::detail
