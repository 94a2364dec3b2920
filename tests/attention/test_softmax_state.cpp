// SPDX-License-Identifier: Apache-2.0
// Tests of attention/detail/softmax_state.hpp, the online-softmax and merge arithmetic both
// backends run (the CUDA kernels call the same functions): random logits fed in random groups
// equal the double softmax; states of split key sets merged equal the whole; masked (-inf)
// logits weigh nothing; merge_row shared by several "threads" (first/step) equals one thread.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/attention/detail/softmax_state.hpp>
#include <inferkit/core/rng.hpp>
#include <limits>
#include <tests/support/paged_fixture.hpp>
#include <vector>

namespace {

using namespace inferkit;
using detail::SoftmaxState;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Row {
  std::vector<float> logits;  // natural-log domain; -inf = masked
  std::vector<float> values;  // one value per key (a 1-dimensional head)
};

Row random_row(Rng& rng, std::size_t n, double masked_fraction) {
  Row r;
  for (std::size_t i = 0; i < n; ++i) {
    const bool masked = rng.uniform() < masked_fraction;
    r.logits.push_back(masked ? kNegInf : test::uniform(rng, -30.0f, 30.0f));
    r.values.push_back(test::uniform(rng, -1.0f, 1.0f));
  }
  return r;
}

/// Softmax-weighted value and natural-log LSE in double (0 and -inf for no visible key).
void reference(const Row& r, double& out, double& lse) {
  double m = -std::numeric_limits<double>::infinity();
  for (float s : r.logits) m = std::max(m, static_cast<double>(s));
  if (m == -std::numeric_limits<double>::infinity()) {
    out = 0.0;
    lse = m;
    return;
  }
  double sum = 0.0;
  double acc = 0.0;
  for (std::size_t i = 0; i < r.logits.size(); ++i) {
    if (r.logits[i] == kNegInf) continue;
    const double p = std::exp(static_cast<double>(r.logits[i]) - m);
    sum += p;
    acc += p * r.values[i];
  }
  out = acc / sum;
  lse = m + std::log(sum);
}

/// Runs keys [begin, end) through a state in groups of `group` logits, as a kernel does.
SoftmaxState run_state(const Row& r, std::size_t begin, std::size_t end, std::size_t group,
                       float& acc) {
  SoftmaxState st;
  acc = 0.0f;
  for (std::size_t g = begin; g < end; g += group) {
    const std::size_t e = std::min(end, g + group);
    float gmax = kNegInf;
    for (std::size_t i = g; i < e; ++i) gmax = std::max(gmax, r.logits[i] * detail::kLog2OfE);
    acc *= st.rescale(gmax);
    for (std::size_t i = g; i < e; ++i) {
      const float p = st.weight(r.logits[i] * detail::kLog2OfE);
      if (p != 0.0f) acc += p * r.values[i];  // as the kernels: masked values are never read
    }
  }
  return st;
}

}  // namespace

TEST_CASE("SoftmaxState: grouped online updates equal the double softmax",
          "[attention][softmax_state]") {
  Rng rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 1 + rng.below(300);
    const Row r = random_row(rng, n, trial % 3 == 0 ? 0.5 : 0.0);
    const std::size_t group = 1 + rng.below(8);
    float acc = 0.0f;
    const SoftmaxState st = run_state(r, 0, n, group, acc);
    double want = 0.0;
    double want_lse = 0.0;
    reference(r, want, want_lse);
    INFO("n " << n << " group " << group);
    CHECK(std::abs(acc * st.inverse_sum() - want) <= 1e-5);
    if (std::isinf(want_lse)) {
      CHECK(st.lse() == kNegInf);
    } else {
      CHECK(std::abs(st.lse() - want_lse) <= 1e-5 * std::max(1.0, std::abs(want_lse)));
    }
  }
}

TEST_CASE("SoftmaxState: all-masked rows give 0 and -inf, and merging them changes nothing",
          "[attention][softmax_state]") {
  Row masked;
  masked.logits.assign(5, kNegInf);
  masked.values.assign(5, std::numeric_limits<float>::quiet_NaN());
  float acc = 0.0f;
  SoftmaxState empty = run_state(masked, 0, 5, 2, acc);
  CHECK(acc == 0.0f);  // NaN values were never weighed
  CHECK(empty.inverse_sum() == 0.0f);
  CHECK(empty.lse() == kNegInf);
  SoftmaxState other;
  const auto f = empty.merge(other);
  CHECK(f.self == 1.0f);
  CHECK(f.other == 0.0f);
  CHECK(empty.lse() == kNegInf);
}

TEST_CASE("SoftmaxState: merging the states of split key sets equals one pass",
          "[attention][softmax_state]") {
  Rng rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    const std::size_t n = 2 + rng.below(200);
    const Row r = random_row(rng, n, trial % 4 == 0 ? 0.7 : 0.1);
    const std::size_t cut = 1 + rng.below(static_cast<std::uint32_t>(n - 1));
    float acc_a = 0.0f;
    float acc_b = 0.0f;
    SoftmaxState a = run_state(r, 0, cut, 4, acc_a);
    const SoftmaxState b = run_state(r, cut, n, 3, acc_b);
    const auto f = a.merge(b);
    const float merged = acc_a * f.self + acc_b * f.other;
    double want = 0.0;
    double want_lse = 0.0;
    reference(r, want, want_lse);
    CHECK(std::abs(merged * a.inverse_sum() - want) <= 1e-5);
    if (!std::isinf(want_lse)) CHECK(std::abs(a.lse() - want_lse) <= 1e-4);
  }
}

TEST_CASE("logit_log2: scales, soft-caps, then converts to base 2", "[attention][softmax_state]") {
  CHECK(detail::logit_log2(2.0f, 0.5f, 0.0f) == Approx(1.0f * detail::kLog2OfE));
  CHECK(detail::logit_log2(100.0f, 1.0f, 5.0f) ==
        Approx(5.0f * std::tanh(20.0f) * detail::kLog2OfE));
  CHECK(detail::logit_log2(-1.0f, 1.0f, 5.0f) ==
        Approx(5.0f * std::tanh(-0.2f) * detail::kLog2OfE));
}

TEST_CASE("merge_row: threads sharing a row (first/step) write what one thread writes",
          "[attention][softmax_state]") {
  Rng rng(3);
  const std::int32_t states = 5;
  const std::int32_t dim = 70;
  std::vector<float> v = test::random_floats(rng, static_cast<std::size_t>(states * dim), -1, 1);
  std::vector<float> lse = {1.0f, kNegInf, -3.0f, 2.5f, 0.25f};
  v[static_cast<std::size_t>(dim) + 3] = std::numeric_limits<float>::quiet_NaN();  // empty state
  std::vector<float> one(static_cast<std::size_t>(dim));
  float one_lse = 0.0f;
  detail::merge_row(states, v.data(), dim, lse.data(), 1, dim, one.data(), &one_lse);
  std::vector<float> shared(static_cast<std::size_t>(dim));
  float shared_lse = 0.0f;
  for (std::int32_t t = 0; t < 32; ++t) {
    detail::merge_row(states, v.data(), dim, lse.data(), 1, dim, shared.data(),
                      t == 0 ? &shared_lse : nullptr, t, 32);
  }
  CHECK(shared == one);
  CHECK(shared_lse == one_lse);
  // The weights by hand.
  double m = 2.5;
  double total = 0.0;
  for (float l : lse) total += l == kNegInf ? 0.0 : std::exp(l - m);
  CHECK(one_lse == Approx(m + std::log(total)));
  double want0 = 0.0;
  for (std::int32_t i = 0; i < states; ++i) {
    if (lse[static_cast<std::size_t>(i)] != kNegInf) {
      want0 +=
          std::exp(lse[static_cast<std::size_t>(i)] - m) * v[static_cast<std::size_t>(i * dim)];
    }
  }
  CHECK(one[0] == Approx(want0 / total));
}
