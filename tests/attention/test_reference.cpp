// SPDX-License-Identifier: Apache-2.0
// Tests for attention/reference.hpp and attention_params.hpp: the double-precision oracle against
// closed forms computed by hand, against an independently written naive triple loop on
// randomized shapes (GQA 1/4/8, causal, window, soft-cap, custom mask), and its argument checks.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/attention/reference.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
#include <limits>
#include <span>
#include <string>
#include <tests/support/error_code.hpp>
#include <vector>

using inferkit::AttentionParams;
using inferkit::AttentionShape;
using inferkit::Error;
using inferkit::ErrorCode;
using inferkit::reference_attention;
using inferkit::Rng;

using inferkit::test::code_of;

namespace {

#if defined(INFERKIT_TEST_SANITIZED) && INFERKIT_TEST_SANITIZED
constexpr int kTrials = 20;
#else
constexpr int kTrials = 200;
#endif

constexpr double kInf = std::numeric_limits<double>::infinity();

std::size_t sz(std::int64_t n) { return static_cast<std::size_t>(n); }

template <class T>
std::vector<T> random_tensor(Rng& rng, std::int64_t n, double lo = -1.0, double hi = 1.0) {
  std::vector<T> x(sz(n));
  for (auto& e : x) e = static_cast<T>(lo + (hi - lo) * rng.uniform_double());
  return x;
}

struct Result {
  std::vector<double> out;
  std::vector<double> lse;
};

template <class T>
Result run_reference(const std::vector<T>& q, const std::vector<T>& k, const std::vector<T>& v,
                     const AttentionShape& s, const AttentionParams& p,
                     const std::vector<std::uint8_t>& mask = {}) {
  Result r{std::vector<double>(sz(std::int64_t{s.num_q_tokens} * s.num_qo_heads * s.head_dim)),
           std::vector<double>(sz(std::int64_t{s.num_q_tokens} * s.num_qo_heads))};
  reference_attention<T>(q, k, v, s, p, r.out, r.lse, mask);
  return r;
}

// An independent naive formula: the full score matrix, masked entries dropped, softmax by the
// textbook definition (no max subtraction; inputs are small), positions written out explicitly.
Result naive_attention(const std::vector<double>& q, const std::vector<double>& k,
                       const std::vector<double>& v, const AttentionShape& s,
                       const AttentionParams& p, const std::vector<std::uint8_t>& mask) {
  const int nq = s.num_q_tokens, nkv = s.num_kv_tokens, hq = s.num_qo_heads, hkv = s.num_kv_heads;
  const int d = s.head_dim;
  const double scale = p.sm_scale > 0 ? p.sm_scale : 1.0 / std::sqrt(double(d));
  Result r{std::vector<double>(sz(nq * hq * d), 0.0), std::vector<double>(sz(nq * hq), -kInf)};
  for (int i = 0; i < nq; ++i) {
    const int my_pos = nkv - nq + i;
    for (int h = 0; h < hq; ++h) {
      const int kh = h * hkv / hq;  // same as h / (hq / hkv) when hkv divides hq
      double denom = 0.0;
      std::vector<double> weight(sz(nkv), 0.0);
      for (int j = 0; j < nkv; ++j) {
        bool ok = true;
        if (p.causal && j > my_pos) ok = false;
        if (p.window_left >= 0 && my_pos - j > p.window_left) ok = false;
        if (!mask.empty() && mask[sz(i * nkv + j)] == 0) ok = false;
        if (!ok) continue;
        double logit = 0.0;
        for (int e = 0; e < d; ++e)
          logit += q[sz((i * hq + h) * d + e)] * k[sz((j * hkv + kh) * d + e)];
        logit *= scale;
        if (p.logit_soft_cap > 0) logit = p.logit_soft_cap * std::tanh(logit / p.logit_soft_cap);
        weight[sz(j)] = std::exp(logit);
        denom += weight[sz(j)];
      }
      if (denom == 0.0) continue;
      r.lse[sz(i * hq + h)] = std::log(denom);
      for (int j = 0; j < nkv; ++j) {
        for (int e = 0; e < d; ++e) {
          r.out[sz((i * hq + h) * d + e)] += weight[sz(j)] / denom * v[sz((j * hkv + kh) * d + e)];
        }
      }
    }
  }
  return r;
}

void require_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      REQUIRE(a[i] == b[i]);
    } else {
      REQUIRE(std::abs(a[i] - b[i]) <= tol * (1.0 + std::abs(b[i])));
    }
  }
}

}  // namespace

TEST_CASE("AttentionParams: resolved_scale defaults to one over sqrt(head_dim)",
          "[attention][reference]") {
  AttentionParams p;
  CHECK(p.resolved_scale(64) == 0.125f);
  CHECK(p.resolved_scale(16) == 0.25f);
  p.sm_scale = 0.3f;
  CHECK(p.resolved_scale(64) == 0.3f);
  p.sm_scale = -1.0f;
  CHECK(p.resolved_scale(4) == 0.5f);
}

TEST_CASE("AttentionParams: visible applies the causal and window rules",
          "[attention][reference]") {
  AttentionParams p;  // causal, unlimited window
  CHECK(p.visible(5, 0));
  CHECK(p.visible(5, 5));
  CHECK_FALSE(p.visible(5, 6));
  p.window_left = 2;  // keys in [3, 5]
  CHECK_FALSE(p.visible(5, 2));
  CHECK(p.visible(5, 3));
  CHECK(p.visible(5, 5));
  p.window_left = 0;  // only itself
  CHECK(p.visible(5, 5));
  CHECK_FALSE(p.visible(5, 4));
  p.causal = false;
  p.window_left = -1;
  CHECK(p.visible(0, 100));
  p.window_left = 1;
  CHECK(p.visible(5, 100));
  CHECK_FALSE(p.visible(5, 3));
  CHECK(inferkit::query_position(0, 3, 10) == 7);
  CHECK(inferkit::query_position(2, 3, 10) == 9);
}

TEST_CASE("validate: rejects bad AttentionParams fields by name", "[attention][reference]") {
  std::string msg;
  AttentionParams p;
  CHECK_NOTHROW(inferkit::validate(p, 64));
  CHECK(code_of([&] { inferkit::validate(p, 0); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("head_dim"));
  p.sm_scale = std::numeric_limits<float>::quiet_NaN();
  CHECK(code_of([&] { inferkit::validate(p, 64); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("sm_scale"));
  p.sm_scale = std::numeric_limits<float>::infinity();
  CHECK(code_of([&] { inferkit::validate(p, 64); }, &msg) == ErrorCode::kInvalidArgument);
  p = {};
  p.logit_soft_cap = -1.0f;
  CHECK(code_of([&] { inferkit::validate(p, 64); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("logit_soft_cap"));
  p.logit_soft_cap = std::numeric_limits<float>::quiet_NaN();
  CHECK(code_of([&] { inferkit::validate(p, 64); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("logit_soft_cap"));
  p = {};
  p.window_left = -2;
  CHECK(code_of([&] { inferkit::validate(p, 64); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("window_left"));
  p.window_left = 0;
  CHECK_NOTHROW(inferkit::validate(p, 64));
}

TEST_CASE("reference_attention: one query over two keys matches the closed form",
          "[attention][reference]") {
  // q = (1, 0), k0 = (1, 0), k1 = (0, 1), scale 1: logits 1 and 0.
  const std::vector<double> q{1, 0};
  const std::vector<double> k{1, 0, 0, 1};
  const std::vector<double> v{1, 2, 3, 4};
  const AttentionShape s{1, 2, 1, 1, 2};
  AttentionParams p;
  p.sm_scale = 1.0f;
  const double e = std::exp(1.0);
  const double w0 = e / (e + 1.0), w1 = 1.0 / (e + 1.0);

  SECTION("plain softmax") {
    const Result r = run_reference(q, k, v, s, p);
    CHECK(r.out[0] == Approx(w0 * 1 + w1 * 3).epsilon(1e-15));
    CHECK(r.out[1] == Approx(w0 * 2 + w1 * 4).epsilon(1e-15));
    CHECK(r.lse[0] == Approx(std::log(e + 1.0)).epsilon(1e-15));
  }
  SECTION("soft cap 0.5 turns logit 1 into 0.5 tanh(2)") {
    p.logit_soft_cap = 0.5f;
    const double s0 = 0.5 * std::tanh(2.0);
    const double a = std::exp(s0), b = 1.0;  // logit 0 stays 0
    const Result r = run_reference(q, k, v, s, p);
    CHECK(r.out[0] == Approx((a * 1 + b * 3) / (a + b)).epsilon(1e-15));
    CHECK(r.out[1] == Approx((a * 2 + b * 4) / (a + b)).epsilon(1e-15));
    CHECK(r.lse[0] == Approx(std::log(a + b)).epsilon(1e-15));
  }
  SECTION("scale 2 doubles the logits") {
    p.sm_scale = 2.0f;
    const double a = std::exp(2.0);
    const Result r = run_reference(q, k, v, s, p);
    CHECK(r.out[0] == Approx((a * 1 + 3) / (a + 1)).epsilon(1e-15));
    CHECK(r.lse[0] == Approx(std::log(a + 1)).epsilon(1e-15));
  }
  SECTION("window 0 sees only the last key") {
    p.window_left = 0;
    const Result r = run_reference(q, k, v, s, p);
    CHECK(r.out[0] == 3.0);
    CHECK(r.out[1] == 4.0);
    CHECK(r.lse[0] == 0.0);
  }
  SECTION("custom mask keeps only key 0") {
    const Result r = run_reference(q, k, v, s, p, {1, 0});
    CHECK(r.out[0] == 1.0);
    CHECK(r.out[1] == 2.0);
    CHECK(r.lse[0] == 1.0);
  }
}

TEST_CASE("reference_attention: causal prefill of two tokens matches the closed form",
          "[attention][reference]") {
  // Two new tokens, no cache: token 0 sees only key 0, token 1 sees both.
  const std::vector<double> q{1, 2};  // head_dim 1
  const std::vector<double> k{1, -1};
  const std::vector<double> v{10, 20};
  const AttentionShape s{2, 2, 1, 1, 1};
  AttentionParams p;  // scale 1/sqrt(1) = 1
  const Result r = run_reference(q, k, v, s, p);
  CHECK(r.out[0] == 10.0);
  CHECK(r.lse[0] == 1.0);
  const double a = std::exp(2.0), b = std::exp(-2.0);
  CHECK(r.out[1] == Approx((10 * a + 20 * b) / (a + b)).epsilon(1e-15));
  CHECK(r.lse[1] == Approx(std::log(a + b)).epsilon(1e-15));
}

TEST_CASE("reference_attention: a single token attends to itself", "[attention][reference]") {
  Rng rng(11);
  const AttentionShape s{1, 1, 4, 2, 8};
  const auto q = random_tensor<float>(rng, 4 * 8);
  const auto k = random_tensor<float>(rng, 2 * 8);
  const auto v = random_tensor<float>(rng, 2 * 8);
  const Result r = run_reference(q, k, v, s, AttentionParams{});
  for (int h = 0; h < 4; ++h) {
    double dot = 0.0;
    for (int d = 0; d < 8; ++d) {
      CHECK(r.out[sz(h * 8 + d)] == static_cast<double>(v[sz((h / 2) * 8 + d)]));
      dot += double(q[sz(h * 8 + d)]) * double(k[sz((h / 2) * 8 + d)]);
    }
    CHECK(r.lse[sz(h)] == Approx(dot / std::sqrt(8.0)).epsilon(1e-14));
  }
}

TEST_CASE("reference_attention: matches a naive triple loop on random shapes",
          "[attention][reference]") {
  Rng rng(2024);
  for (int trial = 0; trial < kTrials; ++trial) {
    const int groups[] = {1, 4, 8};
    const int group = groups[rng.below(3)];
    AttentionShape s;
    s.num_kv_heads = 1 + static_cast<int>(rng.below(3));
    s.num_qo_heads = s.num_kv_heads * group;
    s.head_dim = 1 + static_cast<int>(rng.below(24));
    s.num_q_tokens = 1 + static_cast<int>(rng.below(6));
    s.num_kv_tokens = s.num_q_tokens + static_cast<int>(rng.below(12));
    AttentionParams p;
    p.causal = rng.below(4) != 0;
    if (!p.causal && rng.below(2) == 0) s.num_kv_tokens = 1 + static_cast<int>(rng.below(8));
    p.window_left = rng.below(3) == 0 ? static_cast<int>(rng.below(6)) : -1;
    p.logit_soft_cap = rng.below(3) == 0 ? 0.2f + 3.0f * rng.uniform() : 0.0f;
    p.sm_scale = rng.below(2) == 0 ? 0.05f + rng.uniform() : 0.0f;
    std::vector<std::uint8_t> mask;
    if (rng.below(3) == 0) {
      mask.resize(sz(s.num_q_tokens * s.num_kv_tokens));
      for (auto& m : mask) m = rng.below(4) != 0 ? 1 : 0;
    }
    INFO("trial " << trial << " nq " << s.num_q_tokens << " nkv " << s.num_kv_tokens << " hq "
                  << s.num_qo_heads << " hkv " << s.num_kv_heads << " d " << s.head_dim
                  << " causal " << p.causal << " window " << p.window_left << " cap "
                  << p.logit_soft_cap << " mask " << !mask.empty());
    const auto q = random_tensor<double>(rng, s.num_q_tokens * s.num_qo_heads * s.head_dim, -2, 2);
    const auto k = random_tensor<double>(rng, s.num_kv_tokens * s.num_kv_heads * s.head_dim, -2, 2);
    const auto v = random_tensor<double>(rng, s.num_kv_tokens * s.num_kv_heads * s.head_dim);
    const Result got = run_reference(q, k, v, s, p, mask);
    const Result want = naive_attention(q, k, v, s, p, mask);
    require_close(got.out, want.out, 1e-12);
    require_close(got.lse, want.lse, 1e-12);
  }
}

TEST_CASE("reference_attention: GQA equals MHA with each KV head repeated per group",
          "[attention][reference]") {
  Rng rng(77);
  for (const int group : {1, 4, 8}) {
    const int hkv = 2, hq = hkv * group, d = 16, nq = 3, nkv = 9;
    const auto q = random_tensor<float>(rng, nq * hq * d);
    const auto k = random_tensor<float>(rng, nkv * hkv * d);
    const auto v = random_tensor<float>(rng, nkv * hkv * d);
    std::vector<float> k_rep(sz(nkv * hq * d)), v_rep(sz(nkv * hq * d));
    for (int j = 0; j < nkv; ++j) {
      for (int h = 0; h < hq; ++h) {
        for (int e = 0; e < d; ++e) {
          k_rep[sz((j * hq + h) * d + e)] = k[sz((j * hkv + h / group) * d + e)];
          v_rep[sz((j * hq + h) * d + e)] = v[sz((j * hkv + h / group) * d + e)];
        }
      }
    }
    const Result gqa = run_reference(q, k, v, {nq, nkv, hq, hkv, d}, AttentionParams{});
    const Result mha = run_reference(q, k_rep, v_rep, {nq, nkv, hq, hq, d}, AttentionParams{});
    CHECK(gqa.out == mha.out);
    CHECK(gqa.lse == mha.lse);
  }
}

TEST_CASE("reference_attention: float and double inputs give the same result",
          "[attention][reference]") {
  Rng rng(5);
  const AttentionShape s{4, 10, 8, 2, 32};
  const auto qf = random_tensor<float>(rng, 4 * 8 * 32);
  const auto kf = random_tensor<float>(rng, 10 * 2 * 32);
  const auto vf = random_tensor<float>(rng, 10 * 2 * 32);
  const std::vector<double> qd(qf.begin(), qf.end()), kd(kf.begin(), kf.end()),
      vd(vf.begin(), vf.end());
  AttentionParams p;
  p.window_left = 3;
  p.logit_soft_cap = 1.5f;
  const Result a = run_reference(qf, kf, vf, s, p);
  const Result b = run_reference(qd, kd, vd, s, p);
  CHECK(a.out == b.out);
  CHECK(a.lse == b.lse);
}

TEST_CASE("reference_attention: huge logits stay finite and shift invariant",
          "[attention][reference]") {
  // Logits around 1e4 overflow a naive exp; the max-subtracted softmax must not care, and adding a
  // constant to every logit (via an extra q.k component) leaves the output unchanged.
  const int nkv = 5, d = 2;
  std::vector<double> q{1.0, 0.0}, k(sz(nkv * d)), v(sz(nkv * d));
  std::vector<double> q_shift{1.0, 1.0}, k_shift(sz(nkv * d));
  for (int j = 0; j < nkv; ++j) {
    k[sz(j * d)] = 1e4 + j;
    k_shift[sz(j * d)] = 1e4 + j;
    k_shift[sz(j * d + 1)] = 5e3;  // adds 5e3 to every logit
    v[sz(j * d)] = j;
    v[sz(j * d + 1)] = -j;
  }
  AttentionParams p;
  p.sm_scale = 1.0f;
  const AttentionShape s{1, nkv, 1, 1, d};
  const Result a = run_reference(q, k, v, s, p);
  const Result b = run_reference(q_shift, k_shift, v, s, p);
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0) + std::exp(-4.0);
  const double mean = (4 + 3 * std::exp(-1.0) + 2 * std::exp(-2.0) + std::exp(-3.0)) / z;
  CHECK(a.out[0] == Approx(mean).epsilon(1e-12));
  CHECK(a.out[1] == Approx(-mean).epsilon(1e-12));
  CHECK(a.lse[0] == Approx(1e4 + 4 + std::log(z)).epsilon(1e-14));
  CHECK(b.out[0] == Approx(mean).epsilon(1e-12));
  CHECK(b.lse[0] == Approx(1.5e4 + 4 + std::log(z)).epsilon(1e-14));
}

TEST_CASE("reference_attention: a row that sees no key gives zeros and minus infinity",
          "[attention][reference]") {
  Rng rng(3);
  const AttentionShape s{3, 6, 2, 1, 4};
  const auto q = random_tensor<double>(rng, 3 * 2 * 4);
  const auto k = random_tensor<double>(rng, 6 * 4);
  const auto v = random_tensor<double>(rng, 6 * 4);
  std::vector<std::uint8_t> mask(3 * 6, 1);
  for (int j = 0; j < 6; ++j) mask[sz(6 + j)] = 0;  // query 1 sees nothing
  const Result r = run_reference(q, k, v, s, AttentionParams{}, mask);
  for (int h = 0; h < 2; ++h) {
    CHECK(r.lse[sz(2 + h)] == -kInf);
    CHECK(std::isfinite(r.lse[sz(h)]));
    CHECK(std::isfinite(r.lse[sz(4 + h)]));
    for (int e = 0; e < 4; ++e) CHECK(r.out[sz((2 + h) * 4 + e)] == 0.0);
  }
  SECTION("zero keys when not causal") {
    const AttentionShape empty{2, 0, 2, 1, 4};
    AttentionParams p;
    p.causal = false;
    const Result e = run_reference(std::vector<double>(16, 1.0), std::vector<double>{},
                                   std::vector<double>{}, empty, p);
    for (double x : e.out) CHECK(x == 0.0);
    for (double x : e.lse) CHECK(x == -kInf);
  }
  SECTION("zero query tokens is a no-op") {
    const Result e = run_reference(std::vector<double>{}, k, v, {0, 6, 2, 1, 4}, AttentionParams{});
    CHECK(e.out.empty());
  }
}

TEST_CASE("reference_attention: lse normalizes the visible probabilities",
          "[attention][reference]") {
  Rng rng(9);
  const AttentionShape s{5, 12, 4, 4, 8};
  const auto q = random_tensor<double>(rng, 5 * 4 * 8, -3, 3);
  const auto k = random_tensor<double>(rng, 12 * 4 * 8, -3, 3);
  const auto v = random_tensor<double>(rng, 12 * 4 * 8);
  AttentionParams p;
  p.window_left = 4;
  const Result r = run_reference(q, k, v, s, p);
  for (int i = 0; i < 5; ++i) {
    for (int h = 0; h < 4; ++h) {
      const int pos = 12 - 5 + i;
      double total = 0.0;
      for (int j = pos - 4; j <= pos; ++j) {
        double dot = 0.0;
        for (int e = 0; e < 8; ++e) dot += q[sz((i * 4 + h) * 8 + e)] * k[sz((j * 4 + h) * 8 + e)];
        total += std::exp(dot / std::sqrt(8.0) - r.lse[sz(i * 4 + h)]);
      }
      CHECK(total == Approx(1.0).epsilon(1e-13));
    }
  }
}

TEST_CASE("reference_attention: a strided q gives the bits of its packed copy",
          "[attention][reference]") {
  // q read in place from a fused QKV buffer [tokens][(Hq + 2 Hkv) * D] (row stride), and with
  // a gap between heads (head stride > head_dim): the same arithmetic on the same values.
  Rng rng(4242);
  for (const int group : {1, 4}) {
    const AttentionShape packed{5, 9, 2 * group, 2, 8};
    const std::int64_t hq = packed.num_qo_heads;
    const std::int64_t d = packed.head_dim;
    for (const std::int64_t head_stride : {std::int64_t{0}, d + 3}) {
      const std::int64_t head = head_stride != 0 ? head_stride : d;
      const std::int64_t row_stride = (hq - 1) * head + d + 2 * 2 * d;  // + the K and V heads
      const auto fused = random_tensor<double>(rng, packed.num_q_tokens * row_stride);
      std::vector<double> q(sz(packed.num_q_tokens * hq * d));
      for (std::int64_t i = 0; i < packed.num_q_tokens; ++i) {
        for (std::int64_t h = 0; h < hq; ++h) {
          for (std::int64_t e = 0; e < d; ++e) {
            q[sz((i * hq + h) * d + e)] = fused[sz(i * row_stride + h * head + e)];
          }
        }
      }
      const auto k = random_tensor<double>(rng, 9 * 2 * d);
      const auto v = random_tensor<double>(rng, 9 * 2 * d);
      AttentionShape strided = packed;
      strided.q_row_stride = row_stride;
      strided.q_head_stride = head_stride;
      const Result want = run_reference(q, k, v, packed, AttentionParams{});
      const Result got = run_reference(fused, k, v, strided, AttentionParams{});
      INFO("group " << group << " head stride " << head_stride);
      CHECK(got.out == want.out);
      CHECK(got.lse == want.lse);
      // A window that ends right after the last element read is enough.
      const std::int64_t extent = (packed.num_q_tokens - 1) * row_stride + (hq - 1) * head + d;
      Result cut = want;
      reference_attention<double>(std::span(fused).first(sz(extent)), k, v, strided,
                                  AttentionParams{}, cut.out, cut.lse);
      CHECK(cut.out == want.out);
    }
  }
}

TEST_CASE("reference_attention: bad arguments throw and write nothing", "[attention][reference]") {
  const AttentionShape s{2, 3, 4, 2, 4};
  std::vector<float> q(2 * 4 * 4, 0.5f), k(3 * 2 * 4, 0.5f), v(3 * 2 * 4, 0.5f);
  std::vector<double> out(2 * 4 * 4, 42.0), lse(2 * 4, 42.0);
  std::vector<std::uint8_t> mask(2 * 3, 1);
  std::string msg;
  const auto call = [&](const AttentionShape& shape, std::span<const float> qq,
                        std::span<const float> kk, std::span<const float> vv, std::span<double> oo,
                        std::span<double> ll, std::span<const std::uint8_t> mm,
                        const AttentionParams& pp = AttentionParams{}) {
    return code_of([&] { reference_attention<float>(qq, kk, vv, shape, pp, oo, ll, mm); }, &msg);
  };
  SECTION("wrong span sizes name the span") {
    CHECK(call(s, std::span(q).first(31), k, v, out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("q.size() = 31") && Catch::Contains("32"));
    CHECK(call(s, q, std::span(k).first(8), v, out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("k.size() = 8") && Catch::Contains("24"));
    CHECK(call(s, q, k, std::span(v).first(23), out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("v.size() = 23"));
    CHECK(call(s, q, k, v, std::span(out).first(4), lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("out.size() = 4"));
    CHECK(call(s, q, k, v, out, std::span(lse).first(3), mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("lse.size() = 3"));
    CHECK(call(s, q, k, v, out, lse, std::span(mask).first(5)) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("custom_mask.size() = 5"));
  }
  SECTION("bad shapes and params name the field") {
    CHECK(call({2, 3, 4, 3, 4}, q, k, v, out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("num_qo_heads"));
    CHECK(call({2, 3, 4, 0, 4}, q, k, v, out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("num_kv_heads"));
    CHECK(call({2, 1, 4, 2, 4}, q, k, v, out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("num_kv_tokens = 1"));
    CHECK(call({-1, 3, 4, 2, 4}, q, k, v, out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("num_q_tokens"));
    CHECK(call({2, 3, 4, 2, 0}, q, k, v, out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("head_dim"));
    AttentionParams bad;
    bad.sm_scale = std::numeric_limits<float>::quiet_NaN();
    CHECK(call(s, q, k, v, out, lse, mask, bad) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("sm_scale"));
  }
  SECTION("q strides smaller than packed, and a q too short for its strides") {
    AttentionShape bad = s;
    bad.q_head_stride = 3;
    CHECK(call(bad, q, k, v, out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("shape.q_head_stride = 3") && Catch::Contains("= 4"));
    bad = s;
    bad.q_row_stride = 15;  // 4 heads x 4 elements
    CHECK(call(bad, q, k, v, out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("shape.q_row_stride = 15") && Catch::Contains("= 16"));
    bad.q_head_stride = 5;  // rows then span 3 * 5 + 4 = 19 elements
    bad.q_row_stride = 18;
    CHECK(call(bad, q, k, v, out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("q_row_stride = 18") && Catch::Contains("= 19"));
    bad.q_row_stride = -1;
    CHECK(call(bad, q, k, v, out, lse, mask) == ErrorCode::kInvalidArgument);
    bad.q_row_stride = 20;  // 20 + 19 = 39 elements needed, q has 32
    CHECK(call(bad, q, k, v, out, lse, mask) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("q.size() = 32") && Catch::Contains("39"));
  }
  SECTION("n_kv < n_q is fine when not causal") {
    AttentionParams nc;
    nc.causal = false;
    std::vector<float> k1(2 * 4, 0.5f), v1(2 * 4, 0.25f);
    std::vector<std::uint8_t> m1(2, 1);
    reference_attention<float>(q, k1, v1, {2, 1, 4, 2, 4}, nc, out, lse, m1);
    CHECK(out[0] == 0.25);
    return;
  }
  for (double x : out) CHECK(x == 42.0);
  for (double x : lse) CHECK(x == 42.0);
}
