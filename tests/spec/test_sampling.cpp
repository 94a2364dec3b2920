// SPDX-License-Identifier: Apache-2.0
// Tests for spec/sampling.hpp: softmax against a double reference and its edge rows (all -inf,
// NaN, +inf, ties), each filter against a brute-force sort, the categorical sampler against the
// chi-square test, and batch sampling's reproducibility.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/goodness_of_fit.hpp>
#include <inferkit/spec/sampling.hpp>
#include <limits>
#include <numeric>
#include <vector>

using inferkit::SamplingParams;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_logits(std::size_t n, std::uint64_t seed, float scale) {
  inferkit::Rng rng(seed);
  std::vector<float> logits(n);
  for (float& x : logits) {
    x = scale * (rng.uniform() - 0.5f);
  }
  return logits;
}

std::vector<double> softmax_reference(const std::vector<float>& logits, double t) {
  double m = -1e300;
  for (float x : logits) m = std::max(m, static_cast<double>(x));
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    p[i] = std::exp((logits[i] - m) / t);
    sum += p[i];
  }
  for (double& x : p) x /= sum;
  return p;
}

// Brute force: sort descending, keep the shortest prefix holding top_p mass; ties at the cut kept.
std::vector<bool> top_p_reference(const std::vector<double>& p, double top_p) {
  std::vector<double> sorted(p);
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  const double target = top_p * std::accumulate(p.begin(), p.end(), 0.0);
  double cum = 0.0;
  double cut = sorted.back();
  for (double v : sorted) {
    cum += v;
    if (cum >= target * (1.0 - 1e-12)) {
      cut = v;
      break;
    }
  }
  std::vector<bool> keep(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) keep[i] = p[i] >= cut;
  return keep;
}

double row_sum(const std::vector<float>& row) {
  return std::accumulate(row.begin(), row.end(), 0.0);
}

}  // namespace

TEST_CASE("softmax: matches a double reference at several temperatures", "[spec][sampling]") {
  for (std::size_t n : {1u, 7u, 1000u, 65537u}) {
    const auto logits = random_logits(n, n, 20.0f);
    for (float t : {0.25f, 1.0f, 3.0f}) {
      std::vector<float> probs(n);
      inferkit::softmax(logits, probs, t);
      const auto ref = softmax_reference(logits, t);
      double max_err = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        max_err = std::max(max_err, std::abs(probs[i] - ref[i]) / std::max(ref[i], 1e-30));
      }
      CHECK(max_err < 1e-5);
      CHECK(row_sum(probs) == Approx(1.0).epsilon(1e-5));
    }
  }
}

TEST_CASE("softmax: handles all -inf rows and NaN and +inf and ties without NaN",
          "[spec][sampling]") {
  std::vector<float> probs(4);
  SECTION("all -inf becomes uniform") {
    inferkit::softmax(std::vector<float>{-kInf, -kInf, -kInf, -kInf}, probs);
    for (float p : probs) CHECK(p == 0.25f);
  }
  SECTION("NaN gets probability 0") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    inferkit::softmax(std::vector<float>{nan, 0.0f, nan, 0.0f}, probs);
    CHECK(probs == std::vector<float>{0.0f, 0.5f, 0.0f, 0.5f});
    inferkit::softmax(std::vector<float>{nan, nan, nan, nan}, probs);
    for (float p : probs) CHECK(p == 0.25f);
  }
  SECTION("+inf entries share the mass") {
    inferkit::softmax(std::vector<float>{kInf, 1e30f, kInf, -kInf}, probs);
    CHECK(probs == std::vector<float>{0.5f, 0.0f, 0.5f, 0.0f});
  }
  SECTION("ties give equal probabilities and huge logits do not overflow") {
    inferkit::softmax(std::vector<float>{3e38f, 3e38f, -3e38f, 3e38f}, probs, 1e-30f);
    CHECK(probs[0] == probs[1]);
    CHECK(probs[0] == probs[3]);
    CHECK(probs[2] == 0.0f);
    CHECK(row_sum(probs) == Approx(1.0));
  }
  SECTION("bad arguments throw") {
    std::vector<float> wrong(3);
    CHECK_THROWS_AS(inferkit::softmax(std::vector<float>(4, 0.0f), wrong), inferkit::Error);
    CHECK_THROWS_AS(inferkit::softmax(std::vector<float>(4, 0.0f), probs, 0.0f), inferkit::Error);
  }
}

TEST_CASE("argmax: picks the lowest index among ties and skips NaN", "[spec][sampling]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(inferkit::argmax(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}) == 1);
  CHECK(inferkit::argmax(std::vector<float>{nan, -1.0f, nan}) == 1);
  CHECK(inferkit::argmax(std::vector<float>{-kInf, -kInf}) == 0);
  CHECK(inferkit::argmax(std::vector<float>{}) == 0);
}

TEST_CASE("logits_to_probs: top-k and top-p and min-p match brute-force filters",
          "[spec][sampling]") {
  inferkit::SamplingWorkspace ws;
  for (std::size_t n : {5u, 300u, 4099u, 262144u}) {
    // Wide logits spread mass over many radix buckets; narrow ones crowd one bucket.
    for (float scale : {0.01f, 4.0f, 40.0f}) {
      const auto logits = random_logits(n, n * 31 + static_cast<std::size_t>(scale * 10), scale);
      // The reference filters the same float softmax row, so only the cut search is compared.
      std::vector<float> base(n);
      inferkit::softmax(logits, base, 0.8f);
      const std::vector<double> full(base.begin(), base.end());
      for (float top_p : {0.05f, 0.5f, 0.9f, 0.999f}) {
        SamplingParams params;
        params.temperature = 0.8f;
        params.top_p = top_p;
        std::vector<float> probs(n);
        inferkit::logits_to_probs(logits, params, probs, ws);
        const auto keep = top_p_reference(full, top_p);
        std::size_t mismatches = 0;
        double kept_ref = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
          mismatches += (probs[i] > 0.0f) != keep[i] ? 1 : 0;
          kept_ref += keep[i] ? full[i] : 0.0;
        }
        // The float row and the double reference may disagree on a token at the exact cut.
        INFO("n = " << n << " scale = " << scale << " top_p = " << top_p);
        CHECK(mismatches <= 1);
        CHECK(row_sum(probs) == Approx(1.0).epsilon(1e-5));
        for (std::size_t i = 0; i < n; i += std::max<std::size_t>(1, n / 97)) {
          if (probs[i] > 0.0f && keep[i])
            CHECK(probs[i] == Approx(full[i] / kept_ref).epsilon(1e-3));
        }
      }
    }
  }
  SECTION("top-k keeps the k largest and ties at the k-th value") {
    std::vector<float> logits{0.0f, 5.0f, 1.0f, 5.0f, 3.0f, 3.0f, -1.0f};
    SamplingParams params;
    params.top_k = 3;
    std::vector<float> probs(logits.size());
    inferkit::logits_to_probs(logits, params, probs, ws);
    const std::vector<bool> expected{false, true, false, true, true, true, false};
    for (std::size_t i = 0; i < logits.size(); ++i) CHECK((probs[i] > 0.0f) == expected[i]);
    CHECK(probs[1] == Approx(std::exp(5.0) / (2 * std::exp(5.0) + 2 * std::exp(3.0))));
    params.top_k = 1;
    inferkit::logits_to_probs(logits, params, probs, ws);
    CHECK(probs[1] == Approx(0.5));
  }
  SECTION("min-p drops tokens below min_p times the top probability") {
    const auto logits = random_logits(500, 9, 10.0f);
    SamplingParams params;
    params.min_p = 0.1f;
    std::vector<float> probs(logits.size());
    inferkit::logits_to_probs(logits, params, probs, ws);
    const auto ref = softmax_reference(logits, 1.0);
    const double top = *std::max_element(ref.begin(), ref.end());
    double kept = 0.0;
    for (double p : ref) kept += p >= 0.1 * top ? p : 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      if (std::abs(ref[i] - 0.1 * top) > 1e-6 * top) {
        CHECK((probs[i] > 0.0f) == (ref[i] >= 0.1 * top));
        if (probs[i] > 0.0f) CHECK(probs[i] == Approx(ref[i] / kept).epsilon(1e-4));
      }
    }
  }
  SECTION("greedy is one-hot at the argmax") {
    const auto logits = random_logits(1000, 4, 5.0f);
    SamplingParams params;
    params.temperature = 0.0f;
    params.top_p = 0.3f;
    std::vector<float> probs(logits.size(), 7.0f);
    inferkit::logits_to_probs(logits, params, probs, ws);
    CHECK(row_sum(probs) == 1.0);
    CHECK(probs[static_cast<std::size_t>(inferkit::argmax(logits))] == 1.0f);
  }
}

TEST_CASE("logits_to_probs: top-k ranks the logits, so near-ties in probability stay apart",
          "[spec][sampling]") {
  inferkit::SamplingWorkspace ws;
  SECTION("logits 1e-8 apart: top-1 keeps only the larger") {
    const std::vector<float> logits{1e-8f, 0.0f, -1.0f, -2.0f, -3.0f, -1.5f, -0.5f, -4.0f};
    SamplingParams params;
    params.top_k = 1;
    std::vector<float> probs(logits.size());
    inferkit::logits_to_probs(logits, params, probs, ws);
    CHECK(probs == std::vector<float>{1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
  }
  SECTION("random rows of clustered logits against a sort of the logits") {
    // Clusters of logits a few ulp apart, at temperatures that would merge them in float.
    inferkit::Rng rng(19);
    for (int trial = 0; trial < 200; ++trial) {
      const std::size_t n = 16 + rng.below(300);
      std::vector<float> logits(n);
      for (float& x : logits) {
        const float centre = static_cast<float>(rng.below(4));
        x = std::nextafter(centre, 100.0f);
        for (std::uint32_t step = rng.below(6); step > 0; --step) x = std::nextafter(x, 100.0f);
      }
      if (trial % 5 == 0) logits[rng.below(static_cast<std::uint32_t>(n))] = std::nanf("");
      SamplingParams params;
      params.temperature = trial % 2 == 0 ? 1.0f : 3.0f;
      params.top_k = static_cast<std::int32_t>(1 + rng.below(static_cast<std::uint32_t>(n - 1)));
      std::vector<float> probs(n);
      inferkit::logits_to_probs(logits, params, probs, ws);
      std::vector<float> sorted;
      for (float x : logits)
        if (!std::isnan(x)) sorted.push_back(x);
      std::sort(sorted.begin(), sorted.end(), std::greater<float>());
      const float cut = sorted[static_cast<std::size_t>(params.top_k - 1)];
      for (std::size_t i = 0; i < n; ++i) {
        INFO("trial " << trial << " token " << i << " logit " << logits[i] << " cut " << cut);
        CHECK((probs[i] > 0.0f) == (logits[i] >= cut));
      }
      CHECK(row_sum(probs) == Approx(1.0).epsilon(1e-5));
    }
  }
}

TEST_CASE("logits_to_probs: rejects bad params and leaves the output untouched",
          "[spec][sampling]") {
  inferkit::SamplingWorkspace ws;
  const std::vector<float> logits(8, 0.0f);
  std::vector<float> probs(8, 7.0f);
  const auto expect_invalid = [&](SamplingParams p) {
    try {
      inferkit::logits_to_probs(logits, p, probs, ws);
      FAIL("no throw");
    } catch (const inferkit::Error& e) {
      CHECK(e.code() == inferkit::ErrorCode::kInvalidArgument);
    }
    CHECK(probs == std::vector<float>(8, 7.0f));
  };
  expect_invalid({-1.0f, 0, 1.0f, 0.0f});
  expect_invalid({std::numeric_limits<float>::quiet_NaN(), 0, 1.0f, 0.0f});
  expect_invalid({1.0f, -2, 1.0f, 0.0f});
  expect_invalid({1.0f, 0, 0.0f, 0.0f});
  expect_invalid({1.0f, 0, 1.5f, 0.0f});
  expect_invalid({1.0f, 0, 1.0f, 1.5f});
  std::vector<float> short_probs(7);
  CHECK_THROWS_AS(inferkit::logits_to_probs(logits, {}, short_probs, ws), inferkit::Error);
  CHECK_THROWS_AS(inferkit::logits_to_probs(std::vector<float>{}, {}, short_probs, ws),
                  inferkit::Error);
}

TEST_CASE("sample_categorical: draws follow the distribution and never a zero token",
          "[spec][sampling]") {
#if defined(INFERKIT_TEST_SANITIZED)
  constexpr int kDraws = 20000;
#else
  constexpr int kDraws = 100000;
#endif
  const std::vector<float> probs{0.3f, 0.0f, 0.05f, 0.4f, 0.0f, 0.25f};
  std::vector<double> expected(probs.begin(), probs.end());
  std::vector<std::uint64_t> counts(probs.size(), 0);
  inferkit::Rng rng(2024);
  for (int i = 0; i < kDraws; ++i) {
    ++counts[static_cast<std::size_t>(inferkit::sample_categorical(probs, rng))];
  }
  const auto r = inferkit::chi_square_test(counts, expected);
  CHECK_FALSE(r.impossible_observed);
  CHECK(r.p_value > 1e-6);
  // Unnormalized weights work the same; u near 1 never walks off the end.
  CHECK(inferkit::sample_categorical(std::vector<float>{0.0f, 2.0f, 0.0f}, 0.9999999999) == 1);
  CHECK(inferkit::sample_categorical(std::vector<float>{1.0f, 1.0f, 0.0f}, 0.0) == 0);
  CHECK_THROWS_AS(inferkit::sample_categorical(std::vector<float>{0.0f, 0.0f}, 0.5),
                  inferkit::Error);
  CHECK_THROWS_AS(inferkit::sample_categorical(std::vector<float>{}, 0.5), inferkit::Error);
}

TEST_CASE("sample_categorical: NaN, negative and infinite weights throw naming the entry",
          "[spec][sampling]") {
  using Catch::Matchers::Contains;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(inferkit::sample_categorical(std::vector<float>{0.5f, kInf, 0.5f}, 0.5),
                    Contains("probs[1] = inf must be finite and >= 0"));
  CHECK_THROWS_WITH(inferkit::sample_categorical(std::vector<float>{0.5f, 0.5f, nan}, 0.5),
                    Contains("probs[2] = nan"));
  CHECK_THROWS_WITH(inferkit::sample_categorical(std::vector<float>{-0.5f, 1.0f}, 0.99),
                    Contains("probs[0] = -0.5"));
  CHECK_THROWS_WITH(inferkit::sample_categorical(std::vector<float>{3e38f, 3e38f}, 0.5),
                    Contains("sum(probs) overflows float"));
  for (const double u : {0.0, 0.5, 0.999999}) {
    CHECK_THROWS_AS(inferkit::sample_categorical(std::vector<float>{kInf, 1.0f}, u),
                    inferkit::Error);
  }
  // -0 is a weight of zero, not a negative one.
  CHECK(inferkit::sample_categorical(std::vector<float>{-0.0f, 1.0f}, 0.0) == 1);
}

TEST_CASE("sample_batch: same seeds give the same tokens as row-by-row sampling",
          "[spec][sampling]") {
  constexpr std::size_t kRows = 9;
  constexpr std::size_t kVocab = 8000;  // rows * vocab is large enough to run threaded
  const auto logits = random_logits(kRows * kVocab, 77, 12.0f);
  std::vector<SamplingParams> params(kRows);
  for (std::size_t r = 0; r < kRows; ++r) {
    params[r].temperature = 0.5f + 0.1f * static_cast<float>(r);
    params[r].top_k = static_cast<std::int32_t>(r * 40);
    params[r].top_p = r % 2 == 0 ? 0.9f : 1.0f;
    params[r].min_p = r % 3 == 0 ? 0.05f : 0.0f;
  }
  params[4].temperature = 0.0f;
  std::vector<inferkit::Rng> rngs;
  for (std::size_t r = 0; r < kRows; ++r) rngs.emplace_back(5, r);
  std::vector<std::int32_t> tokens(kRows);
  std::vector<float> probs(kRows * kVocab);
  inferkit::sample_batch(logits, kVocab, params, rngs, tokens, probs);
  inferkit::SamplingWorkspace ws;
  std::vector<float> row(kVocab);
  for (std::size_t r = 0; r < kRows; ++r) {
    inferkit::Rng rng(5, r);
    const std::span<const float> lr(logits.data() + r * kVocab, kVocab);
    inferkit::logits_to_probs(lr, params[r], row, ws);
    CHECK(std::equal(row.begin(), row.end(),
                     probs.begin() + static_cast<std::ptrdiff_t>(r * kVocab)));
    CHECK(tokens[r] == inferkit::sample_categorical(row, rng));
    CHECK(row[static_cast<std::size_t>(tokens[r])] > 0.0f);
  }
  CHECK(tokens[4] == inferkit::argmax(std::span<const float>(logits.data() + 4 * kVocab, kVocab)));
  // One shared params entry and no probs output.
  std::vector<inferkit::Rng> again;
  for (std::size_t r = 0; r < kRows; ++r) again.emplace_back(5, r);
  std::vector<std::int32_t> shared(kRows);
  const SamplingParams one{};
  inferkit::sample_batch(logits, kVocab, std::span<const SamplingParams>(&one, 1), again, shared);
  for (std::size_t r = 0; r < kRows; ++r) {
    CHECK(shared[r] >= 0);
    CHECK(static_cast<std::size_t>(shared[r]) < kVocab);
  }
  // Bad shapes throw before anything is drawn.
  std::vector<std::int32_t> short_tokens(kRows - 1, -5);
  CHECK_THROWS_AS(inferkit::sample_batch(logits, kVocab, params, rngs, short_tokens),
                  inferkit::Error);
  CHECK(short_tokens == std::vector<std::int32_t>(kRows - 1, -5));
  CHECK_THROWS_AS(inferkit::sample_batch(logits, kVocab + 1, params, rngs, tokens),
                  inferkit::Error);
}
