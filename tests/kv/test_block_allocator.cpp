// SPDX-License-Identifier: Apache-2.0
// Tests for kv/block_allocator.hpp: allocation all-or-nothing, refcounts, cached blocks on the
// LRU list (revive, evict with callback, uncache), the tail-first free order, bad input leaving
// the allocator unchanged, and a long randomized run against a brute-force ownership model.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <limits>
#include <set>
#include <tests/support/block_allocator_peer.hpp>
#include <tests/support/error_code.hpp>
#include <type_traits>
#include <vector>

using inferkit::BlockAllocator;
using inferkit::BlockId;
using inferkit::BlockState;
using inferkit::Error;
using inferkit::ErrorCode;

namespace {

// A snapshot of everything observable, to check that a failed call changed nothing.
struct Snapshot {
  std::vector<std::int32_t> refs;
  std::vector<BlockState> states;
  std::vector<bool> cached;
  std::vector<std::int32_t> tokens;
  std::int32_t free_blocks;
  std::int32_t evictable;
  std::int64_t tokens_stored;
  bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(const BlockAllocator& a) {
  Snapshot s{{}, {}, {}, {}, a.num_free_blocks(), a.num_evictable_blocks(), a.tokens_stored()};
  for (BlockId b = 0; b < a.num_blocks(); ++b) {
    s.refs.push_back(a.ref_count(b));
    s.states.push_back(a.state(b));
    s.cached.push_back(a.is_cached(b));
    s.tokens.push_back(a.block_tokens(b));
  }
  return s;
}

template <class F>
void require_error_unchanged(BlockAllocator& a, ErrorCode code, F&& f) {
  const Snapshot before = snapshot(a);
  try {
    f();
    FAIL("expected inferkit::Error");
  } catch (const Error& e) {
    CHECK(e.code() == code);
  }
  CHECK(snapshot(a) == before);
  a.check_consistency();
}

}  // namespace

TEST_CASE("BlockAllocator: construction validates sizes", "[kv][block_allocator]") {
  CHECK_THROWS_AS(BlockAllocator(0, 16), Error);
  CHECK_THROWS_AS(BlockAllocator(4, 0), Error);
  BlockAllocator a(1, 1);
  CHECK(a.num_free_blocks() == 1);
  CHECK(a.num_used_blocks() == 0);
  CHECK(a.utilization() == 0.0);
  a.check_consistency();
}

TEST_CASE("BlockAllocator: allocate is all or nothing and free returns blocks",
          "[kv][block_allocator]") {
  BlockAllocator a(8, 16);
  const auto first = a.allocate(3);
  REQUIRE(first.size() == 3);
  const std::vector<BlockId> got(first.begin(), first.end());
  CHECK(got == std::vector<BlockId>{0, 1, 2});  // ascending ids from a fresh pool
  CHECK(a.num_used_blocks() == 3);
  CHECK(a.num_free_blocks() == 5);

  SECTION("capacity exhausted returns an empty result and changes nothing") {
    const Snapshot before = snapshot(a);
    CHECK(a.allocate(6).empty());
    std::vector<BlockId> out(6, -7);
    CHECK_FALSE(a.allocate(std::span<BlockId>(out)));
    CHECK(std::all_of(out.begin(), out.end(), [](BlockId b) { return b == -7; }));
    CHECK(snapshot(a) == before);
    const auto rest = a.allocate(5);
    CHECK(rest.size() == 5);
    CHECK_FALSE(a.allocate_one().has_value());
    CHECK(a.num_free_blocks() == 0);
  }
  SECTION("zero blocks is an empty success") {
    CHECK(a.allocate(0).empty());
    CHECK(a.num_used_blocks() == 3);
  }
  SECTION("freed blocks are reused") {
    a.free(got[1]);
    CHECK(a.state(got[1]) == BlockState::kFree);
    const auto one = a.allocate_one();
    REQUIRE(one.has_value());
    CHECK(*one == got[1]);  // LIFO free list
  }
  SECTION("releasing everything makes the pool whole") {
    a.free(std::span<const BlockId>(got));
    CHECK(a.num_free_blocks() == 8);
    CHECK(a.allocate(8).size() == 8);
  }
  a.check_consistency();
}

TEST_CASE("BlockAllocator: allocate(n) returns ids that later allocations cannot overwrite",
          "[kv][block_allocator]") {
  STATIC_REQUIRE(
      std::is_same_v<decltype(std::declval<BlockAllocator&>().allocate(1)), std::vector<BlockId>>);
  BlockAllocator a(8, 4);
  const auto first = a.allocate(2);
  const auto second = a.allocate(3);
  CHECK(first == std::vector<BlockId>{0, 1});
  CHECK(second == std::vector<BlockId>{2, 3, 4});
  CHECK(a.allocate(4).empty());  // 3 left: all or nothing, and the earlier results stay put
  CHECK(first == std::vector<BlockId>{0, 1});
  a.free(first);
  a.free(second);
  CHECK(a.num_free_blocks() == 8);
}

TEST_CASE("BlockAllocator: neither copyable nor movable, since tables and trees bind to it",
          "[kv][block_allocator]") {
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<BlockAllocator>);
  STATIC_REQUIRE_FALSE(std::is_move_constructible_v<BlockAllocator>);
  STATIC_REQUIRE_FALSE(std::is_copy_assignable_v<BlockAllocator>);
  STATIC_REQUIRE_FALSE(std::is_move_assignable_v<BlockAllocator>);
}

TEST_CASE("BlockAllocator: can_allocate keeps the watermark in reserve", "[kv][block_allocator]") {
  BlockAllocator a(100, 16);
  CHECK(a.can_allocate(100));
  CHECK_FALSE(a.can_allocate(101));
  CHECK(a.can_allocate(90, 0.1));
  CHECK_FALSE(a.can_allocate(91, 0.1));
  CHECK(a.can_allocate(0, 1.0));
  CHECK_FALSE(a.can_allocate(1, 1.0));
  CHECK_FALSE(a.can_allocate(std::int64_t{1} << 40));  // any block count can be asked about
  CHECK_FALSE(a.can_allocate(std::numeric_limits<std::int64_t>::max()));
  CHECK_THROWS_AS(a.can_allocate(-1), Error);
  CHECK_THROWS_AS(a.can_allocate(1, 1.5), Error);
  CHECK_THROWS_AS(a.can_allocate(1, -0.1), Error);
}

TEST_CASE("BlockAllocator: refcounts count owners", "[kv][block_allocator]") {
  BlockAllocator a(4, 4);
  const BlockId b = *a.allocate_one();
  a.retain(b);
  a.retain(std::span<const BlockId>(&b, 1));
  CHECK(a.ref_count(b) == 3);
  a.free(b);
  a.free(b);
  CHECK(a.ref_count(b) == 1);
  CHECK(a.state(b) == BlockState::kInUse);
  a.free(b);
  CHECK(a.state(b) == BlockState::kFree);
  a.check_consistency();
}

TEST_CASE("BlockAllocator: bad input throws and leaves the allocator unchanged",
          "[kv][block_allocator]") {
  BlockAllocator a(4, 4);
  const BlockId b = *a.allocate_one();
  const BlockId c = *a.allocate_one();
  a.set_block_tokens(b, 3);

  SECTION("freeing a free block") {
    require_error_unchanged(a, ErrorCode::kInvalidState, [&] { a.free(BlockId{3}); });
  }
  SECTION("out-of-range ids") {
    require_error_unchanged(a, ErrorCode::kOutOfRange, [&] { a.free(BlockId{4}); });
    require_error_unchanged(a, ErrorCode::kOutOfRange, [&] { a.free(BlockId{-1}); });
    require_error_unchanged(a, ErrorCode::kOutOfRange, [&] { a.retain(BlockId{9}); });
    CHECK_THROWS_AS(a.ref_count(4), Error);
  }
  SECTION("refcount underflow in a batch with duplicates") {
    const std::vector<BlockId> twice{b, c, b};
    require_error_unchanged(a, ErrorCode::kInvalidState,
                            [&] { a.free(std::span<const BlockId>(twice)); });
    const std::vector<BlockId> with_bad_id{c, 17};
    require_error_unchanged(a, ErrorCode::kOutOfRange,
                            [&] { a.free(std::span<const BlockId>(with_bad_id)); });
  }
  SECTION("retaining a free block") {
    require_error_unchanged(a, ErrorCode::kInvalidState, [&] { a.retain(BlockId{2}); });
    const std::vector<BlockId> mixed{b, 2};
    require_error_unchanged(a, ErrorCode::kInvalidState,
                            [&] { a.retain(std::span<const BlockId>(mixed)); });
  }
  SECTION("caching a free block and uncaching an uncached one") {
    require_error_unchanged(a, ErrorCode::kInvalidState, [&] { a.mark_cached(BlockId{2}); });
    require_error_unchanged(a, ErrorCode::kInvalidState, [&] { a.uncache(b); });
  }
  SECTION("token counts outside the block") {
    require_error_unchanged(a, ErrorCode::kOutOfRange, [&] { a.set_block_tokens(b, 5); });
    require_error_unchanged(a, ErrorCode::kOutOfRange, [&] { a.set_block_tokens(b, -1); });
    require_error_unchanged(a, ErrorCode::kInvalidState, [&] { a.set_block_tokens(3, 1); });
  }
  SECTION("the error message names the block") {
    try {
      a.free(BlockId{3});
      FAIL("expected inferkit::Error");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("block 3"));
    }
  }
}

TEST_CASE("BlockAllocator: a refcount stops at kMaxRefCount and a refused retain changes nothing",
          "[kv][block_allocator]") {
  using Peer = inferkit::detail::BlockAllocatorPeer;
  constexpr std::int32_t kMax = BlockAllocator::kMaxRefCount;
  STATIC_REQUIRE(kMax == std::numeric_limits<std::int32_t>::max());
  BlockAllocator a(4, 4);
  const BlockId b = *a.allocate_one();
  const BlockId c = *a.allocate_one();
  Peer::add_owners(a, b, kMax - 2);  // refcount kMax - 1, as 2^31 - 3 retains would leave it
  a.retain(b);
  CHECK(a.ref_count(b) == kMax);
  require_error_unchanged(a, ErrorCode::kOutOfRange, [&] { a.retain(b); });
  const std::vector<BlockId> one{b};
  require_error_unchanged(a, ErrorCode::kOutOfRange, [&] { a.retain(one); });
  const std::vector<BlockId> mixed{c, b};  // all or nothing: c gains no owner either
  require_error_unchanged(a, ErrorCode::kOutOfRange, [&] { a.retain(mixed); });
  SECTION("a batch listing a block twice counts both owners") {
    a.free(b);
    a.free(b);  // kMax - 2
    const std::vector<BlockId> twice{b, c, b};
    a.retain(twice);
    CHECK(a.ref_count(b) == kMax);
    CHECK(a.ref_count(c) == 2);
    a.free(c);
    a.free(b);  // kMax - 1: one more fits, two do not
    const std::vector<BlockId> again{b, b};
    require_error_unchanged(a, ErrorCode::kOutOfRange, [&] { a.retain(again); });
  }
  SECTION("the message names the block and the limit") {
    std::string message;
    CHECK(inferkit::test::code_of([&] { a.retain(b); }, &message) == ErrorCode::kOutOfRange);
    CHECK_THAT(message, Catch::Contains("block " + std::to_string(b)) &&
                            Catch::Contains(std::to_string(kMax)));
  }
  Peer::add_owners(a, b, 1 - std::int64_t{a.ref_count(b)});
  a.free(b);
  a.free(c);
  CHECK(a.num_free_blocks() == 4);
  a.check_consistency();
}

TEST_CASE("BlockAllocator: one eviction callback at a time, removed only by its owner",
          "[kv][block_allocator]") {
  BlockAllocator a(2, 1);
  int first_owner = 0;
  int second_owner = 0;
  std::vector<BlockId> heard;
  CHECK_FALSE(a.has_eviction_callback());
  a.set_eviction_callback({}, &second_owner);  // removing none is a no-op
  a.set_eviction_callback([&](BlockId b) { heard.push_back(b); }, &first_owner);
  CHECK(a.has_eviction_callback());
  auto code = [](auto&& f) { return inferkit::test::code_of(f); };
  // Neither another owner nor the same one can replace it, and only its owner removes it.
  CHECK(code([&] { a.set_eviction_callback([](BlockId) {}, &second_owner); }) ==
        ErrorCode::kInvalidState);
  CHECK(code([&] { a.set_eviction_callback([](BlockId) {}, &first_owner); }) ==
        ErrorCode::kInvalidState);
  CHECK(code([&] { a.set_eviction_callback({}, &second_owner); }) == ErrorCode::kInvalidState);
  CHECK(code([&] { a.set_eviction_callback({}); }) == ErrorCode::kInvalidState);
  // The refused calls left the installed callback in place.
  const BlockId b = *a.allocate_one();
  a.mark_cached(b);
  a.free(b);
  (void)a.allocate(2);
  CHECK(heard == std::vector<BlockId>{b});
  a.set_eviction_callback({}, &first_owner);
  CHECK_FALSE(a.has_eviction_callback());
  a.set_eviction_callback([](BlockId) {}, &second_owner);  // now free to take
  CHECK(a.has_eviction_callback());
}

TEST_CASE("BlockAllocator: tokens stored and utilization count each physical block once",
          "[kv][block_allocator]") {
  BlockAllocator a(4, 16);
  const BlockId b = *a.allocate_one();
  const BlockId c = *a.allocate_one();
  a.set_block_tokens(b, 16);
  a.set_block_tokens(c, 4);
  a.retain(b);  // shared: still 16 tokens, once
  CHECK(a.tokens_stored() == 20);
  CHECK(a.utilization() == Approx(20.0 / 32.0));
  a.free(c);
  CHECK(a.tokens_stored() == 16);
  CHECK(a.block_tokens(c) == 0);
  CHECK(a.utilization() == Approx(1.0));
}

TEST_CASE("BlockAllocator: cached blocks stay readable until free blocks run out",
          "[kv][block_allocator]") {
  BlockAllocator a(4, 4);
  std::vector<BlockId> evicted;
  a.set_eviction_callback([&](BlockId b) { evicted.push_back(b); });
  const auto seq_span = a.allocate(3);
  const std::vector<BlockId> seq(seq_span.begin(), seq_span.end());  // head .. tail
  for (BlockId b : seq) {
    a.set_block_tokens(b, 4);
    a.mark_cached(b);
  }
  a.free(std::span<const BlockId>(seq));
  CHECK(a.num_evictable_blocks() == 3);
  CHECK(a.num_free_blocks() == 1);
  CHECK(a.tokens_stored() == 0);
  CHECK(a.block_tokens(seq[0]) == 4);  // contents kept
  a.check_consistency();

  SECTION("revive in place keeps the tokens") {
    a.retain(seq[1]);
    CHECK(a.state(seq[1]) == BlockState::kInUse);
    CHECK(a.ref_count(seq[1]) == 1);
    CHECK(a.tokens_stored() == 4);
    CHECK(a.is_cached(seq[1]));
    CHECK(a.num_evictable_blocks() == 2);
  }
  SECTION("eviction takes free blocks first then the tail block first") {
    const BlockId fresh = *a.allocate_one();
    CHECK(evicted.empty());
    CHECK(a.state(fresh) == BlockState::kInUse);
    const auto two = a.allocate(2);
    REQUIRE(two.size() == 2);
    CHECK(evicted == std::vector<BlockId>{seq[2], seq[1]});  // tail before middle before head
    CHECK(two[0] == seq[2]);
    CHECK_FALSE(a.is_cached(seq[2]));
    CHECK(a.block_tokens(seq[2]) == 0);
    CHECK(a.num_evictions() == 2);
    CHECK(a.state(seq[0]) == BlockState::kEvictable);
  }
  SECTION("uncache sends an evictable block to the free list without the callback") {
    a.uncache(seq[0]);
    CHECK(a.state(seq[0]) == BlockState::kFree);
    CHECK(a.block_tokens(seq[0]) == 0);
    CHECK(evicted.empty());
    CHECK(a.num_free_blocks() == 2);
  }
  SECTION("uncache of an in-use block frees it normally later") {
    a.retain(seq[0]);
    a.uncache(seq[0]);
    a.free(seq[0]);
    CHECK(a.state(seq[0]) == BlockState::kFree);
  }
  SECTION("a revived block that is released again becomes most recently used") {
    a.retain(seq[2]);
    a.free(seq[2]);
    const auto three = a.allocate(4);
    REQUIRE(three.size() == 4);
    CHECK(evicted == std::vector<BlockId>{seq[1], seq[0], seq[2]});
  }
  a.check_consistency();
}

TEST_CASE("BlockAllocator: random operations match a brute-force ownership model",
          "[kv][block_allocator]") {
#if defined(INFERKIT_TEST_SANITIZED)
  const int kSteps = 3000;
#else
  const int kSteps = 15000;
#endif
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const std::int32_t num_blocks = 24;
    BlockAllocator a(num_blocks, 8);
    inferkit::Rng rng(seed);
    std::vector<std::vector<BlockId>> owners;  // each owner's blocks, head first
    std::set<BlockId> cache_index;             // what the "prefix cache" believes it holds
    std::deque<BlockId> model_lru;             // evictable blocks, least recent first
    std::vector<BlockId> evicted;
    a.set_eviction_callback([&](BlockId b) {
      evicted.push_back(b);
      cache_index.erase(b);
    });
    auto model_refs = [&](BlockId b) {
      std::int32_t n = 0;
      for (const auto& o : owners)
        n += static_cast<std::int32_t>(std::count(o.begin(), o.end(), b));
      return n;
    };
    auto drop_lru = [&](BlockId b) {
      model_lru.erase(std::remove(model_lru.begin(), model_lru.end(), b), model_lru.end());
    };
    auto release_model = [&](const std::vector<BlockId>& blocks) {
      for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
        if (model_refs(*it) == 0 && cache_index.count(*it) != 0) model_lru.push_back(*it);
      }
    };
    for (int step = 0; step < kSteps; ++step) {
      // 0, 7, 8 allocate (keeps the pool under pressure); a crowd of owners is thinned by frees.
      std::uint32_t op = rng.below(9);
      if (owners.size() > 12 && op != 2) op = rng.below(2) == 0 ? 2 : op;
      evicted.clear();
      if (op == 0 || op >= 7 || owners.empty()) {  // allocate a new sequence
        const auto n = static_cast<std::int32_t>(rng.below(5));
        const std::int32_t available = a.num_available_blocks();
        const auto got = a.allocate(n);
        if (n > available) {
          CHECK(got.empty());
        } else {
          REQUIRE(static_cast<std::int32_t>(got.size()) == n);
          const auto from_lru =
              std::max(0, n - (available - static_cast<std::int32_t>(model_lru.size())));
          const std::vector<BlockId> expect_evicted(model_lru.begin(),
                                                    model_lru.begin() + from_lru);
          CHECK(evicted == expect_evicted);
          model_lru.erase(model_lru.begin(), model_lru.begin() + from_lru);
          for (BlockId b : got) a.set_block_tokens(b, static_cast<std::int32_t>(rng.below(9)));
          owners.emplace_back(got.begin(), got.end());
        }
      } else {
        const std::size_t i = rng.below(static_cast<std::uint32_t>(owners.size()));
        if (op == 1) {  // fork
          a.retain(std::span<const BlockId>(owners[i]));
          owners.push_back(owners[i]);
        } else if (op == 2) {  // free a whole sequence
          std::vector<BlockId> blocks = std::move(owners[i]);
          owners.erase(owners.begin() + static_cast<std::ptrdiff_t>(i));
          a.free(std::span<const BlockId>(blocks));
          release_model(blocks);
        } else if (op == 3) {  // the prefix cache takes all of its blocks
          for (BlockId b : owners[i]) {
            a.mark_cached(b);
            cache_index.insert(b);
          }
        } else if (op == 4 && !cache_index.empty()) {  // revive (or share) a cached block
          auto it = cache_index.begin();
          std::advance(it, rng.below(static_cast<std::uint32_t>(cache_index.size())));
          a.retain(*it);
          drop_lru(*it);
          owners.push_back({*it});
        } else if (op == 5 && !cache_index.empty() &&
                   rng.below(4) == 0) {  // the cache drops a block
          auto it = cache_index.begin();
          std::advance(it, rng.below(static_cast<std::uint32_t>(cache_index.size())));
          a.uncache(*it);
          drop_lru(*it);
          cache_index.erase(it);
        } else if (op == 6 && !owners[i].empty()) {  // truncate: free the tail block
          const BlockId b = owners[i].back();
          owners[i].pop_back();
          a.free(b);
          release_model({b});
        }
      }
      // Every refcount equals the number of owners; states agree with the model.
      for (BlockId b = 0; b < num_blocks; ++b) {
        const std::int32_t refs = model_refs(b);
        REQUIRE(a.ref_count(b) == refs);
        const bool cached = cache_index.count(b) != 0;
        REQUIRE(a.is_cached(b) == cached);
        const BlockState expect = refs > 0 ? BlockState::kInUse
                                  : cached ? BlockState::kEvictable
                                           : BlockState::kFree;
        REQUIRE(a.state(b) == expect);
      }
      REQUIRE(a.num_evictable_blocks() == static_cast<std::int32_t>(model_lru.size()));
      a.check_consistency();
    }
    INFO("evictions " << a.num_evictions());
    CHECK(a.num_evictions() > 100);  // the run exercised eviction
    for (const auto& o : owners) a.free(std::span<const BlockId>(o));
    for (BlockId b : cache_index) a.uncache(b);
    CHECK(a.num_free_blocks() == num_blocks);
    CHECK(a.tokens_stored() == 0);
    CHECK(a.allocate(num_blocks).size() == static_cast<std::size_t>(num_blocks));
    a.check_consistency();
  }
}
