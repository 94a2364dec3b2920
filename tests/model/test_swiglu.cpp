// SPDX-License-Identifier: Apache-2.0
// Tests for model/detail/swiglu.hpp: silu(g) * u on every path this CPU runs, against the
// double-precision formula on random rows of every length around the vector widths, the
// elementwise edges (0, +-inf, NaN, far below and above the exp's range), and position
// invariance: a value's result depends on its place in the row, never on the rows around it.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/model/detail/swiglu.hpp>
#include <limits>
#include <string>
#include <vector>

using inferkit::cpu_isa_supported;
using inferkit::CpuIsa;
using inferkit::detail::silu_mul;

namespace {

// The paths of this build and CPU (the portable one always).
std::vector<CpuIsa> paths() {
  std::vector<CpuIsa> out{CpuIsa::kBaseline};
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (cpu_isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

double silu_times_exact(float g, float u) {
  const double x = g;
  return x / (1.0 + std::exp(-x)) * static_cast<double>(u);
}

}  // namespace

TEST_CASE("silu_mul: every path within a few ulp of silu(g) * u in double", "[model][swiglu]") {
  inferkit::Rng rng(5);
  for (CpuIsa isa : paths()) {
    for (std::int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 576, 1536}) {
      std::vector<float> g(static_cast<std::size_t>(n));
      std::vector<float> u(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) {
        g[i] = static_cast<float>(24.0 * (rng.uniform_double() - 0.5));  // silu's whole bend
        u[i] = static_cast<float>(4.0 * (rng.uniform_double() - 0.5));
      }
      std::vector<float> out = g;
      silu_mul(isa, out.data(), u.data(), n);
      for (std::size_t i = 0; i < g.size(); ++i) {
        const double exact = silu_times_exact(g[i], u[i]);
        INFO(std::string(inferkit::to_string(isa))
             << " n " << n << " i " << i << " g " << g[i] << " u " << u[i]);
        // Four roundings after an exp within 2 ulp: 8 ulp of the result, plus an absolute
        // floor for results that cancel to nothing (u near 0).
        CHECK(std::abs(out[i] - exact) <=
              8.0 * std::numeric_limits<float>::epsilon() * std::abs(exact) + 1e-30);
      }
    }
  }
}

TEST_CASE("silu_mul: edges on every path", "[model][swiglu]") {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  // 17 values: a full vector of 16 (or two of 8) and one in the scalar tail, each edge in both.
  const std::vector<float> edges = {0.0f,    -0.0f, kInf,   -kInf,  kNaN,    100.0f,
                                    -100.0f, 88.0f, -88.0f, 1e-30f, -1e-30f, 2.0f,
                                    -2.0f,   0.5f,  -0.5f,  40.0f,  kNaN};
  for (CpuIsa isa : paths()) {
    INFO(inferkit::to_string(isa));
    std::vector<float> g = edges;
    const std::vector<float> u(g.size(), 3.0f);
    silu_mul(isa, g.data(), u.data(), static_cast<std::int64_t>(g.size()));
    CHECK(g[0] == 0.0f);
    CHECK(g[1] == 0.0f);
    CHECK(g[2] == kInf);
    CHECK(std::isnan(g[3]));  // -inf / (1 + inf), as the formula gives
    CHECK(std::isnan(g[4]));
    CHECK(g[5] == 300.0f);  // exp(-100) underflows: silu(100) = 100
    CHECK(g[6] <= 0.0f);    // -100 e^-100: below float's range, a (negative) zero
    CHECK(g[6] > -1e-38f);
    CHECK(g[7] == 264.0f);
    CHECK(g[8] <= 0.0f);
    CHECK(g[8] > -1e-34f);
    CHECK(g[9] == Approx(1.5e-30f));  // silu(x) = x / 2 near 0
    CHECK(g[10] == Approx(-1.5e-30f));
    CHECK(std::isnan(g[16]));
  }
}

TEST_CASE("silu_mul: a value's result depends on its place in the row, not its neighbours",
          "[model][swiglu]") {
  // Batch invariance of the model's SwiGLU: each token's row runs from its start, so a value's
  // bits may depend on whether it falls in a vector body or the tail, but never on the other
  // values of its vector (no lane of one value feeds another's).
  inferkit::Rng rng(9);
  for (CpuIsa isa : paths()) {
    const std::int64_t row = 37;  // a vector body and a tail on every path
    std::vector<float> a(row);
    std::vector<float> u(row);
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(16.0 * (rng.uniform_double() - 0.5));
      u[i] = static_cast<float>(rng.uniform_double());
    }
    std::vector<float> b = a;
    for (std::size_t i = 1; i < b.size(); i += 2) b[i] = -4.0f * b[i] + 1.0f;  // new neighbours
    silu_mul(isa, a.data(), u.data(), row);
    silu_mul(isa, b.data(), u.data(), row);
    for (std::size_t i = 0; i < a.size(); i += 2) {
      INFO(inferkit::to_string(isa) << " i " << i);
      CHECK(std::memcmp(&a[i], &b[i], sizeof(float)) == 0);
    }
  }
}
