// SPDX-License-Identifier: Apache-2.0
// RadixTree::check_consistency, kept apart from prefix/radix_tree.hpp to keep that header short:
// an O(size) walk over every node, list and block that tests call after each operation to prove
// the tree's invariants and its agreement with the BlockAllocator's cached marks.
#pragma once

#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <string>
#include <vector>

namespace inferkit {

inline void RadixTree::check_consistency() const {
  auto fail = [](const std::string& what) {
    detail::throw_error(ErrorCode::kInvalidState, "RadixTree inconsistent: " + what);
  };
  const std::size_t n_nodes = nodes_.size();
  // List order: every listed node sits behind its listed descendants of the same list.
  std::vector<std::int64_t> rank(n_nodes, -1);
  std::array<std::int64_t, 2> list_sizes{};
  for (std::size_t s = 0; s < lists_.size(); ++s) {
    std::int64_t r = 0;
    std::int32_t prev = detail::kNoNode;
    for (std::int32_t x = lists_[s].head; x != detail::kNoNode; prev = x, x = node(x).next) {
      const detail::RadixNode& n = node(x);
      if (!n.live || !n.listed || n.prev != prev || static_cast<std::size_t>(n.segment) != s ||
          rank[idx(x)] != -1 || r > static_cast<std::int64_t>(n_nodes)) {
        fail("eviction list " + std::to_string(s) + " holds node " + std::to_string(x));
      }
      rank[idx(x)] = r++;
    }
    if (prev != lists_[s].tail || r != lists_[s].size) fail("eviction list tail or size");
    list_sizes[s] = r;
  }
  const auto& prob = lists_[static_cast<std::size_t>(detail::RadixSegment::kProbation)];
  const auto& prot = lists_[static_cast<std::size_t>(detail::RadixSegment::kProtected)];
  const std::int32_t head = prob.head != detail::kNoNode ? prob.head : prot.head;
  if (head != detail::kNoNode && !node(head).children.empty()) fail("eviction head not a leaf");

  std::int64_t blocks = 0;
  std::int64_t protected_blocks = 0;
  std::int64_t live = 0;
  std::vector<std::int64_t> lock_sum(n_nodes, 0);
  for (std::size_t i = 0; i < n_nodes; ++i) {
    const detail::RadixNode& n = nodes_[i];
    if (!n.live) continue;
    const auto x = static_cast<std::int32_t>(i);
    ++live;
    if (n.tokens.size() != n.blocks.size() * static_cast<std::size_t>(block_size_)) {
      fail("node " + std::to_string(x) + " tokens/blocks sizes");
    }
    for (std::size_t c = 0; c < n.children.size(); ++c) {
      const detail::RadixNode& child = node(n.children[c]);
      if (!child.live || child.parent != x || child.pos_in_parent != static_cast<std::int32_t>(c)) {
        fail("child links of node " + std::to_string(x));
      }
      lock_sum[i] += child.lock_count;
    }
    if (x == kRoot) continue;
    if (n.blocks.empty()) fail("empty node " + std::to_string(x));
    const std::span<const TokenId> first =
        std::span<const TokenId>(n.tokens).first(static_cast<std::size_t>(block_size_));
    if (find_child(n.parent, first, n.ns) != x) fail("child index of node " + std::to_string(x));
    if (n.parent != kRoot && node(n.parent).ns != n.ns) {
      fail("node " + std::to_string(x) + " is in another namespace than its parent");
    }
    if (n.listed != (n.lock_count == 0)) fail("listed flag of node " + std::to_string(x));
    if (n.listed && node(n.parent).listed && node(n.parent).segment == n.segment &&
        rank[idx(n.parent)] < rank[i]) {
      fail("node " + std::to_string(x) + " listed behind its parent");
    }
    if (n.segment == detail::RadixSegment::kProtected &&
        node(n.parent).segment != detail::RadixSegment::kProtected && n.parent != kRoot) {
      fail("protected node " + std::to_string(x) + " below a probation node");
    }
    blocks += n.num_pages();
    protected_blocks += n.segment == detail::RadixSegment::kProtected ? n.num_pages() : 0;
    for (std::int32_t p = 0; p < n.num_pages(); ++p) {
      const BlockId b = n.blocks[idx(p)];
      if (owner_[idx(b)] != x || owner_pos_[idx(b)] != p) {
        fail("owner of block " + std::to_string(b));
      }
      if (!allocator_.is_cached(b)) fail("block " + std::to_string(b) + " not marked cached");
      if (allocator_.ref_count(b) < n.lock_count) {
        fail("block " + std::to_string(b) + " has fewer references than locks");
      }
    }
  }
  for (std::size_t i = 0; i < n_nodes; ++i) {
    const detail::RadixNode& n = nodes_[i];
    if (n.live && i != kRoot && n.lock_count != n.own_locks + lock_sum[i]) {
      fail("lock count of node " + std::to_string(i));
    }
  }
  if (live - 1 != num_nodes() || static_cast<std::int64_t>(child_index_.size()) != live - 1) {
    fail("node count");
  }
  if (blocks != cached_blocks_ || protected_blocks != protected_blocks_) fail("block counts");
  if (cached_blocks_ > capacity_blocks_) fail("capacity exceeded");
  std::int64_t pending = 0;
  std::int64_t marked = 0;
  for (BlockId b = 0; b < allocator_.num_blocks(); ++b) {
    pending += owner_[idx(b)] == kPendingUncache ? 1 : 0;
    marked += allocator_.is_cached(b) ? 1 : 0;
    if (owner_[idx(b)] == kPendingUncache && !allocator_.is_cached(b)) {
      fail("pending block " + std::to_string(b) + " not marked cached");
    }
  }
  if (marked != cached_blocks_ + pending) fail("allocator holds cached blocks the tree lost");
}

}  // namespace inferkit
