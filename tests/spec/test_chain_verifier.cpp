// SPDX-License-Identifier: Apache-2.0
// Tests for spec/chain_verifier.hpp. Exactness is proven statistically: over 100k seeded rounds
// the tokens emitted at each position must pass a chi-square test against the target's
// distribution (p-value > 1e-6), including adversarial draft/target pairs, while an inexact
// variant written here (resample from p instead of the residual) must fail the same test. Also:
// tokens per round against (1 - a^(K+1)) / (1 - a), greedy against plain greedy decoding, the
// batch API, and rows that are not distributions.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/chain_verifier.hpp>
#include <inferkit/spec/goodness_of_fit.hpp>
#include <inferkit/spec/sampling.hpp>
#include <limits>
#include <numeric>
#include <string>
#include <tests/support/probability_rows.hpp>
#include <vector>
#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif

using inferkit::AcceptanceStats;
using inferkit::Rng;
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

Row one_hot(std::size_t vocab, std::size_t token) {
  Row row(vocab, 0.0f);
  row[token] = 1.0f;
  return row;
}

Row supported_on(std::size_t vocab, std::size_t begin, std::size_t end, Rng& rng) {
  Row row(vocab, 0.0f);
  double sum = 0.0;
  for (std::size_t i = begin; i < end; ++i) sum += row[i] = 0.1f + rng.uniform();
  for (float& x : row) x = static_cast<float>(x / sum);
  return row;
}

struct ChainCase {
  std::size_t vocab;
  std::vector<Row> p;  // K + 1 rows
  std::vector<Row> q;  // K rows (drafts are drawn from these)
};

struct Emission {
  std::vector<std::vector<std::uint64_t>> counts;  // [K + 1][vocab]
  AcceptanceStats stats;
};

std::vector<float> flatten(const std::vector<Row>& rows) {
  std::vector<float> flat;
  for (const Row& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return flat;
}

// The inexact shortcut the statistics must catch, kept here so no user can call it: a rejected
// draft is replaced by a fresh sample from p_i instead of one from normalize(max(0, p_i - q_i)).
std::size_t verify_resampling_p(std::span<const std::int32_t> draft, const std::vector<Row>& q,
                                const std::vector<Row>& p, Rng& rng, std::span<std::int32_t> out) {
  for (std::size_t i = 0; i < draft.size(); ++i) {
    const auto x = static_cast<std::size_t>(draft[i]);
    const double q_x = q.empty() ? 1.0 : static_cast<double>(q[i][x]);
    out[i] = draft[i];
    if (rng.uniform_double() * q_x >= static_cast<double>(p[i][x])) {
      out[i] = inferkit::sample_categorical(p[i], rng);
      return i + 1;
    }
  }
  out[draft.size()] = inferkit::sample_categorical(p.back(), rng);
  return draft.size() + 1;
}

enum class Verifier { kLibrary, kResamplingP };

// Runs `trials` rounds: drafts drawn from q, verified against p (q one-hot if token_only).
Emission run_chain(const ChainCase& c, int trials, std::uint64_t seed, bool token_only = false,
                   Verifier verifier = Verifier::kLibrary) {
  const std::size_t k = c.q.size();
  const auto p = flatten(c.p);
  const auto q = flatten(c.q);
  Emission e{std::vector<std::vector<std::uint64_t>>(k + 1, std::vector<std::uint64_t>(c.vocab)),
             {}};
  Rng draft_rng(seed, 1);
  Rng verify_rng(seed, 2);
  std::vector<std::int32_t> draft(k);
  std::vector<std::int32_t> out(k + 1);
  for (int t = 0; t < trials; ++t) {
    for (std::size_t i = 0; i < k; ++i) draft[i] = inferkit::sample_categorical(c.q[i], draft_rng);
    std::size_t n = 0;
    if (verifier == Verifier::kLibrary) {
      n = inferkit::verify_chain(draft, token_only ? std::span<const float>() : q, p, c.vocab,
                                 VerifyMode::kSample, verify_rng, out);
    } else {
      n = verify_resampling_p(draft, token_only ? std::vector<Row>() : c.q, c.p, verify_rng, out);
    }
    for (std::size_t i = 0; i < n; ++i) ++e.counts[i][static_cast<std::size_t>(out[i])];
    e.stats.record(std::min(k, n), n - 1);
  }
  return e;
}

// The smallest chi-square p-value over positions with at least 2000 emitted tokens.
double min_p_value(const ChainCase& c, const Emission& e) {
  double worst = 1.0;
  for (std::size_t i = 0; i < c.p.size(); ++i) {
    std::uint64_t total = 0;
    for (auto n : e.counts[i]) total += n;
    if (total < 2000) continue;
    const std::vector<double> expected(c.p[i].begin(), c.p[i].end());
    const auto r = inferkit::chi_square_test(e.counts[i], expected);
    INFO("position " << i << " statistic " << r.statistic << " df " << r.degrees_of_freedom);
    worst = std::min(worst, r.p_value);
  }
  return worst;
}

ChainCase generic_case(std::uint64_t seed, std::size_t k = 4, std::size_t vocab = 8) {
  Rng rng(seed);
  ChainCase c{vocab, {}, {}};
  for (std::size_t i = 0; i <= k; ++i) c.p.push_back(random_row(vocab, rng));
  for (std::size_t i = 0; i < k; ++i) c.q.push_back(random_row(vocab, rng));
  return c;
}

}  // namespace

TEST_CASE("verify_chain: emitted tokens follow the target at every position",
          "[spec][chain_verifier]") {
  Rng rng(99);
  const std::size_t v = 8;
  SECTION("generic random p and q") {
    const auto c = generic_case(1);
    CHECK(min_p_value(c, run_chain(c, kTrials, 10)) > kCriticalP);
  }
  SECTION("q zero where p is positive") {
    ChainCase c{v, {}, {}};
    for (int i = 0; i < 4; ++i) c.p.push_back(random_row(v, rng));
    for (int i = 0; i < 3; ++i) c.q.push_back(supported_on(v, 0, 4, rng));
    CHECK(min_p_value(c, run_chain(c, kTrials, 11)) > kCriticalP);
  }
  SECTION("disjoint supports reject every draft") {
    ChainCase c{v, {}, {}};
    for (int i = 0; i < 4; ++i) c.p.push_back(supported_on(v, 0, 4, rng));
    for (int i = 0; i < 3; ++i) c.q.push_back(supported_on(v, 4, 8, rng));
    const auto e = run_chain(c, kTrials, 12);
    CHECK(min_p_value(c, e) > kCriticalP);
    CHECK(e.stats.accepted[0] == 0);
    CHECK(e.stats.tokens_per_round() == 1.0);
  }
  SECTION("one-hot target") {
    ChainCase c{v, {one_hot(v, 3), one_hot(v, 5), one_hot(v, 0), one_hot(v, 7)}, {}};
    for (int i = 0; i < 3; ++i) c.q.push_back(random_row(v, rng));
    CHECK(min_p_value(c, run_chain(c, kTrials, 13)) > kCriticalP);
  }
  SECTION("one-hot draft") {
    ChainCase c{v, {}, {one_hot(v, 2), one_hot(v, 2), one_hot(v, 6)}};
    for (int i = 0; i < 4; ++i) c.p.push_back(random_row(v, rng));
    CHECK(min_p_value(c, run_chain(c, kTrials, 14)) > kCriticalP);
  }
  SECTION("q equal to p accepts everything") {
    ChainCase c{v, {}, {}};
    for (int i = 0; i < 4; ++i) c.p.push_back(random_row(v, rng));
    c.q.assign(c.p.begin(), c.p.begin() + 3);
    const auto e = run_chain(c, kTrials, 15);
    CHECK(min_p_value(c, e) > kCriticalP);
    CHECK(e.stats.tokens_per_round() == 4.0);
  }
  SECTION("token-only drafts verified with q one-hot") {
    const auto c = generic_case(2);
    CHECK(min_p_value(c, run_chain(c, kTrials, 16, /*token_only=*/true)) > kCriticalP);
  }
}

TEST_CASE("verify_chain: the chi-square test rejects resampling from p instead of the residual",
          "[spec][chain_verifier]") {
  // Same trials, same threshold: only the residual step differs, and the test catches it.
  const auto c = generic_case(1);
  CHECK(min_p_value(c, run_chain(c, kTrials, 10, false, Verifier::kResamplingP)) < kCriticalP);
  const auto d = generic_case(2);
  CHECK(min_p_value(d, run_chain(d, kTrials, 16, true, Verifier::kResamplingP)) < kCriticalP);
}

TEST_CASE("verify_chain: mean tokens per round matches (1 - a^(K+1)) / (1 - a)",
          "[spec][chain_verifier]") {
  Rng rng(5);
  for (std::size_t k : {1u, 5u}) {
    ChainCase c{12, {}, {}};
    const Row p = random_row(12, rng, 4.0f);
    const Row q = random_row(12, rng, 4.0f);
    c.p.assign(k + 1, p);
    c.q.assign(k, q);
    const double alpha = inferkit::acceptance_overlap(p, q);
    const auto e = run_chain(c, kTrials, 20 + k);
    const double expected = inferkit::expected_tokens_per_round(alpha, k);
    // Tokens per round lie in [1, K + 1]: the standard error is below (K / 2) / sqrt(trials).
    const double tolerance = 6.0 * (static_cast<double>(k) / 2.0) / std::sqrt(kTrials);
    INFO("alpha = " << alpha << " K = " << k);
    CHECK(std::abs(e.stats.tokens_per_round() - expected) < tolerance);
    for (std::size_t i = 0; i < k; ++i) {
      const double n = static_cast<double>(e.stats.reached[i]);
      CHECK(std::abs(e.stats.acceptance_rate(i) - alpha) <
            6.0 * std::sqrt(alpha * (1 - alpha) / n));
    }
  }
  CHECK(inferkit::expected_tokens_per_round(1.0, 5) == 6.0);
  CHECK(inferkit::expected_tokens_per_round(0.0, 5) == 1.0);
  CHECK(inferkit::expected_tokens_per_round(0.5, 2) == Approx(1.75));
}

namespace {

// A deterministic toy target: logits are a pseudo-random function of the last two tokens.
std::vector<float> toy_logits(const std::vector<std::int32_t>& ctx, std::size_t vocab) {
  const auto a = static_cast<std::uint64_t>(ctx.size() > 0 ? ctx.back() : 0);
  const auto b = static_cast<std::uint64_t>(ctx.size() > 1 ? ctx[ctx.size() - 2] : 0);
  Rng rng(1234, a * 1000003u + b);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = static_cast<float>(rng.below(16));  // ties are common
  return logits;
}

}  // namespace

TEST_CASE("verify_chain: greedy verification equals plain greedy decoding",
          "[spec][chain_verifier]") {
  constexpr std::size_t kVocab = 40;
  constexpr std::size_t kLength = 300;
  const std::vector<std::int32_t> prompt{1, 2, 3};
  std::vector<std::int32_t> plain = prompt;
  while (plain.size() < prompt.size() + kLength) {
    plain.push_back(inferkit::argmax(toy_logits(plain, kVocab)));
  }
  for (std::size_t k : {1u, 4u}) {
    std::vector<std::int32_t> seq = prompt;
    Rng draft_rng(3);
    Rng verify_rng(4);
    AcceptanceStats stats;
    while (seq.size() < prompt.size() + kLength) {
      // A draft that agrees with the target two times in three.
      std::vector<std::int32_t> ctx = seq;
      std::vector<std::int32_t> draft;
      std::vector<float> target;
      for (std::size_t i = 0; i < k; ++i) {
        const auto logits = toy_logits(ctx, kVocab);
        const std::int32_t t = draft_rng.below(3) == 0
                                   ? static_cast<std::int32_t>(draft_rng.below(kVocab))
                                   : inferkit::argmax(logits);
        draft.push_back(t);
        ctx.push_back(t);
      }
      ctx = seq;
      for (std::size_t i = 0; i <= k; ++i) {
        const auto logits = toy_logits(ctx, kVocab);
        std::vector<float> probs(kVocab);
        inferkit::softmax(logits, probs);
        target.insert(target.end(), probs.begin(), probs.end());
        if (i < k) ctx.push_back(draft[i]);
      }
      std::vector<std::int32_t> out(k + 1);
      const std::size_t n =
          inferkit::verify_chain(draft, {}, target, kVocab, VerifyMode::kGreedy, verify_rng, out);
      stats.record(std::min(k, n), n - 1);
      seq.insert(seq.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
    }
    seq.resize(plain.size());
    CHECK(seq == plain);
    CHECK(stats.acceptance_rate() > 0.3);
    CHECK(stats.acceptance_rate() < 0.95);
  }
}

TEST_CASE("verify_chain_batch: different K per sequence matches per-sequence verification",
          "[spec][chain_verifier]") {
  constexpr std::size_t kVocab = 16;
  const std::vector<std::int32_t> offsets{0, 3, 3, 8, 9, 13};
  const std::size_t seqs = offsets.size() - 1;
  const std::size_t total = 13;
  Rng rng(8);
  std::vector<float> q;
  std::vector<float> p;
  std::vector<std::int32_t> drafts;
  for (std::size_t i = 0; i < total; ++i) {
    const Row row = random_row(kVocab, rng);
    q.insert(q.end(), row.begin(), row.end());
    drafts.push_back(inferkit::sample_categorical(row, rng));
  }
  for (std::size_t i = 0; i < total + seqs; ++i) {
    const Row row = random_row(kVocab, rng);
    p.insert(p.end(), row.begin(), row.end());
  }
  const inferkit::ChainBatch batch{kVocab, offsets, drafts, q, p};
  for (VerifyMode mode : {VerifyMode::kSample, VerifyMode::kGreedy}) {
    for (int round = 0; round < 50; ++round) {
      std::vector<Rng> rngs;
      for (std::size_t s = 0; s < seqs; ++s) rngs.emplace_back(round, s);
      std::vector<std::int32_t> tokens(total + seqs, -1);
      std::vector<std::int32_t> counts(seqs, -1);
      AcceptanceStats stats;
      inferkit::verify_chain_batch(batch, mode, rngs, {tokens, counts}, &stats);
      std::uint64_t emitted = 0;
      for (std::size_t s = 0; s < seqs; ++s) {
        const auto begin = static_cast<std::size_t>(offsets[s]);
        const auto k = static_cast<std::size_t>(offsets[s + 1]) - begin;
        Rng own(round, s);
        std::vector<std::int32_t> out(k + 1);
        const std::size_t n = inferkit::verify_chain(
            std::span<const std::int32_t>(drafts).subspan(begin, k),
            std::span<const float>(q).subspan(begin * kVocab, k * kVocab),
            std::span<const float>(p).subspan((begin + s) * kVocab, (k + 1) * kVocab), kVocab, mode,
            own, out);
        REQUIRE(static_cast<std::size_t>(counts[s]) == n);
        for (std::size_t i = 0; i < n; ++i) CHECK(tokens[begin + s + i] == out[i]);
        CHECK(rngs[s].next_u32() == own.next_u32());
        emitted += n;
      }
      CHECK(stats.rounds == seqs);
      CHECK(stats.emitted_tokens == emitted);
    }
  }
}

TEST_CASE("verify_chain_batch: rejects malformed batches without drawing or writing",
          "[spec][chain_verifier]") {
  constexpr std::size_t kVocab = 4;
  const std::vector<std::int32_t> offsets{0, 2, 3};
  const std::vector<std::int32_t> drafts{1, 2, 3};
  const std::vector<float> q(3 * kVocab, 0.25f);
  const std::vector<float> p(5 * kVocab, 0.25f);
  std::vector<Rng> rngs{Rng(1, 0), Rng(1, 1)};
  std::vector<std::int32_t> tokens(5, -1);
  std::vector<std::int32_t> counts(2, -1);
  const auto expect_error = [&](const inferkit::ChainBatch& b, inferkit::ErrorCode code) {
    try {
      inferkit::verify_chain_batch(b, VerifyMode::kSample, rngs, {tokens, counts});
      FAIL("no throw");
    } catch (const inferkit::Error& e) {
      CHECK(e.code() == code);
    }
    CHECK(tokens == std::vector<std::int32_t>(5, -1));
    CHECK(counts == std::vector<std::int32_t>(2, -1));
    CHECK(rngs[0].next_u32() == Rng(1, 0).next_u32());
    rngs[0] = Rng(1, 0);
  };
  const std::vector<std::int32_t> decreasing{0, 2, 1};
  const std::vector<std::int32_t> nonzero_start{1, 2, 3};
  const std::vector<std::int32_t> bad_token{1, 4, 3};
  using inferkit::ErrorCode;
  expect_error({kVocab, decreasing, drafts, q, p}, ErrorCode::kInvalidArgument);
  expect_error({kVocab, nonzero_start, drafts, q, p}, ErrorCode::kInvalidArgument);
  expect_error({kVocab, offsets, bad_token, q, p}, ErrorCode::kOutOfRange);
  expect_error({kVocab, offsets, drafts, std::span<const float>(q).first(8), p},
               ErrorCode::kInvalidArgument);
  expect_error({kVocab, offsets, drafts, q, std::span<const float>(p).first(16)},
               ErrorCode::kInvalidArgument);
  expect_error({0, offsets, drafts, q, p}, ErrorCode::kOutOfRange);
  std::vector<std::int32_t> out(2);
  Rng r(0);
  CHECK_THROWS_AS(inferkit::verify_chain(drafts, {}, std::span<const float>(p).first(16), kVocab,
                                         VerifyMode::kSample, r, out),
                  inferkit::Error);
  // K = 0 just samples the bonus row.
  std::vector<std::int32_t> one(1);
  CHECK(inferkit::verify_chain({}, {}, std::span<const float>(p).first(kVocab), kVocab,
                               VerifyMode::kSample, r, one) == 1);
}

TEST_CASE("verify_chain_batch: tokens do not depend on the thread count",
          "[spec][chain_verifier]") {
  // 64 sequences x K = 3 over 2048 tokens: large enough for the threaded path.
  constexpr std::size_t kVocab = 2048;
  constexpr std::size_t kSeqs = 64;
  constexpr std::size_t kDrafts = 3;
  Rng rng(31);
  std::vector<std::int32_t> offsets;
  for (std::size_t s = 0; s <= kSeqs; ++s)
    offsets.push_back(static_cast<std::int32_t>(s * kDrafts));
  std::vector<float> q;
  std::vector<float> p;
  std::vector<std::int32_t> drafts;
  for (std::size_t i = 0; i < kSeqs * kDrafts; ++i) {
    const Row row = random_row(kVocab, rng);
    q.insert(q.end(), row.begin(), row.end());
    drafts.push_back(inferkit::sample_categorical(row, rng));
  }
  for (std::size_t i = 0; i < kSeqs * (kDrafts + 1); ++i) {
    const Row row = random_row(kVocab, rng);
    p.insert(p.end(), row.begin(), row.end());
  }
  const inferkit::ChainBatch batch{kVocab, offsets, drafts, q, p};
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
    for (std::size_t s = 0; s < kSeqs; ++s) rngs.emplace_back(77, s);
    std::vector<std::int32_t> tokens(kSeqs * (kDrafts + 1), -1);
    std::vector<std::int32_t> counts(kSeqs, -1);
    inferkit::verify_chain_batch(batch, VerifyMode::kSample, rngs, {tokens, counts});
    for (std::size_t s = 0; s < kSeqs; ++s) {
      tokens.resize(tokens.size() + 1, static_cast<std::int32_t>(rngs[s].next_u32() & 0xFFFF));
    }
    tokens.insert(tokens.end(), counts.begin(), counts.end());
    return tokens;
  };
  const auto one = run(1);
  CHECK(run(2) == one);
  CHECK(run(4) == one);
#if INFERKIT_HAS_OPENMP
  omp_set_num_threads(saved_threads);
#endif
}

TEST_CASE("verify_chain: rows that are not distributions throw, naming the row, and change nothing",
          "[spec][chain_verifier]") {
  constexpr std::size_t kVocab = 4;
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  const Row uniform(kVocab, 0.25f);
  // Runs one verification of `draft` against target rows `p` (and draft rows `q`, may be empty)
  // and returns the error message, checking that nothing was written or drawn.
  const auto error_of = [&](const std::vector<std::int32_t>& draft, const std::vector<Row>& q,
                            const std::vector<Row>& p, VerifyMode mode) -> std::string {
    Rng rng(3);
    std::vector<std::int32_t> out(draft.size() + 1, -1);
    try {
      inferkit::verify_chain(draft, flatten(q), flatten(p), kVocab, mode, rng, out);
    } catch (const inferkit::Error& e) {
      CHECK(e.code() == inferkit::ErrorCode::kInvalidArgument);
      CHECK(out == std::vector<std::int32_t>(draft.size() + 1, -1));
      CHECK(rng.next_u32() == Rng(3).next_u32());
      return e.what();
    }
    return "no throw";
  };
  using Catch::Matchers::Contains;
  SECTION("an unnormalized bonus row") {
    const Row doubled(kVocab, 0.5f);
    CHECK_THAT(
        error_of({}, {}, {doubled}, VerifyMode::kSample),
        Contains("sum of target_probs row 0 = 2.0") && Contains("within kProbabilitySumTolerance"));
    CHECK_THAT(error_of({}, {}, {doubled}, VerifyMode::kGreedy), Contains("sum of target_probs"));
  }
  SECTION("NaN or negative at the draft token") {
    Row nan_at_1 = uniform;
    nan_at_1[1] = kNan;
    CHECK_THAT(error_of({1}, {uniform}, {nan_at_1, uniform}, VerifyMode::kSample),
               Contains("target_probs row 0 entry 1 = nan must be a probability in [0, 1]"));
    Row negative = uniform;
    negative[2] = -0.25f;
    CHECK_THAT(
        error_of({0, 2}, {uniform, uniform}, {uniform, negative, uniform}, VerifyMode::kSample),
        Contains("target_probs row 1 entry 2 = -0.25"));
    CHECK_THAT(error_of({1}, {nan_at_1}, {uniform, uniform}, VerifyMode::kSample),
               Contains("draft_probs row 0 entry 1 = nan"));
  }
  SECTION("a bad entry elsewhere in a row read in full at a rejection") {
    // Draft 3 has p = 0 < q: always rejected, so p_0 and q_0 are read in full.
    const Row p0{0.5f, kNan, 0.5f, 0.0f};
    CHECK_THAT(error_of({3}, {uniform}, {p0, uniform}, VerifyMode::kSample),
               Contains("target_probs row 0 entry 1 = nan"));
    const Row p_ok{0.5f, 0.5f, 0.0f, 0.0f};
    const Row q_unnormalized{0.5f, 0.5f, 0.5f, 0.5f};
    CHECK_THAT(error_of({3}, {q_unnormalized}, {p_ok, uniform}, VerifyMode::kSample),
               Contains("sum of draft_probs row 0 = 2.0"));
    const Row p_inf{0.5f, std::numeric_limits<float>::infinity(), 0.5f, 0.0f};
    CHECK_THAT(error_of({3}, {}, {p_inf, uniform}, VerifyMode::kGreedy),
               Contains("target_probs row 0 entry 1 = inf"));
  }
  SECTION("rows within the tolerance pass") {
    Rng rng(3);
    std::vector<std::int32_t> out(2);
    const Row nearly{0.2502f, 0.25f, 0.25f, 0.25f};  // sums to 1.0002
    CHECK(inferkit::verify_chain(std::vector<std::int32_t>{0}, flatten({uniform}),
                                 flatten({nearly, nearly}), kVocab, VerifyMode::kSample, rng,
                                 out) >= 1);
  }
}

TEST_CASE("verify_chain_batch: errors name the offset, the sequence and the row",
          "[spec][chain_verifier]") {
  constexpr std::size_t kVocab = 4;
  const std::vector<std::int32_t> offsets{0, 1, 1, 3};
  const std::vector<std::int32_t> drafts{1, 2, 3};
  const std::vector<float> q(3 * kVocab, 0.25f);
  std::vector<float> p(6 * kVocab, 0.25f);
  std::vector<Rng> rngs{Rng(1, 0), Rng(1, 1), Rng(1, 2)};
  std::vector<std::int32_t> tokens(6, -1);
  std::vector<std::int32_t> counts(3, -1);
  const auto message = [&](const inferkit::ChainBatch& b) -> std::string {
    try {
      inferkit::verify_chain_batch(b, VerifyMode::kSample, rngs, {tokens, counts});
    } catch (const inferkit::Error& e) {
      CHECK(tokens == std::vector<std::int32_t>(6, -1));
      CHECK(counts == std::vector<std::int32_t>(3, -1));
      for (std::size_t s = 0; s < rngs.size(); ++s)
        CHECK(rngs[s].next_u32() == Rng(1, s).next_u32());
      rngs = {Rng(1, 0), Rng(1, 1), Rng(1, 2)};
      return e.what();
    }
    return "no throw";
  };
  using Catch::Matchers::Contains;
  const std::vector<std::int32_t> nonzero_start{1, 1, 1, 3};
  CHECK_THAT(message({kVocab, nonzero_start, drafts, q, p}),
             Contains("batch.draft_offsets[0] = 1 must equal 0"));
  CHECK_THAT(message({kVocab, {}, drafts, q, p}), Contains("batch.draft_offsets.size() = 0"));
  const std::vector<std::int32_t> decreasing{0, 2, 1, 3};
  CHECK_THAT(message({kVocab, decreasing, drafts, q, p}),
             Contains("batch.draft_offsets[2] (end of sequence 1) = 1 must be >= its start "
                      "draft_offsets[1] = 2"));
  const std::vector<std::int32_t> bad_token{1, 2, 4};
  CHECK_THAT(message({kVocab, offsets, bad_token, q, p}),
             Contains("batch.draft_tokens[2] (sequence 2) = 4"));
  // Sequence 2 owns target rows 3..5; row 5 (its bonus) sums to 2. Sequences 0 and 1 are fine,
  // and still nothing is written.
  for (std::size_t i = 5 * kVocab; i < 6 * kVocab; ++i) p[i] = 0.5f;
  const std::vector<float> q_accepting(3 * kVocab, 0.0f);  // q = 0 accepts every draft
  CHECK_THAT(message({kVocab, offsets, drafts, q_accepting, p}),
             Contains("sequence 2: sum of batch.target_probs row 5 = 2.0"));
}
