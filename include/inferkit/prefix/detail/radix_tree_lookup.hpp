// SPDX-License-Identifier: Apache-2.0
// RadixTree's lookups and argument checks, kept apart from prefix/radix_tree.hpp to keep that
// header short: the child lookup and the page-aligned walk that match and insert share, the
// shared body of match and match_and_lock, and the checks every public call runs before it
// changes anything (handles, block ownership, reference-count limits).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <inferkit/core/error.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <optional>
#include <string>
#include <vector>

namespace inferkit {

inline std::int32_t RadixTree::find_child(std::int32_t parent, std::span<const TokenId> first_page,
                                          CacheNamespace ns) const {
  const auto [lo, hi] = child_index_.equal_range(detail::page_key(parent, first_page, ns));
  for (auto it = lo; it != hi; ++it) {
    const detail::RadixNode& c = node(it->second);
    if (c.parent == parent && c.ns == ns &&
        std::equal(first_page.begin(), first_page.end(), c.tokens.begin())) {
      return it->second;
    }
  }
  return detail::kNoNode;
}

inline RadixTree::Walk RadixTree::walk(std::span<const TokenId> tokens, CacheNamespace ns) const {
  Walk w;
  const auto total = static_cast<std::int64_t>(tokens.size()) / block_size_;
  while (w.pages < total) {
    const std::int32_t child = find_child(w.node, page(tokens, w.pages), ns);
    if (child == detail::kNoNode) break;
    const detail::RadixNode& c = node(child);
    const std::int64_t room = std::min<std::int64_t>(c.num_pages(), total - w.pages);
    const TokenId* query = tokens.data() + w.pages * block_size_;
    std::int64_t k = room;  // pages of c matched; the first is known equal
    if (std::memcmp(c.tokens.data(), query, idx(room * block_size_) * sizeof(TokenId)) != 0) {
      const auto end = c.tokens.begin() + room * block_size_;
      const auto diff = std::mismatch(c.tokens.begin(), end, query).first;
      k = (diff - c.tokens.begin()) / block_size_;
    }
    w.node = child;
    w.pages_in_node = static_cast<std::int32_t>(k);
    w.pages += k;
    if (k < c.num_pages()) break;
  }
  if (w.node == kRoot) w.pages_in_node = 0;
  return w;
}

inline std::vector<BlockId> RadixTree::path_blocks(const Walk& w) const {
  std::vector<BlockId> out(idx(w.pages));
  auto it = out.end();
  std::int32_t keep = w.pages_in_node;
  for (std::int32_t x = w.node; x != kRoot; x = node(x).parent) {
    const std::vector<BlockId>& b = node(x).blocks;
    it = std::copy_backward(b.begin(), b.begin() + keep, it);
    keep = node(node(x).parent).num_pages();
  }
  return out;
}

inline void RadixTree::validate_owned_unique(std::span<const BlockId> blocks) {
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (allocator_.ref_count(blocks[i]) < 1) {  // throws kOutOfRange for a bad id
      detail::throw_error(ErrorCode::kInvalidArgument,
                          "insert: blocks[" + std::to_string(i) +
                              "] = " + std::to_string(blocks[i]) +
                              " is owned by nobody (refcount 0); insert blocks a sequence holds");
    }
  }
  std::optional<std::size_t> twice;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    std::uint8_t& seen = seen_[idx(blocks[i])];
    if (seen != 0 && !twice) twice = i;
    seen = 1;
  }
  for (BlockId b : blocks) seen_[idx(b)] = 0;
  if (twice) {
    detail::throw_error(ErrorCode::kInvalidArgument, "insert: blocks[" + std::to_string(*twice) +
                                                         "] = " + std::to_string(blocks[*twice]) +
                                                         " is listed twice");
  }
}

inline void RadixTree::check_handle(PrefixHandle h, const char* op) const {
  if (is_valid(h)) [[likely]] {
    return;
  }
  const std::string which = std::string(op) + ": handle (node " + std::to_string(h.node) +
                            ", generation " + std::to_string(h.generation) + ", tree " +
                            std::to_string(h.tree) + ")";
  detail::throw_error(ErrorCode::kInvalidArgument,
                      h.tree != id_
                          ? which + " was not issued by this tree (id " + std::to_string(id_) + ")"
                          : which + " is stale: its path lost pages or was evicted");
}

inline void RadixTree::check_lockable(std::int32_t end, std::int32_t pages_in_end,
                                      const char* op) const {
  std::int32_t keep = pages_in_end;
  for (std::int32_t x = end; x != kRoot; x = node(x).parent) {
    const std::vector<BlockId>& blocks = node(x).blocks;
    for (std::int32_t i = 0; i < keep; ++i) {
      const BlockId b = blocks[idx(i)];
      if (allocator_.ref_count(b) == BlockAllocator::kMaxRefCount) [[unlikely]] {
        detail::throw_error(ErrorCode::kOutOfRange,
                            std::string(op) + ": block " + std::to_string(b) +
                                " of the path has refcount " +
                                std::to_string(BlockAllocator::kMaxRefCount) +
                                ", the limit BlockAllocator::kMaxRefCount");
      }
    }
    keep = node(node(x).parent).num_pages();
  }
}

inline void RadixTree::lock_path(std::int32_t end) {
  for (std::int32_t x = end; x != kRoot; x = node(x).parent) {
    detail::RadixNode& n = node(x);
    allocator_.retain(std::span<const BlockId>(n.blocks));
    if (n.lock_count++ == 0 && n.listed) list_of(n).unlink(nodes_, x);
  }
  ++node(end).own_locks;
}

inline PrefixMatch RadixTree::match_impl(std::span<const TokenId> tokens, CacheNamespace ns,
                                         bool lock) {
  const Walk w = walk(tokens, ns);
  if (lock) check_lockable(w.node, w.pages_in_node, "match_and_lock");
  flush_pending();
  std::int32_t end = w.node;
  if (w.pages_in_node < node(end).num_pages()) end = split(end, w.pages_in_node);
  PrefixMatch result;
  result.num_tokens = w.pages * block_size_;
  result.blocks.resize(static_cast<std::size_t>(w.pages));
  auto out = result.blocks.end();
  for (std::int32_t x = end; x != kRoot; x = node(x).parent) {
    const std::vector<BlockId>& blocks = node(x).blocks;
    out = std::copy_backward(blocks.begin(), blocks.end(), out);
  }
  result.handle = {end, node(end).generation, id_};
  if (w.pages > 0) touch_path(end, /*promote=*/true);
  if (lock) lock_path(end);
  ++stats_.queries;
  stats_.queried_tokens += static_cast<std::int64_t>(tokens.size());
  stats_.hit_queries += w.pages > 0 ? 1 : 0;
  stats_.hit_tokens += result.num_tokens;
  ++stats_.match_length_tokens[histogram_bucket(result.num_tokens)];
  return result;
}

}  // namespace inferkit
