// SPDX-License-Identifier: Apache-2.0
// Tests of attention/detail/kv_element_math.hpp, the element math of the CUDA kernels: fp8 codes
// widened to fp16 bits by shifts equal the fp8 values (e4m3 times the folded 2^8), for all 256
// codes, one and two at a time; page scales fold the block scale and the storage factor;
// token_address finds the fixture's elements; the swizzle is a bijection per row whose 8-row
// ldmatrix phases hit 8 distinct bank groups.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/attention/detail/kv_element_math.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/rng.hpp>
#include <set>
#include <tests/support/paged_fixture.hpp>
#include <vector>

namespace {

using namespace inferkit;

float half_value(std::uint32_t bits) {
  return to_float(float16::from_bits(static_cast<std::uint16_t>(bits)));
}

}  // namespace

TEST_CASE("e4m3/e5m2 to fp16 bits: every code keeps its value (e4m3 scaled by 2^-8)",
          "[attention][kv_element_math]") {
  for (std::uint32_t code = 0; code < 256; ++code) {
    const auto c = static_cast<std::uint8_t>(code);
    const float e4 = to_float(float8_e4m3::from_bits(c));
    const float e5 = to_float(float8_e5m2::from_bits(c));
    const float h4 = half_value(detail::e4m3_to_half_bits(c)) * detail::kDequantFold<float8_e4m3>;
    const float h5 = half_value(detail::e5m2_to_half_bits(c)) * detail::kDequantFold<float8_e5m2>;
    INFO("code " << code);
    if (std::isnan(e4)) {
      CHECK(std::isfinite(h4));  // NaN codes are never read, they need not survive
    } else {
      CHECK(h4 == e4);
      CHECK(std::signbit(h4) == std::signbit(e4));
    }
    if (std::isnan(e5)) {
      CHECK(std::isnan(h5));
    } else {
      CHECK(h5 == e5);
    }
  }
}

TEST_CASE("fp8x2_to_half2_bits: two codes at once equal one at a time",
          "[attention][kv_element_math]") {
  for (std::uint32_t lo = 0; lo < 256; lo += 3) {
    for (std::uint32_t hi = 0; hi < 256; hi += 5) {
      const std::uint32_t two = lo | (hi << 8);
      const std::uint32_t w4 = detail::fp8x2_to_half2_bits<float8_e4m3>(two);
      const std::uint32_t w5 = detail::fp8x2_to_half2_bits<float8_e5m2>(two);
      CHECK((w4 & 0xFFFFu) == detail::e4m3_to_half_bits(static_cast<std::uint8_t>(lo)));
      CHECK((w4 >> 16) == detail::e4m3_to_half_bits(static_cast<std::uint8_t>(hi)));
      CHECK((w5 & 0xFFFFu) == detail::e5m2_to_half_bits(static_cast<std::uint8_t>(lo)));
      CHECK((w5 >> 16) == detail::e5m2_to_half_bits(static_cast<std::uint8_t>(hi)));
    }
  }
}

TEST_CASE("page_scale and token_address: the fixture's dequantized elements",
          "[attention][kv_element_math]") {
  Rng rng(21);
  const auto f = test::make_paged_kv<float8_e4m3>(rng, {1, 17, 40}, 2, 16, 64);
  const PagedKVView<const float8_e4m3> kv = f.view();
  const PageTableView pages = f.table();
  for (std::int32_t s = 0; s < f.num_seqs(); ++s) {
    for (std::int64_t pos = 0; pos < f.seq_lens[static_cast<std::size_t>(s)]; ++pos) {
      for (std::int32_t h = 0; h < 2; ++h) {
        const detail::TokenAddress a = detail::token_address(kv, pages, s, h, pos);
        const float scale = detail::page_scale<float8_e4m3>(kv.k_scale, a.block, 2, h);
        for (std::int32_t d = 0; d < 64; d += 9) {
          const std::uint8_t code = kv.k[a.offset + d].bits;
          const float got = half_value(detail::e4m3_to_half_bits(code)) * scale;
          CHECK(got == f.value(f.k, f.k_scale, f.k_zero, s, pos, h, d));
        }
      }
    }
  }
  CHECK(detail::page_scale<float16>(nullptr, 3, 2, 1) == 1.0f);
}

TEST_CASE("int4_nibble: words of packed int4 pages give the fixture's dequantized elements",
          "[attention][kv_element_math]") {
  // The CUDA decode kernel reads packed int4 a 32-bit word at a time (8 dims) and takes
  // (int4_nibble - zero) * scale with the token's scale and zero point: every element of K and V,
  // read that way, is the value the fixture's reference (and the CPU kernels) use.
  Rng rng(22);
  const auto f = test::make_paged_kv<std::uint8_t>(rng, {1, 17, 40}, 2, 16, 64);
  const PagedKVView<const std::uint8_t> kv = f.view();
  const PageTableView pages = f.table();
  for (std::int32_t s = 0; s < f.num_seqs(); ++s) {
    for (std::int64_t pos = 0; pos < f.seq_lens[static_cast<std::size_t>(s)]; ++pos) {
      for (std::int32_t h = 0; h < 2; ++h) {
        const detail::TokenAddress a = detail::token_address(kv, pages, s, h, pos);
        const auto slot = static_cast<std::int32_t>(pos % kv.block_size);
        const std::int64_t si = kv.token_scale_index(a.block, h, slot);
        for (const bool want_v : {false, true}) {
          const std::uint8_t* row = (want_v ? kv.v : kv.k) + a.offset;
          const float scale = (want_v ? kv.v_scale : kv.k_scale)[si];
          const float zero = (want_v ? kv.v_zero : kv.k_zero)[si];
          for (std::int32_t d = 0; d < 64; ++d) {
            const std::uint8_t* w = row + d / 8 * 4;  // the little-endian word holding dim d
            const std::uint32_t word = std::uint32_t{w[0]} | std::uint32_t{w[1]} << 8 |
                                       std::uint32_t{w[2]} << 16 | std::uint32_t{w[3]} << 24;
            const float got = (static_cast<float>(detail::int4_nibble(word, d % 8)) - zero) * scale;
            CHECK(got == (want_v ? f.value(f.v, f.v_scale, f.v_zero, s, pos, h, d)
                                 : f.value(f.k, f.k_scale, f.k_zero, s, pos, h, d)));
          }
        }
      }
    }
  }
  CHECK(detail::int4_nibble(0x87654321u, 0) == 1u);  // the low nibble of the first byte
  CHECK(detail::int4_nibble(0x87654321u, 7) == 8u);
}

TEST_CASE("swizzled_chunk: a bijection per row, conflict-free across 8 rows",
          "[attention][kv_element_math]") {
  for (std::int32_t chunks : {8, 16, 32}) {
    for (std::int32_t row = 0; row < 64; ++row) {
      std::set<std::int32_t> seen;
      for (std::int32_t c = 0; c < chunks; ++c) {
        const std::int32_t s = detail::swizzled_chunk(row, c);
        CHECK((s >= 0 && s < chunks));
        seen.insert(s);
      }
      CHECK(static_cast<std::int32_t>(seen.size()) == chunks);
    }
    // ldmatrix reads one 16-byte chunk column from 8 consecutive rows: 8 different bank
    // groups (a bank group = 16 bytes; 8 groups per 128-byte line).
    for (std::int32_t row0 = 0; row0 < 64; row0 += 8) {
      for (std::int32_t c = 0; c < chunks; ++c) {
        std::set<std::int32_t> groups;
        for (std::int32_t r = row0; r < row0 + 8; ++r) {
          groups.insert((r * chunks + detail::swizzled_chunk(r, c)) % 8);
        }
        CHECK(groups.size() == 8);
      }
    }
  }
}
