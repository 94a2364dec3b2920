// SPDX-License-Identifier: Apache-2.0
// Internals of the RadixTree prefix cache: the node record (a compressed edge of whole pages and
// the KV blocks that hold them), the pool that recycles node slots, the intrusive doubly linked
// eviction lists, and the page hash that keys a node's children. Users name none of this;
// prefix/radix_tree.hpp builds the cache from it.
#pragma once

#include <atomic>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/core/token_id.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <span>
#include <vector>

namespace inferkit::detail {

/// "No node": an empty list link, the root's parent.
inline constexpr std::int32_t kNoNode = -1;

/// Which eviction list an unlocked node sits on (segmented LRU; plain LRU uses only the first).
enum class RadixSegment : std::uint8_t {
  kProbation,  ///< inserted and not matched since: evicted first
  kProtected,  ///< matched at least once since insertion (or since demotion)
};

/// One node of the radix tree: a run of whole pages (`tokens.size() == blocks.size() *
/// block_size`) below `parent`. The root holds no tokens.
struct RadixNode {
  std::vector<TokenId> tokens;         // [pages * block_size]
  std::vector<BlockId> blocks;         // [pages], the KV block of each page
  std::vector<std::int32_t> children;  // unordered; child->pos_in_parent indexes it
  std::int32_t parent = kNoNode;
  std::int32_t pos_in_parent = -1;
  // Locks (and internal pins) on paths through this node, and locks whose handle is this node.
  // int64: each lock holds a reference to every block below, so the refcount limit bounds them
  // (the root, without blocks, by the number of calls).
  std::int64_t lock_count = 0;
  std::int64_t own_locks = 0;
  std::int32_t prev = kNoNode;  // eviction-list links
  std::int32_t next = kNoNode;
  // Bumped when the slot is recycled or the node loses pages: handles to it are then stale.
  CacheNamespace ns = 0;  // the prefix-cache partition; a child always has its parent's
  std::uint32_t generation = 0;
  std::uint64_t key = 0;  // child-map key: hash(parent, first page)
  bool live = false;
  bool listed = false;  // on an eviction list (unlocked, not the root)
  RadixSegment segment = RadixSegment::kProbation;

  [[nodiscard]] std::int32_t num_pages() const noexcept {
    return static_cast<std::int32_t>(blocks.size());
  }
};

/// An intrusive doubly linked list of nodes, least recently used at `head`.
struct RadixNodeList {
  std::int32_t head = kNoNode;
  std::int32_t tail = kNoNode;
  std::int64_t size = 0;

  void push_back(std::vector<RadixNode>& nodes, std::int32_t n) noexcept {
    RadixNode& node = nodes[static_cast<std::size_t>(n)];
    node.prev = tail;
    node.next = kNoNode;
    if (tail != kNoNode) {
      nodes[static_cast<std::size_t>(tail)].next = n;
    } else {
      head = n;
    }
    tail = n;
    node.listed = true;
    ++size;
  }

  // Inserts `n` right after `at` (which is on this list).
  void insert_after(std::vector<RadixNode>& nodes, std::int32_t at, std::int32_t n) noexcept {
    RadixNode& node = nodes[static_cast<std::size_t>(n)];
    RadixNode& before = nodes[static_cast<std::size_t>(at)];
    node.prev = at;
    node.next = before.next;
    if (before.next != kNoNode) {
      nodes[static_cast<std::size_t>(before.next)].prev = n;
    } else {
      tail = n;
    }
    before.next = n;
    node.listed = true;
    ++size;
  }

  void unlink(std::vector<RadixNode>& nodes, std::int32_t n) noexcept {
    RadixNode& node = nodes[static_cast<std::size_t>(n)];
    (node.prev != kNoNode ? nodes[static_cast<std::size_t>(node.prev)].next : head) = node.next;
    (node.next != kNoNode ? nodes[static_cast<std::size_t>(node.next)].prev : tail) = node.prev;
    node.prev = node.next = kNoNode;
    node.listed = false;
    --size;
  }
};

/// A process-wide unique id for each RadixTree, so a tree rejects handles from another (ids are
/// never reused, unlike addresses). Never 0: a default PrefixHandle names no tree.
inline std::uint64_t next_radix_tree_id() noexcept {
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

/// 64-bit hash of one page of tokens under parent node `parent` in namespace `ns` (FNV-1a over
/// the token bytes, then a SplitMix64 finish). Only a bucket key: tokens (and the namespace) are
/// always compared exactly.
inline std::uint64_t page_key(std::int32_t parent, std::span<const TokenId> page,
                              CacheNamespace ns) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull ^ (static_cast<std::uint64_t>(parent) + 1u) ^
                    (ns * 0x9e3779b97f4a7c15ull);
  for (TokenId t : page) {
    h ^= static_cast<std::uint32_t>(t);
    h *= 0x100000001b3ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

}  // namespace inferkit::detail
