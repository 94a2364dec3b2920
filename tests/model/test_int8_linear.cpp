// SPDX-License-Identifier: Apache-2.0
// Tests for model/int8_linear.hpp on both paths (portable, and AVX-512 VNNI where the CPU has it):
// the activation codes against the rule computed here, the products against a double-precision
// sum over weights decoded from the ggml block formats (tests/support/ggml_matrices.hpp), the
// error against the exact fp32-activation product within the activations' rounding, the same bits
// on both paths, batch invariance, shapes, and bad arguments.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <inferkit/core/rng.hpp>
#include <inferkit/model/int8_linear.hpp>
#include <span>
#include <string>
#include <tests/support/error_code.hpp>
#include <tests/support/ggml_matrices.hpp>
#include <vector>

using namespace inferkit;
using namespace inferkit::test;  // NOLINT(google-build-using-namespace): the shared matrices
using detail::Int8Isa;

namespace {

constexpr GgmlType kInt8Types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0};

std::vector<Int8Isa> int8_isas() {
  std::vector<Int8Isa> isas;
  for (Int8Isa isa : {Int8Isa::kBaseline, Int8Isa::kAvx2, Int8Isa::kAvxVnni, Int8Isa::kAvx512Vnni,
                      Int8Isa::kAmxInt8}) {
    if (detail::int8_isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

std::string type_name(GgmlType type) { return std::string(ggml_type_layout(type)->name); }

const char* name_of(Int8Isa isa) { return detail::int8_isa_name(isa); }

/// One block's codes by the documented rule, computed here: scale amax / 127, codes
/// nearbyint(x · (127 / amax)) in float.
struct ReferenceBlock {
  float scale = 0.0f;
  std::int32_t codes[32] = {};
};
ReferenceBlock reference_quantize(const float* x) {
  ReferenceBlock q;
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  q.scale = amax / 127.0f;
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int i = 0; i < 32; ++i) {
    const float v = x[i] * inv;
    q.codes[i] = static_cast<std::int32_t>(std::nearbyint(v));
  }
  return q;
}

std::vector<float> run(Int8Isa isa, const Int8LinearWeights& w, const std::vector<float>& x,
                       std::int64_t n) {
  std::vector<float> y(static_cast<std::size_t>(n * w.rows()), -1.0f);
  detail::linear_int8_on(isa, w, x.data(), n, y.data());
  return y;
}

/// y against sum_k w_k q_k s_b in double (w decoded from the block format, q and s the codes and
/// scale of the rule). Each block adds its float dot product (exact integers, converted exactly)
/// by an FMA with d·s rounded once, and Q4_1 its m term by a second FMA: at most 2 roundings of
/// the running sum and 1 of the scale a block, so |y - ref| <= (3 blocks + 1) u sum |w q s|.
void check_formula(const Matrix& m, const std::vector<float>& x, std::int64_t n,
                   const std::vector<float>& y) {
  const double u = std::ldexp(1.0, -24);
  const std::int64_t blocks = m.cols / 32;
  long bad = 0;
  std::string first;
  for (std::int64_t t = 0; t < n; ++t) {
    std::vector<ReferenceBlock> q;
    for (std::int64_t b = 0; b < blocks; ++b)
      q.push_back(reference_quantize(&x[t * m.cols + b * 32]));
    for (std::int64_t r = 0; r < m.rows; ++r) {
      double ref = 0.0;
      double mag = 0.0;
      for (std::int64_t k = 0; k < m.cols; ++k) {
        const ReferenceBlock& qb = q[static_cast<std::size_t>(k / 32)];
        const double term = reference_element(m.type, m.row(r), k) * qb.codes[k % 32] * qb.scale;
        ref += term;
        mag += std::fabs(term);
      }
      const double got = y[static_cast<std::size_t>(t * m.rows + r)];
      if (!(std::fabs(got - ref) <= (3.0 * static_cast<double>(blocks) + 1.0) * u * mag)) {
        if (bad++ == 0) {
          first = "t " + std::to_string(t) + " r " + std::to_string(r) + " got " +
                  std::to_string(got) + " ref " + std::to_string(ref);
        }
      }
    }
  }
  INFO(first);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("linear_int8: activation codes follow the rule on every path", "[model][int8_linear]") {
  Rng rng(11);
  const std::int64_t cols = 96;
  std::vector<float> x(static_cast<std::size_t>(cols));
  for (int trial = 0; trial < 200; ++trial) {
    for (float& v : x) {
      v = (rng.uniform() * 2.0f - 1.0f) * std::ldexp(1.0f, static_cast<int>(rng.below(40)) - 20);
    }
    if (trial % 7 == 0) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
    if (trial % 11 == 0) x[5] = -std::fabs(x[5]) - 1e3f;  // the block's amax negative
    for (Int8Isa isa : int8_isas()) {
      std::vector<std::int8_t> q(static_cast<std::size_t>(cols));
      std::vector<float> scale(3), scaled_sum(3);
      std::vector<std::int32_t> sum(3);
      detail::Int8ActivationsView a{q.data(), scale.data(), sum.data(), scaled_sum.data(), cols, 3};
#if INFERKIT_CPU_DISPATCH
      if (isa == Int8Isa::kAvx512Vnni || isa == Int8Isa::kAmxInt8) {
        detail::int8_avx512::quantize_token(x.data(), a, 0);
      } else {
        detail::int8_baseline::quantize_token(x.data(), a, 0);
      }
#else
      detail::int8_baseline::quantize_token(x.data(), a, 0);
#endif
      for (std::int64_t b = 0; b < 3; ++b) {
        const ReferenceBlock ref = reference_quantize(&x[static_cast<std::size_t>(b * 32)]);
        INFO(name_of(isa) << " trial " << trial << " block " << b);
        CHECK(scale[static_cast<std::size_t>(b)] == ref.scale);
        std::int32_t s = 0;
        for (int i = 0; i < 32; ++i) {
          const std::int32_t c = q[static_cast<std::size_t>(b * 32 + i)];
          CHECK(c == ref.codes[i]);
          CHECK(std::abs(c) <= 127);
          // Within half a code of the input, and the largest input at ±127.
          CHECK(std::fabs(c * static_cast<double>(ref.scale) -
                          x[static_cast<std::size_t>(b * 32 + i)]) <=
                0.5000001 * ref.scale + 1e-30);
          s += c;
        }
        CHECK(sum[static_cast<std::size_t>(b)] == s);
        CHECK(scaled_sum[static_cast<std::size_t>(b)] == ref.scale * static_cast<float>(s));
      }
    }
  }
}

TEST_CASE("linear_int8: every type, shape and path matches the double formula",
          "[model][int8_linear]") {
  for (GgmlType type : kInt8Types) {
    for (const std::int64_t rows : {1, 15, 16, 17, 33, 70}) {
      for (const std::int64_t cols : {32, 64, 576}) {
        const Matrix m(type, rows, cols, 100 + static_cast<std::uint64_t>(rows * cols));
        const Int8LinearWeights packed(m.weights());
        CHECK(packed.rows() == rows);
        CHECK(packed.cols() == cols);
        // AMX takes 64+ tokens (fewer run on VNNI): 64 is four whole tiles, 70 pads a fifth.
        for (const std::int64_t n : {1, 2, 3, 5, 8, 9, 17, 64, 70}) {
          const std::vector<float> x =
              random_activations(n * cols, 7 + static_cast<std::uint64_t>(n));
          for (Int8Isa isa : int8_isas()) {
            INFO(type_name(type) << " rows " << rows << " cols " << cols << " n " << n << " "
                                 << name_of(isa));
            check_formula(m, x, n, run(isa, packed, x, n));
          }
        }
      }
    }
  }
}

TEST_CASE("linear_int8: the error against the exact product is the activations' rounding",
          "[model][int8_linear]") {
  // |y - sum_k w_k x_k| <= sum_b (s_b / 2) sum_{k in b} |w_k| (the codes are within half a step)
  // plus the formula's own fp32 rounding, bounded by the same magnitude times (3 blocks + 1) u.
  const std::int64_t rows = 48, cols = 576, n = 4;
  for (GgmlType type : kInt8Types) {
    const Matrix m(type, rows, cols, 5);
    const Int8LinearWeights packed(m.weights());
    const std::vector<float> x = random_activations(n * cols, 9);
    const std::vector<float> y = run(detail::int8_linear_isa(), packed, x, n);
    const double u = std::ldexp(1.0, -24);
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t r = 0; r < rows; ++r) {
        double exact = 0.0, bound = 0.0, mag = 0.0;
        for (std::int64_t b = 0; b < cols / 32; ++b) {
          const ReferenceBlock q =
              reference_quantize(&x[static_cast<std::size_t>(t * cols + b * 32)]);
          for (std::int64_t k = b * 32; k < b * 32 + 32; ++k) {
            const double w = reference_element(type, m.row(r), k);
            exact += w * x[static_cast<std::size_t>(t * cols + k)];
            bound += 0.5 * q.scale * std::fabs(w);
            mag += std::fabs(w * q.codes[k % 32] * q.scale);
          }
        }
        const double err = std::fabs(y[static_cast<std::size_t>(t * rows + r)] - exact);
        INFO(type_name(type) << " t " << t << " r " << r << " err " << err << " bound " << bound);
        CHECK(err <= bound * 1.000001 + (3.0 * cols / 32 + 1.0) * u * mag);
      }
    }
  }
}

TEST_CASE("linear_int8: every path gives the portable path's bits", "[model][int8_linear]") {
  for (GgmlType type : kInt8Types) {
    const Matrix m(type, 37, 1536, 77);
    const Int8LinearWeights packed(m.weights());
    const std::int64_t n = 77;  // AMX: four whole tiles and a padded one
    const std::vector<float> x = random_activations(n * 1536, 78);
    const std::vector<float> ref = run(Int8Isa::kBaseline, packed, x, n);
    for (Int8Isa isa : int8_isas()) {
      const std::vector<float> got = run(isa, packed, x, n);
      INFO(type_name(type) << " " << name_of(isa));
      CHECK(same_bits(ref.data(), got.data(), static_cast<std::int64_t>(ref.size())));
    }
  }
}

TEST_CASE("linear_int8: products fused over one input give each product's own bits",
          "[model][int8_linear]") {
  // Mixed types, rows that end mid-group, an empty product between two others, and token counts
  // for the decode tiles and AMX's (70: whole tiles and a padded one).
  const std::int64_t cols = 192;
  const Matrix a(GgmlType::kQ4_1, 37, cols, 11);
  const Matrix b(GgmlType::kQ8_0, 16, cols, 12);
  const Matrix c(GgmlType::kQ4_0, 5, cols, 13);
  const Int8LinearWeights pa(a.weights()), pb(b.weights()), pc(c.weights()), none;
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{3}, std::int64_t{70}}) {
    const std::vector<float> x = random_activations(n * cols, 14 + static_cast<std::uint64_t>(n));
    for (Int8Isa isa : int8_isas()) {
      for (const int threads : {1, 2}) {
        set_threads(threads);
        std::vector<float> ya(static_cast<std::size_t>(n * 37), -1.0f);
        std::vector<float> yb(static_cast<std::size_t>(n * 16), -1.0f);
        std::vector<float> yc(static_cast<std::size_t>(n * 5), -1.0f);
        const Int8Product products[] = {
            {&pa, ya.data()}, {&none, nullptr}, {&pb, yb.data()}, {&pc, yc.data()}};
        detail::linear_int8_on(isa, products, x.data(), n);
        INFO("n " << n << " " << name_of(isa) << " threads " << threads);
        CHECK(same_bits(ya.data(), run(isa, pa, x, n).data(), n * 37));
        CHECK(same_bits(yb.data(), run(isa, pb, x, n).data(), n * 16));
        CHECK(same_bits(yc.data(), run(isa, pc, x, n).data(), n * 5));
      }
    }
  }
  set_threads(2);
}

TEST_CASE("linear_int8: bad fused products are refused before anything is written",
          "[model][int8_linear]") {
  const std::int64_t cols = 192;
  const Matrix a(GgmlType::kQ4_1, 37, cols, 11);
  const Matrix b(GgmlType::kQ8_0, 16, cols, 12);
  const Int8LinearWeights pa(a.weights()), pb(b.weights());
  {
    const Matrix other(GgmlType::kQ4_1, 16, 2 * cols, 15);
    const Int8LinearWeights wide(other.weights());
    const std::vector<float> x = random_activations(cols, 16);
    std::vector<float> ya(37, 7.0f);
    std::vector<float> yw(16, 7.0f);
    const Int8Product mismatched[] = {{&pa, ya.data()}, {&wide, yw.data()}};
    const Int8Product null_w[] = {{&pa, ya.data()}, {nullptr, yw.data()}};
    const Int8Product null_y[] = {{&pa, ya.data()}, {&pb, nullptr}};
    for (const auto& products :
         {std::span<const Int8Product>(mismatched), std::span<const Int8Product>(null_w),
          std::span<const Int8Product>(null_y)}) {
      CHECK(code_of([&] { linear_int8(products, x.data(), 1); }) == ErrorCode::kInvalidArgument);
      CHECK(ya[0] == 7.0f);
    }
    std::string what;
    try {
      linear_int8(mismatched, x.data(), 1);
    } catch (const Error& e) {
      what = e.what();
    }
    CHECK(what.find("products[1].w cols = 384") != std::string::npos);
    // No products, or no tokens: nothing read or written.
    linear_int8(std::span<const Int8Product>(), nullptr, 1);
    const Int8Product one[] = {{&pa, ya.data()}};
    linear_int8(one, nullptr, 0);
    CHECK(ya[0] == 7.0f);
  }
}

TEST_CASE("linear_int8: batch-invariant across n, batch content and threads",
          "[model][int8_linear]") {
  const std::int64_t rows = 200, cols = 576, big = 70;  // 70: the AMX path, alone VNNI
  for (GgmlType type : kInt8Types) {
    const Matrix m(type, rows, cols, 31);
    const Int8LinearWeights packed(m.weights());
    const std::vector<float> x = random_activations(big * cols, 32);
    for (Int8Isa isa : int8_isas()) {
      set_threads(2);
      const std::vector<float> all = run(isa, packed, x, big);
      set_threads(1);
      const std::vector<float> serial = run(isa, packed, x, big);
      INFO(type_name(type) << " " << name_of(isa));
      CHECK(same_bits(all.data(), serial.data(), big * rows));
      for (const std::int64_t t : {std::int64_t{0}, std::int64_t{5}, big - 1}) {
        const std::vector<float> one(x.begin() + t * cols, x.begin() + (t + 1) * cols);
        const std::vector<float> alone = run(isa, packed, one, 1);
        CHECK(same_bits(alone.data(), all.data() + t * rows, rows));
        // The same token beside different neighbours.
        std::vector<float> mixed = random_activations(3 * cols, 99 + static_cast<std::uint64_t>(t));
        std::copy(one.begin(), one.end(), mixed.begin() + cols);
        const std::vector<float> among = run(isa, packed, mixed, 3);
        CHECK(same_bits(among.data() + rows, all.data() + t * rows, rows));
      }
      set_threads(2);
    }
  }
}

TEST_CASE("linear_int8: zero activations give exact zeros", "[model][int8_linear]") {
  for (GgmlType type : kInt8Types) {
    const Matrix m(type, 20, 64, 3);
    const Int8LinearWeights packed(m.weights());
    const std::vector<float> x(2 * 64, 0.0f);
    for (Int8Isa isa : int8_isas()) {
      for (float v : run(isa, packed, x, 2)) CHECK(v == 0.0f);
    }
  }
}

TEST_CASE("linear_int8: empty shapes and bad arguments", "[model][int8_linear]") {
  const Matrix m(GgmlType::kQ4_1, 16, 64, 1);
  const Int8LinearWeights packed(m.weights());
  const std::vector<float> x(64, 1.0f);
  std::vector<float> y(16, 7.0f);
  linear_int8(packed, x.data(), 0, y.data());  // nothing to do, nothing written
  CHECK(y[0] == 7.0f);
  const Int8LinearWeights empty;
  CHECK(empty.empty());
  linear_int8(empty, nullptr, 3, nullptr);
  CHECK(code_of([&] { linear_int8(packed, x.data(), -1, y.data()); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { linear_int8(packed, nullptr, 1, y.data()); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { linear_int8(packed, x.data(), 1, nullptr); }) == ErrorCode::kInvalidArgument);
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32}) {
    const Matrix f(type, 4, 32, 2);
    CHECK(code_of([&] { (void)Int8LinearWeights(f.weights()); }) == ErrorCode::kUnsupported);
    CHECK_FALSE(int8_linear_supports(type));
  }
  LinearWeights bad = m.weights();
  bad.cols = 40;  // not a whole number of blocks
  CHECK(code_of([&] { (void)Int8LinearWeights(bad); }) == ErrorCode::kInvalidArgument);
  // The packed copy holds the file's bytes for whole groups (16 x 20 bytes per Q4_1 block).
  CHECK(packed.bytes() == 16u * 2u * 20u);
}

TEST_CASE("linear_int8: the path follows the CPU kernels' choice", "[model][int8_linear]") {
  const Int8Isa isa = detail::int8_linear_isa();
  CHECK(detail::int8_isa_supported(isa));
  switch (cpu_isa()) {
    case CpuIsa::kAvx512:
      CHECK(isa == (cpu_has_avx512_vnni()
                        ? (cpu_has_amx_int8() ? Int8Isa::kAmxInt8 : Int8Isa::kAvx512Vnni)
                        : (cpu_has_avx_vnni() ? Int8Isa::kAvxVnni : Int8Isa::kAvx2)));
      break;
    case CpuIsa::kAvx2:
      CHECK(isa == (cpu_has_avx_vnni() ? Int8Isa::kAvxVnni : Int8Isa::kAvx2));
      break;
    default:
      CHECK(isa == Int8Isa::kBaseline);
  }
  for (Int8Isa other :
       {Int8Isa::kAvx2, Int8Isa::kAvxVnni, Int8Isa::kAvx512Vnni, Int8Isa::kAmxInt8}) {
    if (detail::int8_isa_supported(other)) continue;
    const Matrix m(GgmlType::kQ4_1, 16, 32, 1);
    const Int8LinearWeights packed(m.weights());
    const std::vector<float> x(32, 1.0f);
    std::vector<float> y(16);
    CHECK(test::code_of([&] { detail::linear_int8_on(other, packed, x.data(), 1, y.data()); }) ==
          ErrorCode::kUnsupported);
  }
}
