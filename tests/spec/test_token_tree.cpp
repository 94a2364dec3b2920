// SPDX-License-Identifier: Apache-2.0
// Tests for spec/token_tree.hpp: node bookkeeping, the ancestor-only attention mask against a
// brute-force ancestor walk, the static builder's shape, and the dynamic builder against an
// exhaustive search for the most confident nodes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/token_tree.hpp>
#include <numeric>
#include <vector>

using inferkit::CandidateRule;
using inferkit::Rng;
using inferkit::TokenTree;

namespace {

// A draft whose distribution depends on the node's token (the root uses row `vocab`).
struct TableDraft {
  std::size_t vocab;
  std::vector<std::vector<float>> rows;  // [vocab + 1][vocab]
  const TokenTree* tree = nullptr;

  TableDraft(std::size_t v, std::uint64_t seed) : vocab(v) {
    Rng rng(seed);
    for (std::size_t r = 0; r <= v; ++r) {
      std::vector<float> row(v);
      for (float& x : row) x = std::exp(4.0f * rng.uniform());
      const float sum = std::accumulate(row.begin(), row.end(), 0.0f);
      for (float& x : row) x /= sum;
      rows.push_back(row);
    }
  }
  std::span<const float> operator()(const TokenTree& t, std::int32_t node) const {
    return node == TokenTree::kRoot
               ? rows[vocab]
               : rows[static_cast<std::size_t>(t.tokens()[static_cast<std::size_t>(node)])];
  }
};

}  // namespace

TEST_CASE("TokenTree: tracks parents and depths and children in insertion order",
          "[spec][token_tree]") {
  TokenTree tree;
  CHECK(tree.empty());
  CHECK(tree.max_depth() == 0);
  const auto a = tree.add_node(TokenTree::kRoot, 10);
  const auto b = tree.add_node(TokenTree::kRoot, 11);
  const auto c = tree.add_node(a, 12);
  const auto d = tree.add_node(c, 13);
  const auto e = tree.add_node(a, 14);
  CHECK(tree.size() == 5);
  CHECK(std::vector<std::int32_t>(tree.depths().begin(), tree.depths().end()) ==
        std::vector<std::int32_t>{1, 1, 2, 3, 2});
  CHECK(std::vector<std::int32_t>(tree.parents().begin(), tree.parents().end()) ==
        std::vector<std::int32_t>{-1, -1, a, c, a});
  CHECK(std::vector<std::int32_t>(tree.children(TokenTree::kRoot).begin(),
                                  tree.children(TokenTree::kRoot).end()) ==
        std::vector<std::int32_t>{a, b});
  CHECK(std::vector<std::int32_t>(tree.children(a).begin(), tree.children(a).end()) ==
        std::vector<std::int32_t>{c, e});
  CHECK(tree.children(d).empty());
  CHECK(tree.max_depth() == 3);
  CHECK(tree.num_leaves() == 3);
  // Bad arguments leave the tree unchanged.
  CHECK_THROWS_AS(tree.add_node(5, 1), inferkit::Error);
  CHECK_THROWS_AS(tree.add_node(-2, 1), inferkit::Error);
  CHECK_THROWS_AS(tree.add_node(0, -1), inferkit::Error);
  CHECK(tree.size() == 5);
  tree.clear();
  CHECK(tree.empty());
  CHECK(tree.children(TokenTree::kRoot).empty());
}

TEST_CASE("TokenTree: the attention mask lets each node see exactly its ancestors",
          "[spec][token_tree]") {
  Rng rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    TokenTree tree;
    const auto n = 1 + rng.below(40);
    for (std::uint32_t i = 0; i < n; ++i) {
      const auto parent = static_cast<std::int32_t>(rng.below(i + 1)) - 1;
      tree.add_node(parent, static_cast<std::int32_t>(rng.below(100)));
    }
    const auto mask = tree.attention_mask();
    const std::size_t rows = n + 1;
    REQUIRE(mask.size() == rows * rows);
    CHECK(mask[0] == 1);
    for (std::size_t c = 1; c < rows; ++c) CHECK(mask[c] == 0);  // the root sees only itself
    for (std::size_t r = 1; r < rows; ++r) {
      std::vector<std::uint8_t> expected(rows, 0);
      expected[0] = 1;
      for (auto a = static_cast<std::int32_t>(r - 1); a != TokenTree::kRoot;
           a = tree.parents()[static_cast<std::size_t>(a)]) {
        expected[static_cast<std::size_t>(a) + 1] = 1;
      }
      std::size_t seen = 0;
      for (std::size_t c = 0; c < rows; ++c) {
        CHECK(mask[r * rows + c] == expected[c]);
        seen += mask[r * rows + c];
      }
      CHECK(seen == static_cast<std::size_t>(tree.depths()[r - 1]) + 1);
    }
  }
  TokenTree empty;
  CHECK(empty.attention_mask() == std::vector<std::uint8_t>{1});
  std::vector<std::uint8_t> wrong(3);
  CHECK_THROWS_AS(empty.attention_mask(wrong), inferkit::Error);
}

TEST_CASE("build_static_tree: 2 branches by 3 levels gives 14 nodes and 8 leaves",
          "[spec][token_tree]") {
  const TableDraft table(10, 7);
  const std::vector<std::int32_t> branching{2, 2, 2};
  Rng rng(1);
  for (CandidateRule rule : {CandidateRule::kTopK, CandidateRule::kSampled}) {
    std::size_t calls = 0;
    const inferkit::DraftFunction draft = [&](const TokenTree& t, std::int32_t node) {
      ++calls;
      return table(t, node);
    };
    const TokenTree tree = inferkit::build_static_tree(branching, draft, rule, rng);
    CHECK(tree.size() == 14);
    CHECK(tree.num_leaves() == 8);
    CHECK(tree.max_depth() == 3);
    CHECK(calls == 7);  // the root and every inner node were drafted once
    for (std::size_t i = 0; i < tree.size(); ++i) {
      const auto kids = tree.children(static_cast<std::int32_t>(i));
      CHECK(kids.size() == (tree.depths()[i] < 3 ? 2u : 0u));
      if (rule == CandidateRule::kTopK && !kids.empty()) {
        // Children are the two most probable tokens of the node's draft row, best first.
        const auto q = table(tree, static_cast<std::int32_t>(i));
        const auto first =
            static_cast<std::size_t>(tree.tokens()[static_cast<std::size_t>(kids[0])]);
        const auto second =
            static_cast<std::size_t>(tree.tokens()[static_cast<std::size_t>(kids[1])]);
        CHECK(q[first] == *std::max_element(q.begin(), q.end()));
        CHECK(q[second] <= q[first]);
        for (std::size_t x = 0; x < q.size(); ++x) {
          if (x != first) CHECK(q[x] <= q[second]);
        }
      }
    }
  }
  const std::vector<std::int32_t> zero{2, 0};
  const inferkit::DraftFunction any = [&](const TokenTree& t, std::int32_t node) {
    return table(t, node);
  };
  CHECK_THROWS_AS(inferkit::build_static_tree(zero, any, CandidateRule::kTopK, rng),
                  inferkit::Error);
  CHECK_THROWS_AS(inferkit::build_static_tree({}, any, CandidateRule::kTopK, rng), inferkit::Error);
}

TEST_CASE("build_dynamic_tree: keeps the most confident paths under the node budget",
          "[spec][token_tree]") {
  constexpr std::size_t kVocab = 6;
  constexpr int kDepth = 4;
  const TableDraft table(kVocab, 21);
  const inferkit::DraftFunction draft = [&](const TokenTree& t, std::int32_t node) {
    return table(t, node);
  };
  // Exhaustive reference: every node of the full top-3 tree up to depth 4 (3 + 9 + 27 + 81),
  // scored by the product of draft probabilities along its path.
  std::vector<double> all;
  const auto expand = [&](auto&& self, std::size_t row, double base, int depth) -> void {
    if (depth == kDepth) return;
    const auto& q = table.rows[row];
    std::vector<std::size_t> order(kVocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto x, auto y) { return q[x] > q[y]; });
    for (std::size_t c = 0; c < 3; ++c) {
      all.push_back(base * q[order[c]]);
      self(self, order[c], all.back(), depth + 1);
    }
  };
  expand(expand, kVocab, 1.0, 0);
  std::sort(all.begin(), all.end(), std::greater<double>());
  for (std::size_t budget : {1u, 5u, 14u, 30u, 120u, 200u}) {
    const TokenTree tree = inferkit::build_dynamic_tree(budget, kDepth, 3, draft);
    CHECK(tree.size() == std::min<std::size_t>(budget, all.size()));
    CHECK(tree.max_depth() <= kDepth);
    std::vector<double> scores(tree.size());
    for (std::size_t i = 0; i < tree.size(); ++i) {
      const auto parent = tree.parents()[i];
      const auto q = table(tree, parent);
      scores[i] = (parent == TokenTree::kRoot ? 1.0 : scores[static_cast<std::size_t>(parent)]) *
                  q[static_cast<std::size_t>(tree.tokens()[i])];
    }
    std::sort(scores.begin(), scores.end(), std::greater<double>());
    for (std::size_t i = 0; i < scores.size(); ++i) CHECK(scores[i] == Approx(all[i]));
  }
  CHECK_THROWS_AS(inferkit::build_dynamic_tree(0, 4, 3, draft), inferkit::Error);
  CHECK_THROWS_AS(inferkit::build_dynamic_tree(5000, 4, 3, draft), inferkit::Error);
  CHECK_THROWS_AS(inferkit::build_dynamic_tree(5, 0, 3, draft), inferkit::Error);
  CHECK_THROWS_AS(inferkit::build_dynamic_tree(5, 4, 0, draft), inferkit::Error);
}
