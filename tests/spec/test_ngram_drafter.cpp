// SPDX-License-Identifier: Apache-2.0
// Tests for spec/ngram_drafter.hpp: proposals against a brute-force search over every earlier
// occurrence and suffix length, plus the edge cases (short contexts, no match, small outputs).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/ngram_drafter.hpp>
#include <vector>

using inferkit::NgramDrafter;

namespace {

// Brute force: for each earlier end position e < n - 1, the common suffix length of
// context[..e] and context (capped at max_n); best = longest, then most continuation, then most
// recent.
std::vector<std::int32_t> reference(const std::vector<std::int32_t>& ctx, std::size_t min_n,
                                    std::size_t max_n, std::size_t k) {
  const std::size_t n = ctx.size();
  std::size_t best_match = 0;
  std::size_t best_follow = 0;
  std::size_t best_start = 0;
  for (std::size_t e = n - 1; e-- > 0;) {  // most recent first
    std::size_t match = 0;
    while (match < max_n && match <= e && ctx[e - match] == ctx[n - 1 - match]) ++match;
    const std::size_t follow = std::min(k, n - 1 - e);
    if (match >= min_n && (match > best_match || (match == best_match && follow > best_follow))) {
      best_match = match;
      best_follow = follow;
      best_start = e + 1;
    }
  }
  if (best_match == 0) return {};
  return {ctx.begin() + static_cast<std::ptrdiff_t>(best_start),
          ctx.begin() + static_cast<std::ptrdiff_t>(best_start + best_follow)};
}

}  // namespace

TEST_CASE("NgramDrafter: proposals match a brute-force search", "[spec][ngram_drafter]") {
  inferkit::Rng rng(17);
  for (int trial = 0; trial < 3000; ++trial) {
    const std::size_t len = 1 + rng.below(60);
    const std::uint32_t alphabet = 2 + rng.below(5);
    std::vector<std::int32_t> ctx(len);
    for (auto& t : ctx) t = static_cast<std::int32_t>(rng.below(alphabet));
    const std::size_t min_n = 1 + rng.below(3);
    const std::size_t max_n = min_n + rng.below(4);
    const std::size_t k = 1 + rng.below(6);
    NgramDrafter drafter(min_n, max_n, k);
    std::vector<std::int32_t> out(k + 2, -1);
    const std::size_t got = drafter.propose(ctx, out);
    const auto expected = len >= 2 ? reference(ctx, min_n, max_n, k) : std::vector<std::int32_t>{};
    INFO("trial " << trial);
    REQUIRE(got == expected.size());
    CHECK(std::equal(expected.begin(), expected.end(), out.begin()));
    CHECK(out[got] == -1);  // nothing written past the proposal
  }
}

TEST_CASE("NgramDrafter: proposes the continuation of a repeated phrase", "[spec][ngram_drafter]") {
  NgramDrafter drafter(1, 3, 4);
  std::vector<std::int32_t> out(4);
  // "10 11 12 13 14 ... 10 11 12" -> continue with 13 14 15 16.
  const std::vector<std::int32_t> ctx{10, 11, 12, 13, 14, 15, 16, 17, 5, 6, 10, 11, 12};
  REQUIRE(drafter.propose(ctx, out) == 4);
  CHECK(out == std::vector<std::int32_t>{13, 14, 15, 16});
  // The longest match wins over a more recent shorter one.
  const std::vector<std::int32_t> ctx2{1, 2, 3, 9, 3, 7, 1, 2, 3};
  REQUIRE(drafter.propose(ctx2, out) == 4);
  CHECK(out == std::vector<std::int32_t>{9, 3, 7, 1});
  // Output smaller than k limits the proposal.
  std::vector<std::int32_t> two(2);
  CHECK(drafter.propose(ctx, two) == 2);
  CHECK(two == std::vector<std::int32_t>{13, 14});
}

TEST_CASE("NgramDrafter: proposes nothing without an earlier match", "[spec][ngram_drafter]") {
  NgramDrafter drafter(2, 4, 3);
  std::vector<std::int32_t> out(3, -1);
  CHECK(drafter.propose(std::vector<std::int32_t>{}, out) == 0);
  CHECK(drafter.propose(std::vector<std::int32_t>{4}, out) == 0);
  CHECK(drafter.propose(std::vector<std::int32_t>{4, 4}, out) == 0);  // a 2-gram needs 3 tokens
  CHECK(drafter.propose(std::vector<std::int32_t>{1, 2, 3, 4, 5}, out) == 0);
  CHECK(drafter.propose(std::vector<std::int32_t>{1, 2, 3, 1, 2}, std::span<std::int32_t>()) == 0);
  CHECK(out == std::vector<std::int32_t>(3, -1));
  CHECK(drafter.propose(std::vector<std::int32_t>{4, 4, 4}, out) == 1);
  CHECK(out[0] == 4);
  CHECK_THROWS_AS(NgramDrafter(0, 2, 3), inferkit::Error);
  CHECK_THROWS_AS(NgramDrafter(3, 2, 3), inferkit::Error);
  CHECK_THROWS_AS(NgramDrafter(1, 2, 0), inferkit::Error);
}
