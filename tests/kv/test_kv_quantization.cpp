// SPDX-License-Identifier: Apache-2.0
// Tests for kv/kv_quantization.hpp: int8 and int4 error bounds (|error| <= scale / 2 per
// element), nibble packing order, fp8 power-of-two block scales and their error within the
// format's relative rounding, exact rescaling, the storage traits, and the row kernels of every
// instruction-set path (kv/detail/kv_row_kernels.hpp) against the scalar storage types and the
// scalar quantization formulas, bit for bit.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/detail/element_convert.hpp>
#include <inferkit/kv/detail/kv_row_kernels.hpp>
#include <inferkit/kv/kv_quantization.hpp>
#include <string>
#include <vector>

using namespace inferkit;

namespace {

std::vector<float> random_vector(Rng& rng, std::size_t n, float magnitude) {
  std::vector<float> x(n);
  for (float& v : x) v = (2.0f * rng.uniform() - 1.0f) * magnitude;
  return x;
}

}  // namespace

static_assert(KVStorage<float> && KVStorage<float16> && KVStorage<bfloat16> &&
              KVStorage<float8_e4m3> && KVStorage<float8_e5m2> && KVStorage<std::int8_t> &&
              KVStorage<std::uint8_t>);
static_assert(!KVStorage<double> && !KVStorage<int>);
static_assert(KVStorageTraits<std::uint8_t>::kDType == DType::kInt4);

TEST_CASE("quantize_int8: error is at most half a scale step", "[kv][kv_quantization]") {
  Rng rng(5);
  for (float magnitude : {1e-3f, 1.0f, 37.0f, 3e4f}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{64}, std::size_t{128}}) {
      const std::vector<float> x = random_vector(rng, n, magnitude);
      std::vector<std::int8_t> q(n);
      std::vector<float> y(n);
      const float scale = quantize_int8(x, q);
      CHECK(scale == Approx(abs_max(x) / 127.0f));
      dequantize_int8(q, scale, y);
      for (std::size_t i = 0; i < n; ++i) {
        CHECK(std::fabs(x[i] - y[i]) <= scale * 0.5f * (1.0f + 1e-5f));
        CHECK(std::abs(int{q[i]}) <= 127);
      }
    }
  }
  SECTION("an all-zero vector") {
    const std::vector<float> x(8, 0.0f);
    std::vector<std::int8_t> q(8, 5);
    CHECK(quantize_int8(x, q) == 0.0f);
    for (std::int8_t v : q) CHECK(v == 0);
  }
}

TEST_CASE("quantize_int4: error is at most half a scale step and nibbles pack low first",
          "[kv][kv_quantization]") {
  Rng rng(6);
  for (float magnitude : {1e-2f, 1.0f, 500.0f}) {
    const std::size_t n = 128;
    std::vector<float> x = random_vector(rng, n, magnitude);
    x[3] += magnitude;  // asymmetric range
    std::vector<std::uint8_t> packed(n / 2);
    std::vector<float> y(n);
    const Int4Params p = quantize_int4(x, packed);
    dequantize_int4(packed, p, y);
    float lo = x[0];
    for (float v : x) lo = std::min(lo, v);
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(std::fabs(x[i] - y[i]) <= p.scale * 0.5f * (1.0f + 1e-4f) + 1e-6f * magnitude);
      // The code of element i sits in the low nibble for even i.
      const std::uint8_t code = i % 2 == 0 ? low_nibble(packed[i / 2]) : high_nibble(packed[i / 2]);
      CHECK(static_cast<float>(code) == Approx(std::rint((x[i] - lo) / p.scale)).margin(1.0));
    }
  }
  SECTION("a constant vector is exact") {
    const std::vector<float> x(4, -2.5f);
    std::vector<std::uint8_t> packed(2);
    std::vector<float> y(4);
    const Int4Params p = quantize_int4(x, packed);
    dequantize_int4(packed, p, y);
    for (float v : y) CHECK(v == -2.5f);
  }
}

TEST_CASE("fp8_block_scale: the smallest power of two that fits the range",
          "[kv][kv_quantization]") {
  CHECK(fp8_block_scale(0.0f, 448.0f) == 0.0f);
  CHECK(fp8_block_scale(448.0f, 448.0f) == 1.0f);
  CHECK(fp8_block_scale(449.0f, 448.0f) == 2.0f);
  CHECK(fp8_block_scale(224.0f, 448.0f) == 0.5f);
  Rng rng(7);
  for (int i = 0; i < 1000; ++i) {
    const float amax = std::ldexp(rng.uniform() + 0.01f, static_cast<int>(rng.below(40)) - 20);
    const float s = fp8_block_scale(amax, 448.0f);
    int e = 0;
    CHECK(std::frexp(s, &e) == 0.5f);  // a power of two
    CHECK(amax / s <= 448.0f);
    CHECK(amax / s > 224.0f);
  }
}

TEST_CASE("fp8_block_scale: equals a brute-force search over every normal exponent",
          "[kv][kv_quantization]") {
  // The smallest power of two 2^k (k over the normal exponents) with amax <= max_finite * 2^k,
  // in double, where every such product is exact.
  const auto brute_force = [](float amax, float max_finite) {
    for (int k = -126; k <= 127; ++k) {
      if (static_cast<double>(amax) <= static_cast<double>(max_finite) * std::ldexp(1.0, k)) {
        return std::ldexp(1.0f, k);
      }
    }
    return -1.0f;  // none: outside the range this test draws from
  };
  Rng rng(8);
  for (const float max_finite : {448.0f, 57344.0f}) {
    const auto mbits = std::bit_cast<std::uint32_t>(max_finite);
    for (int i = 0; i < 20000; ++i) {
      // Exponents from 2^-100 to 2^100 so that the answer stays normal; mantissas uniform, or
      // the max's own mantissa and its neighbours, where the answer steps.
      const auto exponent = static_cast<std::uint32_t>(27 + rng.below(201));
      std::uint32_t mantissa = rng.next_u32() & 0x7FFFFFu;
      if (i % 4 == 1) mantissa = mbits & 0x7FFFFFu;
      if (i % 4 == 2) mantissa = (mbits & 0x7FFFFFu) + 1;
      if (i % 4 == 3) mantissa = (mbits & 0x7FFFFFu) - 1;
      const float amax = std::bit_cast<float>(exponent << 23 | mantissa);
      INFO("amax " << amax << " max_finite " << max_finite);
      REQUIRE(fp8_block_scale(amax, max_finite) == brute_force(amax, max_finite));
    }
  }
}

TEMPLATE_TEST_CASE("quantize_fp8: error within the format's relative rounding",
                   "[kv][kv_quantization]", float8_e4m3, float8_e5m2) {
  using F8 = TestType;
  const bool e4m3 = std::is_same_v<F8, float8_e4m3>;
  const float max_finite = KVStorageTraits<F8>::kMaxFinite;
  // Half an ulp relative to the value (normal range) plus half the smallest subnormal.
  const float rel = e4m3 ? 0x1p-4f : 0x1p-3f;
  const float abs_step = e4m3 ? 0x1p-10f : 0x1p-17f;
  Rng rng(8);
  for (float magnitude : {1e-3f, 1.0f, 1000.0f}) {
    const std::vector<float> x = random_vector(rng, 256, magnitude);
    const float s = fp8_block_scale(abs_max(x), max_finite);
    std::vector<F8> q(x.size());
    std::vector<float> y(x.size());
    quantize_fp8<F8>(x, s, q);
    dequantize_fp8<F8>(q, s, y);
    for (std::size_t i = 0; i < x.size(); ++i) {
      CHECK(std::fabs(x[i] - y[i]) <= rel * std::fabs(x[i]) + abs_step * s);
    }
    SECTION("rescaling to a larger power of two keeps normal values exact") {
      std::vector<F8> r = q;
      rescale_fp8<F8>(std::span<F8>(r), s, 4.0f * s);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const float before = static_cast<float>(q[i]) * s;
        const float after = static_cast<float>(r[i]) * 4.0f * s;
        if (std::fabs(before) >= 4.0f * s * (e4m3 ? 0x1p-6f : 0x1p-14f)) {
          CHECK(after == before);
        } else {
          CHECK(std::fabs(after - before) <= 4.0f * s * abs_step);
        }
      }
    }
  }
  SECTION("a zero scale stores zeros") {
    const std::vector<float> x(4, 0.0f);
    std::vector<F8> q(4);
    quantize_fp8<F8>(x, 0.0f, q);
    for (F8 v : q) CHECK(static_cast<float>(v) == 0.0f);
  }
}

namespace {

/// Every path of this build that the CPU runs.
std::vector<const detail::KvRowKernels*> runnable_paths() {
  std::vector<const detail::KvRowKernels*> paths;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kNeon}) {
    if (cpu_isa_supported(isa)) paths.push_back(&detail::kv_row_kernels(isa));
  }
  return paths;
}

/// Floats to convert: sampled bit patterns (every sign, exponent, NaN and Inf), the values of
/// `T` (fp16, fp8) and the midpoints between neighbours (ties), and the edges of the fp16 / fp8
/// ranges.
template <class T>
std::vector<float> conversion_inputs() {
#if defined(INFERKIT_TEST_SANITIZED)
  const std::uint64_t kStride = 40961;  // ~100k samples
#else
  const std::uint64_t kStride = 4099;  // ~1M samples over all 2^32 bit patterns
#endif
  std::vector<float> x;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += kStride) {
    x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(u)));
  }
  if constexpr (sizeof(T) == 1 || std::is_same_v<T, float16>) {
    using Bits = std::conditional_t<sizeof(T) == 1, std::uint8_t, std::uint16_t>;
    constexpr std::uint32_t kCodes = 1u << (8 * sizeof(T));
    for (std::uint32_t b = 0; b < kCodes; ++b) {
      const float v = static_cast<float>(T::from_bits(static_cast<Bits>(b)));
      const float next = static_cast<float>(T::from_bits(static_cast<Bits>((b + 1) % kCodes)));
      for (float y : {v, 0.5f * (v + next), std::nextafter(v, 0.0f), std::nextafter(v, 1e9f)}) {
        x.push_back(y);
      }
    }
  }
  for (float y : {448.0f, 464.0f, 57344.0f, 61440.0f, 65504.0f, 65520.0f, 0x1p-25f, 0x1p-24f,
                  0x1p-6f, 0x1p-10f, 0x1p-17f, 1e30f, -1e30f, INFINITY, -INFINITY, -0.0f, 0x1p-126f,
                  0x1p-149f, 1e-40f}) {
    x.push_back(y);
  }
  while (x.size() % 64 != 3) x.push_back(1.0f);  // a tail the vector loops leave to scalar code
  return x;
}

template <class T>
void check_conversion_on_every_path(float inv) {
  const std::vector<float> x = conversion_inputs<T>();
  for (const detail::KvRowKernels* k : runnable_paths()) {
    std::vector<T> bulk(x.size());
    detail::convert_from_float(*k, x.data(), inv, bulk.data(), x.size());
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const T scalar(x[i] * inv);
      if (std::memcmp(&bulk[i], &scalar, sizeof(T)) != 0) {
        if (mismatches++ < 5) {
          INFO("path " << std::string(to_string(k->isa)) << " x " << x[i]);
          CHECK(std::memcmp(&bulk[i], &scalar, sizeof(T)) == 0);
        }
      }
    }
    INFO("path " << std::string(to_string(k->isa)));
    CHECK(mismatches == 0);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("kv_row_kernels: every path converts floats like the scalar storage type",
                   "[kv][kv_quantization]", float16, bfloat16, float8_e4m3, float8_e5m2) {
  check_conversion_on_every_path<TestType>(1.0f);
  if constexpr (sizeof(TestType) == 1) check_conversion_on_every_path<TestType>(0.0625f);
}

TEST_CASE("kv_row_kernels: every path quantizes int8 and int4 with the scalar formulas",
          "[kv][kv_quantization]") {
  Rng rng(77);
  for (const detail::KvRowKernels* k : runnable_paths()) {
    INFO("path " << std::string(to_string(k->isa)));
    for (const std::size_t n : {std::size_t{2}, std::size_t{6}, std::size_t{64}, std::size_t{128},
                                std::size_t{130}, std::size_t{254}}) {
      for (int trial = 0; trial < 20; ++trial) {
        std::vector<float> x =
            random_vector(rng, n, std::ldexp(1.0f, static_cast<int>(rng.below(20)) - 10));
        if (trial == 0) std::fill(x.begin(), x.end(), 0.0f);
        if (trial == 1) std::fill(x.begin(), x.end(), 0.75f);  // int4: constant vector
        // int8: amax / 127, codes rint(clamp(x * 127 / amax, -127, 127)).
        float amax = 0.0f;
        for (float v : x) amax = std::max(amax, std::fabs(v));
        CHECK(k->abs_max(x.data(), n) == amax);
        std::vector<std::int8_t> q(n);
        const float scale = k->quantize_int8(x.data(), q.data(), n);
        CHECK(scale == (amax == 0.0f ? 0.0f : amax / 127.0f));
        for (std::size_t i = 0; i < n; ++i) {
          const float r = amax == 0.0f ? 0.0f : std::clamp(x[i] * (127.0f / amax), -127.0f, 127.0f);
          REQUIRE(q[i] == static_cast<std::int8_t>(static_cast<int>(std::rint(r))));
        }
        // int4: [min, max] in 15 steps, codes rint(clamp((x - min) / scale, 0, 15)).
        const float lo = *std::min_element(x.begin(), x.end());
        const float hi = *std::max_element(x.begin(), x.end());
        const float s4 = hi == lo ? 1.0f : (hi - lo) / 15.0f;
        std::vector<std::uint8_t> packed(n / 2);
        float got_scale = 0.0f, got_zero = 0.0f;
        k->quantize_int4(x.data(), packed.data(), n, &got_scale, &got_zero);
        CHECK(got_scale == s4);
        CHECK(got_zero == (hi == lo ? -lo : -lo / s4));
        for (std::size_t i = 0; i < n; ++i) {
          const auto want = static_cast<std::uint8_t>(
              static_cast<int>(std::rint(std::clamp((x[i] - lo) * (1.0f / s4), 0.0f, 15.0f))));
          const std::uint8_t got =
              i % 2 == 0 ? low_nibble(packed[i / 2]) : high_nibble(packed[i / 2]);
          REQUIRE(got == want);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("kv_row_kernels: every path rescales fp8 codes like the scalar type",
                   "[kv][kv_quantization]", float8_e4m3, float8_e5m2) {
  std::vector<TestType> all(256 + 5);
  for (std::size_t b = 0; b < all.size(); ++b) {
    all[b] = TestType::from_bits(static_cast<std::uint8_t>(b % 256));
  }
  for (const detail::KvRowKernels* k : runnable_paths()) {
    for (const float ratio : {0.5f, 0.0625f, 0x1p-12f}) {
      INFO("path " << std::string(to_string(k->isa)) << " ratio " << ratio);
      std::vector<TestType> q = all;
      detail::rescale_fp8_codes(*k, q.data(), q.size(), 1.0f, 1.0f / ratio);
      for (std::size_t i = 0; i < q.size(); ++i) {
        const TestType want(static_cast<float>(all[i]) * ratio);
        REQUIRE(q[i].bits == want.bits);
      }
    }
  }
}

TEMPLATE_TEST_CASE("kv_row_kernels: every path widens fp16 and bf16 rows like the scalar type",
                   "[kv][kv_quantization]", float16, bfloat16) {
  // Every bit pattern (NaNs, infinities, subnormals, both zeros), then a tail the vector loops
  // leave to scalar code; the 16-bit source elements of an append become these floats.
  std::vector<TestType> all(65536 + 13);
  for (std::size_t b = 0; b < all.size(); ++b) {
    all[b] = TestType::from_bits(static_cast<std::uint16_t>(b % 65536));
  }
  for (const detail::KvRowKernels* k : runnable_paths()) {
    INFO("path " << std::string(to_string(k->isa)));
    for (const std::size_t first : {std::size_t{0}, std::size_t{3}}) {  // aligned and not
      std::vector<float> wide(all.size() - first);
      detail::convert_to_float(*k, all.data() + first, wide.data(), wide.size());
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < wide.size(); ++i) {
        const float want = static_cast<float>(all[first + i]);
        mismatches += std::memcmp(&wide[i], &want, sizeof(float)) != 0 ? 1 : 0;
      }
      CHECK(mismatches == 0);
    }
  }
}

TEMPLATE_TEST_CASE("convert_from_float: bulk conversion gives the scalar type's bits",
                   "[kv][kv_quantization]", float, float16, bfloat16, float8_e4m3) {
  Rng rng(9);
  std::vector<float> x(1027);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float mag = std::ldexp(1.0f, static_cast<int>(rng.below(60)) - 30);
    x[i] = (rng.uniform() - 0.5f) * mag;
  }
  x[0] = 65504.0f;
  x[1] = 65520.0f;  // rounds to fp16 infinity
  x[2] = 0x1p-25f;  // fp16 subnormal tie
  x[3] = -0.0f;
  x[4] = INFINITY;
  x[5] = 1e-40f;
  std::vector<TestType> bulk(x.size());
  detail::convert_from_float(x.data(), bulk.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const TestType scalar(x[i]);
    REQUIRE(std::memcmp(&bulk[i], &scalar, sizeof(TestType)) == 0);
  }
}
