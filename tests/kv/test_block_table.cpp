// SPDX-License-Identifier: Apache-2.0
// Tests for kv/block_table.hpp: growth exactly at block boundaries, slot mapping, copy-on-write
// of shared partial blocks, truncation, prefix-cache sharing, CSR and dense exports, and a long
// randomized run against a brute-force model in which "storage" (an int64 array, and a real
// PagedKVCache) holds token ids, so a lost, duplicated or overwritten token shows up as a wrong
// id.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <limits>
#include <map>
#include <tests/support/block_allocator_peer.hpp>
#include <tests/support/error_code.hpp>
#include <type_traits>
#include <utility>
#include <vector>

using inferkit::BlockAllocator;
using inferkit::BlockCopy;
using inferkit::BlockId;
using inferkit::BlockTable;
using inferkit::Error;
using inferkit::ErrorCode;

namespace {

std::vector<std::int64_t> append(BlockTable& t, BlockAllocator& a, std::int64_t n,
                                 std::vector<BlockCopy>& copies) {
  std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
  REQUIRE(t.append_tokens(a, n, slots, copies));
  return slots;
}

}  // namespace

TEST_CASE("BlockTable: grows a block exactly when the last one is full", "[kv][block_table]") {
  const std::int32_t bs = GENERATE(1, 4, 16);
  BlockAllocator a(64, bs);
  BlockTable t(bs);
  std::vector<BlockCopy> copies;
  CHECK(t.num_blocks() == 0);
  CHECK(t.last_block_tokens() == 0);
  CHECK(t.blocks_needed_to_append(a, 1) == 1);
  for (std::int64_t n = 1; n <= 3 * bs + 1; ++n) {
    const auto slots = append(t, a, 1, copies);
    CHECK(t.num_blocks() == (n + bs - 1) / bs);
    const BlockId last = t.blocks().back();
    CHECK(slots[0] == std::int64_t{last} * bs + (n - 1) % bs);
    CHECK(a.block_tokens(last) == t.last_block_tokens());
  }
  CHECK(copies.empty());
  CHECK(a.tokens_stored() == t.num_tokens());
  SECTION("exactly one full block") {
    t.release(a);
    (void)append(t, a, bs, copies);
    CHECK(t.num_blocks() == 1);
    CHECK(t.last_block_tokens() == bs);
    CHECK(t.blocks_needed_to_append(a, 1) == 1);
    CHECK(a.utilization() == 1.0);
  }
  t.release(a);
  CHECK(a.num_free_blocks() == 64);
}

TEST_CASE("BlockTable: slots map positions to block times block_size plus offset",
          "[kv][block_table]") {
  BlockAllocator a(16, 4);
  (void)a.allocate(3);  // so the table's blocks are not 0, 1, 2
  BlockTable t(4);
  std::vector<BlockCopy> copies;
  const auto slots = append(t, a, 10, copies);
  std::vector<std::int64_t> again(10);
  t.slots(0, 10, again);
  CHECK(slots == again);
  for (std::int64_t p = 0; p < 10; ++p) {
    CHECK(t.slot(p) == std::int64_t{t.blocks()[static_cast<std::size_t>(p / 4)]} * 4 + p % 4);
  }
  CHECK_THROWS_AS(t.slot(10), Error);
  std::vector<std::int64_t> wrong(3);
  CHECK_THROWS_AS(t.slots(0, 4, wrong), Error);
  CHECK_THROWS_AS(t.slots(8, 11, wrong), Error);
  SECTION("empty slot mapping is allowed") {
    CHECK(t.append_tokens(a, 2, {}, copies));
    CHECK(t.num_tokens() == 12);
  }
  SECTION("a slot mapping of the wrong size throws and changes nothing") {
    std::vector<std::int64_t> bad(3);
    CHECK_THROWS_AS(t.append_tokens(a, 2, bad, copies), Error);
    CHECK(t.num_tokens() == 10);
  }
}

TEST_CASE("BlockTable: append is all or nothing when blocks run out", "[kv][block_table]") {
  BlockAllocator a(3, 4);
  BlockTable t(4);
  std::vector<BlockCopy> copies;
  (void)append(t, a, 6, copies);
  const std::vector<BlockId> before(t.blocks().begin(), t.blocks().end());
  std::vector<std::int64_t> slots(7, -1);
  CHECK_FALSE(t.append_tokens(a, 7, slots, copies));  // needs 2 more blocks, 1 is free
  CHECK(t.num_tokens() == 6);
  CHECK(std::vector<BlockId>(t.blocks().begin(), t.blocks().end()) == before);
  CHECK(a.num_free_blocks() == 1);
  CHECK(std::all_of(slots.begin(), slots.end(), [](std::int64_t s) { return s == -1; }));
  std::vector<std::int64_t> fits(6);
  CHECK(t.append_tokens(a, 6, fits, copies));  // exactly fills the pool
  CHECK(a.num_free_blocks() == 0);
  t.release(a);
  a.check_consistency();
}

TEST_CASE("BlockTable: fork shares blocks and copy-on-write protects the other owner",
          "[kv][block_table]") {
  BlockAllocator a(16, 4);
  BlockTable parent(4);
  std::vector<BlockCopy> copies;
  (void)append(parent, a, 6, copies);  // blocks: [full, 2 of 4]
  BlockTable child = parent.fork(a);
  for (BlockId b : parent.blocks()) CHECK(a.ref_count(b) == 2);
  CHECK(child.blocks_needed_to_append(a, 1) == 1);  // the copy
  CHECK(a.tokens_stored() == 6);

  const BlockId shared_tail = parent.blocks()[1];
  const auto slots = append(child, a, 1, copies);
  REQUIRE(copies.size() == 1);
  CHECK(copies[0] == BlockCopy{shared_tail, child.blocks()[1], 2});
  CHECK(child.blocks()[0] == parent.blocks()[0]);  // the full block stays shared
  CHECK(child.blocks()[1] != shared_tail);
  CHECK(slots[0] == std::int64_t{child.blocks()[1]} * 4 + 2);
  CHECK(a.ref_count(shared_tail) == 1);
  CHECK(a.block_tokens(shared_tail) == 2);
  CHECK(a.block_tokens(child.blocks()[1]) == 3);

  copies.clear();
  (void)append(parent, a, 1, copies);  // now exclusive again: in place, no copy
  CHECK(copies.empty());
  CHECK(parent.blocks()[1] == shared_tail);

  SECTION("appending after a full shared block needs no copy") {
    BlockTable full(4);
    (void)append(full, a, 4, copies);
    BlockTable other = full.fork(a);
    copies.clear();
    (void)append(other, a, 1, copies);
    CHECK(copies.empty());
    CHECK(other.num_blocks() == 2);
    full.release(a);
    other.release(a);
  }
  parent.release(a);
  child.release(a);
  CHECK(a.num_free_blocks() == 16);
  a.check_consistency();
}

TEST_CASE("BlockTable: truncate frees blocks that become empty", "[kv][block_table]") {
  BlockAllocator a(16, 4);
  BlockTable t(4);
  std::vector<BlockCopy> copies;
  (void)append(t, a, 10, copies);
  const std::vector<BlockId> blocks(t.blocks().begin(), t.blocks().end());
  t.truncate(a, 9);
  CHECK(t.num_blocks() == 3);
  CHECK(a.block_tokens(blocks[2]) == 1);
  t.truncate(a, 8);
  CHECK(t.num_blocks() == 2);
  CHECK(a.state(blocks[2]) == inferkit::BlockState::kFree);
  CHECK(t.last_block_tokens() == 4);
  CHECK(a.tokens_stored() == 8);
  CHECK_THROWS_AS(t.truncate(a, 9), Error);
  SECTION("truncating a shared block keeps the other owner's tokens") {
    BlockTable other = t.fork(a);
    t.truncate(a, 5);
    CHECK(a.block_tokens(blocks[1]) == 4);
    copies.clear();
    const auto slots = append(t, a, 1, copies);  // shared partial: copy 1 slot
    REQUIRE(copies.size() == 1);
    CHECK(copies[0] == BlockCopy{blocks[1], t.blocks()[1], 1});
    CHECK(slots[0] == std::int64_t{t.blocks()[1]} * 4 + 1);
    other.release(a);
  }
  t.truncate(a, 0);
  CHECK(t.num_blocks() == 0);
  CHECK(a.num_free_blocks() == 16);
  a.check_consistency();
}

TEST_CASE("BlockTable: shared cached blocks are adopted and revived", "[kv][block_table]") {
  BlockAllocator a(8, 4);
  BlockTable donor(4);
  std::vector<BlockCopy> copies;
  (void)append(donor, a, 10, copies);
  const std::vector<BlockId> prefix(donor.blocks().begin(), donor.blocks().begin() + 2);
  const BlockId partial = donor.blocks()[2];  // 2 of 4 tokens
  for (BlockId b : donor.blocks()) a.mark_cached(b);
  donor.release(a);
  CHECK(a.num_evictable_blocks() == 3);

  BlockTable t(4);
  t.append_shared_blocks(a, prefix);
  CHECK(t.num_tokens() == 8);
  CHECK(a.ref_count(prefix[0]) == 1);
  CHECK(a.num_evictable_blocks() == 1);
  CHECK(a.tokens_stored() == 8);
  copies.clear();
  (void)append(t, a, 1, copies);
  CHECK(copies.empty());
  CHECK(t.num_blocks() == 3);

  SECTION("a partial cached block is rejected and nothing changes") {
    BlockTable u(4);
    CHECK(a.block_tokens(partial) == 2);
    const std::vector<BlockId> bad{prefix[0], partial};
    CHECK_THROWS_AS(u.append_shared_blocks(a, bad), Error);
    CHECK(u.num_tokens() == 0);
    CHECK(a.ref_count(prefix[0]) == 1);
  }
  SECTION("appending into a cached partial block copies it") {
    BlockTable u(4);
    (void)append(u, a, 2, copies);
    a.mark_cached(u.blocks()[0]);
    copies.clear();
    (void)append(u, a, 1, copies);
    CHECK(copies.size() == 1);
    u.release(a);
  }
  SECTION("sharing after a partial last block throws") {
    BlockTable u(4);
    (void)append(u, a, 1, copies);
    try {
      u.append_shared_blocks(a, prefix);
      FAIL("expected inferkit::Error");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kInvalidState);
    }
    u.release(a);
  }
  t.release(a);
  a.check_consistency();
}

TEST_CASE("BlockTable: tables of another block size are rejected", "[kv][block_table]") {
  BlockAllocator a(8, 4);
  BlockTable t(8);
  std::vector<BlockCopy> copies;
  CHECK_THROWS_AS(t.append_tokens(a, 1, {}, copies), Error);
  CHECK_THROWS_AS((void)t.blocks_needed_to_append(a, 1), Error);  // a query checks it too
  CHECK_THROWS_AS(t.fork(a), Error);
  CHECK_THROWS_AS(BlockTable(0), Error);
  CHECK(a.num_free_blocks() == 8);
}

TEST_CASE("BlockTable: a huge append is refused as out of blocks and needs are exact",
          "[kv][block_table]") {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::vector<BlockCopy> copies;
  SECTION("block size 1") {
    BlockAllocator a(8, 1);
    BlockTable t(a);
    CHECK(t.blocks_needed_to_append(a, std::int64_t{1} << 32) == std::int64_t{1} << 32);
    CHECK(t.blocks_needed_to_append(a, kMax) == kMax);
    CHECK_FALSE(t.append_tokens(a, kMax, {}, copies));
    (void)append(t, a, 3, copies);
    CHECK(t.blocks_needed_to_append(a, kMax) == kMax);
    CHECK_FALSE(t.append_tokens(a, kMax, {}, copies));  // num_tokens + n would overflow
    CHECK_FALSE(t.append_tokens(a, kMax - 2, {}, copies));
    CHECK(t.num_tokens() == 3);
    CHECK(a.num_free_blocks() == 5);
    CHECK_FALSE(a.can_allocate(t.blocks_needed_to_append(a, std::int64_t{1} << 32)));
  }
  SECTION("a shared partial last block adds the copy to a huge need") {
    BlockAllocator a(8, 4);
    BlockTable t(a);
    (void)append(t, a, 6, copies);  // [full, 2 of 4]
    BlockTable child = t.fork(a);
    CHECK(child.blocks_needed_to_append(a, 2) == 1);  // the copy only
    CHECK(child.blocks_needed_to_append(a, 3) == 2);
    CHECK(child.blocks_needed_to_append(a, kMax) == (kMax - 2) / 4 + 1 + 1);
    CHECK_FALSE(child.append_tokens(a, kMax, {}, copies));
    CHECK(copies.empty());
    CHECK(child.num_tokens() == 6);
    CHECK(a.ref_count(t.blocks()[1]) == 2);
    a.check_consistency();
  }
}

TEST_CASE("BlockTable: append_shared_blocks takes a view of the table's own blocks",
          "[kv][block_table]") {
  BlockAllocator a(16, 2);
  BlockTable t(a);
  std::vector<BlockCopy> copies;
  (void)append(t, a, 4, copies);  // two full blocks, a vector with no spare capacity
  const std::vector<BlockId> before(t.blocks().begin(), t.blocks().end());
  for (int round = 0; round < 3; ++round) {  // each round outgrows the vector's capacity
    t.append_shared_blocks(a, t.blocks());
  }
  REQUIRE(t.num_blocks() == 16);
  CHECK(t.num_tokens() == 32);
  for (std::int32_t i = 0; i < t.num_blocks(); ++i) {
    CHECK(t.blocks()[static_cast<std::size_t>(i)] == before[static_cast<std::size_t>(i % 2)]);
  }
  CHECK(a.ref_count(before[0]) == 8);
  t.append_shared_blocks(a, t.blocks().subspan(1, 2));  // a view from the middle
  CHECK(t.blocks().last(2)[0] == before[1]);
  CHECK(t.blocks().last(2)[1] == before[0]);
  t.release(a);
  CHECK(a.num_free_blocks() == 16);
  a.check_consistency();
}

TEST_CASE("BlockTable: a refcount at its limit refuses fork and sharing, changing nothing",
          "[kv][block_table]") {
  using Peer = inferkit::detail::BlockAllocatorPeer;
  BlockAllocator a(8, 2);
  BlockTable t(a);
  std::vector<BlockCopy> copies;
  (void)append(t, a, 4, copies);
  const BlockId b = t.blocks()[1];
  Peer::add_owners(a, b, BlockAllocator::kMaxRefCount - 1);
  CHECK(inferkit::test::code_of([&] { (void)t.fork(a); }) == ErrorCode::kOutOfRange);
  BlockTable u(a);
  CHECK(inferkit::test::code_of([&] { u.append_shared_blocks(a, t.blocks()); }) ==
        ErrorCode::kOutOfRange);
  CHECK(u.num_tokens() == 0);
  CHECK(a.ref_count(t.blocks()[0]) == 1);
  Peer::add_owners(a, b, 1 - BlockAllocator::kMaxRefCount);
  CHECK(a.num_used_blocks() == 2);
  a.check_consistency();
}

TEST_CASE("BlockTable: a table is bound to one allocator", "[kv][block_table]") {
  BlockAllocator a(8, 4);
  BlockAllocator b(8, 4);
  std::vector<BlockCopy> copies;
  BlockTable t(4);  // binds when it first takes a block
  CHECK(t.allocator() == nullptr);
  CHECK_FALSE(t.append_tokens(b, 100, {}, copies));  // took nothing: still unbound
  CHECK(t.allocator() == nullptr);
  (void)append(t, a, 5, copies);
  CHECK(t.allocator() == &a);
  const std::vector<BlockId> blocks(t.blocks().begin(), t.blocks().end());
  auto rejected = [&](auto&& f) {
    CHECK(inferkit::test::code_of(f) == ErrorCode::kInvalidArgument);
    CHECK(t.num_tokens() == 5);
    CHECK(a.num_free_blocks() == 6);
    CHECK(b.num_free_blocks() == 8);
  };
  rejected([&] { (void)t.append_tokens(b, 1, {}, copies); });  // grown through a, not b
  rejected([&] { t.append_shared_blocks(b, {}); });
  rejected([&] { (void)t.blocks_needed_to_append(b, 1); });
  rejected([&] { (void)t.fork(b); });
  rejected([&] { t.truncate(b, 1); });
  rejected([&] { t.release(b); });
  t.release(a);
  CHECK(t.allocator() == &a);  // bound for life
  CHECK_THROWS_AS(t.append_tokens(b, 1, {}, copies), Error);
  BlockTable bound(b);
  CHECK(bound.allocator() == &b);
  CHECK(bound.block_size() == 4);
  CHECK_THROWS_AS(bound.append_tokens(a, 1, {}, copies), Error);
  BlockTable child = bound.fork(b);
  CHECK(child.allocator() == &b);
}

TEST_CASE("BlockTable: move-only, and a dropped table returns its blocks", "[kv][block_table]") {
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<BlockTable>);
  STATIC_REQUIRE_FALSE(std::is_copy_assignable_v<BlockTable>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<BlockTable>);
  STATIC_REQUIRE(std::is_nothrow_move_assignable_v<BlockTable>);
  BlockAllocator a(8, 4);
  std::vector<BlockCopy> copies;
  {
    BlockTable t(4);
    (void)append(t, a, 6, copies);
    BlockTable child = t.fork(a);
    CHECK(a.num_free_blocks() == 6);
  }  // both dropped without release
  CHECK(a.num_free_blocks() == 8);
  CHECK(a.tokens_stored() == 0);

  BlockTable t(a);
  (void)append(t, a, 5, copies);
  BlockTable moved(std::move(t));
  CHECK(moved.num_tokens() == 5);
  CHECK(t.num_tokens() == 0);  // NOLINT(bugprone-use-after-move): the moved-from state is defined
  CHECK(t.num_blocks() == 0);
  CHECK(t.allocator() == &a);
  (void)append(t, a, 1, copies);  // a moved-from table is usable
  BlockTable other(a);
  (void)append(other, a, 4, copies);
  CHECK(a.num_free_blocks() == 4);
  other = std::move(moved);  // other's own block goes back first
  CHECK(a.num_free_blocks() == 5);
  CHECK(other.num_tokens() == 5);
  CHECK(moved.num_blocks() == 0);  // NOLINT(bugprone-use-after-move)
  std::vector<BlockTable> many;
  for (int i = 0; i < 3; ++i) {     // no reserve: reallocation moves the tables
    many.push_back(other.fork(a));  // NOLINT(performance-inefficient-vector-operation)
  }
  many.erase(many.begin());
  CHECK(a.ref_count(other.blocks()[0]) == 3);
  many.clear();
  CHECK(a.ref_count(other.blocks()[0]) == 1);
  a.check_consistency();
}

TEST_CASE("build_page_table: CSR export matches the tables", "[kv][block_table]") {
  BlockAllocator a(32, 4);
  std::vector<BlockCopy> copies;
  std::vector<BlockTable> tables;
  for (std::int64_t len : {5, 0, 4, 1, 13}) {
    tables.emplace_back(4);
    if (len > 0) (void)append(tables.back(), a, len, copies);
  }
  std::vector<const BlockTable*> ptrs;
  for (const auto& t : tables) ptrs.push_back(&t);
  inferkit::PageTableBuffers csr;
  inferkit::build_page_table(ptrs, csr);
  const inferkit::PageTableView view = csr.view();
  REQUIRE(view.num_seqs == 5);
  for (std::int32_t s = 0; s < 5; ++s) {
    const BlockTable& t = tables[static_cast<std::size_t>(s)];
    CHECK(view.num_pages(s) == t.num_blocks());
    CHECK(view.seq_len(s, 4) == t.num_tokens());
    for (std::int32_t i = 0; i < t.num_blocks(); ++i) {
      CHECK(view.indices[view.indptr[s] + i] == t.blocks()[static_cast<std::size_t>(i)]);
    }
  }
  CHECK(csr.last_page_len == std::vector<std::int32_t>{1, 0, 4, 1, 1});

  inferkit::DenseBlockTables dense;
  inferkit::build_dense_block_tables(ptrs, dense, 0, -1);
  CHECK(dense.max_blocks == 4);
  CHECK(dense.seq_lens == std::vector<std::int32_t>{5, 0, 4, 1, 13});
  for (std::int32_t s = 0; s < 5; ++s) {
    const BlockTable& t = tables[static_cast<std::size_t>(s)];
    for (std::int32_t i = 0; i < 4; ++i) {
      CHECK(dense.at(s, i) == (i < t.num_blocks() ? t.blocks()[static_cast<std::size_t>(i)] : -1));
    }
  }
  CHECK_THROWS_AS(inferkit::build_dense_block_tables(ptrs, dense, 3), Error);
  ptrs.push_back(nullptr);
  CHECK_THROWS_AS(inferkit::build_page_table(ptrs, csr), Error);
  SECTION("an empty batch") {
    inferkit::build_page_table({}, csr);
    CHECK(csr.indptr == std::vector<std::int32_t>{0});
    CHECK(csr.view().num_seqs == 0);
  }
  for (auto& t : tables) t.release(a);
}

TEST_CASE("BlockTable: random operations never lose or overwrite a referenced token",
          "[kv][block_table]") {
#if defined(INFERKIT_TEST_SANITIZED)
  const int kSteps = 1500;
#else
  const int kSteps = 15000;
#endif
  for (std::uint64_t seed : {11u, 12u}) {
    const std::int32_t bs = seed == 11u ? 4 : 1;
    const std::int32_t num_blocks = 48 / bs + 8;
    BlockAllocator a(num_blocks, bs);
    inferkit::Rng rng(seed);
    // "Storage": the token id held by each slot; a sequence's model is its token ids.
    std::vector<std::int64_t> storage(static_cast<std::size_t>(num_blocks) * bs, -1);
    // The same traffic through the real storage: K = (id, id + 0.5), V = -K, exact in float.
    inferkit::PagedKVCache<float> kv(inferkit::PagedKVCacheShape{1, num_blocks, bs, 1, 2});
    std::vector<BlockTable> tables;
    std::vector<std::vector<std::int64_t>> model;
    std::map<BlockId, std::vector<std::int64_t>> cache;  // cached block -> its tokens
    a.set_eviction_callback([&](BlockId b) { cache.erase(b); });
    std::int64_t next_token = 0;
    std::vector<BlockCopy> copies;
    std::vector<std::int64_t> slots;

    auto write = [&](std::size_t i, std::int64_t n) {
      copies.clear();
      slots.assign(static_cast<std::size_t>(n), -1);
      if (!tables[i].append_tokens(a, n, slots, copies)) return;
      for (const BlockCopy& c : copies) {
        for (std::int32_t s = 0; s < c.num_slots; ++s) {
          storage[static_cast<std::size_t>(std::int64_t{c.dst} * bs + s)] =
              storage[static_cast<std::size_t>(std::int64_t{c.src} * bs + s)];
        }
      }
      kv.copy_blocks(copies);
      std::vector<float> k;
      std::vector<float> v;
      for (std::int64_t s : slots) {
        storage[static_cast<std::size_t>(s)] = next_token;
        k.insert(k.end(), {static_cast<float>(next_token), static_cast<float>(next_token) + 0.5f});
        v.insert(v.end(), {-k[k.size() - 2], -k.back()});
        model[i].push_back(next_token++);
      }
      kv.append(0, slots, k, v);
    };
    auto block_contents = [&](BlockId b) {
      const auto first = storage.begin() + std::int64_t{b} * bs;
      return std::vector<std::int64_t>(first, first + bs);
    };

    for (int step = 0; step < kSteps; ++step) {
      const std::uint32_t op = tables.size() > 10 ? 3 : rng.below(8);
      if (op == 0 || tables.empty()) {  // new sequence with a prompt
        tables.emplace_back(bs);
        model.emplace_back();
        write(tables.size() - 1, 1 + rng.below(9));
        continue;
      }
      const std::size_t i = rng.below(static_cast<std::uint32_t>(tables.size()));
      if (op == 1 || op == 2) {  // decode or a speculative burst
        write(i, op == 1 ? 1 : 1 + rng.below(5));
      } else if (op == 3) {  // finish
        tables[i].release(a);
        tables.erase(tables.begin() + static_cast<std::ptrdiff_t>(i));
        model.erase(model.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (op == 4) {  // fork (parallel sampling)
        tables.push_back(tables[i].fork(a));
        model.push_back(model[i]);
      } else if (op == 5 && tables[i].num_tokens() > 0) {  // reject speculative tokens
        const auto keep = static_cast<std::int64_t>(
            rng.below(static_cast<std::uint32_t>(tables[i].num_tokens()) + 1));
        tables[i].truncate(a, keep);
        model[i].resize(static_cast<std::size_t>(keep));
      } else if (op == 6) {  // the prefix cache takes this sequence's full blocks
        const std::int64_t full = tables[i].num_tokens() / bs;
        for (std::int64_t k = 0; k < full; ++k) {
          const BlockId b = tables[i].blocks()[static_cast<std::size_t>(k)];
          a.mark_cached(b);
          cache[b] = block_contents(b);
        }
      } else if (op == 7 && !cache.empty()) {  // a cache hit adopts a cached block
        auto it = cache.begin();
        std::advance(it, rng.below(static_cast<std::uint32_t>(cache.size())));
        if (rng.below(5) == 0) {
          a.uncache(it->first);
          cache.erase(it);
        } else {
          tables.emplace_back(bs);
          model.push_back(it->second);
          const BlockId b = it->first;
          tables.back().append_shared_blocks(a, std::span<const BlockId>(&b, 1));
        }
      }
      // Invariants after every operation.
      std::vector<std::int32_t> owners(static_cast<std::size_t>(num_blocks), 0);
      for (std::size_t s = 0; s < tables.size(); ++s) {
        REQUIRE(tables[s].num_tokens() == static_cast<std::int64_t>(model[s].size()));
        for (BlockId b : tables[s].blocks()) ++owners[static_cast<std::size_t>(b)];
        for (std::int64_t p = 0; p < tables[s].num_tokens(); ++p) {
          REQUIRE(storage[static_cast<std::size_t>(tables[s].slot(p))] ==
                  model[s][static_cast<std::size_t>(p)]);
        }
        std::vector<float> k(static_cast<std::size_t>(2 * tables[s].num_tokens()));
        std::vector<float> v(k.size());
        kv.gather(0, tables[s], k, v);
        for (std::size_t p = 0; p < model[s].size(); ++p) {
          REQUIRE(k[2 * p] == static_cast<float>(model[s][p]));
          REQUIRE(k[2 * p + 1] == static_cast<float>(model[s][p]) + 0.5f);
          REQUIRE(v[2 * p] == -k[2 * p]);
        }
      }
      for (BlockId b = 0; b < num_blocks; ++b) {
        REQUIRE(a.ref_count(b) == owners[static_cast<std::size_t>(b)]);
        // No block is both free and owned; cached blocks still hold what was cached.
        if (owners[static_cast<std::size_t>(b)] > 0) {
          REQUIRE(a.state(b) == inferkit::BlockState::kInUse);
        }
      }
      for (const auto& [b, tokens] : cache) {
        REQUIRE(a.is_cached(b));
        REQUIRE(block_contents(b) == tokens);
      }
      a.check_consistency();
    }
    CHECK(a.num_evictions() > 0);
    for (auto& t : tables) t.release(a);
    for (const auto& entry : cache) a.uncache(entry.first);
    CHECK(a.num_free_blocks() == num_blocks);
    CHECK(a.tokens_stored() == 0);
    a.check_consistency();
  }
}
