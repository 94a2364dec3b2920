// SPDX-License-Identifier: Apache-2.0
// Tests for core/token_id.hpp: TokenId is the one token type, so the prefix cache's keys and
// every other part that holds token sequences exchange spans without conversion.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/token_id.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

TEST_CASE("TokenId: a signed 32-bit id, large enough for any vocabulary", "[core][token_id]") {
  STATIC_REQUIRE(std::is_same_v<inferkit::TokenId, std::int32_t>);
  // Llama 3's 128,256-token vocabulary and beyond fit with room to spare.
  STATIC_REQUIRE(std::numeric_limits<inferkit::TokenId>::max() > 128'256);
}

TEST_CASE("TokenId: the radix tree matches a span of TokenId as it was inserted",
          "[core][token_id]") {
  inferkit::BlockAllocator pool(4, 2);
  inferkit::RadixTree tree(pool);
  const std::vector<inferkit::TokenId> tokens = {7, 8, 9, 10};
  const auto blocks = pool.allocate(2);
  REQUIRE(blocks.size() == 2);
  const std::vector<inferkit::BlockId> owned(blocks.begin(), blocks.end());
  for (inferkit::BlockId b : owned) pool.set_block_tokens(b, 2);
  const inferkit::PrefixInsert inserted = tree.insert(tokens, owned);
  CHECK(inserted.inserted_tokens == 4);
  const inferkit::PrefixMatch match = tree.match(std::span<const inferkit::TokenId>(tokens));
  CHECK(match.num_tokens == 4);
  CHECK(match.blocks == owned);
  pool.free(owned);
}
