// SPDX-License-Identifier: Apache-2.0
// BlockTable: one sequence's logical -> physical block mapping on top of BlockAllocator. The
// scheduler grows it as tokens are appended (a block exactly when the last one is full, with
// copy-on-write of a shared partial block), truncates it for rejected speculative tokens, and
// exports a batch of tables as the page tables kernels read: CSR (PageTableView) or dense padded.
// Threads: one thread at a time for an allocator and all its tables: every call taking a
// BlockAllocator& (fork too, though const), move assignment and destruction change the allocator.
#pragma once

#include <algorithm>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/detail/span_overlap.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace inferkit {

/// A block copy that copy-on-write asks the storage to perform (vLLM's `blocks_to_copy`): the
/// first `num_slots` token slots of block `src` go to block `dst`, for every layer, K and V
/// (`PagedKVCache::copy_block`).
struct BlockCopy {
  /// Block read from: the shared, partially filled block.
  BlockId src = kNoBlock;
  /// Block written to: the sequence's new private block (never `src` in a copy a table emits).
  BlockId dst = kNoBlock;
  /// Token slots copied from the start of the block, in [0, block_size]: `src`'s fill.
  std::int32_t num_slots = 0;
  /// Field-wise equality (tests compare copy lists).
  bool operator==(const BlockCopy&) const = default;
};

/// One sequence's blocks in logical order and its length in tokens.
///
/// Invariant: `num_blocks() == ceil(num_tokens() / block_size)`; token `p` lives in block
/// `blocks()[p / block_size]` at offset `p % block_size`, i.e. in slot
/// `block * block_size + offset` of the paged storage.
///
/// **Ownership.** The table owns one reference to each of its blocks and is bound to the one
/// allocator they come from: `BlockTable(allocator)` binds at construction,
/// `BlockTable(block_size)` when it first takes a block. Every method that takes an allocator
/// throws `Error` for any other one, so block ids of two pools never mix. `release` and `truncate`
/// return blocks early; the destructor returns whatever is still owned, so a dropped table leaks
/// nothing, and the allocator must outlive its tables. The table is move-only (a moved-from table
/// is empty, owns nothing and keeps its binding); sharing blocks with another table is explicit:
/// `fork`.
class BlockTable {
  BlockAllocator* allocator_ = nullptr;  // the bound allocator; null until the first block
  std::int32_t block_size_ = 1;
  std::vector<BlockId> blocks_;
  std::int64_t num_tokens_ = 0;

 public:
  /// The most blocks one table holds (`num_blocks()` and page-table entries are int32).
  static constexpr std::int64_t kMaxBlocks = std::numeric_limits<std::int32_t>::max();

  /// An empty table bound to `allocator` (its blocks have `allocator.block_size()` tokens).
  explicit BlockTable(BlockAllocator& allocator) noexcept
      : allocator_(&allocator), block_size_(allocator.block_size()) {}

  /// An empty table for blocks of `block_size` tokens, bound to the first allocator it takes a
  /// block from (which must have that block size). Throws `Error{kInvalidArgument}` for
  /// `block_size < 1`.
  explicit BlockTable(std::int32_t block_size) : block_size_(block_size) {
    check_arg(block_size >= 1, ErrorCode::kInvalidArgument, "block_size", block_size,
              "must be >=", 1);
  }

  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;
  /// Takes `other`'s blocks and binding; `other` is left empty (and still bound).
  BlockTable(BlockTable&& other) noexcept
      : allocator_(other.allocator_),
        block_size_(other.block_size_),
        blocks_(std::move(other.blocks_)),
        num_tokens_(std::exchange(other.num_tokens_, 0)) {
    other.blocks_.clear();
  }
  /// Returns this table's blocks to its allocator, then takes `other`'s blocks and binding.
  BlockTable& operator=(BlockTable&& other) noexcept {
    if (this != &other) {
      release_owned();
      allocator_ = other.allocator_;
      block_size_ = other.block_size_;
      blocks_ = std::move(other.blocks_);
      other.blocks_.clear();
      num_tokens_ = std::exchange(other.num_tokens_, 0);
    }
    return *this;
  }
  /// Returns every block still owned to the allocator (tail first).
  ~BlockTable() { release_owned(); }

  /// The allocator this table is bound to; nullptr until a table built from a block size first
  /// takes a block.
  [[nodiscard]] const BlockAllocator* allocator() const noexcept { return allocator_; }
  /// Tokens per block.
  [[nodiscard]] std::int32_t block_size() const noexcept { return block_size_; }
  /// Tokens in the sequence.
  [[nodiscard]] std::int64_t num_tokens() const noexcept { return num_tokens_; }
  /// Blocks owned.
  [[nodiscard]] std::int32_t num_blocks() const noexcept {
    return static_cast<std::int32_t>(blocks_.size());
  }
  /// Physical block ids in logical order (valid until the table changes).
  [[nodiscard]] std::span<const BlockId> blocks() const noexcept { return blocks_; }
  /// Tokens in the last block (1..block_size), or 0 for an empty table.
  [[nodiscard]] std::int32_t last_block_tokens() const noexcept {
    return blocks_.empty() ? 0
                           : static_cast<std::int32_t>(
                                 num_tokens_ - std::int64_t{num_blocks() - 1} * block_size_);
  }

  /// Blocks `append_tokens(allocator, n, ...)` would take now, counting the copy-on-write
  /// block. Exact for every `n >= 0`: an int64, because a huge `n` needs more blocks than an
  /// int32 counts (ask `allocator.can_allocate(...)`, which takes an int64). O(1).
  /// Throws `Error{kInvalidArgument}` for `n < 0` or an allocator that is not this table's.
  [[nodiscard]] std::int64_t blocks_needed_to_append(const BlockAllocator& allocator,
                                                     std::int64_t n) const {
    check_arg(n >= 0, ErrorCode::kInvalidArgument, "n", n, "must be >=", 0);
    check_allocator(allocator);
    return new_blocks(n) + (needs_copy_on_write(allocator, n) ? 1 : 0);
  }

  /// Appends `n` tokens, allocating blocks exactly when the last one is full. If the last block
  /// is partially filled and shared (refcount > 1, or marked cached by a prefix cache), the
  /// table first takes a new block for it and pushes `{old, new, last_block_tokens}` onto
  /// `copies`: the caller must run that copy (`PagedKVCache::copy_block`) before writing the
  /// new tokens' K/V. The other owners' block is left untouched.
  ///
  /// Writes the new tokens' slots (`block * block_size + offset`) into `slot_mapping`, which
  /// must hold exactly `n` entries or be empty (slots not wanted).
  /// All or nothing: returns false, with nothing changed, when the allocator cannot supply the
  /// blocks (for any `n`, however large). May evict cached blocks (the allocator's eviction
  /// callback runs). No heap allocation once the table's capacity has grown. O(n + blocks).
  /// Throws `Error{kInvalidArgument}` for `n < 0`, a `slot_mapping` of the wrong size or an
  /// allocator that is not this table's; `Error{kOutOfRange}` past `kMaxBlocks` blocks.
  [[nodiscard]] bool append_tokens(BlockAllocator& allocator, std::int64_t n,
                                   std::span<std::int64_t> slot_mapping,
                                   std::vector<BlockCopy>& copies) {
    if (n < 0 || (!slot_mapping.empty() && static_cast<std::int64_t>(slot_mapping.size()) != n))
        [[unlikely]] {
      check_arg(n >= 0, ErrorCode::kInvalidArgument, "n", n, "must be >=", 0);
      check_arg(false, ErrorCode::kInvalidArgument, "slot_mapping.size()", slot_mapping.size(),
                "must be 0 or n =", n);
    }
    check_allocator(allocator);
    if (n == 0) return true;
    const bool copy = needs_copy_on_write(allocator, n);
    const std::int64_t grow = new_blocks(n);
    if (grow + (copy ? 1 : 0) > allocator.num_available_blocks()) return false;
    // Now n <= (grow + 1) * block_size < 2^62: no sum below overflows.
    check_room(grow, "blocks to append");
    // Reserve first so nothing below can fail after the allocator has changed.
    reserve_geometric(blocks_, static_cast<std::size_t>(grow));
    if (copy) reserve_geometric(copies, 1);
    // Every block is taken before the shared one is dropped, so none of them can be it.
    const std::size_t old = blocks_.size();
    const std::int32_t used = last_block_tokens();
    const BlockId own = copy ? *allocator.allocate_one() : kNoBlock;
    blocks_.resize(old + static_cast<std::size_t>(grow));
    const bool got = allocator.allocate(std::span<BlockId>(blocks_).subspan(old));
    INFERKIT_ASSERT(got);
    (void)got;
    if (copy) {
      const BlockId shared = blocks_[old - 1];
      copies.push_back(BlockCopy{shared, own, used});
      allocator.set_block_tokens(own, used);
      allocator.free(shared);  // refcount >= 2 or cached: the others keep their data
      blocks_[old - 1] = own;
    }
    // Slots of the new tokens (walking block and offset: one division, not one per token),
    // then each touched block's fill.
    const std::int64_t begin = num_tokens_;
    num_tokens_ += n;
    const auto first_block = static_cast<std::int32_t>(begin / block_size_);
    auto block = static_cast<std::size_t>(first_block);
    std::int64_t offset = begin - std::int64_t{first_block} * block_size_;
    for (std::int64_t& slot : slot_mapping) {
      slot = std::int64_t{blocks_[block]} * block_size_ + offset;
      if (++offset == block_size_) {
        offset = 0;
        ++block;
      }
    }
    for (std::int32_t i = first_block; i < num_blocks(); ++i) {
      allocator.set_block_tokens(blocks_[static_cast<std::size_t>(i)], fill_of(i));
    }
    allocator_ = &allocator;
    return true;
  }

  /// Appends full blocks shared with other owners (a prefix-cache hit): each gets one more
  /// reference (`BlockAllocator::retain`, which revives evictable cached blocks) and the table
  /// grows by `blocks.size() * block_size` tokens. `blocks` may be a view of this very table
  /// (`blocks()`). All or nothing. Throws `Error{kInvalidState}` unless the table's last block
  /// is full (or the table is empty), `Error{kInvalidArgument}` for a block that is not full or
  /// an allocator that is not this table's, `Error{kOutOfRange}` past `kMaxBlocks` blocks, and
  /// what `retain` throws.
  void append_shared_blocks(BlockAllocator& allocator, std::span<const BlockId> blocks) {
    check_allocator(allocator);
    INFERKIT_CHECK(num_tokens_ % block_size_ == 0, ErrorCode::kInvalidState,
                   "append_shared_blocks: the last block holds " +
                       std::to_string(last_block_tokens()) + " of " + std::to_string(block_size_) +
                       " tokens; shared blocks follow full ones");
    check_room(static_cast<std::int64_t>(blocks.size()), "blocks.size()");
    for (BlockId b : blocks) {
      if (allocator.block_tokens(b) != block_size_) {
        detail::throw_error(
            ErrorCode::kInvalidArgument,
            "append_shared_blocks: block " + std::to_string(b) + " holds " +
                std::to_string(allocator.block_tokens(b)) +
                " tokens, must be full (block_size = " + std::to_string(block_size_) + ")");
      }
    }
    if (blocks.empty()) return;
    // Growing the vector may move it: a view of this table is re-pointed to the new storage.
    const std::ptrdiff_t self = detail::offset_in(blocks, std::span<const BlockId>(blocks_));
    reserve_geometric(blocks_, blocks.size());
    if (self >= 0) blocks = std::span<const BlockId>(blocks_.data() + self, blocks.size());
    allocator.retain(blocks);
    const std::size_t old = blocks_.size();
    blocks_.resize(old + blocks.size());  // within capacity: `blocks` stays valid
    std::copy(blocks.begin(), blocks.end(), blocks_.begin() + static_cast<std::ptrdiff_t>(old));
    num_tokens_ += static_cast<std::int64_t>(blocks.size()) * block_size_;
    allocator_ = &allocator;
  }

  /// A child sequence sharing every block of this one (each refcount + 1), bound to the same
  /// allocator. The first append into a shared partial last block copies it (see
  /// `append_tokens`). O(blocks). Throws what `retain` throws (nothing changes then).
  [[nodiscard]] BlockTable fork(BlockAllocator& allocator) const {
    check_allocator(allocator);
    std::vector<BlockId> shared = blocks_;
    allocator.retain(std::span<const BlockId>(shared));
    BlockTable child(allocator);
    child.blocks_ = std::move(shared);
    child.num_tokens_ = num_tokens_;
    return child;
  }

  /// Shortens the sequence to `num_tokens` (rejected speculative tokens, preemption by
  /// recompute): blocks that become empty are freed (tail first). The last kept block's fill
  /// is lowered only if this table owns it alone and it is not cached. O(freed blocks).
  /// Throws `Error{kOutOfRange}` unless `0 <= num_tokens <= num_tokens()`,
  /// `Error{kInvalidArgument}` for an allocator that is not this table's.
  void truncate(BlockAllocator& allocator, std::int64_t num_tokens) {
    check_arg(num_tokens >= 0 && num_tokens <= num_tokens_, ErrorCode::kOutOfRange, "num_tokens",
              num_tokens, "must be in [0, num_tokens()] with num_tokens() =", num_tokens_);
    check_allocator(allocator);
    const auto keep = static_cast<std::size_t>(ceil_blocks(num_tokens));
    allocator.free(std::span<const BlockId>(blocks_).subspan(keep));
    blocks_.resize(keep);
    num_tokens_ = num_tokens;
    if (keep > 0) {
      const BlockId last = blocks_.back();
      if (allocator.ref_count(last) == 1 && !allocator.is_cached(last)) {
        allocator.set_block_tokens(last, last_block_tokens());
      }
    }
  }

  /// Returns every block to the allocator (tail first) and empties the table, which stays
  /// bound. O(blocks). Throws `Error{kInvalidArgument}` for an allocator that is not this
  /// table's.
  void release(BlockAllocator& allocator) {
    check_allocator(allocator);
    allocator.free(std::span<const BlockId>(blocks_));
    blocks_.clear();
    num_tokens_ = 0;
  }

  /// The slot of token position `position`. Throws `Error{kOutOfRange}` past the end.
  [[nodiscard]] std::int64_t slot(std::int64_t position) const {
    check_arg(position >= 0 && position < num_tokens_, ErrorCode::kOutOfRange, "position", position,
              "must be in [0, num_tokens()) with num_tokens() =", num_tokens_);
    return slot_unchecked(position);
  }

  /// Writes the slots of positions `[begin, end)` into `out` (size `end - begin`).
  /// Throws `Error{kOutOfRange}` / `Error{kInvalidArgument}` for a bad range or size.
  void slots(std::int64_t begin, std::int64_t end, std::span<std::int64_t> out) const {
    check_arg(begin >= 0 && begin <= end && end <= num_tokens_, ErrorCode::kOutOfRange,
              "[begin, end) end", end, "must be within num_tokens() =", num_tokens_);
    check_arg(static_cast<std::int64_t>(out.size()) == end - begin, ErrorCode::kInvalidArgument,
              "out.size()", out.size(), "must be end - begin =", end - begin);
    std::int64_t p = begin;
    for (std::int64_t& s : out) s = slot_unchecked(p++);
  }

 private:
  // Room for `more` elements, doubling (a plain reserve(size + 1) would reallocate each time).
  template <class V>
  static void reserve_geometric(std::vector<V>& v, std::size_t more) {
    if (v.size() + more > v.capacity()) v.reserve(std::max(v.size() + more, 2 * v.capacity()));
  }
  // ceil(tokens / block_size) without the overflow of (tokens + block_size - 1).
  [[nodiscard]] std::int64_t ceil_blocks(std::int64_t tokens) const noexcept {
    return tokens / block_size_ + (tokens % block_size_ != 0 ? 1 : 0);
  }
  // Blocks to add for n more tokens (not counting copy-on-write), exact for any n >= 0: the last
  // block's free slots come first. num_blocks * block_size < 2^62, so nothing overflows.
  [[nodiscard]] std::int64_t new_blocks(std::int64_t n) const noexcept {
    const std::int64_t room = std::int64_t{num_blocks()} * block_size_ - num_tokens_;
    return n <= room ? 0 : ceil_blocks(n - room);
  }
  void check_room(std::int64_t more, const char* what) const {
    if (more > kMaxBlocks - num_blocks()) [[unlikely]] {
      check_arg(false, ErrorCode::kOutOfRange, what, more,
                "must be <= kMaxBlocks - num_blocks() =", kMaxBlocks - num_blocks());
    }
  }
  [[nodiscard]] std::int32_t fill_of(std::int32_t block_index) const noexcept {
    const std::int64_t rest = num_tokens_ - std::int64_t{block_index} * block_size_;
    return static_cast<std::int32_t>(rest < block_size_ ? rest : block_size_);
  }
  [[nodiscard]] std::int64_t slot_unchecked(std::int64_t position) const noexcept {
    const std::int64_t block = blocks_[static_cast<std::size_t>(position / block_size_)];
    return block * block_size_ + position % block_size_;
  }
  [[nodiscard]] bool needs_copy_on_write(const BlockAllocator& allocator, std::int64_t n) const {
    if (n == 0 || blocks_.empty()) return false;
    const std::int32_t used = last_block_tokens();
    if (used == block_size_) return false;
    const BlockId last = blocks_.back();
    return allocator.ref_count(last) > 1 || allocator.is_cached(last);
  }
  // A bound table takes its own allocator only; an unbound one any of its block size.
  void check_allocator(const BlockAllocator& allocator) const {
    if (allocator_ != nullptr ? allocator_ != &allocator : allocator.block_size() != block_size_)
        [[unlikely]] {
      if (allocator_ != nullptr) {
        detail::throw_error(ErrorCode::kInvalidArgument,
                            "allocator: this table is bound to another BlockAllocator (a table "
                            "takes its blocks from one allocator for life)");
      }
      check_arg(false, ErrorCode::kInvalidArgument, "allocator.block_size()",
                allocator.block_size(), "must equal the table's", block_size_);
    }
  }
  // The destructor's and move assignment's release. free() can throw only if someone else freed
  // this table's references (a broken invariant), and a destructor must not throw.
  void release_owned() noexcept {
    if (blocks_.empty()) return;
    try {
      allocator_->free(std::span<const BlockId>(blocks_));
    } catch (...) {  // nothing sensible to do in a destructor
    }
    blocks_.clear();
    num_tokens_ = 0;
  }
};

/// Owning buffers for a batch's CSR page tables; `view()` is what kernels take.
struct PageTableBuffers {
  std::vector<std::int32_t> indptr;         ///< [num_seqs + 1]
  std::vector<std::int32_t> indices;        ///< [total pages] physical block ids
  std::vector<std::int32_t> last_page_len;  ///< [num_seqs], 0 for a sequence with no pages

  /// A non-owning view of the buffers (valid until they change).
  [[nodiscard]] PageTableView view() const noexcept {
    return PageTableView{indptr.data(), indices.data(), last_page_len.data(),
                         static_cast<std::int32_t>(last_page_len.size())};
  }
};

/// Exports `tables` (one per sequence of the batch, in batch order) in CSR form into `out`,
/// reusing its capacity. O(total blocks). Throws `Error{kOutOfRange}` if the batch or its page
/// count does not fit int32, `Error{kInvalidArgument}` for a null table.
inline void build_page_table(std::span<const BlockTable* const> tables, PageTableBuffers& out) {
  std::int64_t pages = 0;
  for (const BlockTable* t : tables) {
    check_arg(t != nullptr, ErrorCode::kInvalidArgument, "tables[i]", "nullptr", "must be",
              "a table");
    pages += t->num_blocks();
  }
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  check_arg(pages <= kMax, ErrorCode::kOutOfRange, "total pages", pages, "must be <= int32 max",
            kMax);
  check_arg(static_cast<std::int64_t>(tables.size()) < kMax, ErrorCode::kOutOfRange, "num_seqs",
            tables.size(), "must be < int32 max", kMax);
  out.indptr.resize(tables.size() + 1);
  out.indices.resize(static_cast<std::size_t>(pages));
  out.last_page_len.resize(tables.size());
  std::int32_t at = 0;
  out.indptr[0] = 0;
  for (std::size_t s = 0; s < tables.size(); ++s) {
    for (BlockId b : tables[s]->blocks()) out.indices[static_cast<std::size_t>(at++)] = b;
    out.indptr[s + 1] = at;
    out.last_page_len[s] = tables[s]->last_block_tokens();
  }
}

/// A batch's page tables in dense padded form (vLLM's `block_tables` + `seq_lens`).
struct DenseBlockTables {
  std::vector<std::int32_t> block_tables;  ///< [num_seqs][max_blocks], padded with `pad`
  std::vector<std::int32_t> seq_lens;      ///< [num_seqs] tokens
  /// Sequences in the batch: the rows of `block_tables` and entries of `seq_lens`.
  std::int32_t num_seqs = 0;
  /// Row width of `block_tables` in blocks, >= every sequence's block count.
  std::int32_t max_blocks = 0;

  /// Block `i` of sequence `s` (a pad value past its last block).
  [[nodiscard]] std::int32_t at(std::int32_t s, std::int32_t i) const noexcept {
    return block_tables[static_cast<std::size_t>(std::int64_t{s} * max_blocks + i)];
  }
};

/// Exports `tables` in dense form into `out`, reusing its capacity. `max_blocks` is the row
/// width (0: the longest table's block count); unused entries hold `pad` (default 0, a valid
/// id, as in vLLM: kernels must stop at `seq_lens`, never follow padding). O(num_seqs *
/// max_blocks). Throws `Error{kOutOfRange}` if a table has more blocks than `max_blocks`, or the
/// batch size, a length or the table size does not fit int32; `Error{kInvalidArgument}` for a
/// null table.
inline void build_dense_block_tables(std::span<const BlockTable* const> tables,
                                     DenseBlockTables& out, std::int32_t max_blocks = 0,
                                     std::int32_t pad = 0) {
  check_arg(max_blocks >= 0, ErrorCode::kInvalidArgument, "max_blocks", max_blocks,
            "must be >=", 0);
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  check_arg(static_cast<std::int64_t>(tables.size()) <= kMax, ErrorCode::kOutOfRange, "num_seqs",
            tables.size(), "must be <= int32 max", kMax);
  std::int32_t widest = 0;
  for (const BlockTable* t : tables) {
    check_arg(t != nullptr, ErrorCode::kInvalidArgument, "tables[i]", "nullptr", "must be",
              "a table");
    check_arg(t->num_tokens() <= kMax, ErrorCode::kOutOfRange, "seq_len", t->num_tokens(),
              "must be <= int32 max", kMax);
    widest = t->num_blocks() > widest ? t->num_blocks() : widest;
  }
  if (max_blocks == 0) max_blocks = widest;
  check_arg(widest <= max_blocks, ErrorCode::kOutOfRange, "blocks of a sequence", widest,
            "must be <= max_blocks =", max_blocks);
  const std::int64_t cells = static_cast<std::int64_t>(tables.size()) * max_blocks;
  check_arg(cells <= kMax, ErrorCode::kOutOfRange, "num_seqs * max_blocks", cells,
            "must be <= int32 max", kMax);
  out.num_seqs = static_cast<std::int32_t>(tables.size());
  out.max_blocks = max_blocks;
  out.block_tables.assign(static_cast<std::size_t>(cells), pad);
  out.seq_lens.resize(tables.size());
  for (std::size_t s = 0; s < tables.size(); ++s) {
    const std::span<const BlockId> blocks = tables[s]->blocks();
    std::int32_t* row = out.block_tables.data() + s * static_cast<std::size_t>(max_blocks);
    for (std::size_t i = 0; i < blocks.size(); ++i) row[i] = blocks[i];
    out.seq_lens[s] = static_cast<std::int32_t>(tables[s]->num_tokens());
  }
}

}  // namespace inferkit
