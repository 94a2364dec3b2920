// SPDX-License-Identifier: Apache-2.0
// Tests for kv/paged_kv_view.hpp: the strides and offsets of PagedKVView (plain and packed
// int4) against a brute-force enumeration of the documented layout, and PageTableView's page
// counts and sequence lengths.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/kv/paged_kv_view.hpp>
#include <set>
#include <type_traits>
#include <vector>

using inferkit::PagedKVView;
using inferkit::PageTableView;

TEST_CASE("PagedKVView: offsets enumerate the layout densely without overlap",
          "[kv][paged_kv_view]") {
  for (bool packed : {false, true}) {
    PagedKVView<std::uint8_t> view;
    view.num_blocks = 3;
    view.num_kv_heads = 2;
    view.block_size = 5;
    view.head_dim = 8;
    view.packed_int4 = packed;
    const std::int64_t ts = packed ? 4 : 8;
    CHECK(view.token_stride() == ts);
    CHECK(view.head_stride() == ts * 5);
    CHECK(view.block_stride() == ts * 5 * 2);
    // Walking [block][head][slot] in order visits consecutive token-sized chunks.
    std::int64_t expected = 0;
    std::set<std::int64_t> scale_indices;
    for (std::int32_t b = 0; b < 3; ++b) {
      for (std::int32_t h = 0; h < 2; ++h) {
        for (std::int32_t s = 0; s < 5; ++s) {
          CHECK(view.offset(b, h, s) == expected);
          expected += ts;
          scale_indices.insert(view.token_scale_index(b, h, s));
        }
      }
    }
    CHECK(expected == view.block_stride() * view.num_blocks);
    CHECK(scale_indices.size() == 30);
    CHECK(*scale_indices.rbegin() == 29);
  }
}

TEST_CASE("PageTableView: page counts and lengths follow indptr and last_page_len",
          "[kv][paged_kv_view]") {
  const std::vector<std::int32_t> indptr{0, 2, 2, 5};
  const std::vector<std::int32_t> indices{4, 1, 0, 3, 2};
  const std::vector<std::int32_t> last{3, 0, 16};
  const PageTableView view{indptr.data(), indices.data(), last.data(), 3};
  CHECK(view.num_pages(0) == 2);
  CHECK(view.num_pages(1) == 0);
  CHECK(view.num_pages(2) == 3);
  CHECK(view.seq_len(0, 16) == 19);
  CHECK(view.seq_len(1, 16) == 0);
  CHECK(view.seq_len(2, 16) == 48);
  static_assert(std::is_trivially_copyable_v<PageTableView>);
  static_assert(std::is_trivially_copyable_v<PagedKVView<float>>);
}

TEST_CASE("PagedKVView: a writable view converts to a read-only view with every field kept",
          "[kv][paged_kv_view]") {
  std::uint8_t k[4] = {};
  std::uint8_t v[4] = {};
  const float scales[6] = {};
  PagedKVView<std::uint8_t> view;
  view.k = k;
  view.v = v;
  view.k_scale = scales;
  view.v_scale = scales + 1;
  view.k_zero = scales + 2;
  view.v_zero = scales + 3;
  view.num_blocks = 7;
  view.num_kv_heads = 3;
  view.block_size = 16;
  view.head_dim = 64;
  view.packed_int4 = true;
  const PagedKVView<const std::uint8_t> ro = view;
  CHECK(ro.k == k);
  CHECK(ro.v == v);
  CHECK(ro.k_scale == scales);
  CHECK(ro.v_scale == scales + 1);
  CHECK(ro.k_zero == scales + 2);
  CHECK(ro.v_zero == scales + 3);
  CHECK(ro.num_blocks == 7);
  CHECK(ro.num_kv_heads == 3);
  CHECK(ro.block_size == 16);
  CHECK(ro.head_dim == 64);
  CHECK(ro.packed_int4);
  CHECK(ro.block_stride() == view.block_stride());
  static_assert(std::is_convertible_v<PagedKVView<float>, PagedKVView<const float>>);
  static_assert(!std::is_convertible_v<PagedKVView<const float>, PagedKVView<float>>);
}

TEST_CASE("PageTableView: begin/end offsets bound each sequence on their own",
          "[kv][paged_kv_view]") {
  // Sequences stored out of order with gaps (-9 marks an entry no sequence owns).
  const std::vector<std::int32_t> indices{-9, 7, 8, -9, 4, -9, -9, 1, 0, 3};
  const std::vector<std::int32_t> begin{7, 4, 5};
  const std::vector<std::int32_t> end{10, 5, 5};
  const std::vector<std::int32_t> last{2, 16, 0};
  const PageTableView view{begin.data(), indices.data(), last.data(), 3, end.data()};
  CHECK(view.has_gaps());
  CHECK(view.page_begin(0) == 7);
  CHECK(view.page_end(0) == 10);
  CHECK(view.num_pages(0) == 3);
  CHECK(view.num_pages(1) == 1);
  CHECK(view.num_pages(2) == 0);
  CHECK(view.seq_len(0, 16) == 34);
  CHECK(view.seq_len(1, 16) == 16);
  CHECK(view.seq_len(2, 16) == 0);
  // The CSR form reads its ends from indptr[s + 1].
  const std::vector<std::int32_t> indptr{0, 3, 4};
  const PageTableView csr{indptr.data(), indices.data(), last.data(), 2};
  CHECK_FALSE(csr.has_gaps());
  CHECK(csr.page_end(0) == 3);
  CHECK(csr.page_begin(1) == 3);
  CHECK(csr.num_pages(1) == 1);
}
