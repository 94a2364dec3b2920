// SPDX-License-Identifier: Apache-2.0
// Tests for spec/tree_verifier.hpp. The target is a small Markov model (next-token distribution
// depends on the previous token), drafts come from a second table, and every emitted token,
// grouped by depth and previous token, must pass a chi-square test against the target row over
// 100k seeded rounds: sampled siblings (SpecInfer), top-k and dynamic trees (one-hot), and
// adversarial tables. The inexact variant (no residual update) must fail the same test.
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
#include <numeric>
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
using inferkit::detail::ResidualRule;

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

template <ResidualRule kRule = ResidualRule::kResidual>
Emission run_tree(const Markov& m, Shape shape, std::span<const std::int32_t> branching, int trials,
                  std::uint64_t seed) {
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
    const auto result = verifier.verify_with_rule<kRule>(
        tree, target, draft_rows, v, VerifyMode::kSample, verify_rng, out, nodes, &e.stats);
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
  CHECK(min_p_value(m, run_tree<ResidualRule::kTargetRow>(m, Shape::kStaticSampled, kTwoByThree,
                                                          kTrials, 2)) < kCriticalP);
  CHECK(min_p_value(m, run_tree<ResidualRule::kTargetRow>(m, Shape::kStaticTopK, kTwoByThree,
                                                          kTrials, 3)) < kCriticalP);
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
