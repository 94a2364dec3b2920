// SPDX-License-Identifier: Apache-2.0
// BlockAllocator: the host-side bookkeeping of PagedAttention's KV memory. A pool of fixed-size
// blocks with O(1) allocate/free through an intrusive free list, reference counts for sharing
// (fork, prefix cache), and an LRU list of cached blocks that stay readable until truly free
// blocks run out. The scheduler calls it every step; PagedKVCache owns the storage it indexes.
// Threads: one thread at a time for an allocator and the BlockTables and RadixTree bound to it
// (their mutating calls change it too); const queries may run together while nothing mutates.
#pragma once

#include <cstdint>
#include <functional>
#include <inferkit/core/error.hpp>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace inferkit {

/// A physical KV block id, in `[0, num_blocks)`.
using BlockId = std::int32_t;

/// "No block" (an empty list link, a padding entry).
inline constexpr BlockId kNoBlock = -1;

namespace detail {
/// Test access (defined in tests/support/): reaches a refcount's limit without 2^31 retains.
struct BlockAllocatorPeer;
}  // namespace detail

/// Where a block is in its life cycle.
enum class BlockState : std::uint8_t {
  kFree,       ///< on the free list; its contents are garbage
  kInUse,      ///< refcount >= 1
  kEvictable,  ///< refcount 0 but cached: still readable, on the LRU list, reused last
};

/// A pool of `num_blocks` KV blocks of `block_size` tokens each.
///
/// Every block is in exactly one state (`BlockState`):
/// - **free**: on an intrusive LIFO free list;
/// - **in use**: refcount >= 1 (one count per owner: block tables, the prefix cache's locks);
/// - **evictable**: refcount 0 but marked cached by a prefix cache: it keeps its K/V and sits on
///   an LRU list; `retain` revives it in O(1), and allocation reuses it only when the free list
///   is empty, calling the eviction callback first so the cache can forget it.
///
/// All metadata is preallocated as structure-of-arrays at construction; no operation but
/// `allocate(n)` (which returns its blocks in a vector) allocates heap memory. Bad input
/// (out-of-range id, freeing a free block, refcount underflow or overflow, ...) throws `Error`
/// naming the block and leaves the allocator unchanged. Running out of blocks is not an error:
/// `allocate` returns an empty result.
///
/// Block tables and prefix caches bind to an allocator by address, so it is neither copyable
/// nor movable, and it must outlive every `BlockTable` and `RadixTree` built on it.
///
/// The allocator also records how many slots of each block hold tokens (`set_block_tokens`,
/// maintained by BlockTable) so it can report `tokens_stored()` and `utilization()`.
///
/// **Eviction callback.** Only the allocating calls (`allocate`, `allocate_one`, and through
/// them `BlockTable::append_tokens`) can evict, and so call the callback. It receives the block
/// id after the block has left the LRU list and lost its cached mark (it is already handed to
/// the new owner); it must not throw and must not call mutating methods of this allocator.
/// There is one callback at a time, and only its owner can remove it: whoever tracks the cached
/// blocks (a `RadixTree`) must hear of every eviction, so a second one cannot take over.
class BlockAllocator {
  friend struct detail::BlockAllocatorPeer;

 public:
  /// Called with each cached block that allocation evicts for reuse.
  using EvictionCallback = std::function<void(BlockId)>;

  /// The most owners one block can have (its reference count is an int32).
  static constexpr std::int32_t kMaxRefCount = std::numeric_limits<std::int32_t>::max();

 private:
  std::int32_t num_blocks_ = 0;
  std::int32_t block_size_ = 0;
  // Structure of arrays: each vector below is [num_blocks], indexed by BlockId.
  std::vector<std::int32_t> ref_count_;
  std::vector<std::int32_t> tokens_;  // slots holding tokens (0..block_size)
  std::vector<BlockId> next_;         // free list (singly) or LRU list (doubly) links
  std::vector<BlockId> prev_;
  std::vector<BlockState> state_;
  std::vector<std::uint8_t> cached_;
  std::vector<std::int32_t> pending_;  // scratch for validating batched retains/frees (all zero)
  BlockId free_head_ = kNoBlock;
  BlockId lru_head_ = kNoBlock;  // least recently used: evicted first
  BlockId lru_tail_ = kNoBlock;
  std::int32_t num_free_ = 0;
  std::int32_t num_evictable_ = 0;
  std::int64_t tokens_stored_ = 0;  // sum of tokens_ over in-use blocks
  std::int64_t num_evictions_ = 0;
  EvictionCallback on_evict_;
  const void* on_evict_owner_ = nullptr;

 public:
  /// Creates a pool of `num_blocks` free blocks of `block_size` tokens.
  /// Throws `Error{kInvalidArgument}` unless `num_blocks >= 1` and `block_size >= 1`.
  BlockAllocator(std::int32_t num_blocks, std::int32_t block_size) {
    check_arg(num_blocks >= 1, ErrorCode::kInvalidArgument, "num_blocks", num_blocks,
              "must be >=", 1);
    check_arg(block_size >= 1, ErrorCode::kInvalidArgument, "block_size", block_size,
              "must be >=", 1);
    num_blocks_ = num_blocks;
    block_size_ = block_size;
    const auto n = static_cast<std::size_t>(num_blocks);
    ref_count_.assign(n, 0);
    tokens_.assign(n, 0);
    next_.assign(n, kNoBlock);
    prev_.assign(n, kNoBlock);
    state_.assign(n, BlockState::kFree);
    cached_.assign(n, 0);
    pending_.assign(n, 0);
    // Ascending ids come out first: block i links to i + 1.
    for (BlockId b = num_blocks - 1; b >= 0; --b) push_free(b);
  }

  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;
  BlockAllocator(BlockAllocator&&) = delete;
  BlockAllocator& operator=(BlockAllocator&&) = delete;
  ~BlockAllocator() = default;

  /// Installs `callback`, which allocation calls for every cached block it evicts, on behalf of
  /// `owner` (any address that identifies the installer; a RadixTree passes itself). An empty
  /// `callback` removes the installed one (a no-op when there is none). O(1).
  /// Throws `Error{kInvalidState}`, changing nothing, when installing while a callback is
  /// installed (remove it first), or when removing a callback installed by another owner.
  void set_eviction_callback(EvictionCallback callback, const void* owner = nullptr) {
    if (on_evict_ && (callback || owner != on_evict_owner_)) [[unlikely]] {
      detail::throw_error(ErrorCode::kInvalidState,
                          std::string("set_eviction_callback: a callback is already installed") +
                              (callback ? " (one at a time: its owner must remove it first)"
                                        : " by another owner, who alone can remove it"));
    }
    on_evict_ = std::move(callback);
    on_evict_owner_ = on_evict_ ? owner : nullptr;
  }
  /// Whether an eviction callback is installed.
  [[nodiscard]] bool has_eviction_callback() const noexcept { return static_cast<bool>(on_evict_); }

  // ---- sizes and statistics (all O(1)) ----

  /// Blocks in the pool.
  [[nodiscard]] std::int32_t num_blocks() const noexcept { return num_blocks_; }
  /// Tokens per block.
  [[nodiscard]] std::int32_t block_size() const noexcept { return block_size_; }
  /// Blocks on the free list (not counting evictable cached blocks).
  [[nodiscard]] std::int32_t num_free_blocks() const noexcept { return num_free_; }
  /// Cached blocks with refcount 0, reusable after the free list runs out.
  [[nodiscard]] std::int32_t num_evictable_blocks() const noexcept { return num_evictable_; }
  /// Blocks an allocation can obtain: free + evictable.
  [[nodiscard]] std::int32_t num_available_blocks() const noexcept {
    return num_free_ + num_evictable_;
  }
  /// Blocks with refcount >= 1.
  [[nodiscard]] std::int32_t num_used_blocks() const noexcept {
    return num_blocks_ - num_free_ - num_evictable_;
  }
  /// Tokens held by in-use blocks (each physical block counted once, however many owners).
  [[nodiscard]] std::int64_t tokens_stored() const noexcept { return tokens_stored_; }
  /// `tokens_stored / (used blocks * block_size)`, in [0, 1]; 0 when no block is used.
  [[nodiscard]] double utilization() const noexcept {
    const std::int32_t used = num_used_blocks();
    return used == 0 ? 0.0
                     : static_cast<double>(tokens_stored_) /
                           (static_cast<double>(used) * static_cast<double>(block_size_));
  }
  /// Cached blocks evicted (reused) by allocation since construction.
  [[nodiscard]] std::int64_t num_evictions() const noexcept { return num_evictions_; }

  // ---- per-block queries (throw Error{kOutOfRange} for a bad id) ----

  /// Owners of block `b` (0 for free and evictable blocks).
  [[nodiscard]] std::int32_t ref_count(BlockId b) const {
    check_id(b, "block");
    return ref_count_[idx(b)];
  }
  /// Life-cycle state of block `b`.
  [[nodiscard]] BlockState state(BlockId b) const {
    check_id(b, "block");
    return state_[idx(b)];
  }
  /// Whether block `b` is marked as holding a cached prefix.
  [[nodiscard]] bool is_cached(BlockId b) const {
    check_id(b, "block");
    return cached_[idx(b)] != 0;
  }
  /// Slots of block `b` that hold tokens (0..block_size).
  [[nodiscard]] std::int32_t block_tokens(BlockId b) const {
    check_id(b, "block");
    return tokens_[idx(b)];
  }

  // ---- allocation ----

  /// Whether `n` blocks can be allocated while keeping `floor(watermark * num_blocks)` blocks
  /// in reserve (vLLM's watermark: admission of new work leaves room for running sequences to
  /// grow). `n` is an int64 so that any block count (`BlockTable::blocks_needed_to_append`)
  /// can be asked about. Throws `Error{kInvalidArgument}` for `n < 0` or a watermark outside
  /// [0, 1].
  [[nodiscard]] bool can_allocate(std::int64_t n, double watermark = 0.0) const {
    check_arg(n >= 0, ErrorCode::kInvalidArgument, "n", n, "must be >=", 0);
    check_arg(watermark >= 0.0 && watermark <= 1.0, ErrorCode::kInvalidArgument, "watermark",
              watermark, "must be in", "[0, 1]");
    const auto reserve = static_cast<std::int64_t>(watermark * static_cast<double>(num_blocks_));
    return std::int64_t{num_available_blocks()} - n >= reserve;
  }

  /// Allocates `n` blocks (refcount 1 each, 0 tokens), all or nothing, and returns them in a
  /// vector the caller owns; an empty vector when fewer than `n` blocks are available (and for
  /// `n == 0`). Takes free blocks first, then evicts least recently used cached blocks (calling
  /// the eviction callback). O(n), one heap allocation: hot paths use `allocate(out)` or
  /// `allocate_one`. Throws `Error{kInvalidArgument}` for `n < 0`.
  [[nodiscard]] std::vector<BlockId> allocate(std::int32_t n) {
    check_arg(n >= 0, ErrorCode::kInvalidArgument, "n", n, "must be >=", 0);
    std::vector<BlockId> out;
    if (n == 0 || n > num_available_blocks()) return out;
    out.resize(static_cast<std::size_t>(n));  // before anything changes: may throw bad_alloc
    for (BlockId& b : out) b = take_one();
    return out;
  }

  /// Allocates `out.size()` blocks into `out` (caller-owned storage, no heap allocation), all
  /// or nothing; false (and `out` untouched) when not enough blocks are available.
  /// O(out.size()).
  [[nodiscard]] bool allocate(std::span<BlockId> out) {
    if (out.size() > static_cast<std::size_t>(num_available_blocks())) return false;
    for (BlockId& b : out) b = take_one();
    return true;
  }

  /// Allocates one block; `std::nullopt` when none is available. O(1).
  [[nodiscard]] std::optional<BlockId> allocate_one() {
    if (num_available_blocks() == 0) return std::nullopt;
    return take_one();
  }

  // ---- sharing and release ----

  /// Adds an owner to block `b`: increments the refcount of an in-use block, or revives an
  /// evictable cached block (removed from the LRU list, refcount 1, contents intact). O(1).
  /// Throws `Error{kInvalidState}` for a free block, `Error{kOutOfRange}` for a bad id or a
  /// block that already has `kMaxRefCount` owners.
  void retain(BlockId b) {
    check_id(b, "block");
    check_not_free(b, "retain");
    if (ref_count_[idx(b)] == kMaxRefCount) [[unlikely]] {
      throw_ref_limit(b);
    }
    retain_unchecked(b);
  }

  /// `retain` on every block (a fork shares all of a parent's blocks); a block listed k times
  /// gains k owners. All or nothing: validates every id, and that no refcount would pass
  /// `kMaxRefCount`, before changing anything. O(blocks.size()).
  void retain(std::span<const BlockId> blocks) {
    // No refcount can pass the limit if none is above `room`: one compare per block, and the
    // exact count of duplicates only near the limit.
    const std::int64_t room = kMaxRefCount - static_cast<std::int64_t>(blocks.size());
    bool near_limit = false;
    for (BlockId b : blocks) {
      check_id(b, "block");
      check_not_free(b, "retain");
      near_limit |= ref_count_[idx(b)] > room;
    }
    if (near_limit) [[unlikely]] {
      validate_retain(blocks);
    }
    for (BlockId b : blocks) retain_unchecked(b);
  }

  /// Drops one owner of block `b`. At refcount 0 a cached block becomes evictable (most
  /// recently used end of the LRU list) and keeps its contents; any other block returns to the
  /// free list. O(1). Throws `Error{kInvalidState}` if `b` has no owner (double free, refcount
  /// underflow), `Error{kOutOfRange}` for a bad id; the allocator is then unchanged.
  void free(BlockId b) {
    check_id(b, "block");
    check_owned(b, 1);
    release_unchecked(b);
  }

  /// Drops one owner of every block of a sequence, given in logical order (head first). Blocks
  /// are released tail first, so a sequence's cached tail blocks sit nearer the LRU end and are
  /// evicted before its head blocks (a shared prefix outlives the suffixes that extend it).
  /// All or nothing: a bad id, or a block listed more times than it has owners, throws before
  /// anything changes. O(blocks.size()).
  void free(std::span<const BlockId> blocks) {
    validate_release(blocks);
    for (std::size_t i = blocks.size(); i-- > 0;) release_unchecked(blocks[i]);
  }

  // ---- prefix-cache hooks ----

  /// Marks in-use block `b` as holding a cached prefix: when its refcount reaches 0 it becomes
  /// evictable instead of free. Idempotent. O(1). Throws `Error{kInvalidState}` unless `b` is in
  /// use (a free block's contents are garbage and cannot be cached).
  void mark_cached(BlockId b) {
    check_id(b, "block");
    check_owned(b, 1);
    cached_[idx(b)] = 1;
  }

  /// The cache's explicit release: clears the cached mark of `b`. An evictable block goes back
  /// to the free list at once; an in-use block will be freed normally by its last owner. Does
  /// not call the eviction callback. O(1). Throws `Error{kInvalidState}` if `b` is not cached.
  void uncache(BlockId b) {
    check_id(b, "block");
    if (cached_[idx(b)] == 0) {
      detail::throw_error(ErrorCode::kInvalidState,
                          "uncache: block " + std::to_string(b) + " is not cached");
    }
    cached_[idx(b)] = 0;
    if (state_[idx(b)] == BlockState::kEvictable) {
      lru_unlink(b);
      tokens_[idx(b)] = 0;
      push_free(b);
    }
  }

  /// Records that `tokens` slots of in-use block `b` hold tokens (BlockTable calls this as it
  /// appends and truncates). O(1). Throws `Error{kOutOfRange}` for tokens outside
  /// [0, block_size], `Error{kInvalidState}` if `b` is not in use.
  void set_block_tokens(BlockId b, std::int32_t tokens) {
    check_id(b, "block");
    check_owned(b, 1);
    if (tokens < 0 || tokens > block_size_) [[unlikely]] {
      check_arg(false, ErrorCode::kOutOfRange, "tokens", tokens,
                "must be in [0, block_size] with block_size =", block_size_);
    }
    tokens_stored_ += tokens - tokens_[idx(b)];
    tokens_[idx(b)] = tokens;
  }

  /// Walks every list and recounts every statistic; throws `Error{kInvalidState}` describing
  /// the first inconsistency. O(num_blocks); for tests and debugging.
  void check_consistency() const {
    auto fail = [](const std::string& what) {
      detail::throw_error(ErrorCode::kInvalidState, "BlockAllocator inconsistent: " + what);
    };
    std::int32_t free_seen = 0;
    for (BlockId b = free_head_; b != kNoBlock; b = next_[idx(b)]) {
      if (state_[idx(b)] != BlockState::kFree || ++free_seen > num_blocks_) {
        fail("free list holds block " + std::to_string(b));
      }
    }
    std::int32_t lru_seen = 0;
    BlockId prev = kNoBlock;
    for (BlockId b = lru_head_; b != kNoBlock; prev = b, b = next_[idx(b)]) {
      if (state_[idx(b)] != BlockState::kEvictable || prev_[idx(b)] != prev ||
          ++lru_seen > num_blocks_) {
        fail("LRU list holds block " + std::to_string(b));
      }
    }
    if (prev != lru_tail_) fail("LRU tail");
    std::int32_t free_count = 0;
    std::int32_t evictable_count = 0;
    std::int64_t tokens = 0;
    for (BlockId b = 0; b < num_blocks_; ++b) {
      const BlockState s = state_[idx(b)];
      const std::int32_t refs = ref_count_[idx(b)];
      const bool ok = s == BlockState::kInUse
                          ? refs >= 1
                          : refs == 0 && (s == BlockState::kFree) == (cached_[idx(b)] == 0);
      if (!ok) fail("block " + std::to_string(b) + " state/refcount/cached mismatch");
      if (s == BlockState::kFree && tokens_[idx(b)] != 0) fail("free block holds tokens");
      free_count += s == BlockState::kFree ? 1 : 0;
      evictable_count += s == BlockState::kEvictable ? 1 : 0;
      tokens += s == BlockState::kInUse ? tokens_[idx(b)] : 0;
      if (pending_[idx(b)] != 0) fail("scratch not reset");
    }
    if (free_count != num_free_ || free_seen != num_free_) fail("free count");
    if (evictable_count != num_evictable_ || lru_seen != num_evictable_) fail("evictable count");
    if (tokens != tokens_stored_) fail("tokens stored");
  }

 private:
  static std::size_t idx(BlockId b) noexcept { return static_cast<std::size_t>(b); }

  // The checks are one compare on the hot path; the messages are built out of line.
  void check_id(BlockId b, const char* name) const {
    if (b < 0 || b >= num_blocks_) [[unlikely]] {
      throw_bad_id(b, name);
    }
  }
  void check_not_free(BlockId b, const char* op) const {
    if (state_[idx(b)] == BlockState::kFree) [[unlikely]] {
      throw_free(b, op);
    }
  }
  // Throws unless block b has at least `owners` owners.
  void check_owned(BlockId b, std::int64_t owners) const {
    if (ref_count_[idx(b)] < owners) [[unlikely]] {
      throw_not_owned(b, owners);
    }
  }
  [[noreturn]] void throw_bad_id(BlockId b, const char* name) const {
    detail::throw_error(
        ErrorCode::kOutOfRange,
        std::string(name) + " = " + std::to_string(b) +
            " must be in [0, num_blocks) with num_blocks = " + std::to_string(num_blocks_));
  }
  [[noreturn]] void throw_free(BlockId b, const char* op) const {
    detail::throw_error(ErrorCode::kInvalidState,
                        std::string(op) + ": block " + std::to_string(b) + " is free");
  }
  [[noreturn]] void throw_ref_limit(BlockId b) const {
    detail::throw_error(
        ErrorCode::kOutOfRange,
        "retain: block " + std::to_string(b) + " has refcount " +
            std::to_string(ref_count_[idx(b)]) +
            ", one more owner would pass kMaxRefCount = " + std::to_string(kMaxRefCount));
  }
  [[noreturn]] void throw_not_owned(BlockId b, std::int64_t owners) const {
    detail::throw_error(ErrorCode::kInvalidState,
                        "block " + std::to_string(b) + " has refcount " +
                            std::to_string(ref_count_[idx(b)]) + " (" +
                            (state_[idx(b)] == BlockState::kFree ? "free" : "evictable") +
                            "), cannot drop " + std::to_string(owners) + " owner(s)");
  }

  // Counts each id's occurrences in `pending_` (stopping at the first that `room_of` would not
  // allow, so the count never overflows), then resets the scratch: a batch with duplicates is
  // validated exactly. Returns the first block over its limit.
  template <class RoomOf>
  std::optional<BlockId> first_over(std::span<const BlockId> blocks, RoomOf room_of) {
    std::optional<BlockId> bad;
    for (BlockId b : blocks) {
      std::int32_t& seen = pending_[idx(b)];
      if (seen < room_of(b)) {
        ++seen;
      } else if (!bad) {
        bad = b;
      }
    }
    for (BlockId b : blocks) pending_[idx(b)] = 0;
    return bad;
  }
  void validate_release(std::span<const BlockId> blocks) {
    for (BlockId b : blocks) check_id(b, "block");
    const auto bad = first_over(blocks, [this](BlockId b) { return ref_count_[idx(b)]; });
    if (bad) check_owned(*bad, std::int64_t{ref_count_[idx(*bad)]} + 1);
  }
  void validate_retain(std::span<const BlockId> blocks) {
    const auto bad =
        first_over(blocks, [this](BlockId b) { return kMaxRefCount - ref_count_[idx(b)]; });
    if (bad) throw_ref_limit(*bad);
  }

  void push_free(BlockId b) noexcept {
    state_[idx(b)] = BlockState::kFree;
    prev_[idx(b)] = kNoBlock;
    next_[idx(b)] = free_head_;
    free_head_ = b;
    ++num_free_;
  }
  void lru_push_back(BlockId b) noexcept {
    state_[idx(b)] = BlockState::kEvictable;
    prev_[idx(b)] = lru_tail_;
    next_[idx(b)] = kNoBlock;
    if (lru_tail_ != kNoBlock) {
      next_[idx(lru_tail_)] = b;
    } else {
      lru_head_ = b;
    }
    lru_tail_ = b;
    ++num_evictable_;
  }
  void lru_unlink(BlockId b) noexcept {
    const BlockId p = prev_[idx(b)];
    const BlockId n = next_[idx(b)];
    (p != kNoBlock ? next_[idx(p)] : lru_head_) = n;
    (n != kNoBlock ? prev_[idx(n)] : lru_tail_) = p;
    prev_[idx(b)] = next_[idx(b)] = kNoBlock;
    --num_evictable_;
  }

  // Precondition: num_available_blocks() >= 1.
  BlockId take_one() {
    BlockId b = free_head_;
    bool evicted = false;
    if (b != kNoBlock) {
      free_head_ = next_[idx(b)];
      next_[idx(b)] = kNoBlock;
      --num_free_;
    } else {
      b = lru_head_;
      INFERKIT_ASSERT(b != kNoBlock);
      lru_unlink(b);
      cached_[idx(b)] = 0;
      tokens_[idx(b)] = 0;
      ++num_evictions_;
      evicted = true;
    }
    state_[idx(b)] = BlockState::kInUse;
    ref_count_[idx(b)] = 1;
    if (evicted && on_evict_) on_evict_(b);
    return b;
  }

  void retain_unchecked(BlockId b) noexcept {
    if (state_[idx(b)] == BlockState::kEvictable) {
      lru_unlink(b);
      state_[idx(b)] = BlockState::kInUse;
      tokens_stored_ += tokens_[idx(b)];
    }
    ++ref_count_[idx(b)];
  }

  void release_unchecked(BlockId b) noexcept {
    if (--ref_count_[idx(b)] > 0) return;
    tokens_stored_ -= tokens_[idx(b)];
    if (cached_[idx(b)] != 0) {
      lru_push_back(b);  // keeps its tokens_ for revival
    } else {
      tokens_[idx(b)] = 0;
      push_free(b);
    }
  }
};

}  // namespace inferkit
