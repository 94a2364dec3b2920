// SPDX-License-Identifier: Apache-2.0
// White-box tests of the CPU attention kernels' paged-KV addressing
// (cpu/detail/kv_head_source.hpp): TileRows::gather must give, for every token of a tile, the K/V
// row addresses and quantization scales that the PagedKVView layout defines, walking a shuffled
// page table across page boundaries, and scale 1 in the lanes past the tile. The expected values
// are computed token by token from PagedKVView::offset / token_scale_index, not from KvHeadSource's
// own arithmetic.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/attention/cpu/detail/kv_head_source.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using namespace inferkit;
using detail::kTileTokens;
using detail::KvHeadSource;
using detail::KvScaleMode;
using detail::TileRows;

using detail::scale_mode_of;

/// One layer's paged K/V (contents irrelevant: only addresses are checked) and a shuffled page
/// table of one sequence. Scale entry i holds i + 0.25 for K and -(i + 0.25) for V (int4's zero
/// points i + 0.5 and -(i + 0.5)), so a value names the entry it came from (exact in fp32 for the
/// sizes here).
template <class KV>
struct Pool {
  PagedKVView<const KV> view;
  std::vector<KV> k, v;
  std::vector<float> k_scale, v_scale;
  std::vector<float> k_zero, v_zero;  ///< packed int4 only
  std::vector<std::int32_t> pages;    ///< the sequence's physical blocks, logical order

  Pool(std::int32_t block_size, std::int32_t heads, std::int32_t head_dim, std::int32_t blocks,
       std::int32_t seq_pages, Rng& rng) {
    view.num_blocks = blocks;
    view.num_kv_heads = heads;
    view.block_size = block_size;
    view.head_dim = head_dim;
    view.packed_int4 = detail::is_packed_int4_v<KV>;
    const auto n = static_cast<std::size_t>(view.block_stride() * blocks);
    k.resize(n);
    v.resize(n);
    view.k = k.data();
    view.v = v.data();
    constexpr KvScaleMode kMode = scale_mode_of<KV>();
    if constexpr (kMode != KvScaleMode::kNone) {
      const std::int64_t entries =
          std::int64_t{blocks} * heads * (kMode == KvScaleMode::kPerToken ? block_size : 1);
      k_scale.resize(static_cast<std::size_t>(entries));
      v_scale.resize(static_cast<std::size_t>(entries));
      for (std::size_t i = 0; i < k_scale.size(); ++i) {
        k_scale[i] = static_cast<float>(i) + 0.25f;
        v_scale[i] = -(static_cast<float>(i) + 0.25f);
      }
      view.k_scale = k_scale.data();
      view.v_scale = v_scale.data();
    }
    if constexpr (detail::is_packed_int4_v<KV>) {
      k_zero.resize(k_scale.size());
      v_zero.resize(k_scale.size());
      for (std::size_t i = 0; i < k_zero.size(); ++i) {
        k_zero[i] = static_cast<float>(i) + 0.5f;
        v_zero[i] = -(static_cast<float>(i) + 0.5f);
      }
      view.k_zero = k_zero.data();
      view.v_zero = v_zero.data();
    }
    std::vector<std::int32_t> perm(static_cast<std::size_t>(blocks));
    std::iota(perm.begin(), perm.end(), 0);
    for (std::size_t i = perm.size(); i > 1; --i) {  // Fisher-Yates: a real, shuffled table
      std::swap(perm[i - 1], perm[rng.below(static_cast<std::uint32_t>(i))]);
    }
    pages.assign(perm.begin(), perm.begin() + seq_pages);
  }
  Pool(const Pool&) = delete;  // view points into k, v and the scales
  Pool& operator=(const Pool&) = delete;

  /// The source the driver builds for KV head `head` (see run_paged_attention).
  KvHeadSource<const KV> source(std::int32_t head) const {
    return detail::make_kv_head_source(view, pages.data(), head);
  }
};

/// Checks one gather of tokens [tok0, tok0 + count) of head `head` against the layout.
template <class KV>
void check_gather(const Pool<KV>& pool, std::int32_t head, std::int64_t tok0, std::int32_t count,
                  const KvHeadSource<const KV>& src) {
  constexpr KvScaleMode kMode = scale_mode_of<KV>();
  TileRows<const KV> tr;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::fill(std::begin(tr.k), std::end(tr.k), nullptr);
  std::fill(std::begin(tr.v), std::end(tr.v), nullptr);
  std::fill(std::begin(tr.k_scale), std::end(tr.k_scale), nan);  // "not written" sentinel
  std::fill(std::begin(tr.v_scale), std::end(tr.v_scale), nan);
  tr.gather(src, tok0, count);
  const std::int32_t bs = pool.view.block_size;
  for (std::int32_t j = 0; j < count; ++j) {
    const std::int64_t tok = tok0 + j;
    const std::int32_t block = pool.pages[static_cast<std::size_t>(tok / bs)];
    const auto slot = static_cast<std::int32_t>(tok % bs);
    const std::int64_t off = pool.view.offset(block, head, slot);
    INFO("block_size " << bs << " head " << head << " tok0 " << tok0 << " count " << count
                       << " lane " << j << " block " << block << " slot " << slot);
    CHECK(tr.k[j] == pool.k.data() + off);
    CHECK(tr.v[j] == pool.v.data() + off);
    if constexpr (kMode != KvScaleMode::kNone) {
      const std::int64_t si = kMode == KvScaleMode::kPerToken
                                  ? pool.view.token_scale_index(block, head, slot)
                                  : std::int64_t{block} * pool.view.num_kv_heads + head;
      const float want_k =
          src.k_scale != nullptr ? pool.k_scale[static_cast<std::size_t>(si)] : 1.0f;
      const float want_v =
          src.v_scale != nullptr ? pool.v_scale[static_cast<std::size_t>(si)] : 1.0f;
      CHECK(tr.k_scale[j] == want_k);
      CHECK(tr.v_scale[j] == want_v);
      if constexpr (TileRows<const KV>::kZeroPoints) {
        CHECK(tr.k_zero[j] == pool.k_zero[static_cast<std::size_t>(si)]);
        CHECK(tr.v_zero[j] == pool.v_zero[static_cast<std::size_t>(si)]);
      }
    }
  }
  if constexpr (kMode != KvScaleMode::kNone) {
    // The kernel multiplies all 16 score lanes by k_scale and p lanes by v_scale: lanes past the
    // tile must be exactly 1 (finite, neutral), whatever the tile held before.
    for (std::int32_t j = count; j < kTileTokens; ++j) {
      INFO("tok0 " << tok0 << " count " << count << " lane " << j);
      CHECK(tr.k_scale[j] == 1.0f);
      CHECK(tr.v_scale[j] == 1.0f);
      if constexpr (TileRows<const KV>::kZeroPoints) {  // and zero points exactly 0
        CHECK(tr.k_zero[j] == 0.0f);
        CHECK(tr.v_zero[j] == 0.0f);
      }
    }
  }
}

template <class KV>
void check_gather_tiles(std::int32_t block_size, std::int32_t head_dim, Rng& rng) {
  const std::int32_t heads = 3;
  // About 100 tokens: several 16-token tiles, and many pages for small block sizes.
  const std::int64_t seq_len = 70 + rng.below(60);
  const auto seq_pages = static_cast<std::int32_t>((seq_len + block_size - 1) / block_size);
  const Pool<KV> pool(block_size, heads, head_dim, seq_pages + 5, seq_pages, rng);
  for (int trial = 0; trial < 150; ++trial) {
    const auto head = static_cast<std::int32_t>(rng.below(heads));
    std::int64_t tok0 = rng.below(static_cast<std::uint32_t>(seq_len));
    if (trial % 5 == 0) tok0 = tok0 / block_size * block_size;            // at a page start
    if (trial % 5 == 1) tok0 = (tok0 / block_size + 1) * block_size - 1;  // a page's last slot
    tok0 = std::min(tok0, seq_len - 1);
    const std::int64_t left = std::min<std::int64_t>(kTileTokens, seq_len - tok0);
    // Mostly full tiles (the common case), else any shorter count, including 1.
    const auto count = static_cast<std::int32_t>(
        trial % 2 == 0 ? left : 1 + rng.below(static_cast<std::uint32_t>(left)));
    auto src = pool.source(head);
    check_gather(pool, head, tok0, count, src);
    if constexpr (scale_mode_of<KV>() != KvScaleMode::kNone) {
      if (trial % 7 == 0) {  // a scaled type without scale arrays: scale 1
        src.k_scale = nullptr;
        src.v_scale = nullptr;
        check_gather(pool, head, tok0, count, src);
      }
    }
  }
  // Every tile of the sequence, in order, as the kernel walks it.
  const auto src = pool.source(heads - 1);
  for (std::int64_t tok0 = 0; tok0 < seq_len; tok0 += kTileTokens) {
    check_gather(pool, heads - 1, tok0,
                 static_cast<std::int32_t>(std::min<std::int64_t>(kTileTokens, seq_len - tok0)),
                 src);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("TileRows: gather matches the paged layout token by token", "[attention]",
                   float16, float8_e4m3, std::int8_t, std::uint8_t) {
  // float16: no scales; float8_e4m3: one scale per (block, head); int8: one per token; packed
  // int4: a scale and a zero point per token.
  Rng rng(std::is_same_v<TestType, float16> ? 101 : (sizeof(TestType) == 1 ? 103 : 107));
  for (const std::int32_t block_size : {1, 3, 16, 32}) {
    for (const std::int32_t head_dim : {8, 72}) {
      check_gather_tiles<TestType>(block_size, head_dim, rng);
    }
  }
}

TEST_CASE("KvHeadSource: scale_index addresses per block-head and per token scales",
          "[attention]") {
  Rng rng(109);
  for (int trial = 0; trial < 500; ++trial) {
    PagedKVView<const std::int8_t> view;
    view.num_kv_heads = 1 + static_cast<std::int32_t>(rng.below(16));
    view.block_size = 1 + static_cast<std::int32_t>(rng.below(64));
    // Block ids up to 2^30: (block * heads + head) * block_size overflows 32 bits.
    const auto block =
        static_cast<std::int32_t>(trial % 2 == 0 ? rng.below(1000) : rng.below(1u << 30));
    const auto head =
        static_cast<std::int32_t>(rng.below(static_cast<std::uint32_t>(view.num_kv_heads)));
    const auto slot =
        static_cast<std::int32_t>(rng.below(static_cast<std::uint32_t>(view.block_size)));
    KvHeadSource<const std::int8_t> src;
    src.num_kv_heads = view.num_kv_heads;
    src.block_size = view.block_size;
    src.head = head;
    INFO("heads " << view.num_kv_heads << " block_size " << view.block_size << " block " << block
                  << " head " << head << " slot " << slot);
    src.scale_mode = KvScaleMode::kPerToken;
    CHECK(src.scale_index(block, slot) == view.token_scale_index(block, head, slot));
    src.scale_mode = KvScaleMode::kPerBlockHead;  // the slot does not matter
    CHECK(src.scale_index(block, slot) == std::int64_t{block} * view.num_kv_heads + head);
    CHECK(src.scale_index(block, 0) == src.scale_index(block, slot));
  }
}
