// SPDX-License-Identifier: Apache-2.0
// RadixTree's structural surgery, kept apart from prefix/radix_tree.hpp to keep that header
// short: splitting a node, the eviction-list touch (leaf first, so a list head is always a
// leaf), incremental LRU eviction, and the allocator's eviction callback that drops a reused
// block with the rest of its node and subtree.
#pragma once

#include <algorithm>
#include <cstdint>
#include <inferkit/prefix/radix_tree.hpp>
#include <vector>

namespace inferkit {

inline std::int32_t RadixTree::split(std::int32_t n, std::int32_t k) {
  const std::int32_t u = new_node();
  detail::RadixNode& lower = node(n);
  detail::RadixNode& upper = node(u);
  const auto cut = lower.tokens.begin() + std::int64_t{k} * block_size_;
  upper.tokens.assign(lower.tokens.begin(), cut);
  upper.blocks.assign(lower.blocks.begin(), lower.blocks.begin() + k);
  lower.tokens.erase(lower.tokens.begin(), cut);
  lower.blocks.erase(lower.blocks.begin(), lower.blocks.begin() + k);
  upper.parent = lower.parent;
  upper.ns = lower.ns;
  upper.pos_in_parent = lower.pos_in_parent;
  upper.key = lower.key;
  node(upper.parent).children[idx(upper.pos_in_parent)] = u;
  const auto [lo, hi] = child_index_.equal_range(upper.key);
  for (auto it = lo; it != hi; ++it) {
    if (it->second == n) it->second = u;
  }
  upper.lock_count = lower.lock_count;
  upper.segment = lower.segment;
  for (std::int32_t i = 0; i < upper.num_pages(); ++i) {
    owner_[idx(upper.blocks[idx(i)])] = u;
    owner_pos_[idx(upper.blocks[idx(i)])] = i;
  }
  for (std::int32_t i = 0; i < lower.num_pages(); ++i) owner_pos_[idx(lower.blocks[idx(i)])] = i;
  upper.children.clear();
  link_child(u, n);
  // The upper half goes right after the lower one: after its descendants, before its parent.
  if (lower.listed) list_of(lower).insert_after(nodes_, n, u);
  return u;
}

inline void RadixTree::touch_path(std::int32_t end, bool promote) {
  const bool segmented = promote && policy_ == EvictionPolicy::kSegmentedLru;
  for (std::int32_t x = end; x != kRoot; x = node(x).parent) {
    detail::RadixNode& n = node(x);
    if (n.listed) list_of(n).unlink(nodes_, x);
    if (segmented && n.segment == detail::RadixSegment::kProbation) {
      n.segment = detail::RadixSegment::kProtected;
      protected_blocks_ += n.num_pages();
    }
    if (n.lock_count == 0) list_of(n).push_back(nodes_, x);
  }
  if (!segmented) return;
  // SLRU: the least recently matched protected nodes fall back to probation.
  auto& prot = lists_[static_cast<std::size_t>(detail::RadixSegment::kProtected)];
  auto& prob = lists_[static_cast<std::size_t>(detail::RadixSegment::kProbation)];
  while (protected_blocks_ > protected_cap_blocks_ && prot.head != detail::kNoNode) {
    const std::int32_t h = prot.head;
    prot.unlink(nodes_, h);
    node(h).segment = detail::RadixSegment::kProbation;
    protected_blocks_ -= node(h).num_pages();
    prob.push_back(nodes_, h);
  }
}

inline std::int64_t RadixTree::evict_blocks(std::int64_t n_blocks, std::int64_t& counter) {
  auto& prob = lists_[static_cast<std::size_t>(detail::RadixSegment::kProbation)];
  auto& prot = lists_[static_cast<std::size_t>(detail::RadixSegment::kProtected)];
  std::int64_t freed = 0;
  while (freed < n_blocks) {
    const std::int32_t leaf = prob.head != detail::kNoNode ? prob.head : prot.head;
    if (leaf == detail::kNoNode) break;
    detail::RadixNode& n = node(leaf);
    INFERKIT_ASSERT(n.children.empty() && n.lock_count == 0);
    const std::int64_t take = std::min<std::int64_t>(n_blocks - freed, n.num_pages());
    const std::int64_t keep = n.num_pages() - take;
    for (std::int64_t i = keep; i < n.num_pages(); ++i) {
      const BlockId b = n.blocks[idx(i)];
      allocator_.uncache(b);
      owner_[idx(b)] = detail::kNoNode;
      if (!observers_.empty()) removed_.push_back(b);
    }
    n.blocks.resize(idx(keep));
    n.tokens.resize(idx(keep * block_size_));
    add_blocks(n, -take);
    freed += take;
    if (keep == 0) {
      list_of(n).unlink(nodes_, leaf);
      unlink_child(leaf);
      free_node(leaf);
    } else {
      ++n.generation;  // its handles would lock fewer pages than their match returned
    }
  }
  counter += freed;
  if (!removed_.empty()) {
    notify({PrefixEventKind::kRemoved, removed_, kNoBlock, {}, 0});
    removed_.clear();
  }
  return freed;
}

// Only a failed INFERKIT_ASSERT can throw here (the walk's stack is reserved for every node), and
// terminating is the right end for a broken invariant inside the allocator's eviction.
// NOLINTNEXTLINE(bugprone-exception-escape)
inline void RadixTree::on_allocator_evicted(BlockId b) noexcept {
  const std::int32_t owner = owner_[idx(b)];
  if (owner == kPendingUncache) {
    owner_[idx(b)] = detail::kNoNode;  // already dropped; the allocator unmarked it
    return;
  }
  if (owner == detail::kNoNode) return;
  const std::int32_t pos = owner_pos_[idx(b)];
  owner_[idx(b)] = detail::kNoNode;
  if (!observers_.empty()) reclaimed_.push_back(b);  // reported at the tree's next call
  detail::RadixNode& n = node(owner);
  INFERKIT_ASSERT(n.lock_count == 0);
  for (std::int32_t i = pos + 1; i < n.num_pages(); ++i) drop_block_later(n.blocks[idx(i)]);
  std::int64_t dropped = n.num_pages() - pos;
  stack_.assign(n.children.begin(), n.children.end());
  while (!stack_.empty()) {
    const std::int32_t c = stack_.back();
    stack_.pop_back();
    detail::RadixNode& d = node(c);
    stack_.insert(stack_.end(), d.children.begin(), d.children.end());
    for (BlockId db : d.blocks) drop_block_later(db);
    dropped += d.num_pages();
    add_blocks(d, -d.num_pages());
    if (d.listed) list_of(d).unlink(nodes_, c);
    erase_index(c);
    free_node(c);
  }
  n.children.clear();
  add_blocks(n, -(n.num_pages() - pos));
  n.blocks.resize(idx(pos));
  n.tokens.resize(idx(std::int64_t{pos} * block_size_));
  if (pos == 0) {
    if (n.listed) list_of(n).unlink(nodes_, owner);
    unlink_child(owner);
    free_node(owner);
  } else {
    ++n.generation;  // lost pages: its handles are stale
  }
  stats_.reclaimed_blocks += dropped;
}

}  // namespace inferkit
