// SPDX-License-Identifier: Apache-2.0
// Tests of the CPU attention kernels' vector vocabulary (cpu/detail/simd.hpp), for every SIMD
// policy this TU may call (the portable one, and AVX2 / AVX-512 / NEON where the TU's flags
// enable them; each with its own lane count): the bulk KV conversions against the scalar
// kv_to_float (every 8- and 16-bit pattern), the horizontal reductions, lane masking and the
// shifted exp of the online softmax against double precision.
#include <algorithm>
#include <array>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/attention/cpu/detail/simd.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/rng.hpp>
#include <iterator>
#include <limits>
#include <string>
#include <tests/support/cpu_paths.hpp>
#include <tests/support/paged_fixture.hpp>
#include <type_traits>
#include <vector>

#if __has_include(<sys/mman.h>) && __has_include(<unistd.h>)
#  include <sys/mman.h>
#  include <unistd.h>
#  define INFERKIT_TEST_HAS_MMAN 1
#else
#  define INFERKIT_TEST_HAS_MMAN 0
#endif

namespace {

using namespace inferkit;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// The lanes of one vector of policy Simd.
template <class Simd>
using Lanes = std::array<float, Simd::kLanes>;

template <class Simd>
Lanes<Simd> lanes_of(typename Simd::V v) {
  Lanes<Simd> out;
  Simd::store(out.data(), v);
  return out;
}

/// The stored element with raw bits `b` (low bits used), NaN and inf encodings included.
template <class T>
T element_from_bits(std::uint32_t b) {
  if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<float>(b);
  } else if constexpr (std::is_same_v<T, std::int8_t>) {
    return std::bit_cast<std::int8_t>(static_cast<std::uint8_t>(b));
  } else {
    using Bits = decltype(T::bits);
    return T::from_bits(static_cast<Bits>(b));
  }
}

/// Lanes [0, min(n, kLanes)) are kv_to_float(p[i]) bit for bit; the others are +0.
template <class Simd, class T>
void check_converted(const T* p, int n, const Lanes<Simd>& got) {
  for (int i = 0; i < Simd::kLanes; ++i) {
    const float want = i < n ? detail::kv_to_float(p[i]) : 0.0f;
    INFO(test::kv_type_name<T>() << " n " << n << " lane " << i << " got "
                                 << got[static_cast<std::size_t>(i)] << " want " << want);
    CHECK(std::bit_cast<std::uint32_t>(got[static_cast<std::size_t>(i)]) ==
          std::bit_cast<std::uint32_t>(want));
  }
}

/// Every bit pattern of an 8- or 16-bit type (NaN, inf, subnormals, -0 included); 4096 random
/// ones for fp32, which is a plain load.
template <class T>
std::vector<T> all_patterns(Rng& rng) {
  constexpr std::uint32_t kPatterns = sizeof(T) == 4 ? 4096u : 1u << (8 * sizeof(T));
  std::vector<T> all(kPatterns);
  for (std::uint32_t i = 0; i < kPatterns; ++i) {
    all[i] = element_from_bits<T>(sizeof(T) == 4 ? rng.next_u32() : i);
  }
  return all;
}

template <class Simd, class T>
void check_load_kv(Rng& rng) {
  constexpr int kLanes = Simd::kLanes;
  const std::vector<T> all = all_patterns<T>(rng);
  for (std::size_t i = 0; i < all.size(); i += kLanes) {
    check_converted<Simd>(all.data() + i, kLanes,
                          lanes_of<Simd>(Simd::load_kv(all.data() + i, kLanes)));
    check_converted<Simd>(all.data() + i, kLanes,
                          lanes_of<Simd>(Simd::load_kv_full(all.data() + i)));
  }
  // Partial loads: n = 1..kLanes, and n > kLanes (loads kLanes), from random patterns at random
  // offsets.
  T buf[48];
  for (int n = 1; n <= kLanes + 4; ++n) {
    for (int trial = 0; trial < 20; ++trial) {
      for (T& x : buf) x = element_from_bits<T>(rng.next_u32());
      const T* p = buf + rng.below(17);
      check_converted<Simd>(p, std::min(n, kLanes), lanes_of<Simd>(Simd::load_kv(p, n)));
    }
  }
}

/// Horizontal sum of one vector's lanes in double.
template <std::size_t kN>
double lane_sum(const std::array<float, kN>& a) {
  double s = 0.0;
  for (const float x : a) s += x;
  return s;
}

/// Bound on the rounding error of any order of summing the lanes in fp32: kN - 1 additions, each
/// within 2^-24 of its partial sum, which is at most the sum of magnitudes.
template <std::size_t kN>
double sum_error_bound(const std::array<float, kN>& a) {
  double mag = 0.0;
  for (const float x : a) mag += std::abs(static_cast<double>(x));
  return static_cast<double>(kN - 1) * 0x1.0p-24 * mag;
}

}  // namespace

TEMPLATE_TEST_CASE("Simd: any_greater agrees with a scalar scan", "[attention]",
                   INFERKIT_TEST_SIMD_POLICIES) {
  Rng rng(11);
  constexpr auto kLanes = static_cast<std::uint32_t>(TestType::kLanes);
  for (int trial = 0; trial < 200; ++trial) {
    float lanes[kLanes];
    for (float& x : lanes) x = static_cast<float>(rng.next_u32() % 200) - 100.0f;
    if (trial % 3 == 0) lanes[rng.next_u32() % kLanes] = std::nanf("");
    const float m = static_cast<float>(rng.next_u32() % 240) - 120.0f;
    bool want = false;
    for (const float x : lanes) want = want || x > m;  // NaN > m is false
    CHECK(TestType::any_greater(TestType::load(lanes), m) == want);
  }
  float all_nan[kLanes];
  std::fill(std::begin(all_nan), std::end(all_nan), std::nanf(""));
  CHECK_FALSE(TestType::any_greater(TestType::load(all_nan), -1e30f));
  float neg_inf[kLanes];
  std::fill(std::begin(neg_inf), std::end(neg_inf), -std::numeric_limits<float>::infinity());
  CHECK_FALSE(
      TestType::any_greater(TestType::load(neg_inf), -std::numeric_limits<float>::infinity()));
}

TEMPLATE_TEST_CASE("Simd: zero set1 load store mul add and fma are lane-wise", "[attention]",
                   INFERKIT_TEST_SIMD_POLICIES) {
  Rng rng(3);
  // Small integers and halves: every product and sum is exact, fused or not.
  using Lanes = Lanes<TestType>;
  constexpr int kLanes = TestType::kLanes;
  Lanes a, b, c;
  for (int i = 0; i < kLanes; ++i) {
    const auto u = static_cast<std::size_t>(i);
    a[u] = static_cast<float>(static_cast<int>(rng.below(64)) - 32) * 0.5f;
    b[u] = static_cast<float>(static_cast<int>(rng.below(64)) - 32);
    c[u] = static_cast<float>(static_cast<int>(rng.below(1024)) - 512) * 0.25f;
  }
  const auto va = TestType::load(a.data());
  const auto vb = TestType::load(b.data());
  const auto vc = TestType::load(c.data());
  CHECK(lanes_of<TestType>(va) == a);
  const Lanes zero = lanes_of<TestType>(TestType::zero());
  const Lanes seven = lanes_of<TestType>(TestType::set1(-7.25f));
  const Lanes prod = lanes_of<TestType>(TestType::mul(va, vb));
  const Lanes sum = lanes_of<TestType>(TestType::add(va, vc));
  const Lanes fused = lanes_of<TestType>(TestType::fma(va, vb, vc));
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(std::bit_cast<std::uint32_t>(zero[i]) == 0u);  // +0
    CHECK(seven[i] == -7.25f);
    CHECK(prod[i] == a[i] * b[i]);
    CHECK(sum[i] == a[i] + c[i]);
    CHECK(fused[i] == a[i] * b[i] + c[i]);
  }
  // store writes exactly kLanes floats.
  float out[kLanes + 2];
  std::fill(std::begin(out), std::end(out), -1.0f);
  TestType::store(out + 1, va);
  CHECK(out[0] == -1.0f);
  CHECK(out[kLanes + 1] == -1.0f);
  CHECK(std::equal(a.begin(), a.end(), out + 1));
}

TEMPLATE_TEST_CASE("Simd: load_kv converts every storage type like kv_to_float with zero tails",
                   "[attention]", INFERKIT_TEST_SIMD_POLICIES) {
  Rng rng(17);
  check_load_kv<TestType, float>(rng);
  check_load_kv<TestType, float16>(rng);
  check_load_kv<TestType, bfloat16>(rng);
  check_load_kv<TestType, float8_e4m3>(rng);
  check_load_kv<TestType, float8_e5m2>(rng);
  check_load_kv<TestType, std::int8_t>(rng);
}

TEMPLATE_TEST_CASE("Simd: load_kv of packed int4 gives every byte's nibbles in dim order",
                   "[attention]", INFERKIT_TEST_SIMD_POLICIES) {
  // Packed int4 (std::uint8_t): kLanes dims are kLanes / 2 bytes, the even dim in the low nibble;
  // a partial load of n dims (n even) reads n / 2 bytes and zero-fills the rest.
  using Simd = TestType;
  constexpr int kLanes = Simd::kLanes;
  const auto want_lane = [](const std::uint8_t* p, int i, int n) {
    if (i >= n) return 0.0f;
    const std::uint8_t byte = p[i / 2];
    return static_cast<float>(i % 2 == 0 ? byte & 0x0F : byte >> 4);
  };
  const auto check = [&](const std::uint8_t* p, int n, const Lanes<Simd>& got) {
    for (int i = 0; i < kLanes; ++i) {
      INFO("n " << n << " lane " << i << " byte " << int{p[i / 2]});
      CHECK(got[static_cast<std::size_t>(i)] == want_lane(p, i, n));
    }
  };
  std::vector<std::uint8_t> all(256 + kLanes);  // every byte, in every position of a load
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint8_t>(i * 7 + 3);
  for (std::size_t i = 0; i + kLanes / 2 <= all.size(); ++i) {
    check(all.data() + i, kLanes, lanes_of<Simd>(Simd::load_kv_full(all.data() + i)));
    check(all.data() + i, kLanes, lanes_of<Simd>(Simd::load_kv(all.data() + i, kLanes)));
  }
  Rng rng(19);
  std::uint8_t buf[48];
  for (int n = 2; n <= kLanes + 4; n += 2) {
    for (int trial = 0; trial < 20; ++trial) {
      for (std::uint8_t& x : buf) x = static_cast<std::uint8_t>(rng.next_u32());
      const std::uint8_t* p = buf + rng.below(17);
      check(p, std::min(n, kLanes), lanes_of<Simd>(Simd::load_kv(p, n)));
      // load_int4 (the kernels' load, zero point applied): each lane is exactly the float
      // nibble - zero, lanes past n are 0 - zero.
      const float zero = static_cast<float>(rng.below(1 << 20)) / 65536.0f - 0.3f;
      const Lanes<Simd> got = lanes_of<Simd>(Simd::load_int4(p, n, Simd::int4_offsets(zero)));
      for (int i = 0; i < kLanes; ++i) {
        INFO("n " << n << " lane " << i << " zero " << zero);
        CHECK(got[static_cast<std::size_t>(i)] == want_lane(p, i, std::min(n, kLanes)) - zero);
      }
    }
  }
}

TEMPLATE_TEST_CASE("Simd: raw e4m3 loads are kv_to_float / kE4m3RawDivisor for every non-NaN code",
                   "[attention]", INFERKIT_TEST_SIMD_POLICIES) {
  if constexpr (TestType::kRawE4m3) {
    constexpr int kLanes = TestType::kLanes;
    const float divisor = TestType::kE4m3RawDivisor;
    // A power of two, so folding it into a scale changes no bit.
    int exp = 0;
    REQUIRE(std::frexp(divisor, &exp) == 0.5f);
    Rng rng(41);
    std::vector<float8_e4m3> codes;
    for (std::uint32_t b = 0; b < 256; ++b) {
      if ((b & 0x7Fu) != 0x7Fu)
        codes.push_back(float8_e4m3::from_bits(static_cast<std::uint8_t>(b)));
    }
    while (codes.size() % kLanes != 0) codes.push_back(float8_e4m3::from_bits(0x80));  // -0
    // Raw lanes times the divisor must be load_kv's lanes: check_converted's bitwise test.
    const auto scaled = [&](typename TestType::V raw) {
      Lanes<TestType> lanes = lanes_of<TestType>(raw);
      for (float& x : lanes) x *= divisor;
      return lanes;
    };
    for (std::size_t i = 0; i < codes.size(); i += kLanes) {
      check_converted<TestType>(&codes[i], kLanes, scaled(TestType::load_e4m3_raw_full(&codes[i])));
      check_converted<TestType>(&codes[i], kLanes,
                                scaled(TestType::load_e4m3_raw(&codes[i], kLanes)));
    }
    for (int n = 1; n < kLanes; ++n) {
      const float8_e4m3* p =
          codes.data() + rng.below(static_cast<std::uint32_t>(codes.size() - kLanes));
      check_converted<TestType>(p, n, scaled(TestType::load_e4m3_raw(p, n)));
    }
  } else {
    SUCCEED("this policy has no raw e4m3 loads");
  }
}

TEMPLATE_TEST_CASE("Simd: any_e4m3_nan finds a NaN code at any row, dim and in K or V",
                   "[attention]", INFERKIT_TEST_SIMD_POLICIES) {
  if constexpr (TestType::kRawE4m3) {
    Rng rng(43);
    for (const int dim : {1, 8, 31, 32, 40, 64, 72, 128, 200, 256}) {
      for (int trial = 0; trial < 40; ++trial) {
        const int count = 1 + static_cast<int>(rng.below(16));
        std::vector<float8_e4m3> k(static_cast<std::size_t>(count * dim));
        std::vector<float8_e4m3> v(k.size());
        // Every code but the NaNs, 0x7E / 0xFE (the largest magnitudes) often.
        const auto clean = [&] {
          const std::uint32_t b = rng.below(4) == 0 ? 0x7Eu | (rng.below(2) << 7) : rng.below(256);
          return float8_e4m3::from_bits(
              static_cast<std::uint8_t>((b & 0x7Fu) == 0x7Fu ? 0x7Eu : b));
        };
        for (auto& x : k) x = clean();
        for (auto& x : v) x = clean();
        const float8_e4m3* kr[16];
        const float8_e4m3* vr[16];
        for (int j = 0; j < count; ++j) {
          kr[j] = k.data() + static_cast<std::ptrdiff_t>(j) * dim;
          vr[j] = v.data() + static_cast<std::ptrdiff_t>(j) * dim;
        }
        INFO("dim " << dim << " count " << count << " trial " << trial);
        CHECK_FALSE(TestType::any_e4m3_nan(kr, vr, count, dim));
        const bool in_v = rng.below(2) == 1;
        const auto at =
            static_cast<std::size_t>(rng.below(static_cast<std::uint32_t>(count * dim)));
        (in_v ? v : k)[at] = float8_e4m3::from_bits(rng.below(2) == 0 ? 0x7F : 0xFF);
        INFO((in_v ? "V" : "K") << " NaN at " << at);
        CHECK(TestType::any_e4m3_nan(kr, vr, count, dim));
        // Rows past count are not scanned.
        if (count > 1 &&
            at >= static_cast<std::size_t>(count - 1) * static_cast<std::size_t>(dim)) {
          CHECK_FALSE(TestType::any_e4m3_nan(kr, vr, count - 1, dim));
        }
      }
    }
  } else {
    SUCCEED("this policy has no raw e4m3 loads");
  }
}

#if INFERKIT_TEST_HAS_MMAN
namespace {

/// Loads the last n (1..kLanes-1) elements before an inaccessible page: a read of element n (or
/// any further one) faults, so the test crashes instead of passing if load_kv reads past n.
template <class Simd, class T>
void check_load_kv_stops_at_n(Rng& rng) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* map = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(map != MAP_FAILED);
  char* base = static_cast<char*>(map);
  REQUIRE(mprotect(base + page, page, PROT_NONE) == 0);
  T* end = reinterpret_cast<T*>(base + page);
  for (int i = 1; i <= Simd::kLanes; ++i) *(end - i) = element_from_bits<T>(rng.next_u32());
  for (int n = 1; n < Simd::kLanes; ++n) {
    const T* p = end - n;
    check_converted<Simd>(p, n, lanes_of<Simd>(Simd::load_kv(p, n)));
  }
  munmap(map, 2 * page);
}

}  // namespace

TEMPLATE_TEST_CASE("Simd: load_kv reads no element at or past n", "[attention]",
                   INFERKIT_TEST_SIMD_POLICIES) {
  Rng rng(19);
  check_load_kv_stops_at_n<TestType, float>(rng);
  check_load_kv_stops_at_n<TestType, float16>(rng);
  check_load_kv_stops_at_n<TestType, bfloat16>(rng);
  check_load_kv_stops_at_n<TestType, float8_e4m3>(rng);
  check_load_kv_stops_at_n<TestType, float8_e5m2>(rng);
  check_load_kv_stops_at_n<TestType, std::int8_t>(rng);
}
#endif

TEMPLATE_TEST_CASE("Simd: reduce_lanes puts the sum of acc[j] in lane j", "[attention]",
                   INFERKIT_TEST_SIMD_POLICIES) {
  using Lanes = Lanes<TestType>;
  constexpr int kLanes = TestType::kLanes;
  Rng rng(29);
  for (int trial = 0; trial < 200; ++trial) {
    // Odd trials: integers, whose sums are exact in any order, so a lane mix-up cannot hide in
    // the tolerance. Even trials: floats of mixed magnitude.
    const bool exact = trial % 2 == 1;
    Lanes in[kLanes];
    typename TestType::V acc[kLanes];
    for (int j = 0; j < kLanes; ++j) {
      for (float& x : in[j]) {
        x = exact ? static_cast<float>(static_cast<int>(rng.below(20001)) - 10000)
                  : (2.0f * rng.uniform() - 1.0f) *
                        std::ldexp(1.0f, static_cast<int>(rng.below(9)) - 4);
      }
      acc[j] = TestType::load(in[j].data());
    }
    const Lanes got = lanes_of<TestType>(TestType::reduce_lanes(acc));
    for (int j = 0; j < kLanes; ++j) {
      const Lanes& row = in[j];
      INFO("trial " << trial << " lane " << j);
      if (exact) {
        CHECK(got[static_cast<std::size_t>(j)] == static_cast<float>(lane_sum(row)));
      } else {
        CHECK(std::abs(got[static_cast<std::size_t>(j)] - lane_sum(row)) <= sum_error_bound(row));
      }
    }
  }
}

TEMPLATE_TEST_CASE("Simd: reduce_max and reduce_add over all lanes", "[attention]",
                   INFERKIT_TEST_SIMD_POLICIES) {
  using Lanes = Lanes<TestType>;
  constexpr int kLanes = TestType::kLanes;
  Rng rng(31);
  for (int trial = 0; trial < 300; ++trial) {
    Lanes a;
    for (float& x : a) x = (2.0f * rng.uniform() - 1.0f) * 100.0f;
    // Masked-out scores are -inf in the kernel: some lanes, or all but one.
    const std::uint32_t drop = trial % 3 == 0 ? rng.next_u32() : 0u;
    for (int i = 0; i < kLanes; ++i) {
      if (((drop >> i) & 1u) != 0) a[static_cast<std::size_t>(i)] = -kInf;
    }
    if (trial % 10 == 0) {  // the maximum in one chosen lane, every lane over the trials
      std::fill(a.begin(), a.end(), -kInf);
      a[static_cast<std::size_t>(trial / 10 % kLanes)] = -3.5f;
    }
    const auto v = TestType::load(a.data());
    INFO("trial " << trial);
    CHECK(TestType::reduce_max(v) == *std::max_element(a.begin(), a.end()));
    const bool finite = std::all_of(a.begin(), a.end(), [](float x) { return std::isfinite(x); });
    if (finite) {
      CHECK(std::abs(TestType::reduce_add(v) - lane_sum(a)) <= sum_error_bound(a));
    }
  }
  Lanes ints;
  for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<float>(1 << i);
  // each lane once
  CHECK(TestType::reduce_add(TestType::load(ints.data())) == static_cast<float>((1 << kLanes) - 1));
  CHECK(TestType::reduce_max(TestType::set1(-kInf)) == -kInf);
  CHECK(TestType::reduce_add(TestType::zero()) == 0.0f);
}

TEMPLATE_TEST_CASE("Simd: keep_or keeps the lanes of set bits and fills the others", "[attention]",
                   INFERKIT_TEST_SIMD_POLICIES) {
  using Lanes = Lanes<TestType>;
  constexpr int kLanes = TestType::kLanes;
  constexpr std::uint32_t kAll = (1u << kLanes) - 1u;
  Rng rng(37);
  for (int trial = 0; trial < 300; ++trial) {
    Lanes a;
    for (float& x : a) x = std::bit_cast<float>(rng.next_u32());  // NaNs and infs kept as bits
    // The kernels pass a lane's bits only; bits past kLanes are cleared here, as they clear them.
    std::uint32_t keep = rng.next_u32() & kAll;
    if (trial == 0) keep = 0u;
    if (trial == 1) keep = kAll;
    const float fill = trial % 3 == 0 ? -kInf : (trial % 3 == 1 ? 0.0f : -2.5f);
    const Lanes got = lanes_of<TestType>(TestType::keep_or(TestType::load(a.data()), keep, fill));
    for (int i = 0; i < kLanes; ++i) {
      const auto u = static_cast<std::size_t>(i);
      const float want = ((keep >> i) & 1u) != 0 ? a[u] : fill;
      INFO("trial " << trial << " keep " << keep << " lane " << i);
      CHECK(std::bit_cast<std::uint32_t>(got[u]) == std::bit_cast<std::uint32_t>(want));
    }
  }
}

namespace {

/// Checks exp(a - m) lanes against double precision. The difference a - m is formed in fp32 (as
/// every policy forms it) and the reference is std::exp of that float in double, so only the exp
/// is measured. Relative error <= 1e-6 where the result is a normal float; below FLT_MIN
/// (arguments under about -87.3) the result is subnormal and holds only a few significant bits,
/// so the bound adds one subnormal ulp (denorm_min) of absolute error. Non-kept lanes are +0.
template <class Simd>
void check_exp_lanes(const Lanes<Simd>& a, float m, std::uint32_t keep, const Lanes<Simd>& got) {
  for (int i = 0; i < Simd::kLanes; ++i) {
    const auto u = static_cast<std::size_t>(i);
    INFO("a " << a[u] << " m " << m << " a - m " << a[u] - m << " got " << got[u]);
    if (((keep >> i) & 1u) == 0) {
      CHECK(std::bit_cast<std::uint32_t>(got[u]) == 0u);
      continue;
    }
    const float d = a[u] - m;
    const double want = std::exp(static_cast<double>(d));
    CHECK(got[u] >= 0.0f);
    CHECK(std::abs(static_cast<double>(got[u]) - want) <=
          1e-6 * want + std::numeric_limits<float>::denorm_min());
    if (d == 0.0f) CHECK(got[u] == 1.0f);
    if (d == -kInf) CHECK(got[u] == 0.0f);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("Simd: exp_shifted matches exp(a - m) in double and zeroes lanes not kept",
                   "[attention]", INFERKIT_TEST_SIMD_POLICIES) {
  using Lanes = Lanes<TestType>;
  constexpr int kLanes = TestType::kLanes;
  constexpr std::uint32_t kAll = (1u << kLanes) - 1u;
  Rng rng(41);
  // Named arguments a - m (m = 0): 0, just below 0, +-ln2/2 rounding edges, the normal/subnormal
  // edge (-87.33), -87, -100 (subnormal), the last nonzero float (-103.97), -120, beyond, -inf.
  const float named[] = {0.0f,     -0.0f,    -1e-30f,  -1e-7f,    -0.34657359f, -0.3465736f,
                         -0.5f,    -1.0f,    -10.0f,   -87.0f,    -87.3365f,    -87.5f,
                         -100.0f,  -103.97f, -103.98f, -110.0f,   -120.0f,      -121.0f,
                         -1000.0f, -3.4e38f, -kInf,    -88.72283f};
  std::vector<float> args(std::begin(named), std::end(named));
  for (int i = 0; i <= 2000; ++i) args.push_back(-static_cast<float>(i) * 0.0625f);  // to -125
  for (int i = 0; i < 4000; ++i) args.push_back(-130.0f * rng.uniform());
  for (int i = 0; i < 1000; ++i) args.push_back(-rng.uniform());
  while (args.size() % kLanes != 0) args.push_back(-kInf);

  const float shifts[] = {0.0f, 3.25f, -17.5f, 1000.0f};
  for (const float m : shifts) {
    for (std::size_t i = 0; i < args.size(); i += kLanes) {
      // a = arg + m, so a - m is arg up to the rounding of the sum (the reference uses a - m).
      Lanes a;
      for (std::size_t l = 0; l < a.size(); ++l) a[l] = args[i + l] + m;
      const auto va = TestType::load(a.data());
      check_exp_lanes<TestType>(a, m, kAll, lanes_of<TestType>(TestType::exp_shifted(va, m, kAll)));
      // A random keep mask; lanes not kept may hold anything (NaN, +inf) and still give +0.
      const std::uint32_t keep = rng.next_u32() & kAll;
      Lanes junk = a;
      for (int l = 0; l < kLanes; ++l) {
        if (((keep >> l) & 1u) == 0) junk[static_cast<std::size_t>(l)] = l % 2 == 0 ? kNaN : kInf;
      }
      check_exp_lanes<TestType>(
          junk, m, keep,
          lanes_of<TestType>(TestType::exp_shifted(TestType::load(junk.data()), m, keep)));
    }
  }
}

TEMPLATE_TEST_CASE("Simd: exp_nonpositive matches exp in double for 0 down to -inf", "[attention]",
                   INFERKIT_TEST_SIMD_POLICIES) {
  using Lanes = Lanes<TestType>;
  constexpr int kLanes = TestType::kLanes;
  Rng rng(43);
  std::vector<float> args = {0.0f, -0.0f, -87.0f, -100.0f, -120.0f, -120.5f, -1e4f, -kInf};
  for (int i = 0; i < 16000; ++i) args.push_back(-130.0f * rng.uniform());
  for (int i = 0; i < 4000; ++i)
    args.push_back(-std::ldexp(rng.uniform(), -static_cast<int>(rng.below(30))));
  while (args.size() % kLanes != 0) args.push_back(-1.0f);
  for (std::size_t i = 0; i < args.size(); i += kLanes) {
    Lanes a;
    std::copy_n(args.begin() + static_cast<std::ptrdiff_t>(i), kLanes, a.begin());
    // exp_nonpositive(x) is exp_shifted(x, 0, all lanes) before the mask.
    check_exp_lanes<TestType>(
        a, 0.0f, (1u << kLanes) - 1u,
        lanes_of<TestType>(TestType::exp_nonpositive(TestType::load(a.data()))));
  }
}
