// SPDX-License-Identifier: Apache-2.0
// Tests of merge_states / merge_state_pair (CPU): attention over a key set split into parts,
// each part computed by the double reference, merged with the natural-log LSE, equals attention
// over the whole set; empty parts (LSE -inf, values NaN) are ignored; all-empty rows give 0/-inf.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/attention/merge_states.hpp>
#include <inferkit/attention/reference.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
#include <limits>
#include <tests/support/paged_fixture.hpp>
#include <vector>

namespace {

using namespace inferkit;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Parts {
  std::int32_t rows = 0;
  std::int32_t dim = 0;
  std::vector<float> v, lse;  // [parts][rows][dim], [parts][rows]
  std::vector<double> want_v, want_lse;
};

/// Non-causal attention of `rows` query heads (1 token, GQA 1) over n_kv keys, split at `cuts`.
Parts make_parts(std::uint64_t seed, std::int32_t rows, std::int32_t dim, std::int32_t n_kv,
                 const std::vector<std::int32_t>& cuts) {
  Rng rng(seed);
  Parts p;
  p.rows = rows;
  p.dim = dim;
  const auto q = test::random_floats(rng, static_cast<std::size_t>(rows * dim), -2.0f, 2.0f);
  const auto k = test::random_floats(rng, static_cast<std::size_t>(n_kv * rows * dim), -1.0f, 1.0f);
  const auto v = test::random_floats(rng, static_cast<std::size_t>(n_kv * rows * dim), -1.0f, 1.0f);
  AttentionParams params;
  params.causal = false;
  AttentionShape shape{1, n_kv, rows, rows, dim};
  p.want_v.resize(static_cast<std::size_t>(rows * dim));
  p.want_lse.resize(static_cast<std::size_t>(rows));
  reference_attention<float>(q, k, v, shape, params, p.want_v, p.want_lse);
  std::vector<std::int32_t> bounds = {0};
  bounds.insert(bounds.end(), cuts.begin(), cuts.end());
  bounds.push_back(n_kv);
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
    const std::int32_t n = bounds[i + 1] - bounds[i];
    const auto off = static_cast<std::size_t>(bounds[i] * rows * dim);
    const auto len = static_cast<std::size_t>(n * rows * dim);
    std::vector<double> out(static_cast<std::size_t>(rows * dim)),
        lse(static_cast<std::size_t>(rows));
    AttentionShape part{1, n, rows, rows, dim};
    reference_attention<float>(q, std::span<const float>(k).subspan(off, len),
                               std::span<const float>(v).subspan(off, len), part, params, out, lse);
    for (double x : out) p.v.push_back(n == 0 ? kNaN : static_cast<float>(x));  // empty: NaN
    for (double x : lse) p.lse.push_back(static_cast<float>(x));
  }
  return p;
}

}  // namespace

TEST_CASE("merge_states: merging split parts equals attention over all keys",
          "[attention][merge_states]") {
  // Parts of 0 keys (lse -inf, values NaN) must be ignored.
  const Parts p = make_parts(1, 6, 64, 300, {0, 17, 17, 200});
  const std::int32_t parts = static_cast<std::int32_t>(p.lse.size()) / p.rows;
  REQUIRE(parts == 5);
  std::vector<float> v(static_cast<std::size_t>(p.rows * p.dim)),
      lse(static_cast<std::size_t>(p.rows));
  merge_states(cpu{}, p.v, p.lse, parts, p.dim, v, lse);
  CHECK(test::max_abs_diff(v, p.want_v) <= 1e-5);
  CHECK(test::max_abs_diff(lse, p.want_lse) <= 1e-5);
}

TEST_CASE("merge_state_pair: two halves merge into the whole and empty halves are skipped",
          "[attention][merge_states]") {
  const Parts p = make_parts(2, 4, 128, 100, {37});
  const std::size_t n = static_cast<std::size_t>(p.rows * p.dim);
  const std::span<const float> v(p.v), lse(p.lse);
  std::vector<float> out(n), out_lse(static_cast<std::size_t>(p.rows));
  merge_state_pair(cpu{}, v.first(n), lse.first(4), v.subspan(n), lse.subspan(4), p.dim, out,
                   out_lse);
  CHECK(test::max_abs_diff(out, p.want_v) <= 1e-5);
  CHECK(test::max_abs_diff(out_lse, p.want_lse) <= 1e-5);

  // b empty (lse -inf, NaN values): result is a, bit for bit.
  std::vector<float> nan_v(n, kNaN), empty_lse(4, kNegInf);
  merge_state_pair(cpu{}, v.first(n), lse.first(4), nan_v, empty_lse, p.dim, out, out_lse);
  CHECK(std::vector<float>(out) ==
        std::vector<float>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)));
  // Both empty: zeros and -inf, no NaN.
  merge_state_pair(cpu{}, nan_v, empty_lse, nan_v, empty_lse, p.dim, out, out_lse);
  for (float x : out) CHECK(x == 0.0f);
  for (float x : out_lse) CHECK(x == kNegInf);
}

TEST_CASE("merge_states: rows where every state is empty give zeros and -inf",
          "[attention][merge_states]") {
  std::vector<float> v(3 * 2 * 16, kNaN), lse(3 * 2, kNegInf);
  v[16] = 1.0f;  // state 0, row 1
  for (int d = 0; d < 16; ++d) v[static_cast<std::size_t>(16 + d)] = static_cast<float>(d);
  lse[1] = 0.5f;
  std::vector<float> out(2 * 16, 9.0f), out_lse(2, 9.0f);
  merge_states(cpu{}, v, lse, 3, 16, out, out_lse);
  for (int d = 0; d < 16; ++d) {
    CHECK(out[static_cast<std::size_t>(d)] == 0.0f);
    CHECK(out[static_cast<std::size_t>(16 + d)] == static_cast<float>(d));
  }
  CHECK(out_lse[0] == kNegInf);
  CHECK(out_lse[1] == 0.5f);
}

TEST_CASE("merge_states: mismatched sizes throw and write nothing", "[attention][merge_states]") {
  std::vector<float> v(2 * 3 * 8, 1.0f), lse(2 * 3, 0.0f), out(3 * 8, 5.0f);
  CHECK_THROWS_AS(merge_states(cpu{}, v, lse, 4, 8, out), Error);
  CHECK_THROWS_AS(merge_states(cpu{}, v, lse, 2, 4, out), Error);
  CHECK_THROWS_AS(merge_states(cpu{}, v, lse, 0, 8, out), Error);
  std::vector<float> short_out(8);
  CHECK_THROWS_AS(merge_states(cpu{}, v, lse, 2, 8, short_out), Error);
  CHECK(out == std::vector<float>(3 * 8, 5.0f));
  merge_states(cpu{}, v, lse, 2, 8, out);
  CHECK(out == std::vector<float>(3 * 8, 1.0f));
}
