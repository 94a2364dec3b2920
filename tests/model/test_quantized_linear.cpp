// SPDX-License-Identifier: Apache-2.0
// Tests for model/quantized_linear.hpp on every instruction-set path this CPU has: dequantization
// and products against a double-precision reference decoded from the block formats as ggml
// documents them (ggml-common.h: block_q4_0 {fp16 d; 16 bytes}, x = ((q & 15) - 8) d for element
// j and ((q >> 4) - 8) d for j + 16; block_q4_1 {fp16 d, m; 16 bytes}, x = q d + m; block_q8_0
// {fp16 d; 32 int8}, x = q d), shape edge cases, bad arguments, and batch invariance: a token's
// outputs are the same bits for any batch size, batch content and thread count.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/model/quantized_linear.hpp>
#include <span>
#include <string>
#include <tests/support/error_code.hpp>
#include <tests/support/float_reference.hpp>
#include <tests/support/ggml_matrices.hpp>
#include <vector>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif

using namespace inferkit;
using detail::LinearIsa;
using inferkit::test::code_of;
using namespace inferkit::test;  // NOLINT(google-build-using-namespace): the shared matrices

namespace {

constexpr GgmlType kAllTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0,
                                  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kF32};

/// The paths this CPU runs (the baseline always).
std::vector<LinearIsa> supported_isas() {
  std::vector<LinearIsa> isas;
  for (LinearIsa isa : {LinearIsa::kBaseline, LinearIsa::kAvx2, LinearIsa::kAvx512}) {
    if (detail::linear_isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

/// Checks y[n][rows] against the double reference. Error bound: each decoded weight is exact
/// except Q4_1's q d + m, rounded once (relative error <= u = 2^-24); each of the 16 lanes sums
/// ceil(cols / 16) products, each step rounding at most twice (fused: once; the portable path may
/// not fuse), then 4 additions combine the lanes. So |y - ref| <= (2 ceil(cols/16) + 4 + 1) u
/// sum_i |w_i x_i| (Higham's gamma_k bound, k u / (1 - k u) < (k + 1) u for these k); the test
/// allows (2 ceil(cols/16) + 6) u sum |w_i x_i|.
void check_against_reference(const Matrix& m, const std::vector<float>& x, std::int64_t n,
                             const std::vector<float>& y) {
  const double u = std::ldexp(1.0, -24);
  const std::int64_t vectors = (m.cols + 15) / 16;  // ceil(cols / 16)
  const double k = 2.0 * static_cast<double>(vectors) + 6.0;
  long bad = 0;
  std::string first;
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t r = 0; r < m.rows; ++r) {
      double ref = 0.0, mag = 0.0;
      for (std::int64_t i = 0; i < m.cols; ++i) {
        const double p = reference_element(m.type, m.row(r), i) *
                         static_cast<double>(x[static_cast<std::size_t>(t * m.cols + i)]);
        ref += p;
        mag += std::fabs(p);
      }
      const double got = y[static_cast<std::size_t>(t * m.rows + r)];
      if (!(std::fabs(got - ref) <= k * u * mag)) {
        if (bad++ == 0) {
          first = "token " + std::to_string(t) + " row " + std::to_string(r) + ": got " +
                  std::to_string(got) + ", reference " + std::to_string(ref);
        }
      }
    }
  }
  INFO(first);
  CHECK(bad == 0);
}

std::string describe(LinearIsa isa, GgmlType type, std::int64_t rows, std::int64_t cols,
                     std::int64_t n) {
  return std::string(detail::linear_isa_name(isa)) + " " +
         std::string(ggml_type_layout(type)->name) + " rows " + std::to_string(rows) + " cols " +
         std::to_string(cols) + " n " + std::to_string(n);
}

}  // namespace

TEST_CASE("dequantize_row: every type decodes as the block format says",
          "[model][quantized_linear]") {
  for (LinearIsa isa : supported_isas()) {
    for (GgmlType type : kAllTypes) {
      const std::int64_t cols = is_block_type(type) ? 32 * 9 : 37;  // float types: a partial tail
      const Matrix m(type, 16, cols, 11);
      for (std::int64_t r = 0; r < m.rows; ++r) {
        std::vector<float> out(static_cast<std::size_t>(cols) + 1, -7.0f);
        detail::dequantize_row_on(isa, type, m.row(r), cols, out.data());
        INFO(describe(isa, type, m.rows, cols, 1) << " row " << r);
        CHECK(out.back() == -7.0f);  // nothing written past cols
        long bad = 0;
        for (std::int64_t i = 0; i < cols; ++i) {
          const double ref = reference_element(type, m.row(r), i);
          const double got = out[static_cast<std::size_t>(i)];
          // Exact, but for Q4_1's q d + m: rounded once by an FMA (to the float nearest the
          // exact value), or twice where the portable path does not fuse (2 u relative).
          const bool ok = type == GgmlType::kQ4_1 && isa == LinearIsa::kBaseline
                              ? std::fabs(got - ref) <= std::ldexp(std::fabs(ref), -23)
                              : got == static_cast<double>(static_cast<float>(ref));
          bad += ok ? 0 : 1;
        }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("dequantize_row: the process's path and its argument checks",
          "[model][quantized_linear]") {
  const Matrix m(GgmlType::kQ8_0, 1, 64, 3);
  std::vector<float> a(64), b(64);
  dequantize_row(GgmlType::kQ8_0, m.row(0), 64, a.data());
  detail::dequantize_row_on(detail::linear_isa(), GgmlType::kQ8_0, m.row(0), 64, b.data());
  CHECK(same_bits(a.data(), b.data(), 64));
  dequantize_row(GgmlType::kQ8_0, nullptr, 0, nullptr);  // nothing to do
  CHECK(code_of([&] { dequantize_row(GgmlType::kQ8_0, m.row(0), 48, a.data()); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { dequantize_row(GgmlType::kQ8_0, nullptr, 32, a.data()); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { dequantize_row(GgmlType::kQ8_0, m.row(0), 32, nullptr); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { dequantize_row(static_cast<GgmlType>(12), m.row(0), 32, a.data()); }) ==
        ErrorCode::kUnsupported);
}

TEST_CASE("linear: every type and path matches the double reference", "[model][quantized_linear]") {
  struct Shape {
    std::int64_t rows, cols, n;
  };
  // One block; rows not a multiple of any tile; a SmolLM2 width; several token counts (1 and 2:
  // the fused tiles; 3, 7: the panel path with partial token tiles).
  const Shape block_shapes[] = {{1, 32, 1}, {37, 96, 1}, {37, 96, 2}, {19, 576, 3}, {70, 160, 7}};
  // Float types: widths with partial vectors (1, 15, 17, 33) and none (64).
  const Shape float_shapes[] = {{3, 1, 1}, {21, 15, 2}, {37, 17, 1}, {18, 33, 7}, {5, 64, 3}};
  for (LinearIsa isa : supported_isas()) {
    for (GgmlType type : kAllTypes) {
      for (const Shape& s : is_block_type(type) ? block_shapes : float_shapes) {
        const Matrix m(type, s.rows, s.cols, 100 + static_cast<std::uint64_t>(s.rows));
        const std::vector<float> x = random_activations(s.n * s.cols, 7);
        std::vector<float> y(static_cast<std::size_t>(s.n * s.rows), NAN);
        detail::linear_on(isa, m.weights(), x.data(), s.n, y.data());
        INFO(describe(isa, type, s.rows, s.cols, s.n));
        check_against_reference(m, x, s.n, y);
      }
    }
  }
}

TEST_CASE("linear: many rows, split across threads and panels", "[model][quantized_linear]") {
  set_threads(2);
  for (LinearIsa isa : supported_isas()) {
    for (GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kF16}) {
      for (std::int64_t n : {1, 5}) {
        const Matrix m(type, 1000, 64, 5);
        const std::vector<float> x = random_activations(n * 64, 9);
        std::vector<float> y(static_cast<std::size_t>(n * 1000), NAN);
        detail::linear_on(isa, m.weights(), x.data(), n, y.data());
        INFO(describe(isa, type, m.rows, m.cols, n));
        check_against_reference(m, x, n, y);
      }
    }
  }
}

TEST_CASE("linear: products fused over one input give each product's own bits",
          "[model][quantized_linear]") {
  // Mixed types, rows that end mid-panel, an empty product between two others, and token counts
  // for the streaming decode kernel (1, 2) and the panel path (5).
  const std::int64_t cols = 96;
  const Matrix a(GgmlType::kQ4_1, 37, cols, 21);
  const Matrix b(GgmlType::kF16, 16, cols, 22);
  const Matrix c(GgmlType::kQ8_0, 5, cols, 23);
  const LinearWeights none{GgmlType::kQ4_0, 0, 0, nullptr};
  const LinearWeights wa = a.weights(), wb = b.weights(), wc = c.weights();
  const auto alone = [&](LinearIsa isa, const LinearWeights& w, const std::vector<float>& x,
                         std::int64_t n) {
    std::vector<float> y(static_cast<std::size_t>(n * w.rows), NAN);
    detail::linear_on(isa, w, x.data(), n, y.data());
    return y;
  };
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{2}, std::int64_t{5}}) {
    const std::vector<float> x = random_activations(n * cols, 24 + static_cast<std::uint64_t>(n));
    for (LinearIsa isa : supported_isas()) {
      for (const int threads : {1, 2}) {
        set_threads(threads);
        std::vector<float> ya(static_cast<std::size_t>(n * 37), NAN);
        std::vector<float> yb(static_cast<std::size_t>(n * 16), NAN);
        std::vector<float> yc(static_cast<std::size_t>(n * 5), NAN);
        const LinearProduct products[] = {
            {&wa, ya.data()}, {&none, nullptr}, {&wb, yb.data()}, {&wc, yc.data()}};
        detail::linear_on(isa, products, x.data(), n);
        INFO("n " << n << " threads " << threads);
        CHECK(same_bits(ya.data(), alone(isa, wa, x, n).data(), n * 37));
        CHECK(same_bits(yb.data(), alone(isa, wb, x, n).data(), n * 16));
        CHECK(same_bits(yc.data(), alone(isa, wc, x, n).data(), n * 5));
      }
    }
  }
  set_threads(2);
}

TEST_CASE("for_thread_share: every unit of every product goes to exactly one thread, in runs",
          "[model][quantized_linear]") {
  Rng rng(2026'1208);
  for (int round = 0; round < 200; ++round) {
    // Products of 0 to 9 units each (0: a product with no rows), up to 6 of them.
    std::vector<std::int64_t> first{0};
    const int products = static_cast<int>(rng.below(7));
    for (int j = 0; j < products; ++j) {
      first.push_back(first.back() + static_cast<std::int64_t>(rng.below(10)));
    }
    const std::int64_t total = first.back();
    const int threads = 1 + static_cast<int>(rng.below(5));
    std::vector<int> owner(static_cast<std::size_t>(total), -1);
    for (int id = 0; id < threads; ++id) {
      std::int64_t last_unit = -1;  // a thread's units form one contiguous run, in order
      detail::for_thread_share(std::span<const std::int64_t>(first), id, threads,
                               [&](std::size_t j, std::int64_t u0, std::int64_t u1) {
                                 REQUIRE(j + 1 < first.size());
                                 REQUIRE(0 <= u0);
                                 REQUIRE(u0 < u1);
                                 REQUIRE(u1 <= first[j + 1] - first[j]);
                                 if (last_unit >= 0) REQUIRE(first[j] + u0 == last_unit + 1);
                                 for (std::int64_t u = first[j] + u0; u < first[j] + u1; ++u) {
                                   REQUIRE(owner[static_cast<std::size_t>(u)] == -1);
                                   owner[static_cast<std::size_t>(u)] = id;
                                 }
                                 last_unit = first[j] + u1 - 1;
                               });
    }
    for (std::int64_t u = 0; u < total; ++u) {
      // Brute force: thread id owns [total * id / threads, total * (id + 1) / threads).
      int expected = 0;
      while (u >= total * (expected + 1) / threads) ++expected;
      REQUIRE(owner[static_cast<std::size_t>(u)] == expected);
    }
  }
}

TEST_CASE("linear: bad fused products are refused before anything is written",
          "[model][quantized_linear]") {
  const Matrix a(GgmlType::kQ4_1, 37, 96, 21);
  const Matrix wide(GgmlType::kQ4_1, 16, 192, 25);
  const LinearWeights wa = a.weights(), ww = wide.weights();
  const std::vector<float> x = random_activations(96, 26);
  std::vector<float> ya(37, 7.0f), yw(16, 7.0f);
  const LinearProduct mismatched[] = {{&wa, ya.data()}, {&ww, yw.data()}};
  const LinearProduct null_w[] = {{&wa, ya.data()}, {nullptr, yw.data()}};
  const LinearProduct null_y[] = {{&wa, ya.data()}, {&wa, nullptr}};
  for (const auto& products :
       {std::span<const LinearProduct>(mismatched), std::span<const LinearProduct>(null_w),
        std::span<const LinearProduct>(null_y)}) {
    CHECK(code_of([&] { linear(products, x.data(), 1); }) == ErrorCode::kInvalidArgument);
    CHECK(ya[0] == 7.0f);
  }
  std::string message;
  CHECK(code_of([&] { linear(mismatched, x.data(), 1); }, &message) == ErrorCode::kInvalidArgument);
  CHECK(message.find("products[1].w cols = 192") != std::string::npos);
  // No products, or no tokens: nothing read or written.
  linear(std::span<const LinearProduct>(), nullptr, 1);
  const LinearProduct one[] = {{&wa, ya.data()}};
  linear(one, nullptr, 0);
  CHECK(ya[0] == 7.0f);
}

TEST_CASE("linear: empty shapes", "[model][quantized_linear]") {
  const Matrix m(GgmlType::kQ4_0, 4, 32, 1);
  std::vector<float> x(64, 1.0f), y(8, NAN);
  linear(m.weights(), x.data(), 0, nullptr);  // no tokens: nothing read or written
  linear({GgmlType::kQ4_0, 0, 32, nullptr}, x.data(), 2, nullptr);  // no rows
  linear({GgmlType::kQ4_0, 4, 0, nullptr}, nullptr, 2, y.data());   // no inputs: y = 0
  for (float v : y) CHECK(v == 0.0f);
}

TEST_CASE("linear: bad arguments throw", "[model][quantized_linear]") {
  const Matrix m(GgmlType::kQ4_1, 4, 64, 1);
  std::vector<float> x(64, 1.0f), y(4);
  const LinearWeights ok = m.weights();
  const auto with = [&](auto change) {
    LinearWeights w = ok;
    change(w);
    return w;
  };
  CHECK(code_of([&] { validate(with([](LinearWeights& w) { w.cols = 48; })); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { validate(with([](LinearWeights& w) { w.cols = -32; })); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { validate(with([](LinearWeights& w) { w.rows = -1; })); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { validate(with([](LinearWeights& w) { w.data = nullptr; })); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(code_of([&] {
          validate(with([](LinearWeights& w) { w.type = static_cast<GgmlType>(12); }));
        }) == ErrorCode::kUnsupported);
  CHECK(code_of([&] {
          validate(with([](LinearWeights& w) { w.rows = std::int64_t{1} << 60; }));
        }) == ErrorCode::kOutOfRange);
  std::string message;
  CHECK(code_of([&] { linear(with([](LinearWeights& w) { w.cols = 33; }), x.data(), 1, y.data()); },
                &message) == ErrorCode::kInvalidArgument);
  CHECK(message.find("33") != std::string::npos);
  CHECK(code_of([&] { linear(ok, nullptr, 1, y.data()); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { linear(ok, x.data(), 1, nullptr); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { linear(ok, x.data(), -1, y.data()); }) == ErrorCode::kInvalidArgument);
  validate(ok);
  validate({GgmlType::kF32, 3, 0, nullptr});  // empty: no data needed
}

TEST_CASE("linear: the path follows the CPU kernels' choice (INFERKIT_CPU_ISA)",
          "[model][quantized_linear]") {
  CHECK(detail::linear_isa() == detail::to_linear_isa(cpu_isa()));
  CHECK(detail::to_linear_isa(CpuIsa::kBaseline) == LinearIsa::kBaseline);
  CHECK(detail::to_linear_isa(CpuIsa::kNeon) == LinearIsa::kBaseline);  // no NEON kernels yet
  CHECK(detail::to_linear_isa(CpuIsa::kAvx2) == LinearIsa::kAvx2);
  CHECK(detail::to_linear_isa(CpuIsa::kAvx512) == LinearIsa::kAvx512);
  CHECK(detail::linear_isa_supported(LinearIsa::kBaseline));
  CHECK(detail::linear_isa_supported(detail::best_linear_isa()));
  for (LinearIsa isa : {LinearIsa::kAvx2, LinearIsa::kAvx512}) {
    CHECK(detail::linear_isa_name(isa) ==
          to_string(isa == LinearIsa::kAvx2 ? CpuIsa::kAvx2 : CpuIsa::kAvx512));
    CHECK(detail::linear_isa_supported(isa) ==
          cpu_isa_supported(isa == LinearIsa::kAvx2 ? CpuIsa::kAvx2 : CpuIsa::kAvx512));
    if (!detail::linear_isa_supported(isa)) {
      CHECK(code_of([&] { (void)detail::linear_kernels(isa); }) == ErrorCode::kUnsupported);
    }
  }
}

TEST_CASE("linear: batch-invariant across n, batch content and threads on every path",
          "[model][quantized_linear]") {
  constexpr std::int64_t kTokens = 32;
  for (LinearIsa isa : supported_isas()) {
    for (GgmlType type : kAllTypes) {
      const std::int64_t rows = 200;  // not a multiple of 16: a partial panel and tiles
      const std::int64_t cols = is_block_type(type) ? 576 : 100;
      const Matrix m(type, rows, cols, 21);
      const std::vector<float> x = random_activations(kTokens * cols, 23);
      const auto run = [&](const float* xs, std::int64_t n, int threads) {
        set_threads(threads);
        std::vector<float> y(static_cast<std::size_t>(n * rows));
        detail::linear_on(isa, m.weights(), xs, n, y.data());
        return y;
      };
      INFO(describe(isa, type, rows, cols, kTokens));
      const std::vector<float> all = run(x.data(), kTokens, 1);
      check_against_reference(m, x, kTokens, all);
      CHECK(same_bits(all.data(), run(x.data(), kTokens, 2).data(), kTokens * rows));
      for (int threads : {1, 2}) {
        const std::vector<float> seven = run(x.data(), 7, threads);
        CHECK(same_bits(all.data(), seven.data(), 7 * rows));
        for (std::int64_t t : {0, 5, 31}) {
          const std::vector<float> one = run(x.data() + t * cols, 1, threads);
          CHECK(same_bits(all.data() + t * rows, one.data(), rows));
          const std::vector<float> two = run(x.data() + t * cols - (t > 0 ? cols : 0), 2, threads);
          CHECK(same_bits(all.data() + (t > 0 ? t - 1 : 0) * rows, two.data(), 2 * rows));
        }
        // Token 31 among other tokens, at position 3 of 7.
        std::vector<float> mixed = random_activations(7 * cols, 99);
        std::memcpy(mixed.data() + 3 * cols, x.data() + 31 * cols,
                    static_cast<std::size_t>(cols) * sizeof(float));
        const std::vector<float> y_mixed = run(mixed.data(), 7, threads);
        CHECK(same_bits(all.data() + 31 * rows, y_mixed.data() + 3 * rows, rows));
      }
    }
  }
  set_threads(2);
}

TEST_CASE("linear: the AVX2 and AVX-512 paths give the same floats", "[model][quantized_linear]") {
  if (!detail::linear_isa_supported(LinearIsa::kAvx512)) return;
  for (GgmlType type : kAllTypes) {
    const std::int64_t cols = is_block_type(type) ? 320 : 45;
    const Matrix m(type, 40, cols, 31);
    for (std::int64_t n : {1, 2, 9}) {
      const std::vector<float> x = random_activations(n * cols, 37);
      std::vector<float> a(static_cast<std::size_t>(n * 40)), b(a.size());
      detail::linear_on(LinearIsa::kAvx2, m.weights(), x.data(), n, a.data());
      detail::linear_on(LinearIsa::kAvx512, m.weights(), x.data(), n, b.data());
      INFO(describe(LinearIsa::kAvx2, type, 40, cols, n));
      CHECK(same_bits(a.data(), b.data(), n * 40));
    }
  }
}

TEST_CASE("linear: wide rows, tokens in several cache blocks", "[model][quantized_linear]") {
  // 8192 inputs: the panel path takes linear_token_block(8192, 6) = 12 tokens per block, so 32
  // tokens cross three blocks.
  REQUIRE(detail::linear_token_block(8192, 6) == 12);
  constexpr std::int64_t kTokens = 32, kRows = 24, kCols = 8192;
  for (LinearIsa isa : supported_isas()) {
    for (GgmlType type : {GgmlType::kQ4_1, GgmlType::kBF16}) {
      const Matrix m(type, kRows, kCols, 41);
      const std::vector<float> x = random_activations(kTokens * kCols, 43);
      std::vector<float> all(static_cast<std::size_t>(kTokens * kRows)), one(kRows);
      detail::linear_on(isa, m.weights(), x.data(), kTokens, all.data());
      INFO(describe(isa, type, kRows, kCols, kTokens));
      check_against_reference(m, x, kTokens, all);
      for (std::int64_t t : {0, 11, 12, 24, 31}) {
        detail::linear_on(isa, m.weights(), x.data() + t * kCols, 1, one.data());
        CHECK(same_bits(all.data() + t * kRows, one.data(), kRows));
      }
    }
  }
}

TEST_CASE("linear: the portable fp16 scale conversion is exact for every code",
          "[model][quantized_linear]") {
  long bad = 0;
  for (std::uint32_t code = 0; code < 65536; ++code) {
    const auto h = static_cast<std::uint16_t>(code);
    const float got = detail::linear_baseline::Simd::half_bits(h);
    const float want = to_float(float16::from_bits(h));
    bad += same_bits(&got, &want, 1) ? 0 : 1;
  }
  CHECK(bad == 0);
}
