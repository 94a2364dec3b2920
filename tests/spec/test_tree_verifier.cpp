// SPDX-License-Identifier: Apache-2.0
// Tests for spec/tree_verifier.hpp. The target is a small Markov model (next-token distribution
// depends on the previous token), drafts come from a second table, and every emitted token,
// grouped by depth and previous token, must pass a chi-square test against the target row over
// 100k seeded rounds: sampled siblings (SpecInfer), top-k and dynamic trees (one-hot), and
// adversarial tables. An inexact variant written here (no residual update) must fail the same
// test. Greedy mode is checked against a brute-force longest-path search on trees with duplicate
// siblings, and rows that are not distributions must throw.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/chain_verifier.hpp>
#include <inferkit/spec/goodness_of_fit.hpp>
#include <inferkit/spec/token_tree.hpp>
#include <inferkit/spec/tree_verifier.hpp>
#include <limits>
#include <numeric>
#include <string>
#include <tests/support/probability_rows.hpp>
#include <vector>
#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif

using inferkit::AcceptanceStats;
using inferkit::CandidateRule;
using inferkit::Rng;
using inferkit::TokenTree;
using inferkit::TreeVerifier;
using inferkit::VerifyMode;

namespace {

#if defined(INFERKIT_TEST_SANITIZED)
constexpr int kTrials = 30000;
#else
constexpr int kTrials = 100000;
#endif
constexpr double kCriticalP = 1e-6;

using Row = std::vector<float>;
using inferkit::test::random_row;

Row supported_on(std::size_t vocab, std::size_t begin, std::size_t end, Rng& rng) {
  Row row(vocab, 0.0f);
  float sum = 0.0f;
  for (std::size_t i = begin; i < end; ++i) sum += row[i] = 0.1f + rng.uniform();
  for (float& x : row) x /= sum;
  return row;
}

// Next-token tables: row t is the distribution after token t, row `vocab` the root's.
struct Markov {
  std::size_t vocab;
  std::vector<Row> p;
  std::vector<Row> q;
  const Row& p_after(const TokenTree& t, std::int32_t node) const {
    return p[node == TokenTree::kRoot
                 ? vocab
                 : static_cast<std::size_t>(t.tokens()[static_cast<std::size_t>(node)])];
  }
  const Row& q_after(const TokenTree& t, std::int32_t node) const {
    return q[node == TokenTree::kRoot
                 ? vocab
                 : static_cast<std::size_t>(t.tokens()[static_cast<std::size_t>(node)])];
  }
};

Markov random_markov(std::size_t vocab, std::uint64_t seed) {
  Rng rng(seed);
  Markov m{vocab, {}, {}};
  for (std::size_t i = 0; i <= vocab; ++i) m.p.push_back(random_row(vocab, rng));
  for (std::size_t i = 0; i <= vocab; ++i) m.q.push_back(random_row(vocab, rng));
  return m;
}

enum class Shape { kStaticSampled, kStaticTopK, kDynamic };

struct Emission {
  // counts[depth][previous token (vocab = root)][token]
  std::vector<std::vector<std::vector<std::uint64_t>>> counts;
  AcceptanceStats stats;
  bool path_ok = true;  // accepted node indices matched the emitted tokens
};

// The inexact shortcut the statistics must catch, kept here so no user can call it: every sibling
// is tested against the unchanged target row, and a level where all fail resamples from p.
inferkit::TreeVerifyResult verify_without_residual(
    const TokenTree& tree, std::span<const float> target, std::span<const float> draft_rows,
    std::size_t vocab, Rng& rng, std::span<std::int32_t> out, std::span<std::int32_t> nodes,
    AcceptanceStats* stats) {
  inferkit::TreeVerifyResult result;
  std::int32_t node = TokenTree::kRoot;
  while (true) {
    const auto row = static_cast<std::size_t>(node + 1) * vocab;
    const auto p = target.subspan(row, vocab);
    const auto kids = tree.children(node);
    std::int32_t accepted = TokenTree::kRoot;
    for (std::int32_t child : kids) {
      const auto x = static_cast<std::size_t>(tree.tokens()[static_cast<std::size_t>(child)]);
      const double q_x = draft_rows.empty() ? 1.0 : static_cast<double>(draft_rows[row + x]);
      if (rng.uniform_double() * q_x < static_cast<double>(p[x])) {
        accepted = child;
        break;
      }
    }
    result.num_tested += kids.empty() ? 0 : 1;
    if (accepted == TokenTree::kRoot) {
      out[result.num_accepted] = inferkit::sample_categorical(p, rng);
      break;
    }
    out[result.num_accepted] = tree.tokens()[static_cast<std::size_t>(accepted)];
    nodes[result.num_accepted++] = accepted;
    node = accepted;
  }
  result.num_tokens = result.num_accepted + 1;
  stats->record(result.num_tested, result.num_accepted);
  return result;
}

enum class Verifier { kLibrary, kWithoutResidual };

Emission run_tree(const Markov& m, Shape shape, std::span<const std::int32_t> branching, int trials,
                  std::uint64_t seed, Verifier which = Verifier::kLibrary) {
  const std::size_t v = m.vocab;
  Emission e;
  Rng draft_rng(seed, 1);
  Rng verify_rng(seed, 2);
  TreeVerifier verifier;
  const inferkit::DraftFunction draft = [&](const TokenTree& t, std::int32_t node) {
    return std::span<const float>(m.q_after(t, node));
  };
  std::vector<float> target;
  std::vector<float> draft_rows;
  for (int trial = 0; trial < trials; ++trial) {
    TokenTree tree;
    if (shape == Shape::kDynamic) {
      tree = inferkit::build_dynamic_tree(10, 4, 3, draft);
    } else {
      tree = inferkit::build_static_tree(
          branching, draft,
          shape == Shape::kStaticSampled ? CandidateRule::kSampled : CandidateRule::kTopK,
          draft_rng);
    }
    target.clear();
    draft_rows.clear();
    for (std::int32_t node = TokenTree::kRoot; node < static_cast<std::int32_t>(tree.size());
         ++node) {
      const Row& p = m.p_after(tree, node);
      target.insert(target.end(), p.begin(), p.end());
      if (shape == Shape::kStaticSampled) {
        const Row& q = m.q_after(tree, node);
        draft_rows.insert(draft_rows.end(), q.begin(), q.end());
      }
    }
    std::vector<std::int32_t> out(static_cast<std::size_t>(tree.max_depth()) + 1);
    std::vector<std::int32_t> nodes(static_cast<std::size_t>(tree.max_depth()));
    const auto result = which == Verifier::kLibrary
                            ? verifier.verify(tree, target, draft_rows, v, VerifyMode::kSample,
                                              verify_rng, out, nodes, &e.stats)
                            : verify_without_residual(tree, target, draft_rows, v, verify_rng, out,
                                                      nodes, &e.stats);
    if (e.counts.size() < result.num_tokens) {
      e.counts.resize(result.num_tokens, std::vector<std::vector<std::uint64_t>>(
                                             v + 1, std::vector<std::uint64_t>(v, 0)));
    }
    std::size_t previous = v;
    for (std::size_t d = 0; d < result.num_tokens; ++d) {
      const auto token = static_cast<std::size_t>(out[d]);
      ++e.counts[d][previous][token];
      if (d < result.num_accepted) {  // accepted nodes form a parent chain with those tokens
        const auto node = static_cast<std::size_t>(nodes[d]);
        e.path_ok = e.path_ok && static_cast<std::size_t>(tree.tokens()[node]) == token &&
                    tree.parents()[node] == (d == 0 ? TokenTree::kRoot : nodes[d - 1]);
      }
      previous = token;
    }
  }
  return e;
}

double min_p_value(const Markov& m, const Emission& e) {
  CHECK(e.path_ok);
  double worst = 1.0;
  for (std::size_t d = 0; d < e.counts.size(); ++d) {
    for (std::size_t prev = 0; prev <= m.vocab; ++prev) {
      const auto& counts = e.counts[d][prev];
      const auto total = std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
      if (total < 2000) continue;
      const std::vector<double> expected(m.p[prev].begin(), m.p[prev].end());
      worst = std::min(worst, inferkit::chi_square_test(counts, expected).p_value);
    }
  }
  return worst;
}

const std::vector<std::int32_t> kTwoByThree{2, 2, 2};

}  // namespace

TEST_CASE("TreeVerifier: emitted tokens follow the target for every tree shape",
          "[spec][tree_verifier]") {
  const Markov m = random_markov(6, 1);
  SECTION("static tree with sampled siblings") {
    const auto e = run_tree(m, Shape::kStaticSampled, kTwoByThree, kTrials, 2);
    CHECK(min_p_value(m, e) > kCriticalP);
    CHECK(e.stats.tokens_per_round() > 1.5);
  }
  SECTION("static tree with top-k siblings verified one-hot") {
    CHECK(min_p_value(m, run_tree(m, Shape::kStaticTopK, kTwoByThree, kTrials, 3)) > kCriticalP);
  }
  SECTION("dynamic tree verified one-hot") {
    CHECK(min_p_value(m, run_tree(m, Shape::kDynamic, {}, kTrials, 4)) > kCriticalP);
  }
  SECTION("three siblings per node") {
    const std::vector<std::int32_t> wide{3, 3};
    CHECK(min_p_value(m, run_tree(m, Shape::kStaticSampled, wide, kTrials, 5)) > kCriticalP);
  }
}

TEST_CASE("TreeVerifier: adversarial draft tables stay exact", "[spec][tree_verifier]") {
  Rng rng(7);
  const std::size_t v = 6;
  Markov m{v, {}, {}};
  SECTION("disjoint supports") {
    for (std::size_t i = 0; i <= v; ++i) m.p.push_back(supported_on(v, 0, 3, rng));
    for (std::size_t i = 0; i <= v; ++i) m.q.push_back(supported_on(v, 3, 6, rng));
    const auto e = run_tree(m, Shape::kStaticSampled, kTwoByThree, kTrials, 8);
    CHECK(min_p_value(m, e) > kCriticalP);
    CHECK(e.stats.tokens_per_round() == 1.0);
  }
  SECTION("q zero where p is positive") {
    for (std::size_t i = 0; i <= v; ++i) m.p.push_back(random_row(v, rng));
    for (std::size_t i = 0; i <= v; ++i) m.q.push_back(supported_on(v, 0, 2, rng));
    CHECK(min_p_value(m, run_tree(m, Shape::kStaticSampled, kTwoByThree, kTrials, 9)) > kCriticalP);
  }
  SECTION("one-hot target rows") {
    for (std::size_t i = 0; i <= v; ++i) {
      Row row(v, 0.0f);
      row[(i * 5 + 1) % v] = 1.0f;
      m.p.push_back(row);
    }
    for (std::size_t i = 0; i <= v; ++i) m.q.push_back(random_row(v, rng));
    CHECK(min_p_value(m, run_tree(m, Shape::kStaticSampled, kTwoByThree, kTrials, 10)) >
          kCriticalP);
  }
  SECTION("q equal to p accepts a full path") {
    for (std::size_t i = 0; i <= v; ++i) m.p.push_back(random_row(v, rng));
    m.q = m.p;
    const auto e = run_tree(m, Shape::kStaticSampled, kTwoByThree, kTrials, 11);
    CHECK(min_p_value(m, e) > kCriticalP);
    CHECK(e.stats.tokens_per_round() == 4.0);
  }
}

TEST_CASE("TreeVerifier: the chi-square test rejects skipping the residual update",
          "[spec][tree_verifier]") {
  const Markov m = random_markov(6, 1);
  CHECK(min_p_value(m, run_tree(m, Shape::kStaticSampled, kTwoByThree, kTrials, 2,
                                Verifier::kWithoutResidual)) < kCriticalP);
  CHECK(min_p_value(m, run_tree(m, Shape::kStaticTopK, kTwoByThree, kTrials, 3,
                                Verifier::kWithoutResidual)) < kCriticalP);
}

TEST_CASE("TreeVerifier: a single-branch tree matches the chain theory", "[spec][tree_verifier]") {
  // With the same p and q at every node, a path of depth K is a chain of K drafts.
  Rng rng(12);
  const std::size_t v = 10;
  const Row p = random_row(v, rng, 4.0f);
  const Row q = random_row(v, rng, 4.0f);
  Markov m{v, std::vector<Row>(v + 1, p), std::vector<Row>(v + 1, q)};
  const std::vector<std::int32_t> path{1, 1, 1, 1, 1};
  const auto e = run_tree(m, Shape::kStaticSampled, path, kTrials, 13);
  const double alpha = inferkit::acceptance_overlap(p, q);
  const double expected = inferkit::expected_tokens_per_round(alpha, 5);
  CHECK(std::abs(e.stats.tokens_per_round() - expected) < 6.0 * 2.5 / std::sqrt(kTrials));
  CHECK(std::abs(e.stats.acceptance_rate(0) - alpha) < 0.01);
}

TEST_CASE("TreeVerifier: greedy follows the longest path matching the target argmax",
          "[spec][tree_verifier]") {
  // Greedy tree decoding of a deterministic Markov target equals plain greedy decoding.
  const Markov m = random_markov(9, 30);
  const std::size_t v = m.vocab;
  std::vector<std::int32_t> plain{0};
  for (int i = 0; i < 200; ++i) {
    plain.push_back(inferkit::argmax(m.p[static_cast<std::size_t>(plain.back())]));
  }
  std::vector<std::int32_t> seq{0};
  TreeVerifier verifier;
  Rng rng(1);
  AcceptanceStats stats;
  while (seq.size() < plain.size()) {
    // Root = the last committed token; the draft proposes top-2 of its own table.
    const std::int32_t root = seq.back();
    const inferkit::DraftFunction draft = [&](const TokenTree& t, std::int32_t node) {
      const auto row = node == TokenTree::kRoot
                           ? static_cast<std::size_t>(root)
                           : static_cast<std::size_t>(t.tokens()[static_cast<std::size_t>(node)]);
      return std::span<const float>(m.q[row]);
    };
    const TokenTree tree =
        inferkit::build_static_tree(kTwoByThree, draft, CandidateRule::kTopK, rng);
    std::vector<float> target(m.p[static_cast<std::size_t>(root)]);
    for (std::int32_t t : tree.tokens()) {
      const Row& p = m.p[static_cast<std::size_t>(t)];
      target.insert(target.end(), p.begin(), p.end());
    }
    std::vector<std::int32_t> out(4);
    const auto r = verifier.verify(tree, target, {}, v, VerifyMode::kGreedy, rng, out, {}, &stats);
    seq.insert(seq.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(r.num_tokens));
  }
  seq.resize(plain.size());
  CHECK(seq == plain);
  CHECK(stats.rounds > 0);
  CHECK(stats.tokens_per_round() > 1.0);
}

TEST_CASE("TreeVerifier: rejects mismatched sizes and tokens outside the vocabulary",
          "[spec][tree_verifier]") {
  TokenTree tree;
  const auto a = tree.add_node(TokenTree::kRoot, 1);
  tree.add_node(a, 3);
  const std::vector<float> target(3 * 4, 0.25f);
  TreeVerifier verifier;
  Rng rng(0);
  std::vector<std::int32_t> out(3, -1);
  CHECK_THROWS_AS(verifier.verify(tree, std::span<const float>(target).first(8), {}, 4,
                                  VerifyMode::kSample, rng, out),
                  inferkit::Error);
  CHECK_THROWS_AS(verifier.verify(tree, target, std::span<const float>(target).first(4), 4,
                                  VerifyMode::kSample, rng, out),
                  inferkit::Error);
  std::vector<std::int32_t> short_out(2);
  CHECK_THROWS_AS(verifier.verify(tree, target, {}, 4, VerifyMode::kSample, rng, short_out),
                  inferkit::Error);
  const std::vector<float> small(3 * 3, 1.0f / 3.0f);
  CHECK_THROWS_AS(verifier.verify(tree, small, {}, 3, VerifyMode::kSample, rng, out),
                  inferkit::Error);
  CHECK(out == std::vector<std::int32_t>(3, -1));
  CHECK(rng.next_u32() == Rng(0).next_u32());
  // An empty tree just samples the root row.
  const TokenTree empty;
  const auto r = verifier.verify(empty, std::span<const float>(target).first(4), {}, 4,
                                 VerifyMode::kSample, rng, out);
  CHECK(r.num_tokens == 1);
  CHECK(r.num_accepted == 0);
}

TEST_CASE("verify_tree_batch: matches per-tree verification at any thread count",
          "[spec][tree_verifier]") {
  constexpr std::size_t kVocab = 2048;  // 208 rows x 2048: large enough to run threaded
  constexpr std::size_t kSeqs = 32;
  Rng rng(41);
  std::vector<TokenTree> trees(kSeqs);
  std::vector<std::int32_t> offsets{0};
  std::vector<float> p;
  std::vector<float> q;
  for (std::size_t s = 0; s < kSeqs; ++s) {
    // Shapes from empty to 3 levels; siblings drawn from the row of their parent.
    const std::size_t levels = s % 4;
    std::vector<Row> rows{random_row(kVocab, rng)};
    std::vector<std::int32_t> frontier{TokenTree::kRoot};
    for (std::size_t level = 0; level < levels; ++level) {
      std::vector<std::int32_t> next;
      for (std::int32_t parent : frontier) {
        const Row parent_q = rows[static_cast<std::size_t>(parent + 1)];  // rows grows below
        for (int c = 0; c < 2; ++c) {
          next.push_back(trees[s].add_node(parent, inferkit::sample_categorical(parent_q, rng)));
          rows.push_back(random_row(kVocab, rng));
        }
      }
      frontier = next;
    }
    for (const Row& r : rows) q.insert(q.end(), r.begin(), r.end());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const Row target = random_row(kVocab, rng);
      p.insert(p.end(), target.begin(), target.end());
    }
    offsets.push_back(offsets.back() + static_cast<std::int32_t>(trees[s].size() + 1));
  }
  const auto total = static_cast<std::size_t>(offsets.back());
  const inferkit::TreeBatch batch{kVocab, trees, offsets, p, q};
  for (VerifyMode mode : {VerifyMode::kSample, VerifyMode::kGreedy}) {
#if INFERKIT_HAS_OPENMP
    const int saved_threads = omp_get_max_threads();
#endif
    const auto run = [&](int threads) {
#if INFERKIT_HAS_OPENMP
      omp_set_num_threads(threads);
#else
      (void)threads;
#endif
      std::vector<Rng> rngs;
      for (std::size_t s = 0; s < kSeqs; ++s) rngs.emplace_back(9, s);
      std::vector<std::int32_t> tokens(total, -1);
      std::vector<std::int32_t> nodes(total, -1);
      std::vector<std::int32_t> counts(kSeqs, -1);
      AcceptanceStats stats;
      inferkit::verify_tree_batch(batch, mode, rngs, {tokens, nodes, counts}, &stats);
      CHECK(stats.rounds == kSeqs);
      for (const Rng& r : rngs) {
        Rng copy = r;
        tokens.push_back(static_cast<std::int32_t>(copy.next_u32() & 0xFFFF));
      }
      tokens.insert(tokens.end(), nodes.begin(), nodes.end());
      tokens.insert(tokens.end(), counts.begin(), counts.end());
      return tokens;
    };
    const auto one = run(1);
    CHECK(run(2) == one);
    CHECK(run(4) == one);
#if INFERKIT_HAS_OPENMP
    omp_set_num_threads(saved_threads);
#endif
    // Against the single-tree API with the same seeds.
    TreeVerifier verifier;
    for (std::size_t s = 0; s < kSeqs; ++s) {
      const auto begin = static_cast<std::size_t>(offsets[s]);
      const std::size_t rows = trees[s].size() + 1;
      Rng own(9, s);
      std::vector<std::int32_t> out(rows);
      const auto r = verifier.verify(
          trees[s], std::span<const float>(p).subspan(begin * kVocab, rows * kVocab),
          std::span<const float>(q).subspan(begin * kVocab, rows * kVocab), kVocab, mode, own, out);
      REQUIRE(static_cast<std::size_t>(one[total + kSeqs + total + s]) == r.num_tokens);
      for (std::size_t i = 0; i < r.num_tokens; ++i) CHECK(one[begin + i] == out[i]);
    }
  }
  // Malformed batches throw before anything is written or drawn.
  std::vector<Rng> rngs;
  for (std::size_t s = 0; s < kSeqs; ++s) rngs.emplace_back(9, s);
  std::vector<std::int32_t> tokens(total, -1);
  std::vector<std::int32_t> counts(kSeqs, -1);
  std::vector<std::int32_t> bad_offsets = offsets;
  bad_offsets[3] += 1;
  CHECK_THROWS_AS(inferkit::verify_tree_batch({kVocab, trees, bad_offsets, p, q},
                                              VerifyMode::kSample, rngs, {tokens, {}, counts}),
                  inferkit::Error);
  CHECK_THROWS_AS(inferkit::verify_tree_batch(
                      {kVocab, trees, offsets, std::span<const float>(p).first(kVocab), q},
                      VerifyMode::kSample, rngs, {tokens, {}, counts}),
                  inferkit::Error);
  CHECK_THROWS_AS(inferkit::verify_tree_batch(
                      {16, trees, offsets, std::span<const float>(p).first(total * 16), {}},
                      VerifyMode::kSample, rngs, {tokens, {}, counts}),
                  inferkit::Error);
  CHECK_THROWS_AS(inferkit::verify_tree_batch({kVocab, trees, offsets, p, q}, VerifyMode::kSample,
                                              std::span<Rng>(rngs).first(3), {tokens, {}, counts}),
                  inferkit::Error);
  CHECK(tokens == std::vector<std::int32_t>(total, -1));
  CHECK(counts == std::vector<std::int32_t>(kSeqs, -1));
  CHECK(rngs[0].next_u32() == Rng(9, 0).next_u32());
}

namespace {

// Brute force: every root-to-node path on which each token is the argmax of its parent's row,
// searched depth first in child order; the first of the longest wins. Returns its nodes.
std::vector<std::int32_t> longest_matching_path(const TokenTree& tree,
                                                std::span<const float> target, std::size_t vocab) {
  const auto argmax_of = [&](std::int32_t node) {
    return inferkit::argmax(target.subspan(static_cast<std::size_t>(node + 1) * vocab, vocab));
  };
  std::vector<std::int32_t> best;
  std::vector<std::int32_t> path;
  const auto search = [&](const auto& self, std::int32_t node) -> void {
    if (path.size() > best.size()) best = path;
    for (std::int32_t child : tree.children(node)) {
      if (tree.tokens()[static_cast<std::size_t>(child)] != argmax_of(node)) continue;
      path.push_back(child);
      self(self, child);
      path.pop_back();
    }
  };
  search(search, TokenTree::kRoot);
  return best;
}

}  // namespace

TEST_CASE("TreeVerifier: greedy takes the longest matching path when siblings repeat a token",
          "[spec][tree_verifier]") {
  constexpr std::size_t kVocab = 4;
  TreeVerifier verifier;
  SECTION("two root children with token 2, only the second continues") {
    TokenTree tree;
    tree.add_node(TokenTree::kRoot, 2);  // a
    const auto b = tree.add_node(TokenTree::kRoot, 2);
    tree.add_node(b, 1);                                      // c
    const std::vector<float> target{0.1f, 0.2f, 0.6f, 0.1f,   // root
                                    0.1f, 0.7f, 0.1f, 0.1f,   // a
                                    0.1f, 0.7f, 0.1f, 0.1f,   // b
                                    0.1f, 0.1f, 0.1f, 0.7f};  // c
    Rng rng(0);
    std::vector<std::int32_t> out(3, -1);
    std::vector<std::int32_t> nodes(2, -1);
    const auto r = verifier.verify(tree, target, {}, kVocab, VerifyMode::kGreedy, rng, out, nodes);
    CHECK(r.num_accepted == 2);
    CHECK(out == std::vector<std::int32_t>{2, 1, 3});
    CHECK(nodes == std::vector<std::int32_t>{1, 2});
  }
  SECTION("equally long paths: the first in child order") {
    TokenTree tree;
    const auto a = tree.add_node(TokenTree::kRoot, 0);
    const auto b = tree.add_node(TokenTree::kRoot, 0);
    tree.add_node(b, 0);
    tree.add_node(a, 0);
    const std::vector<float> target(5 * kVocab, 0.25f);  // argmax 0 everywhere
    Rng rng(0);
    std::vector<std::int32_t> out(3, -1);
    std::vector<std::int32_t> nodes(2, -1);
    const auto r = verifier.verify(tree, target, {}, kVocab, VerifyMode::kGreedy, rng, out, nodes);
    CHECK(r.num_accepted == 2);
    CHECK(nodes == std::vector<std::int32_t>{0, 3});
  }
  SECTION("random trees with duplicate siblings match a brute-force search") {
    // Small vocabularies make duplicate siblings common. Target rows either depend only on the
    // path (the same prefix gives the same row, as a real target's would) or on the node.
    Rng rng(77);
    std::size_t trees_with_duplicates = 0;
    for (int trial = 0; trial < 2000; ++trial) {
      const bool by_path = trial % 2 == 0;
      TokenTree tree;
      const auto nodes_wanted = 1 + rng.below(24);
      for (std::uint32_t i = 0; i < nodes_wanted; ++i) {
        const auto parent = static_cast<std::int32_t>(rng.below(i + 1)) - 1;
        tree.add_node(parent, static_cast<std::int32_t>(rng.below(kVocab)));
      }
      std::vector<float> target;
      for (std::int32_t node = TokenTree::kRoot; node < static_cast<std::int32_t>(tree.size());
           ++node) {
        std::uint64_t key = 0;
        for (std::int32_t a = node; a != TokenTree::kRoot;
             a = tree.parents()[static_cast<std::size_t>(a)]) {
          key =
              key * 7 + static_cast<std::uint64_t>(tree.tokens()[static_cast<std::size_t>(a)]) + 1;
        }
        Rng row_rng(by_path ? key
                            : static_cast<std::uint64_t>(trial) * 1000 + 1 +
                                  static_cast<std::uint64_t>(node + 1),
                    by_path ? 1 : 2);
        const Row row = random_row(kVocab, row_rng);
        target.insert(target.end(), row.begin(), row.end());
      }
      for (std::int32_t node = TokenTree::kRoot; node < static_cast<std::int32_t>(tree.size());
           ++node) {
        auto kids = tree.children(node);
        std::vector<std::int32_t> seen;
        for (std::int32_t c : kids) seen.push_back(tree.tokens()[static_cast<std::size_t>(c)]);
        std::sort(seen.begin(), seen.end());
        if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) {
          ++trees_with_duplicates;
          break;
        }
      }
      const auto expected = longest_matching_path(tree, target, kVocab);
      const std::size_t depth = static_cast<std::size_t>(tree.max_depth());
      std::vector<std::int32_t> out(depth + 1, -1);
      std::vector<std::int32_t> nodes(depth, -1);
      Rng verify_rng(1);
      const auto r =
          verifier.verify(tree, target, {}, kVocab, VerifyMode::kGreedy, verify_rng, out, nodes);
      INFO("trial " << trial);
      REQUIRE(r.num_accepted == expected.size());
      CHECK(std::equal(expected.begin(), expected.end(), nodes.begin()));
      const std::int32_t last = expected.empty() ? TokenTree::kRoot : expected.back();
      CHECK(out[r.num_accepted] == inferkit::argmax(std::span<const float>(target).subspan(
                                       static_cast<std::size_t>(last + 1) * kVocab, kVocab)));
    }
    CHECK(trees_with_duplicates > 500);
  }
}

TEST_CASE("TreeVerifier: rows that are not distributions throw, naming the row and the sequence",
          "[spec][tree_verifier]") {
  constexpr std::size_t kVocab = 4;
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  TokenTree tree;
  const auto a = tree.add_node(TokenTree::kRoot, 1);
  tree.add_node(a, 3);
  // The root row accepts node a in both modes (argmax 1; p(1) = 1); node a's row rejects its
  // child (p(3) = 0), so it is read in full, and its entry 2 is NaN.
  const std::vector<float> target{0.0f,  1.0f,  0.0f,  0.0f,  // root
                                  0.25f, 0.75f, kNan,  0.0f,  // a
                                  0.25f, 0.25f, 0.25f, 0.25f};
  TreeVerifier verifier;
  using Catch::Matchers::Contains;
  for (VerifyMode mode : {VerifyMode::kGreedy, VerifyMode::kSample}) {
    Rng rng(5);
    std::vector<std::int32_t> out(3, -1);
    CHECK_THROWS_WITH(verifier.verify(tree, target, {}, kVocab, mode, rng, out),
                      Contains("target_probs row 1 entry 2 = nan"));
    CHECK(out == std::vector<std::int32_t>(3, -1));
    CHECK(rng.next_u32() == Rng(5).next_u32());
  }
  // In a batch the message names the sequence and the row of the batch's buffer.
  const std::vector<TokenTree> trees{tree, tree};
  const std::vector<std::int32_t> offsets{0, 3, 6};
  std::vector<float> p(target);
  std::replace_if(
      p.begin(), p.end(), [](float x) { return std::isnan(x); }, 0.0f);
  p.insert(p.end(), target.begin(), target.end());
  p[4 * kVocab + 2] = 0.5f;  // sequence 1, node a: no NaN, but the row sums to 1.5
  std::vector<Rng> rngs{Rng(1, 0), Rng(1, 1)};
  std::vector<std::int32_t> tokens(6, -1);
  std::vector<std::int32_t> counts(2, -1);
  CHECK_THROWS_WITH(inferkit::verify_tree_batch({kVocab, trees, offsets, p, {}},
                                                VerifyMode::kGreedy, rngs, {tokens, {}, counts}),
                    Contains("sequence 1: sum of batch.target_probs row 4 = 1.5"));
  CHECK(tokens == std::vector<std::int32_t>(6, -1));
  CHECK(counts == std::vector<std::int32_t>(2, -1));
}
