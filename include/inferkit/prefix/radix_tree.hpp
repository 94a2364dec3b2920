// SPDX-License-Identifier: Apache-2.0
// RadixTree: the prefix cache (SGLang's RadixAttention, vLLM's automatic prefix caching) over the
// BlockAllocator's KV blocks. The scheduler calls `match_and_lock` when it admits a request (reuse
// the cached prefix's blocks instead of recomputing them), `unlock` when the request ends, and
// `insert` after prefill or at finish, so later requests sharing the prefix skip its prefill.
// Threads: one thread at a time for a tree together with its allocator (allocations call the
// tree's eviction callback); even match writes (recency, splits, stats); match_length only reads.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <inferkit/core/error.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/prefix/detail/radix_node.hpp>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace inferkit {

/// How the tree picks what to evict. Both evict only unlocked leaves, least recently used first,
/// in O(1) per freed block (intrusive lists, no heap over the leaves).
enum class EvictionPolicy : std::uint8_t {
  kLru,           ///< one LRU order (SGLang's policy)
  kSegmentedLru,  ///< SLRU: prefixes never matched since insertion go first (scan resistant)
};

/// Construction options of a RadixTree. The capacity is the tighter of the two limits and the
/// allocator's size; a token limit counts whole blocks (`floor(max_cached_tokens / block_size)`).
struct RadixTreeOptions {
  std::optional<std::int64_t> max_cached_blocks{};  ///< >= 0; none = no limit of its own
  std::optional<std::int64_t> max_cached_tokens{};  ///< >= 0; none = no limit of its own
  /// Which unlocked leaves eviction takes first (default: segmented LRU).
  EvictionPolicy policy = EvictionPolicy::kSegmentedLru;
  /// kSegmentedLru: share of the capacity matched prefixes may hold before the least recently
  /// used of them are demoted to the probation segment, in [0, 1].
  double protected_fraction = 0.8;
};

/// Names a matched path for `lock`/`unlock` in the tree that issued it. Valid while that path is
/// whole (a locked path always is): once its node is evicted or loses any page (to `evict`, to
/// room for an `insert`, or to the allocator reusing a block) the handle is stale and rejected,
/// so a lock never covers fewer blocks than the match returned. A handle from another tree, or
/// a default-constructed one, is rejected too. `RadixTree::is_valid` tells without throwing.
struct PrefixHandle {
  std::int32_t node = 0;  ///< 0: the root (an empty match; its locks hold no block)
  /// The node's generation when the handle was issued; the tree bumps it when the node's slot
  /// is recycled or the node loses pages, which makes the handle stale.
  std::uint32_t generation = 0;
  std::uint64_t tree = 0;  ///< the issuing tree's id; 0 names no tree
};

/// The result of `RadixTree::match` and `RadixTree::match_and_lock`.
struct PrefixMatch {
  std::int64_t num_tokens = 0;  ///< cached prefix length, a multiple of block_size
  std::vector<BlockId> blocks;  ///< its KV blocks, one per block_size tokens, head first
  PrefixHandle handle;          ///< the matched path, for lock/unlock
};

/// The result of `RadixTree::insert`.
struct PrefixInsert {
  std::int64_t matched_tokens = 0;   ///< already cached before the call
  std::int64_t inserted_tokens = 0;  ///< newly cached (may stop short at capacity)
  /// The caller's blocks for the already-cached part that are not the cached ones (the caller
  /// computed the same KV twice): not adopted; the caller may switch to the cached blocks.
  std::vector<BlockId> duplicate_blocks;
  /// Tokens of the sequence now cached: matched + inserted.
  [[nodiscard]] std::int64_t cached_tokens() const noexcept {
    return matched_tokens + inserted_tokens;
  }
};

/// Buckets of `PrefixCacheStats::match_length_tokens`: bucket 0 counts empty matches, bucket
/// `i >= 1` matches of [2^(i-1), 2^i) tokens (the last bucket is open-ended).
inline constexpr std::size_t kMatchHistogramBuckets = 33;

/// Counters of a RadixTree since construction (or `reset_stats`).
struct PrefixCacheStats {
  std::int64_t queries = 0;         ///< match calls
  std::int64_t hit_queries = 0;     ///< matches of at least one block
  std::int64_t queried_tokens = 0;  ///< tokens passed to match
  std::int64_t hit_tokens = 0;      ///< tokens matched
  /// Tokens newly cached by insert (whole blocks; excludes the part that was already cached).
  std::int64_t inserted_tokens = 0;
  std::int64_t evicted_blocks = 0;    ///< dropped by evict() or to make room on insert
  std::int64_t reclaimed_blocks = 0;  ///< dropped because the allocator reused a cached block
  std::int64_t cached_blocks = 0;     ///< now in the tree
  std::int64_t cached_tokens = 0;     ///< cached_blocks * block_size
  /// Histogram of match lengths in tokens: one count per `match` or `match_and_lock` call, in
  /// the power-of-two buckets `kMatchHistogramBuckets` describes.
  std::array<std::int64_t, kMatchHistogramBuckets> match_length_tokens{};

  /// hit_queries / queries (0 without queries).
  [[nodiscard]] double request_hit_rate() const noexcept {
    return queries == 0 ? 0.0 : static_cast<double>(hit_queries) / static_cast<double>(queries);
  }
  /// hit_tokens / queried_tokens (0 without queried tokens).
  [[nodiscard]] double token_hit_rate() const noexcept {
    return queried_tokens == 0
               ? 0.0
               : static_cast<double>(hit_tokens) / static_cast<double>(queried_tokens);
  }
};

/// Kinds of `PrefixEvent` (vLLM's KV cache events BlockStored and BlockRemoved).
enum class PrefixEventKind : std::uint8_t {
  kStored,   ///< `blocks` were cached: the pages after `parent_block` on a path of namespace `ns`
  kRemoved,  ///< `blocks` left the cache (evicted by the tree, or reclaimed by the allocator)
};

/// One change to what a RadixTree caches, as its observers see it. The spans are valid during
/// the observer's call only.
struct PrefixEvent {
  PrefixEventKind kind = PrefixEventKind::kStored;  ///< stored or removed
  std::span<const BlockId> blocks;  ///< kStored: one per page, in path order; kRemoved: any order
  /// kStored: the block of the page just before `blocks[0]` on the path, kNoBlock at the root
  /// (an observer keys a block by its path: parent's key, then this page's tokens).
  BlockId parent_block = kNoBlock;
  std::span<const TokenId> tokens;  ///< kStored: the pages' tokens, blocks.size() * block_size
  CacheNamespace ns = 0;            ///< kStored: the namespace the path was inserted in
};

/// Receives a RadixTree's events, in the order of the changes. Called on the thread that called
/// the tree; must not throw (the tree calls it from noexcept code) or call the tree.
using PrefixObserver = std::function<void(const PrefixEvent&)>;

/// Names an observer for `RadixTree::remove_observer`.
using PrefixObserverId = std::uint64_t;

/// A radix tree of token sequences whose nodes own the BlockAllocator's KV blocks.
///
/// **Keys.** Edges are compressed runs of whole pages (`block_size` tokens, one KV block each);
/// only full blocks are cached and matched, and tokens are always compared exactly (a page hash
/// only picks the child bucket).
///
/// **Ownership.** The tree holds *no* reference count of its own. A block it caches is marked
/// cached in the allocator (`mark_cached`) while the inserting sequence still owns it; when its
/// last owner frees it, it becomes *evictable* there: readable, on the allocator's LRU list.
/// - `lock(handle)` retains every block of the path (one reference per lock), so neither the
///   allocator nor `evict` can take it; `unlock` frees those references.
/// - Tree eviction (`evict`, or room for an `insert`) unlinks unlocked leaves and calls
///   `allocator.uncache` on their blocks: evictable ones return to the free list at once, ones
///   still owned by running sequences lose the mark and are freed by their last owner.
/// - When allocation reuses an evictable cached block, the allocator's eviction callback tells
///   the tree, which drops that block and everything after it in its node plus the node's whole
///   subtree (a prefix with a hole is useless). The dropped blocks other than the reused one are
///   uncached at the start of the tree's next public call (the callback may not mutate the
///   allocator); until then they stay evictable and the allocator may reuse them first.
///
/// **Sharing a match.** `match` takes no reference: the next allocation may reuse any matched
/// block. Use `match_and_lock`, whose blocks are the locked ones, or `lock` the handle before
/// anything allocates (`lock` rejects a handle whose path lost a block since).
///
/// **Events.** Any number of observers (`add_observer`: a KV-event exporter, an offloader, a
/// router's index) see every block stored and removed. Blocks the allocator reclaims inside an
/// allocation are reported at the start of the tree's next call (or `flush`): the allocator's
/// callback may not run user code. Destroying the tree reports nothing; an observer that outlives
/// it treats the end as "everything removed".
///
/// One tree per allocator: it installs the allocator's eviction callback, and the allocator
/// refuses a second one while it is installed. The allocator must outlive the tree. Not
/// copyable or movable. Not thread-safe. A throwing call changes nothing, the deferred uncache
/// included: every call validates before it flushes.
class RadixTree {
  static constexpr std::int32_t kRoot = 0;
  static constexpr std::int32_t kPendingUncache = -2;  // owner_ of a dropped, still-marked block

  BlockAllocator& allocator_;
  std::uint64_t id_ = detail::next_radix_tree_id();
  std::int32_t block_size_ = 1;
  std::int64_t capacity_blocks_ = 0;
  std::int64_t protected_cap_blocks_ = 0;
  EvictionPolicy policy_ = EvictionPolicy::kSegmentedLru;
  std::vector<detail::RadixNode> nodes_;  // [0] is the root; slots recycled via free_nodes_
  std::vector<std::int32_t> free_nodes_;
  std::unordered_multimap<std::uint64_t, std::int32_t> child_index_;  // page_key -> child
  std::vector<std::int32_t> owner_;      // [num_blocks] node, kNoNode or kPendingUncache
  std::vector<std::int32_t> owner_pos_;  // [num_blocks] page index inside the owner
  std::vector<BlockId> pending_;         // dropped blocks to uncache at the next call
  std::vector<std::int32_t> stack_;      // scratch of the callback's subtree walk
  std::vector<std::uint8_t> seen_;       // [num_blocks] scratch of insert's duplicate check
  std::vector<std::pair<PrefixObserverId, PrefixObserver>> observers_;
  PrefixObserverId next_observer_ = 1;
  std::vector<BlockId> removed_;    // blocks of the kRemoved event being gathered
  std::vector<BlockId> reclaimed_;  // blocks the allocator reclaimed, reported at the next call
  std::array<detail::RadixNodeList, 2> lists_{};  // eviction lists, indexed by RadixSegment
  std::int64_t cached_blocks_ = 0;
  std::int64_t protected_blocks_ = 0;
  PrefixCacheStats stats_;

 public:
  /// A tree caching blocks of `allocator`, installing its eviction callback. Throws
  /// `Error{kInvalidArgument}` for a negative limit or a protected_fraction outside [0, 1],
  /// `Error{kInvalidState}` when the allocator already has an eviction callback (another tree's,
  /// or the user's).
  explicit RadixTree(BlockAllocator& allocator, const RadixTreeOptions& options = {})
      : allocator_(allocator), block_size_(allocator.block_size()), policy_(options.policy) {
    std::int64_t cap = allocator.num_blocks();
    if (options.max_cached_blocks) {
      check_arg(*options.max_cached_blocks >= 0, ErrorCode::kInvalidArgument, "max_cached_blocks",
                *options.max_cached_blocks, "must be >=", 0);
      cap = std::min(cap, *options.max_cached_blocks);
    }
    if (options.max_cached_tokens) {
      check_arg(*options.max_cached_tokens >= 0, ErrorCode::kInvalidArgument, "max_cached_tokens",
                *options.max_cached_tokens, "must be >=", 0);
      cap = std::min(cap, *options.max_cached_tokens / block_size_);
    }
    if (!(options.protected_fraction >= 0.0 && options.protected_fraction <= 1.0)) {
      detail::throw_error(ErrorCode::kInvalidArgument,
                          "protected_fraction = " + std::to_string(options.protected_fraction) +
                              " must be in [0, 1]");
    }
    capacity_blocks_ = cap;
    protected_cap_blocks_ =
        static_cast<std::int64_t>(options.protected_fraction * static_cast<double>(cap));
    const auto n = static_cast<std::size_t>(allocator.num_blocks());
    nodes_.emplace_back().live = true;  // the root
    owner_.assign(n, detail::kNoNode);
    owner_pos_.assign(n, 0);
    seen_.assign(n, 0);
    pending_.reserve(n);    // the callback must not allocate: every buffer it touches is sized
    reclaimed_.reserve(n);  // each block is reclaimed at most once between two calls
    removed_.reserve(n);
    stack_.reserve(n + 1);
    free_nodes_.reserve(n + 1);  // live nodes <= cached blocks + 1
    allocator_.set_eviction_callback([this](BlockId b) { on_allocator_evicted(b); }, this);
  }

  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  /// Hands every block back: drops the locks' references, uncaches every cached block and
  /// removes the eviction callback, so the allocator is as if the tree had never cached.
  ~RadixTree() {
    try {
      observers_.clear();  // they may be gone already; destruction reports nothing
      allocator_.set_eviction_callback({}, this);
      flush_pending();
      for (detail::RadixNode& node : nodes_) {
        if (!node.live) continue;
        if (node.blocks.empty()) continue;  // the root
        for (std::int64_t i = 0; i < node.lock_count; ++i) allocator_.free(node.blocks);
        for (BlockId b : node.blocks) allocator_.uncache(b);
      }
    } catch (...) {  // only a broken invariant can throw here; a destructor must not
    }
  }

  /// Tokens per page (the allocator's block_size).
  std::int32_t block_size() const noexcept { return block_size_; }
  /// The most blocks the tree caches at once.
  std::int64_t capacity_blocks() const noexcept { return capacity_blocks_; }
  /// Blocks cached now.
  std::int64_t cached_blocks() const noexcept { return cached_blocks_; }
  /// Tokens cached now (cached_blocks * block_size).
  std::int64_t cached_tokens() const noexcept { return cached_blocks_ * block_size_; }
  /// Nodes in the tree, the root excluded.
  std::int64_t num_nodes() const noexcept {
    return static_cast<std::int64_t>(nodes_.size() - free_nodes_.size()) - 1;
  }
  /// Counters since construction or `reset_stats`.
  PrefixCacheStats stats() const noexcept {
    PrefixCacheStats s = stats_;
    s.cached_blocks = cached_blocks_;
    s.cached_tokens = cached_blocks_ * block_size_;
    return s;
  }
  /// Zeroes the counters (the cache content stays).
  void reset_stats() noexcept { stats_ = {}; }

  /// Adds an observer of every block stored and removed from now on; returns its id for
  /// `remove_observer`. Observers are called in the order they were added. Throws
  /// `Error{kInvalidArgument}` for an empty function. O(1) amortized.
  PrefixObserverId add_observer(PrefixObserver observer) {
    if (!observer) {
      detail::throw_error(ErrorCode::kInvalidArgument, "add_observer: observer is empty");
    }
    observers_.emplace_back(next_observer_, std::move(observer));
    return next_observer_++;
  }

  /// Stops calling observer `id`. Throws `Error{kInvalidArgument}` for an id this tree did not
  /// issue or already removed. O(observers).
  void remove_observer(PrefixObserverId id) {
    const auto it = std::find_if(observers_.begin(), observers_.end(),
                                 [&](const auto& o) { return o.first == id; });
    if (it == observers_.end()) {
      detail::throw_error(
          ErrorCode::kInvalidArgument,
          "remove_observer: id = " + std::to_string(id) + " names no observer of this tree");
    }
    observers_.erase(it);
  }

  /// Observers added and not removed.
  [[nodiscard]] std::int64_t num_observers() const noexcept {
    return static_cast<std::int64_t>(observers_.size());
  }

  /// The longest cached prefix of `tokens` in whole pages, its blocks and a handle to lock it.
  /// Takes no reference: the next allocation may reuse any of these blocks, so a caller that
  /// will share them (`BlockTable::append_shared_blocks`) uses `match_and_lock`, or calls
  /// `lock(handle)` before anything allocates (it throws if the path lost a block meanwhile).
  /// Marks the path most recently used (and, under kSegmentedLru, protected). May split a node
  /// where the match ends. A scheduler that needs the last prompt token's logits matches
  /// `tokens.first(size - 1)`. Only prefixes inserted in namespace `ns` match.
  /// O(matched tokens + path length).
  [[nodiscard]] PrefixMatch match(std::span<const TokenId> tokens, CacheNamespace ns = 0) {
    return match_impl(tokens, ns, /*lock=*/false);
  }

  /// The length in tokens `match(tokens, ns)` would return, without its effects: no split, no
  /// recency update, no statistics (what a cache-aware scheduling policy ranks waiting requests
  /// by). O(matched tokens + path length).
  [[nodiscard]] std::int64_t match_length(std::span<const TokenId> tokens,
                                          CacheNamespace ns = 0) const {
    return walk(tokens, ns).pages * block_size_;
  }

  /// `match`, then `lock` of its handle in the same call: nothing can reclaim the matched blocks
  /// in between, so `blocks` are exactly the blocks the lock holds. Call `unlock(handle)` once
  /// done with them (also after an empty match, whose lock holds no block).
  /// Throws `Error{kOutOfRange}`, changing nothing, if a block of the path already has
  /// `BlockAllocator::kMaxRefCount` owners. O(matched tokens + path length).
  [[nodiscard]] PrefixMatch match_and_lock(std::span<const TokenId> tokens, CacheNamespace ns = 0) {
    return match_impl(tokens, ns, /*lock=*/true);
  }

  /// Whether `handle` was issued by this tree and still names its whole path (what `lock` and
  /// `unlock` accept). O(1).
  [[nodiscard]] bool is_valid(PrefixHandle handle) const noexcept {
    return handle.tree == id_ && handle.node >= 0 && idx(handle.node) < nodes_.size() &&
           node(handle.node).live && node(handle.node).generation == handle.generation;
  }

  /// Caches `tokens` (a prompt after prefill, or a finished sequence) with the caller's KV
  /// `blocks`, one per page in order; a trailing partial page is never cached, and its block may
  /// be passed or omitted (`blocks.size()` is `tokens.size() / block_size` or the ceiling) and
  /// is validated like the others.
  /// The already-cached prefix is kept as is; the new pages are adopted (`mark_cached`) unless
  /// capacity runs out: then least recently used unlocked leaves are evicted first, and if still
  /// short only what fits is cached. The caller keeps its own references either way.
  /// Throws `Error{kInvalidArgument}` (changing nothing) for a wrong block count, a block with
  /// no owner (refcount 0), a block listed twice, or a block the tree already caches at another
  /// position; `Error{kOutOfRange}` for a bad block id. The prefix is cached in namespace `ns`
  /// (only matches in `ns` see it). O(tokens + path length + evicted).
  PrefixInsert insert(std::span<const TokenId> tokens, std::span<const BlockId> blocks,
                      CacheNamespace ns = 0) {
    const auto num_tokens = static_cast<std::int64_t>(tokens.size());
    const std::int64_t full_pages = num_tokens / block_size_;
    const std::int64_t all_pages = full_pages + (num_tokens % block_size_ != 0 ? 1 : 0);
    const auto given = static_cast<std::int64_t>(blocks.size());
    if (given != full_pages && given != all_pages) {
      detail::throw_error(
          ErrorCode::kInvalidArgument,
          "insert: blocks.size() = " + std::to_string(given) +
              " must be tokens.size() / block_size = " + std::to_string(full_pages) +
              " or its ceiling " + std::to_string(all_pages) +
              " (tokens.size() = " + std::to_string(tokens.size()) +
              ", block_size = " + std::to_string(block_size_) + ")");
    }
    validate_owned_unique(blocks);
    const std::span<const BlockId> pages = blocks.first(static_cast<std::size_t>(full_pages));
    const Walk w = walk(tokens, ns);
    const std::vector<BlockId> cached = path_blocks(w);
    for (std::size_t i = 0; i < pages.size(); ++i) {
      const bool same = i < cached.size() && pages[i] == cached[i];
      // A node's block (a dropped one pending uncache is no longer cached by the tree).
      if (!same && owner_[idx(pages[i])] >= 0) {
        detail::throw_error(ErrorCode::kInvalidArgument,
                            "insert: blocks[" + std::to_string(i) + "] = " +
                                std::to_string(pages[i]) + " is already cached for another prefix");
      }
    }
    // Validated: from here on nothing throws but allocation failure.
    flush_pending();
    PrefixInsert result;
    result.matched_tokens = w.pages * block_size_;
    for (std::size_t i = 0; i < cached.size(); ++i) {
      if (pages[i] != cached[i]) result.duplicate_blocks.push_back(pages[i]);
    }
    const std::int64_t need = full_pages - w.pages;
    if (need > 0 && cached_blocks_ + need > capacity_blocks_) {
      pin_path(w.node);  // the prefix we extend must survive the eviction it triggers
      evict_blocks(cached_blocks_ + need - capacity_blocks_, stats_.evicted_blocks);
      unpin_path(w.node);
    }
    const std::int64_t add = std::min(need, capacity_blocks_ - cached_blocks_);
    std::int32_t end = w.node;
    if (add > 0) {
      if (w.pages_in_node < node(end).num_pages()) end = split(end, w.pages_in_node);
      end = add_leaf(end, tokens, pages, w.pages, add, ns);
      result.inserted_tokens = add * block_size_;
      stats_.inserted_tokens += result.inserted_tokens;
    }
    if (end != kRoot) touch_path(end, /*promote=*/false);
    if (add > 0 && !observers_.empty()) {
      const detail::RadixNode& leaf = node(end);
      const std::int32_t parent = leaf.parent;
      notify({PrefixEventKind::kStored, leaf.blocks,
              parent == kRoot ? kNoBlock : node(parent).blocks.back(), leaf.tokens, leaf.ns});
    }
    return result;
  }

  /// Locks the path of `handle` (from `match`): retains each of its blocks once in the
  /// allocator, so no block of it is evicted or reused until the matching `unlock`. Locks nest.
  /// O(path blocks). Throws, changing nothing: `Error{kInvalidArgument}` for a stale handle
  /// (its path lost a block since the match) or one from another tree, `Error{kOutOfRange}` if
  /// a block of the path already has `BlockAllocator::kMaxRefCount` owners.
  void lock(PrefixHandle handle) {
    check_handle(handle, "lock");
    check_lockable(handle.node, node(handle.node).num_pages(), "lock");
    flush_pending();
    lock_path(handle.node);
  }

  /// Undoes one `lock(handle)` (or `match_and_lock`): frees its block references (tail first)
  /// and makes the path evictable again once no lock holds it. O(path blocks). Throws, changing
  /// nothing: `Error{kInvalidArgument}` for a stale or foreign handle, `Error{kInvalidState}`
  /// when `handle` holds no lock.
  void unlock(PrefixHandle handle) {
    check_handle(handle, "unlock");
    if (node(handle.node).own_locks <= 0) {
      detail::throw_error(ErrorCode::kInvalidState,
                          "unlock: handle of node " + std::to_string(handle.node) +
                              " holds no lock (unlock without a matching lock)");
    }
    flush_pending();
    --node(handle.node).own_locks;
    for (std::int32_t x = handle.node; x != kRoot; x = node(x).parent) {
      detail::RadixNode& n = node(x);
      allocator_.free(std::span<const BlockId>(n.blocks));
      if (--n.lock_count == 0) list_of(n).push_back(nodes_, x);
    }
  }

  /// Evicts up to `n_blocks` cached blocks from unlocked leaves, least recently used first (a
  /// leaf loses its tail pages first), and uncaches them in the allocator. Returns the number
  /// evicted (fewer when everything else is locked). O(1) per evicted block plus per node
  /// removed; no scan or heap over the leaves. Throws `Error{kInvalidArgument}` for n_blocks < 0.
  std::int64_t evict(std::int64_t n_blocks) {
    check_arg(n_blocks >= 0, ErrorCode::kInvalidArgument, "n_blocks", n_blocks, "must be >=", 0);
    flush_pending();
    return evict_blocks(n_blocks, stats_.evicted_blocks);
  }

  /// Uncaches, now, the blocks dropped by allocator reuse since the last call (every public
  /// call does this first; a scheduler may call it right after allocating so the allocator's
  /// cached marks are exact). O(dropped blocks).
  void flush() { flush_pending(); }

  /// Checks every invariant (links, counts, lock sums, list order, block ownership and the
  /// allocator's cached marks); throws `Error{kInvalidState}` on the first violation.
  /// O(nodes + tokens + num_blocks); for tests and debugging.
  void check_consistency() const;

 private:
  struct Walk {
    std::int32_t node = kRoot;       // deepest node reached
    std::int32_t pages_in_node = 0;  // its pages matched (== num_pages when whole)
    std::int64_t pages = 0;          // pages matched in all
  };

  static std::size_t idx(std::int64_t i) noexcept { return static_cast<std::size_t>(i); }
  detail::RadixNode& node(std::int32_t n) noexcept { return nodes_[idx(n)]; }
  const detail::RadixNode& node(std::int32_t n) const noexcept { return nodes_[idx(n)]; }
  detail::RadixNodeList& list_of(const detail::RadixNode& n) noexcept {
    return lists_[static_cast<std::size_t>(n.segment)];
  }
  std::span<const TokenId> page(std::span<const TokenId> tokens, std::int64_t p) const noexcept {
    return tokens.subspan(idx(p * block_size_), idx(block_size_));
  }

  static std::size_t histogram_bucket(std::int64_t tokens) noexcept {
    const auto width = static_cast<std::size_t>(std::bit_width(static_cast<std::uint64_t>(tokens)));
    return std::min(width, kMatchHistogramBuckets - 1);
  }

  std::int32_t find_child(std::int32_t parent, std::span<const TokenId> first_page,
                          CacheNamespace ns) const;
  // Longest page-aligned match, read only.
  Walk walk(std::span<const TokenId> tokens, CacheNamespace ns) const;
  // The blocks of a walk's matched pages, head first.
  std::vector<BlockId> path_blocks(const Walk& w) const;
  // insert's checks: every block owned (refcount >= 1) and listed once.
  void validate_owned_unique(std::span<const BlockId> blocks);
  // Throws unless `h` is valid (issued by this tree, path whole).
  void check_handle(PrefixHandle h, const char* op) const;
  // Throws unless every block of the path ending after `pages_in_end` pages of node `end` can
  // take one more reference.
  void check_lockable(std::int32_t end, std::int32_t pages_in_end, const char* op) const;
  PrefixMatch match_impl(std::span<const TokenId> tokens, CacheNamespace ns, bool lock);
  void lock_path(std::int32_t end);

  std::int32_t new_node() {
    std::int32_t n;
    if (!free_nodes_.empty()) {
      n = free_nodes_.back();
      free_nodes_.pop_back();
    } else {
      n = static_cast<std::int32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    detail::RadixNode& x = node(n);
    x.live = true;
    x.parent = detail::kNoNode;
    x.lock_count = x.own_locks = 0;
    x.segment = detail::RadixSegment::kProbation;
    return n;
  }

  void free_node(std::int32_t n) noexcept {  // n is unlinked from its parent and lists
    detail::RadixNode& x = node(n);
    x.live = false;
    ++x.generation;
    x.tokens.clear();
    x.blocks.clear();
    x.children.clear();
    free_nodes_.push_back(n);  // capacity reserved
  }

  void link_child(std::int32_t parent, std::int32_t child) {
    detail::RadixNode& c = node(child);
    detail::RadixNode& p = node(parent);
    c.parent = parent;
    c.pos_in_parent = static_cast<std::int32_t>(p.children.size());
    p.children.push_back(child);
    c.key =
        detail::page_key(parent, std::span<const TokenId>(c.tokens).first(idx(block_size_)), c.ns);
    child_index_.emplace(c.key, child);
  }

  void erase_index(std::int32_t child) noexcept {
    const auto [lo, hi] = child_index_.equal_range(node(child).key);
    for (auto it = lo; it != hi; ++it) {
      if (it->second == child) {
        child_index_.erase(it);
        return;
      }
    }
  }

  void unlink_child(std::int32_t child) noexcept {
    detail::RadixNode& c = node(child);
    std::vector<std::int32_t>& siblings = node(c.parent).children;
    const std::int32_t last = siblings.back();
    siblings[idx(c.pos_in_parent)] = last;
    node(last).pos_in_parent = c.pos_in_parent;
    siblings.pop_back();
    erase_index(child);
  }

  void add_blocks(detail::RadixNode& n, std::int64_t count) noexcept {
    cached_blocks_ += count;
    if (n.segment == detail::RadixSegment::kProtected) protected_blocks_ += count;
  }

  // Splits node n after its first k pages (0 < k < pages): a new node takes those pages and
  // becomes n's parent, so n keeps its identity (and handles to it stay valid).
  std::int32_t split(std::int32_t n, std::int32_t k);

  // A new leaf under `parent` holding pages [first, first + count) of the sequence.
  std::int32_t add_leaf(std::int32_t parent, std::span<const TokenId> tokens,
                        std::span<const BlockId> pages, std::int64_t first, std::int64_t count,
                        CacheNamespace ns) {
    const std::int32_t c = new_node();
    detail::RadixNode& leaf = node(c);
    leaf.ns = ns;
    const auto from = tokens.begin() + first * block_size_;
    leaf.tokens.assign(from, from + count * block_size_);
    leaf.blocks.assign(pages.begin() + first, pages.begin() + first + count);
    for (std::int32_t i = 0; i < leaf.num_pages(); ++i) {
      const BlockId b = leaf.blocks[idx(i)];
      allocator_.mark_cached(b);
      owner_[idx(b)] = c;
      owner_pos_[idx(b)] = i;
    }
    add_blocks(leaf, count);
    link_child(parent, c);
    return c;
  }

  // Moves the path end..root to the most recently used end of its lists, leaf first, so every
  // node stays behind its descendants: the head of a list is then always a leaf.
  void touch_path(std::int32_t end, bool promote);

  // Internal pins: like locks, but without allocator references (no callback can run inside a
  // tree call, so only the tree's own eviction needs keeping off).
  void pin_path(std::int32_t end) noexcept {
    for (std::int32_t x = end; x != kRoot; x = node(x).parent) {
      detail::RadixNode& n = node(x);
      if (n.lock_count++ == 0 && n.listed) list_of(n).unlink(nodes_, x);
    }
  }
  void unpin_path(std::int32_t end) noexcept {
    for (std::int32_t x = end; x != kRoot; x = node(x).parent) {
      detail::RadixNode& n = node(x);
      if (--n.lock_count == 0) list_of(n).push_back(nodes_, x);
    }
  }

  std::int64_t evict_blocks(std::int64_t n_blocks, std::int64_t& counter);

  void flush_pending() {
    for (BlockId b : pending_) {
      if (owner_[idx(b)] != kPendingUncache) continue;  // reused by the allocator meanwhile
      owner_[idx(b)] = detail::kNoNode;
      allocator_.uncache(b);
    }
    pending_.clear();
    if (!reclaimed_.empty()) {
      notify({PrefixEventKind::kRemoved, reclaimed_, kNoBlock, {}, 0});
      reclaimed_.clear();
    }
  }

  void drop_block_later(BlockId b) noexcept {
    owner_[idx(b)] = kPendingUncache;
    pending_.push_back(b);  // capacity num_blocks: each block is pending at most once
    if (!observers_.empty()) reclaimed_.push_back(b);
  }

  // Calls every observer; noexcept, so an observer that throws ends the program instead of
  // leaving the tree half-changed.
  void notify(const PrefixEvent& event) const noexcept {
    for (const auto& [id, observer] : observers_) observer(event);
  }

  // The allocator reused cached block b. Drop it, the rest of its node and the node's subtree.
  // Runs inside allocation: no allocator calls, no memory allocation, no throw.
  // NOLINTNEXTLINE(bugprone-exception-escape): see its definition
  void on_allocator_evicted(BlockId b) noexcept;
};

}  // namespace inferkit

#include <inferkit/prefix/detail/radix_tree_check.hpp>
#include <inferkit/prefix/detail/radix_tree_lookup.hpp>
#include <inferkit/prefix/detail/radix_tree_surgery.hpp>
