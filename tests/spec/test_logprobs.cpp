// SPDX-License-Identifier: Apache-2.0
// Tests for spec/logprobs.hpp: the chosen token's log-probability and the top-N list against a
// long-double log-softmax and a full sort, on random rows with fixed seeds, plus the edges
// (NaN, +inf and -inf logits, N larger than the row, ties) and bad arguments.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/logprobs.hpp>
#include <limits>
#include <numeric>
#include <tests/support/error_code.hpp>
#include <vector>

namespace {

using namespace inferkit;

// Exact log-softmax of one entry, NaN as -inf.
long double reference_logprob(const std::vector<float>& row, std::size_t i) {
  const auto v = [](float x) {
    return std::isnan(x) ? -std::numeric_limits<long double>::infinity()
                         : static_cast<long double>(x);
  };
  long double m = -std::numeric_limits<long double>::infinity();
  for (float x : row) m = std::max(m, v(x));
  long double sum = 0;
  for (float x : row) sum += std::exp(v(x) - m);
  return v(row[i]) - m - std::log(sum);
}

}  // namespace

TEST_CASE("token_logprobs: matches an exact log-softmax and a full sort on random rows",
          "[spec][logprobs]") {
  Rng rng(7, 0);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t vocab = 1 + static_cast<std::size_t>(rng.next_u32() % 3000);
    std::vector<float> row(vocab);
    const float scale = static_cast<float>(1 + rng.next_u32() % 30);
    for (float& x : row) {
      // Few distinct values sometimes, so ties happen.
      x = trial % 3 == 0 ? static_cast<float>(rng.next_u32() % 5)
                         : scale * (static_cast<float>(rng.uniform()) - 0.5f);
    }
    const auto chosen = static_cast<TokenId>(rng.next_u32() % vocab);
    const auto top_n = static_cast<std::int32_t>(rng.next_u32() % (kMaxTopLogprobs + 1));
    const TokenLogprobs got = token_logprobs(row, chosen, top_n);
    CHECK(std::abs(got.logprob - static_cast<double>(reference_logprob(
                                     row, static_cast<std::size_t>(chosen)))) < 1e-5);
    std::vector<std::size_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return row[a] > row[b]; });
    REQUIRE(got.top.size() == std::min<std::size_t>(vocab, static_cast<std::size_t>(top_n)));
    for (std::size_t k = 0; k < got.top.size(); ++k) {
      CHECK(got.top[k].token == static_cast<TokenId>(order[k]));
      CHECK(std::abs(got.top[k].logprob - static_cast<double>(reference_logprob(row, order[k]))) <
            1e-5);
    }
  }
}

TEST_CASE("token_logprobs: NaN, infinite and single-entry rows", "[spec][logprobs]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SECTION("NaN counts as -inf") {
    const std::vector<float> row = {0.0f, nan, 0.0f};
    const TokenLogprobs got = token_logprobs(row, 1, 3);
    CHECK(got.logprob == -inf);
    CHECK(got.top[0].token == 0);
    CHECK(got.top[1].token == 2);
    CHECK(got.top[0].logprob == Approx(std::log(0.5)));
    CHECK(got.top[2].token == 1);
  }
  SECTION("+inf entries share the mass") {
    const std::vector<float> row = {inf, 3.0f, inf, nan};
    CHECK(token_logprobs(row, 0, 0).logprob == Approx(std::log(0.5)));
    CHECK(token_logprobs(row, 1, 0).logprob == -inf);
  }
  SECTION("a row with no finite entry is uniform") {
    const std::vector<float> row = {-inf, nan, -inf, -inf};
    CHECK(token_logprobs(row, 2, 0).logprob == Approx(std::log(0.25)));
  }
  SECTION("one entry: log 1 = 0, and N beyond the row gives the row") {
    const std::vector<float> row = {-12.5f};
    const TokenLogprobs got = token_logprobs(row, 0, kMaxTopLogprobs);
    CHECK(got.logprob == 0.0f);
    REQUIRE(got.top.size() == 1);
  }
}

TEST_CASE("token_logprobs: bad arguments are an Error", "[spec][logprobs]") {
  const std::vector<float> row = {1.0f, 2.0f};
  CHECK(test::code_of([&] { (void)token_logprobs({}, 0, 0); }) == ErrorCode::kInvalidArgument);
  CHECK(test::code_of([&] { (void)token_logprobs(row, 2, 0); }) == ErrorCode::kInvalidArgument);
  CHECK(test::code_of([&] { (void)token_logprobs(row, -1, 0); }) == ErrorCode::kInvalidArgument);
  CHECK(test::code_of([&] { (void)token_logprobs(row, 0, kMaxTopLogprobs + 1); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(test::code_of([&] { (void)token_logprobs(row, 0, -1); }) == ErrorCode::kInvalidArgument);
}
