// SPDX-License-Identifier: Apache-2.0
// Tests for prefix/radix_tree.hpp: page-granular matching and node splits, insert with duplicate
// blocks and capacity limits, locks against both evictors, LRU and segmented-LRU order, the
// allocator's eviction callback (including a block in the middle of a node), bad input leaving
// everything unchanged, and randomized serving loops against a brute-force model.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tests/support/block_allocator_peer.hpp>
#include <tests/support/error_code.hpp>
#include <vector>

using inferkit::BlockAllocator;
using inferkit::BlockId;
using inferkit::Error;
using inferkit::ErrorCode;
using inferkit::EvictionPolicy;
using inferkit::PrefixEvent;
using inferkit::PrefixEventKind;
using inferkit::PrefixHandle;
using inferkit::RadixTree;
using inferkit::RadixTreeOptions;
using inferkit::Rng;
using inferkit::TokenId;

namespace {

#if defined(INFERKIT_TEST_SANITIZED)
constexpr int kRandomSteps = 300;
#else
constexpr int kRandomSteps = 6000;
#endif

// A running sequence that owns its blocks directly in the allocator (one reference each): the
// first `shared` come from a prefix match, the rest are freshly allocated.
struct Sequence {
  std::vector<TokenId> tokens;
  std::vector<BlockId> blocks;
  std::optional<PrefixHandle> lock;
  std::vector<BlockId> locked_blocks;
};

// Builds a sequence over `shared` cached blocks; nullopt (and nothing held) when out of blocks.
std::optional<Sequence> start(BlockAllocator& a, const std::vector<TokenId>& tokens,
                              const std::vector<BlockId>& shared) {
  const auto bs = static_cast<std::size_t>(a.block_size());
  const std::size_t pages = (tokens.size() + bs - 1) / bs;
  Sequence s{tokens, shared, std::nullopt, {}};
  a.retain(std::span<const BlockId>(shared));
  const auto fresh = a.allocate(static_cast<std::int32_t>(pages - shared.size()));
  if (fresh.size() != pages - shared.size()) {
    a.free(std::span<const BlockId>(shared));
    return std::nullopt;
  }
  s.blocks.insert(s.blocks.end(), fresh.begin(), fresh.end());
  for (std::size_t p = shared.size(); p < pages; ++p) {
    a.set_block_tokens(s.blocks[p],
                       static_cast<std::int32_t>(std::min(bs, tokens.size() - p * bs)));
  }
  return s;
}

std::vector<TokenId> seq(std::initializer_list<TokenId> t) { return t; }

// A request whose `tokens` are now cached in `tree`; it still holds its blocks.
Sequence cached_sequence(BlockAllocator& a, RadixTree& tree, const std::vector<TokenId>& tokens) {
  auto s = start(a, tokens, {});
  REQUIRE(s);
  (void)tree.insert(s->tokens, s->blocks);
  return *s;
}

// Everything observable of a tree and its allocator, to prove a failed call changed nothing.
struct Snapshot {
  std::int64_t cached_blocks, nodes, queries, free_blocks;
  std::vector<std::int32_t> refs;
  std::vector<bool> cached;
  bool operator==(const Snapshot&) const = default;
};
Snapshot snapshot(const RadixTree& t, const BlockAllocator& a) {
  Snapshot s{t.cached_blocks(), t.num_nodes(), t.stats().queries, a.num_free_blocks(), {}, {}};
  for (BlockId b = 0; b < a.num_blocks(); ++b) {
    s.refs.push_back(a.ref_count(b));
    s.cached.push_back(a.is_cached(b));
  }
  return s;
}

template <class F>
void require_error_unchanged(RadixTree& t, BlockAllocator& a, ErrorCode code, F&& f) {
  const Snapshot before = snapshot(t, a);
  try {
    f();
    FAIL("expected inferkit::Error");
  } catch (const Error& e) {
    CHECK(e.code() == code);
  }
  CHECK(snapshot(t, a) == before);
  t.check_consistency();
  a.check_consistency();
}

}  // namespace

TEST_CASE("RadixTree: match is page granular and splits nodes exactly", "[prefix][radix_tree]") {
  BlockAllocator a(16, 4);
  RadixTree tree(a);
  const std::vector<TokenId> t1 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 2 full pages + 2 tokens
  auto s1 = start(a, t1, {});
  REQUIRE(s1);
  const auto ins = tree.insert(t1, s1->blocks);  // ceil(10 / 4) = 3 blocks, last not cached
  CHECK(ins.matched_tokens == 0);
  CHECK(ins.inserted_tokens == 8);
  CHECK(ins.duplicate_blocks.empty());
  CHECK(tree.cached_tokens() == 8);
  CHECK_FALSE(a.is_cached(s1->blocks[2]));
  tree.check_consistency();

  SECTION("empty query and a query shorter than a page match nothing") {
    CHECK(tree.match({}).num_tokens == 0);
    CHECK(tree.match(seq({1, 2, 3})).num_tokens == 0);
    CHECK(tree.stats().hit_queries == 0);
  }
  SECTION("a partial page never counts") {
    const auto m = tree.match(seq({1, 2, 3, 4, 5, 6, 7, 99, 9}));
    CHECK(m.num_tokens == 4);
    CHECK(m.blocks == std::vector<BlockId>{s1->blocks[0]});
    CHECK(tree.num_nodes() == 2);  // split after the first page
    tree.check_consistency();
  }
  SECTION("exactly one full block") {
    const auto m = tree.match(seq({1, 2, 3, 4}));
    CHECK(m.num_tokens == 4);
    CHECK(m.blocks.size() == 1);
  }
  SECTION("a longer query matches the whole cached run") {
    const auto m = tree.match(seq({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
    CHECK(m.num_tokens == 8);
    CHECK(m.blocks == std::vector<BlockId>(s1->blocks.begin(), s1->blocks.begin() + 2));
  }
  SECTION("a diverging insert splits and gives back duplicate blocks") {
    const std::vector<TokenId> t2 = {1, 2, 3, 4, 50, 60, 70, 80};
    auto s2 = start(a, t2, {});  // recomputed the first page instead of matching it
    REQUIRE(s2);
    const auto r = tree.insert(t2, s2->blocks);
    CHECK(r.matched_tokens == 4);
    CHECK(r.inserted_tokens == 4);
    CHECK(r.duplicate_blocks == std::vector<BlockId>{s2->blocks[0]});
    CHECK_FALSE(a.is_cached(s2->blocks[0]));
    CHECK(a.is_cached(s2->blocks[1]));
    CHECK(tree.num_nodes() == 3);
    CHECK(tree.match(t2).blocks == std::vector<BlockId>{s1->blocks[0], s2->blocks[1]});
    CHECK(tree.match(t1).blocks == std::vector<BlockId>{s1->blocks[0], s1->blocks[1]});
    tree.check_consistency();
  }
  SECTION("re-inserting the matched blocks themselves is no duplicate") {
    const auto m = tree.match(t1);
    const std::vector<TokenId> longer = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    auto s2 = start(a, longer, m.blocks);
    REQUIRE(s2);
    const auto r = tree.insert(longer, s2->blocks);
    CHECK(r.matched_tokens == 8);
    CHECK(r.inserted_tokens == 4);
    CHECK(r.duplicate_blocks.empty());
    tree.check_consistency();
  }
}

TEST_CASE("RadixTree: prefixes match only inside their cache namespace", "[prefix][radix_tree]") {
  BlockAllocator a(32, 2);
  RadixTree tree(a);
  const std::vector<TokenId> tokens = seq({1, 2, 3, 4, 5, 6});
  auto s = start(a, tokens, {});
  REQUIRE(s);
  CHECK(tree.insert(s->tokens, s->blocks, /*ns=*/7).inserted_tokens == 6);
  CHECK(tree.match(tokens).num_tokens == 0);  // the default namespace sees nothing
  CHECK(tree.match(tokens, 8).num_tokens == 0);
  const inferkit::PrefixMatch m = tree.match(tokens, 7);
  CHECK(m.num_tokens == 6);
  CHECK(m.blocks == s->blocks);
  // The same tokens in another namespace are another prefix, with blocks of its own.
  auto t = start(a, tokens, {});
  REQUIRE(t);
  const inferkit::PrefixInsert other = tree.insert(t->tokens, t->blocks, 8);
  CHECK(other.matched_tokens == 0);
  CHECK(other.inserted_tokens == 6);
  CHECK(tree.match(tokens, 8).blocks == t->blocks);
  CHECK(tree.match(tokens, 7).blocks == s->blocks);
  // A split inside one namespace leaves the other untouched.
  CHECK(tree.match(seq({1, 2, 3, 4, 9, 9}), 7).num_tokens == 4);
  CHECK(tree.insert(seq({1, 2, 3, 4}),
                    std::vector<BlockId>(s->blocks.begin(), s->blocks.begin() + 2), 7)
            .matched_tokens == 4);
  CHECK(tree.match(tokens, 8).num_tokens == 6);
  tree.check_consistency();
  a.free(std::span<const BlockId>(s->blocks));
  a.free(std::span<const BlockId>(t->blocks));
}

TEST_CASE("RadixTree: match_length reports the match without its effects", "[prefix][radix_tree]") {
  BlockAllocator a(32, 2);
  RadixTree tree(a);
  Sequence s = cached_sequence(a, tree, seq({1, 2, 3, 4, 5, 6}));
  const Snapshot before = snapshot(tree, a);
  const inferkit::PrefixCacheStats stats = tree.stats();
  const std::vector<TokenId> probe = seq({1, 2, 3, 4, 7, 7});
  CHECK(tree.match_length(probe) == 4);
  CHECK(tree.match_length(probe, 3) == 0);
  CHECK(tree.match_length(seq({1})) == 0);  // less than a page
  CHECK(snapshot(tree, a) == before);
  CHECK(tree.num_nodes() == 1);  // no split
  CHECK(tree.stats().queries == stats.queries);
  CHECK(tree.match(probe).num_tokens == tree.match_length(probe));
  CHECK(tree.num_nodes() == 2);  // match itself splits where it ends
  a.free(std::span<const BlockId>(s.blocks));
}

TEST_CASE("RadixTree: block size one caches single tokens", "[prefix][radix_tree]") {
  BlockAllocator a(8, 1);
  RadixTree tree(a);
  auto s = start(a, seq({7}), {});
  REQUIRE(s);
  CHECK(tree.insert(seq({7}), s->blocks).inserted_tokens == 1);
  CHECK(tree.match(seq({7, 8})).num_tokens == 1);
  CHECK(tree.match(seq({8})).num_tokens == 0);
  const auto st = tree.stats();
  CHECK(st.queries == 2);
  CHECK(st.hit_queries == 1);
  CHECK(st.queried_tokens == 3);
  CHECK(st.hit_tokens == 1);
  CHECK(st.match_length_tokens[0] == 1);  // the miss
  CHECK(st.match_length_tokens[1] == 1);  // [1, 2)
  CHECK(st.token_hit_rate() == Approx(1.0 / 3.0));
}

TEST_CASE("RadixTree: bad input throws and changes nothing", "[prefix][radix_tree]") {
  BlockAllocator a(16, 2);
  RadixTree tree(a);
  auto s1 = start(a, seq({1, 2, 3, 4}), {});
  REQUIRE(s1);
  (void)tree.insert(s1->tokens, s1->blocks);
  auto s2 = start(a, seq({9, 9, 8, 8}), {});
  REQUIRE(s2);
  const std::vector<TokenId> t2 = s2->tokens;

  SECTION("block count not matching the tokens") {
    require_error_unchanged(tree, a, ErrorCode::kInvalidArgument,
                            [&] { (void)tree.insert(t2, std::vector<BlockId>{s2->blocks[0]}); });
    require_error_unchanged(tree, a, ErrorCode::kInvalidArgument, [&] {
      (void)tree.insert(seq({9, 9, 8}), std::vector<BlockId>{});
    });
  }
  SECTION("a block owned by nobody") {
    const BlockId free_block = 15;
    REQUIRE(a.ref_count(free_block) == 0);
    require_error_unchanged(tree, a, ErrorCode::kInvalidArgument, [&] {
      (void)tree.insert(t2, std::vector<BlockId>{s2->blocks[0], free_block});
    });
  }
  SECTION("an evictable cached block is owned by nobody either") {
    a.free(std::span<const BlockId>(s1->blocks));  // tree blocks now evictable, refcount 0
    require_error_unchanged(tree, a, ErrorCode::kInvalidArgument, [&] {
      (void)tree.insert(seq({5, 5, 6, 6}), s1->blocks);
    });
  }
  SECTION("a block listed twice") {
    require_error_unchanged(tree, a, ErrorCode::kInvalidArgument, [&] {
      (void)tree.insert(t2, std::vector<BlockId>{s2->blocks[0], s2->blocks[0]});
    });
  }
  SECTION("a block cached for another prefix") {
    require_error_unchanged(tree, a, ErrorCode::kInvalidArgument, [&] {
      (void)tree.insert(t2, std::vector<BlockId>{s2->blocks[0], s1->blocks[0]});
    });
  }
  SECTION("a block id out of range") {
    require_error_unchanged(tree, a, ErrorCode::kOutOfRange, [&] {
      (void)tree.insert(t2, std::vector<BlockId>{s2->blocks[0], 99});
    });
  }
  SECTION("unlocking more than locked") {
    const auto m = tree.match(s1->tokens);
    tree.lock(m.handle);
    tree.unlock(m.handle);
    require_error_unchanged(tree, a, ErrorCode::kInvalidState, [&] { tree.unlock(m.handle); });
    // A lock on a longer path does not license unlocking a shorter one through it.
    const auto shorter = tree.match(seq({1, 2}));
    const auto full = tree.match(s1->tokens);
    tree.lock(full.handle);
    require_error_unchanged(tree, a, ErrorCode::kInvalidState,
                            [&] { tree.unlock(shorter.handle); });
    tree.unlock(full.handle);
  }
  SECTION("a stale handle after eviction") {
    const auto m = tree.match(s1->tokens);
    CHECK(tree.evict(100) == 2);
    require_error_unchanged(tree, a, ErrorCode::kInvalidArgument, [&] { tree.lock(m.handle); });
  }
  SECTION("negative eviction and bad options") {
    require_error_unchanged(tree, a, ErrorCode::kInvalidArgument, [&] { (void)tree.evict(-1); });
    BlockAllocator b(4, 1);
    CHECK_THROWS_AS(RadixTree(b, RadixTreeOptions{.max_cached_blocks = -1}), Error);
    CHECK_THROWS_AS(RadixTree(b, RadixTreeOptions{.protected_fraction = 1.5}), Error);
  }
}

TEST_CASE("RadixTree: insert validates the block of a trailing partial page",
          "[prefix][radix_tree]") {
  BlockAllocator a(16, 2);
  RadixTree tree(a);
  auto s = start(a, seq({1, 2, 3, 4, 5}), {});  // 2 full pages and a partial one
  REQUIRE(s);
  const BlockId free_block = 15;
  REQUIRE(a.ref_count(free_block) == 0);
  auto with_tail = [&](BlockId tail) {
    return std::vector<BlockId>{s->blocks[0], s->blocks[1], tail};
  };
  for (const BlockId bad : {BlockId{-1}, BlockId{16}, std::numeric_limits<BlockId>::max()}) {
    require_error_unchanged(tree, a, ErrorCode::kOutOfRange,
                            [&] { (void)tree.insert(s->tokens, with_tail(bad)); });
  }
  require_error_unchanged(tree, a, ErrorCode::kInvalidArgument,
                          [&] { (void)tree.insert(s->tokens, with_tail(free_block)); });
  require_error_unchanged(tree, a, ErrorCode::kInvalidArgument,
                          [&] { (void)tree.insert(s->tokens, with_tail(s->blocks[0])); });
  CHECK(tree.insert(s->tokens, s->blocks).inserted_tokens == 4);  // the real tail is accepted
  CHECK_FALSE(a.is_cached(s->blocks[2]));
}

TEST_CASE("RadixTree: a throwing call leaves the deferred uncache pending",
          "[prefix][radix_tree]") {
  BlockAllocator a(4, 1);
  RadixTree tree(a);
  const Sequence s = cached_sequence(a, tree, seq({1, 2, 3}));
  const auto stale = tree.match(seq({1, 2, 3}));
  a.retain(s.blocks[2]);                 // a running sequence keeps the tail
  for (BlockId b : s.blocks) a.free(b);  // head first: {1} then {2} on the LRU list, {3} owned
  const std::vector<BlockId> taken = a.allocate(2);  // the free block, then {1}'s block
  REQUIRE(taken.size() == 2);
  // The tree dropped the whole path; the blocks of {2} (evictable) and {3} (owned) wait, still
  // marked cached, for the next call to uncache them.
  CHECK(tree.cached_blocks() == 0);
  REQUIRE(a.is_cached(s.blocks[1]));
  REQUIRE(a.is_cached(s.blocks[2]));
  REQUIRE(a.num_free_blocks() == 0);
  require_error_unchanged(tree, a, ErrorCode::kInvalidArgument, [&] { tree.lock(stale.handle); });
  require_error_unchanged(tree, a, ErrorCode::kInvalidArgument, [&] { tree.unlock(stale.handle); });
  require_error_unchanged(tree, a, ErrorCode::kInvalidArgument,
                          [&] { (void)tree.insert(seq({5}), taken); });  // wrong block count
  require_error_unchanged(tree, a, ErrorCode::kOutOfRange,
                          [&] { (void)tree.insert(seq({5}), std::vector<BlockId>{-1}); });
  require_error_unchanged(tree, a, ErrorCode::kInvalidArgument, [&] { (void)tree.evict(-1); });
  CHECK(a.is_cached(s.blocks[2]));
  tree.flush();
  CHECK_FALSE(a.is_cached(s.blocks[2]));
  CHECK(a.num_free_blocks() == 1);
  a.free(s.blocks[2]);
  a.free(std::span<const BlockId>(taken));
  CHECK(a.num_free_blocks() == 4);
}

TEST_CASE("RadixTree: one tree per allocator, and no other callback takes it over",
          "[prefix][radix_tree]") {
  BlockAllocator a(8, 1);
  {
    RadixTree tree(a);
    CHECK(a.has_eviction_callback());
    CHECK(inferkit::test::code_of([&] { RadixTree second(a); }) == ErrorCode::kInvalidState);
    CHECK(inferkit::test::code_of([&] { a.set_eviction_callback([](BlockId) {}); }) ==
          ErrorCode::kInvalidState);
    CHECK(inferkit::test::code_of([&] { a.set_eviction_callback({}); }) ==
          ErrorCode::kInvalidState);
    // The first tree still hears of every eviction.
    auto s = start(a, seq({1, 2}), {});
    REQUIRE(s);
    (void)tree.insert(s->tokens, s->blocks);
    a.free(std::span<const BlockId>(s->blocks));
    const std::vector<BlockId> all = a.allocate(8);
    REQUIRE(all.size() == 8);
    CHECK(tree.cached_blocks() == 0);
    CHECK(tree.match(seq({1, 2})).num_tokens == 0);
    tree.check_consistency();
    a.free(std::span<const BlockId>(all));
  }
  CHECK_FALSE(a.has_eviction_callback());
  RadixTree next(a);  // the destroyed tree removed its callback
  CHECK(a.has_eviction_callback());
}

TEST_CASE("RadixTree: handles name their tree and go stale when their path loses a page",
          "[prefix][radix_tree]") {
  BlockAllocator a(8, 1);
  BlockAllocator b(8, 1);
  RadixTree tree(a);
  RadixTree other(b);
  const Sequence s = cached_sequence(a, tree, seq({1, 2, 3}));
  const Sequence t = cached_sequence(b, other, seq({1, 2, 3}));
  a.free(std::span<const BlockId>(s.blocks));  // finished: evictable
  const auto m = tree.match(seq({1, 2, 3}));
  const auto m_other = other.match(seq({1, 2, 3}));
  REQUIRE(m.handle.node == m_other.handle.node);  // same slot and generation: only the tree
  REQUIRE(m.handle.generation == m_other.handle.generation);
  CHECK(tree.is_valid(m.handle));
  CHECK_FALSE(tree.is_valid(m_other.handle));
  CHECK_FALSE(tree.is_valid(PrefixHandle{}));
  std::string message;
  CHECK(inferkit::test::code_of([&] { tree.lock(m_other.handle); }, &message) ==
        ErrorCode::kInvalidArgument);
  CHECK_THAT(message, Catch::Contains("not issued by this tree"));
  require_error_unchanged(tree, a, ErrorCode::kInvalidArgument, [&] { tree.lock({}); });
  SECTION("evict takes a tail page") {
    CHECK(tree.evict(1) == 1);
    CHECK(tree.match(seq({1, 2, 3})).num_tokens == 2);
  }
  SECTION("the allocator reuses a block of the path") {
    const std::vector<BlockId> taken = a.allocate(6);  // the 5 free blocks, then the LRU one
    REQUIRE(taken.size() == 6);
    CHECK(tree.match(seq({1, 2, 3})).num_tokens < 3);
    a.free(std::span<const BlockId>(taken));
  }
  // Either way the match's handle would now lock fewer blocks than it returned: rejected.
  CHECK_FALSE(tree.is_valid(m.handle));
  CHECK(inferkit::test::code_of([&] { tree.lock(m.handle); }, &message) ==
        ErrorCode::kInvalidArgument);
  CHECK_THAT(message, Catch::Contains("stale"));
  tree.check_consistency();
  b.free(std::span<const BlockId>(t.blocks));
}

TEST_CASE("RadixTree: match_and_lock locks exactly the blocks it returns", "[prefix][radix_tree]") {
  BlockAllocator a(6, 2);
  RadixTree tree(a);
  const Sequence s = cached_sequence(a, tree, seq({1, 1, 2, 2, 3, 3}));
  a.free(std::span<const BlockId>(s.blocks));  // 3 evictable cached blocks
  const auto hit = tree.match_and_lock(seq({1, 1, 2, 2, 9, 9}));
  REQUIRE(hit.blocks == std::vector<BlockId>{s.blocks[0], s.blocks[1]});
  CHECK(tree.is_valid(hit.handle));
  for (BlockId blk : hit.blocks) CHECK(a.ref_count(blk) == 1);
  // Allocating everything cannot reclaim them: the locked blocks are safe to share.
  const std::vector<BlockId> rest = a.allocate(a.num_available_blocks());
  CHECK(rest.size() == 4);
  inferkit::BlockTable table(a);
  table.append_shared_blocks(a, hit.blocks);
  CHECK(table.num_tokens() == 4);
  tree.unlock(hit.handle);
  table.release(a);
  a.free(std::span<const BlockId>(rest));
  SECTION("an empty match is locked and unlocked too") {
    const auto miss = tree.match_and_lock(seq({8, 8}));
    CHECK(miss.num_tokens == 0);
    tree.unlock(miss.handle);
    require_error_unchanged(tree, a, ErrorCode::kInvalidState, [&] { tree.unlock(miss.handle); });
  }
  tree.check_consistency();
  (void)tree.evict(100);
  CHECK(a.num_free_blocks() == a.num_blocks());
}

TEST_CASE("RadixTree: lock and match_and_lock stop at the refcount limit, changing nothing",
          "[prefix][radix_tree]") {
  using Peer = inferkit::detail::BlockAllocatorPeer;
  BlockAllocator a(4, 1);
  RadixTree tree(a);
  const Sequence s = cached_sequence(a, tree, seq({1, 2}));
  Peer::add_owners(a, s.blocks[1], BlockAllocator::kMaxRefCount - 2);
  const auto m = tree.match(s.tokens);
  tree.lock(m.handle);  // kMaxRefCount references now
  require_error_unchanged(tree, a, ErrorCode::kOutOfRange, [&] { tree.lock(m.handle); });
  require_error_unchanged(tree, a, ErrorCode::kOutOfRange,
                          [&] { (void)tree.match_and_lock(s.tokens); });
  CHECK(tree.match_and_lock(seq({1})).num_tokens == 1);  // the head block has room
  tree.unlock(tree.match(seq({1})).handle);
  tree.unlock(m.handle);
  Peer::add_owners(a, s.blocks[1], 2 - BlockAllocator::kMaxRefCount);
  tree.check_consistency();
  a.free(std::span<const BlockId>(s.blocks));
}

TEST_CASE("RadixTree: locked paths survive evict and allocator pressure", "[prefix][radix_tree]") {
  BlockAllocator a(6, 2);
  RadixTree tree(a);
  auto s1 = start(a, seq({1, 1, 2, 2, 3, 3}), {});
  REQUIRE(s1);
  (void)tree.insert(s1->tokens, s1->blocks);
  a.free(std::span<const BlockId>(s1->blocks));  // finished: 3 evictable cached blocks
  const auto m = tree.match(seq({1, 1, 2, 2, 9, 9}));
  REQUIRE(m.num_tokens == 4);
  tree.lock(m.handle);
  CHECK(a.ref_count(m.blocks[0]) == 1);  // the lock revived them

  CHECK(tree.evict(10) == 1);  // only the unlocked third page can go
  CHECK(tree.cached_blocks() == 2);
  const auto all = a.allocate(4);  // 4 free blocks remain; the locked two are not available
  CHECK(all.size() == 4);
  const std::vector<BlockId> held(all.begin(), all.end());
  CHECK_FALSE(a.allocate_one());
  CHECK(tree.match(seq({1, 1, 2, 2})).blocks == m.blocks);
  tree.check_consistency();

  tree.unlock(m.handle);
  CHECK(a.num_evictable_blocks() == 2);
  const auto reused = a.allocate_one();  // now the allocator reclaims a cached block
  REQUIRE(reused);
  CHECK(tree.match(seq({1, 1, 2, 2})).num_tokens < 4);
  tree.check_consistency();
  a.free(*reused);
  a.free(std::span<const BlockId>(held));
  (void)tree.evict(100);
  CHECK(a.num_free_blocks() == a.num_blocks());
  a.check_consistency();
}

TEST_CASE("RadixTree: allocator reusing a middle block drops the rest of the node and its subtree",
          "[prefix][radix_tree]") {
  BlockAllocator a(12, 1);
  RadixTree tree(a);
  auto s1 = start(a, seq({1, 2, 3, 4}), {});
  REQUIRE(s1);
  (void)tree.insert(s1->tokens, s1->blocks);
  auto s2 = start(a, seq({1, 2, 3, 4, 5, 6}), tree.match(seq({1, 2, 3, 4})).blocks);
  REQUIRE(s2);
  (void)tree.insert(s2->tokens, s2->blocks);  // child {5, 6} under {1, 2, 3, 4}
  const BlockId middle = s1->blocks[1];       // token 2
  // Everyone releases, but other holders keep every block except `middle`, so the allocator's
  // only evictable block sits in the middle of the node.
  std::vector<BlockId> others;
  for (BlockId b : s2->blocks) {
    if (b != middle) others.push_back(b);
  }
  a.retain(std::span<const BlockId>(others));
  a.free(std::span<const BlockId>(s1->blocks));
  a.free(std::span<const BlockId>(s2->blocks));
  REQUIRE(a.num_evictable_blocks() == 1);
  const auto fresh = a.allocate(static_cast<std::int32_t>(a.num_free_blocks() + 1));
  REQUIRE(!fresh.empty());
  const std::vector<BlockId> taken(fresh.begin(), fresh.end());
  CHECK(std::find(taken.begin(), taken.end(), middle) != taken.end());
  // The tree drops them at once; the allocator marks follow at the next call (or flush).
  CHECK(tree.cached_blocks() == 1);
  CHECK(a.is_cached(s2->blocks[5]));
  tree.flush();
  CHECK_FALSE(a.is_cached(s2->blocks[5]));
  // The prefix {1} survives; {3, 4} and the {5, 6} subtree are gone, their blocks uncached.
  const auto m = tree.match(seq({1, 2, 3, 4, 5, 6}));
  CHECK(m.num_tokens == 1);
  CHECK(tree.cached_blocks() == 1);
  CHECK(tree.stats().reclaimed_blocks == 5);
  for (BlockId b : others) CHECK(a.is_cached(b) == (b == s1->blocks[0]));
  tree.check_consistency();
  a.free(std::span<const BlockId>(others));
  a.free(std::span<const BlockId>(taken));
  (void)tree.evict(100);
  CHECK(a.num_free_blocks() == a.num_blocks());
  a.check_consistency();
}

TEST_CASE("RadixTree: every observer sees blocks stored and removed, reclaims at the next call",
          "[prefix][radix_tree]") {
  BlockAllocator a(12, 1);
  RadixTree tree(a);
  CHECK(inferkit::test::code_of([&] { (void)tree.add_observer({}); }) ==
        ErrorCode::kInvalidArgument);
  std::vector<std::string> log_a;
  std::vector<std::string> log_b;
  const auto describe = [](const PrefixEvent& e) {
    std::string text = e.kind == PrefixEventKind::kStored ? "stored" : "removed";
    std::vector<BlockId> blocks(e.blocks.begin(), e.blocks.end());
    if (e.kind == PrefixEventKind::kRemoved) std::sort(blocks.begin(), blocks.end());
    for (BlockId b : blocks) text += " " + std::to_string(b);
    if (e.kind == PrefixEventKind::kStored) {
      text += " after " + std::to_string(e.parent_block) + " ns " + std::to_string(e.ns) + ":";
      for (TokenId t : e.tokens) text += " " + std::to_string(t);
    }
    return text;
  };
  const auto ida = tree.add_observer([&](const PrefixEvent& e) { log_a.push_back(describe(e)); });
  const auto idb = tree.add_observer([&](const PrefixEvent& e) { log_b.push_back(describe(e)); });
  CHECK(tree.num_observers() == 2);
  auto s1 = start(a, seq({1, 2, 3, 4}), {});
  REQUIRE(s1);
  (void)tree.insert(s1->tokens, s1->blocks, /*ns=*/7);
  auto s2 = start(a, seq({1, 2, 5}), tree.match(seq({1, 2}), 7).blocks);  // splits {1,2 | 3,4}
  REQUIRE(s2);
  (void)tree.insert(s2->tokens, s2->blocks, 7);
  const auto& b1 = s1->blocks;
  const std::vector<std::string> stored = {
      "stored " + std::to_string(b1[0]) + " " + std::to_string(b1[1]) + " " +
          std::to_string(b1[2]) + " " + std::to_string(b1[3]) + " after -1 ns 7: 1 2 3 4",
      "stored " + std::to_string(s2->blocks[2]) + " after " + std::to_string(b1[1]) + " ns 7: 5"};
  CHECK(log_a == stored);
  CHECK(log_b == stored);
  tree.remove_observer(idb);
  CHECK(inferkit::test::code_of([&] { tree.remove_observer(idb); }) == ErrorCode::kInvalidArgument);
  CHECK(inferkit::test::code_of([&] { tree.remove_observer(12345); }) ==
        ErrorCode::kInvalidArgument);
  // Tree eviction reports at once: the least recently used leaf is {3, 4}.
  a.free(std::span<const BlockId>(s1->blocks));
  a.free(std::span<const BlockId>(s2->blocks));
  CHECK(tree.evict(2) == 2);
  REQUIRE(log_a.size() == 3);
  CHECK(log_a[2] == "removed " + std::to_string(std::min(b1[2], b1[3])) + " " +
                        std::to_string(std::max(b1[2], b1[3])));
  // The allocator reclaiming a cached block (inside allocate) is reported at the next call.
  const auto taken = a.allocate(static_cast<std::int32_t>(a.num_free_blocks() + 3));
  REQUIRE(taken.size() == static_cast<std::size_t>(a.num_blocks()));
  CHECK(log_a.size() == 3);
  tree.flush();
  REQUIRE(log_a.size() == 4);
  std::vector<BlockId> rest = {b1[0], b1[1], s2->blocks[2]};
  std::sort(rest.begin(), rest.end());
  CHECK(log_a[3] == "removed " + std::to_string(rest[0]) + " " + std::to_string(rest[1]) + " " +
                        std::to_string(rest[2]));
  CHECK(log_b.size() == 2);  // removed before any of this
  CHECK(tree.cached_blocks() == 0);
  tree.remove_observer(ida);
  CHECK(tree.num_observers() == 0);
  a.free(std::span<const BlockId>(taken.begin(), taken.end()));
  tree.check_consistency();
  a.check_consistency();
}

TEST_CASE("RadixTree: eviction order is least recently used leaf first", "[prefix][radix_tree]") {
  for (const EvictionPolicy policy : {EvictionPolicy::kLru, EvictionPolicy::kSegmentedLru}) {
    BlockAllocator a(32, 1);
    RadixTree tree(a, {.policy = policy});
    std::vector<Sequence> seqs;
    for (const auto& t : {seq({1, 2, 3}), seq({1, 2, 4}), seq({5, 6}), seq({7, 8})}) {
      auto s = start(a, t, tree.match(t).blocks);
      REQUIRE(s);
      (void)tree.insert(t, s->blocks);
      seqs.push_back(*s);
    }
    (void)tree.match(seq({1, 2, 3}));  // {1,2,3} and {5,6} become more recent than {1,2,4}
    (void)tree.match(seq({5, 6}));
    // Blocks: {1,2} shared, {3}, {4}, {5,6}, {7,8}. {7,8} was matched once (by its own start, an
    // empty match) and never since; {1,2,4} was inserted after a hit on {1,2}.
    CHECK(tree.evict(1) == 1);
    if (policy == EvictionPolicy::kLru) {
      // Least recent: {1,2,4}'s leaf {4} (touched by its insert before {5,6} and {7,8} came).
      CHECK(tree.match(seq({1, 2, 4})).num_tokens == 2);
      CHECK(tree.match(seq({7, 8})).num_tokens == 2);
    } else {
      // SLRU: never-matched probation leaves go first: {4} is the oldest probation leaf too.
      CHECK(tree.match(seq({1, 2, 4})).num_tokens == 2);
    }
    tree.check_consistency();
    CHECK(tree.evict(1) == 1);
    if (policy == EvictionPolicy::kLru) {
      // Order now {3}, {5,6}, {1,2}, {7,8}: the leaf {3} is least recent.
      CHECK(tree.match(seq({1, 2, 3})).num_tokens == 2);
      CHECK(tree.match(seq({5, 6})).num_tokens == 2);
    } else {
      // {7,8} is the only probation leaf left: it loses its tail page, matched ones stay.
      CHECK(tree.match(seq({7, 8})).num_tokens == 1);
      CHECK(tree.match(seq({1, 2, 3})).num_tokens == 3);
      CHECK(tree.match(seq({5, 6})).num_tokens == 2);
    }
    tree.check_consistency();
    for (auto& s : seqs) a.free(std::span<const BlockId>(s.blocks));
    (void)tree.evict(100);
    CHECK(a.num_free_blocks() == a.num_blocks());
  }
}

TEST_CASE("RadixTree: segmented LRU keeps shared prefixes through a scan of unique requests",
          "[prefix][radix_tree]") {
  for (const EvictionPolicy policy : {EvictionPolicy::kLru, EvictionPolicy::kSegmentedLru}) {
    BlockAllocator a(64, 1);
    RadixTree tree(a, {.max_cached_blocks = 12, .policy = policy});
    auto insert_release = [&](const std::vector<TokenId>& t) {
      auto s = start(a, t, tree.match(t).blocks);
      REQUIRE(s);
      (void)tree.insert(t, s->blocks);
      a.free(std::span<const BlockId>(s->blocks));
    };
    insert_release(seq({1, 2, 3, 4}));
    insert_release(seq({1, 2, 3, 4, 10}));  // a hit on {1,2,3,4}: protected under SLRU
    for (TokenId u = 100; u < 110; ++u) insert_release(seq({u, u, u}));  // 30 unique tokens
    const auto hit = tree.match(seq({1, 2, 3, 4, 11}));
    CHECK(hit.num_tokens == (policy == EvictionPolicy::kLru ? 0 : 4));
    CHECK(tree.cached_blocks() <= 12);
    tree.check_consistency();
  }
}

TEST_CASE("RadixTree: capacity is never exceeded and locked content caps an insert",
          "[prefix][radix_tree]") {
  BlockAllocator a(32, 2);
  RadixTree tree(a, {.max_cached_tokens = 9});  // 4 blocks of 2 tokens
  CHECK(tree.capacity_blocks() == 4);
  auto s1 = start(a, seq({1, 1, 2, 2, 3, 3}), {});
  REQUIRE(s1);
  CHECK(tree.insert(s1->tokens, s1->blocks).inserted_tokens == 6);
  const auto m = tree.match(s1->tokens);
  tree.lock(m.handle);
  auto s2 = start(a, seq({5, 5, 6, 6, 7, 7}), {});
  REQUIRE(s2);
  const auto r = tree.insert(s2->tokens, s2->blocks);
  CHECK(r.inserted_tokens == 2);  // one block of room left, nothing unlocked to evict
  CHECK(tree.cached_blocks() == 4);
  CHECK(a.is_cached(s2->blocks[0]));
  CHECK_FALSE(a.is_cached(s2->blocks[1]));
  tree.unlock(m.handle);
  auto s3 = start(a, seq({8, 8, 9, 9}), {});
  REQUIRE(s3);
  CHECK(tree.insert(s3->tokens, s3->blocks).inserted_tokens == 4);  // evicts LRU to make room
  CHECK(tree.cached_blocks() == 4);
  tree.check_consistency();

  BlockAllocator b(8, 1);
  RadixTree none(b, {.max_cached_blocks = 0});
  auto s4 = start(b, seq({1, 2}), {});
  REQUIRE(s4);
  CHECK(none.insert(s4->tokens, s4->blocks).inserted_tokens == 0);
  CHECK(none.match(seq({1, 2})).num_tokens == 0);
}

TEST_CASE("RadixTree: destruction hands every block back to the allocator",
          "[prefix][radix_tree]") {
  BlockAllocator a(8, 1);
  Sequence s;
  {
    RadixTree tree(a);
    auto started = start(a, seq({1, 2, 3}), {});
    REQUIRE(started);
    s = *started;
    (void)tree.insert(s.tokens, s.blocks);
    tree.lock(tree.match(s.tokens).handle);  // never unlocked
    CHECK(a.ref_count(s.blocks[0]) == 2);
  }
  for (BlockId b : s.blocks) {
    CHECK(a.ref_count(b) == 1);
    CHECK_FALSE(a.is_cached(b));
  }
  a.free(std::span<const BlockId>(s.blocks));
  CHECK(a.num_free_blocks() == a.num_blocks());
  a.check_consistency();
}

TEST_CASE("RadixTree: a request's life with BlockTable shares the cached prefix",
          "[prefix][radix_tree]") {
  BlockAllocator a(8, 4);
  RadixTree tree(a);
  const std::vector<TokenId> system = {1, 2, 3, 4, 5, 6, 7, 8};
  auto run = [&](TokenId user) {
    std::vector<TokenId> prompt = system;
    prompt.insert(prompt.end(), {user, user, user});
    inferkit::BlockTable table(a);
    const auto hit = tree.match_and_lock(std::span<const TokenId>(prompt).first(prompt.size() - 1));
    table.append_shared_blocks(a, hit.blocks);
    std::vector<inferkit::BlockCopy> copies;
    REQUIRE(table.append_tokens(a, static_cast<std::int64_t>(prompt.size()) - hit.num_tokens, {},
                                copies));
    CHECK(copies.empty());  // only full blocks are cached: no copy-on-write
    const auto r = tree.insert(prompt, table.blocks());
    CHECK(r.duplicate_blocks.empty());
    tree.unlock(hit.handle);
    table.release(a);
    return hit.num_tokens;
  };
  CHECK(run(20) == 0);
  CHECK(run(30) == 8);  // the system prompt's two blocks are reused
  CHECK(run(40) == 8);
  CHECK(tree.cached_tokens() == 8);
  CHECK(a.num_evictable_blocks() == 2);
  tree.check_consistency();
  a.check_consistency();
}

namespace {

// The brute-force model: every cached page-aligned prefix and the block of its last page.
struct Model {
  std::int32_t bs;
  std::map<std::vector<TokenId>, BlockId> entries;

  // Forgets prefixes whose block lost its cached mark, and everything that extends them (the
  // map's order puts a prefix before its extensions).
  void sync(const BlockAllocator& a) {
    std::map<std::vector<TokenId>, BlockId> kept;
    for (const auto& [prefix, block] : entries) {
      const bool parent_kept =
          prefix.size() == static_cast<std::size_t>(bs) ||
          kept.count(std::vector<TokenId>(prefix.begin(), prefix.end() - bs)) != 0;
      if (parent_kept && a.is_cached(block)) kept.emplace(prefix, block);
    }
    entries = std::move(kept);
  }
  std::vector<BlockId> longest(const std::vector<TokenId>& t) const {
    std::vector<BlockId> out;
    for (std::size_t end = static_cast<std::size_t>(bs); end <= t.size(); end += bs) {
      const auto it = entries.find(std::vector<TokenId>(t.begin(), t.begin() + end));
      if (it == entries.end()) break;
      out.push_back(it->second);
    }
    return out;
  }
};

// An observer's picture of the cache, rebuilt from its events alone, as a KV-event exporter or a
// router's index keeps it: each cached block's namespace and tokens from the root through its
// page. Observers run inside noexcept code, so a bad event is recorded in `problem` (the test
// checks it), never thrown.
struct EventReplica {
  std::int32_t bs;
  std::map<BlockId, std::pair<inferkit::CacheNamespace, std::vector<TokenId>>> path;
  std::int64_t events = 0;
  std::string problem;

  void on(const PrefixEvent& e) {
    ++events;
    if (!problem.empty()) return;
    if (e.kind == PrefixEventKind::kRemoved) {
      for (BlockId b : e.blocks) {
        if (path.erase(b) != 1) problem = "removed block " + std::to_string(b) + " not stored";
      }
      return;
    }
    if (e.tokens.size() != e.blocks.size() * static_cast<std::size_t>(bs) || e.blocks.empty()) {
      problem = "stored event with " + std::to_string(e.blocks.size()) + " blocks and " +
                std::to_string(e.tokens.size()) + " tokens";
      return;
    }
    std::vector<TokenId> prefix;
    if (e.parent_block != inferkit::kNoBlock) {
      const auto it = path.find(e.parent_block);
      if (it == path.end() || it->second.first != e.ns) {
        problem = "parent block " + std::to_string(e.parent_block) + " unknown";
        return;
      }
      prefix = it->second.second;
    }
    for (std::size_t i = 0; i < e.blocks.size(); ++i) {
      prefix.insert(prefix.end(), e.tokens.begin() + static_cast<std::ptrdiff_t>(i * bs),
                    e.tokens.begin() + static_cast<std::ptrdiff_t>((i + 1) * bs));
      if (!path.emplace(e.blocks[i], std::make_pair(e.ns, prefix)).second) {
        problem = "block " + std::to_string(e.blocks[i]) + " stored twice";
      }
    }
  }
  // Prefix -> block, the brute-force model's form (namespace 0).
  std::map<std::vector<TokenId>, BlockId> entries() const {
    std::map<std::vector<TokenId>, BlockId> out;
    for (const auto& [b, where] : path) out.emplace(where.second, b);
    return out;
  }
};

void run_random(std::int32_t bs, EvictionPolicy policy, std::optional<std::int64_t> cap,
                std::uint64_t seed) {
  INFO("bs " << bs << " policy " << static_cast<int>(policy) << " seed " << seed);
  BlockAllocator a(48, bs);
  RadixTree tree(a, {.max_cached_blocks = cap, .policy = policy});
  Model model{bs, {}};
  // Two observers from the start; the second leaves halfway and hears nothing more.
  EventReplica replica{bs, {}, 0, {}};
  EventReplica leaver{bs, {}, 0, {}};
  (void)tree.add_observer([&](const PrefixEvent& e) { replica.on(e); });
  const auto leaver_id = tree.add_observer([&](const PrefixEvent& e) { leaver.on(e); });
  std::int64_t leaver_events = -1;
  Rng rng(seed);
  std::vector<Sequence> running;
  std::vector<BlockId> pressure;
  const std::vector<std::vector<TokenId>> bases = {
      {}, {1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 9, 9}, {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}};
  auto release = [&](Sequence& s) {
    if (s.lock) tree.unlock(*s.lock);
    std::vector<BlockId> order = s.blocks;
    if (rng.below(2) == 0) {
      for (std::size_t i = order.size(); i > 1; --i)
        std::swap(order[i - 1], order[rng.below(static_cast<std::uint32_t>(i))]);
      for (BlockId b : order) a.free(b);  // any order: middle blocks may be evicted first
    } else {
      a.free(std::span<const BlockId>(order));  // tail first
    }
  };
  for (int step = 0; step < kRandomSteps; ++step) {
    if (step == kRandomSteps / 2) {
      tree.remove_observer(leaver_id);
      leaver_events = leaver.events;
    }
    const std::uint32_t op = rng.below(10);
    if (op < 5) {  // a request: match, maybe lock, run, maybe insert, maybe keep running
      std::vector<TokenId> t = bases[rng.below(4)];
      const std::uint32_t extra = rng.below(9);
      for (std::uint32_t i = 0; i < extra; ++i) t.push_back(static_cast<TokenId>(rng.below(3)));
      const auto m = tree.match(t);
      REQUIRE(m.blocks == model.longest(t));
      REQUIRE(m.num_tokens == static_cast<std::int64_t>(m.blocks.size()) * bs);
      auto s = start(a, t, m.blocks);
      model.sync(a);  // allocation may have reclaimed cached blocks
      if (!s) continue;
      if (rng.below(2) == 0) {
        tree.lock(m.handle);
        s->lock = m.handle;
        s->locked_blocks = m.blocks;
      }
      if (rng.below(5) != 0) {
        const auto before = model.longest(t);
        const auto r = tree.insert(t, s->blocks);
        REQUIRE(r.matched_tokens == static_cast<std::int64_t>(before.size()) * bs);
        model.sync(a);  // insert may evict for room
        const std::size_t first = before.size();
        for (std::size_t p = first; p < first + static_cast<std::size_t>(r.inserted_tokens / bs);
             ++p) {
          model.entries.emplace(std::vector<TokenId>(t.begin(), t.begin() + (p + 1) * bs),
                                s->blocks[p]);
        }
        for (std::size_t p = 0; p < first; ++p) {
          const bool dup = std::find(r.duplicate_blocks.begin(), r.duplicate_blocks.end(),
                                     s->blocks[p]) != r.duplicate_blocks.end();
          REQUIRE(dup == (s->blocks[p] != before[p]));
        }
      }
      if (rng.below(3) == 0) {
        release(*s);
      } else {
        running.push_back(*s);
      }
    } else if (op < 7 && !running.empty()) {  // a sequence finishes
      const std::size_t i = rng.below(static_cast<std::uint32_t>(running.size()));
      release(running[i]);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 7) {
      (void)tree.evict(rng.below(6));
    } else if (op == 8) {  // memory pressure from elsewhere: the allocator reclaims cached blocks
      const auto got = a.allocate(static_cast<std::int32_t>(rng.below(6)));
      pressure.insert(pressure.end(), got.begin(), got.end());
    } else if (!pressure.empty()) {
      const std::size_t i = rng.below(static_cast<std::uint32_t>(pressure.size()));
      a.free(pressure[i]);
      pressure.erase(pressure.begin() + static_cast<std::ptrdiff_t>(i));
    }
    model.sync(a);
    tree.check_consistency();
    a.check_consistency();
    REQUIRE(tree.cached_blocks() == static_cast<std::int64_t>(model.entries.size()));
    if (rng.below(2) == 0) {  // reclaimed blocks are reported at the tree's next call
      tree.flush();
      REQUIRE(replica.problem.empty());
      REQUIRE(replica.entries() == model.entries);
    }
    REQUIRE(tree.cached_blocks() <= tree.capacity_blocks());
    for (const Sequence& s : running) {  // locked prefixes stay cached with the same blocks
      if (!s.lock) continue;
      REQUIRE(model.longest(s.tokens).size() >= s.locked_blocks.size());
      for (std::size_t p = 0; p < s.locked_blocks.size(); ++p) {
        REQUIRE(model.longest(s.tokens)[p] == s.locked_blocks[p]);
        REQUIRE(a.ref_count(s.locked_blocks[p]) >= 2);  // the lock's and the sequence's
      }
    }
  }
  CHECK(leaver.problem.empty());
  CHECK(leaver.events == leaver_events);  // nothing after remove_observer
  CHECK(replica.events > leaver.events);
  // The run must have exercised both evictors (the allocator reclaims on every config).
  CHECK(tree.stats().reclaimed_blocks > 0);
  if (cap) CHECK(tree.stats().evicted_blocks > 0);
  for (Sequence& s : running) release(s);
  a.free(std::span<const BlockId>(pressure));
  (void)tree.evict(a.num_blocks());
  CHECK(tree.cached_blocks() == 0);
  CHECK(replica.problem.empty());
  CHECK(replica.path.empty());  // every stored block was reported removed
  CHECK(a.num_free_blocks() == a.num_blocks());
  a.check_consistency();
  tree.check_consistency();
}

}  // namespace

TEST_CASE("RadixTree: randomized serving loop agrees with a brute-force model",
          "[prefix][radix_tree]") {
  std::uint64_t seed = 1;
  for (const std::int32_t bs : {1, 2, 4}) {
    for (const EvictionPolicy policy : {EvictionPolicy::kLru, EvictionPolicy::kSegmentedLru}) {
      run_random(bs, policy, std::nullopt, seed++);
      run_random(bs, policy, 10, seed++);
    }
  }
}
