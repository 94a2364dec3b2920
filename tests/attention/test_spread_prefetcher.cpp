// SPDX-License-Identifier: Apache-2.0
// White-box tests of the CPU decode kernel's spread prefetcher (cpu/detail/spread_prefetcher.hpp):
// the lines it walks for a future tile must be exactly the cache lines holding that tile's K and
// V rows, page table followed, for any page size, row size and tile position. A wrong walk
// cannot change results, only speed, so the numeric tests would never notice it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/attention/cpu/detail/spread_prefetcher.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/rng.hpp>
#include <numeric>
#include <set>
#include <vector>

namespace {

using namespace inferkit;
using detail::KvHeadSource;
using detail::SpreadPrefetcher;

constexpr std::int64_t kLine = 64;

std::uintptr_t line_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p) / kLine; }

template <class KV>
struct Pool {
  std::int32_t block_size, num_kv_heads, head_dim, num_blocks;
  std::vector<KV> k, v;
  std::vector<std::int32_t> pages;

  Pool(std::int32_t bs, std::int32_t heads, std::int32_t dim, std::int32_t blocks, Rng& rng)
      : block_size(bs), num_kv_heads(heads), head_dim(dim), num_blocks(blocks) {
    const auto n = static_cast<std::size_t>(std::int64_t{blocks} * heads * bs * dim);
    k.resize(n);
    v.resize(n);
    pages.resize(static_cast<std::size_t>(blocks));
    std::iota(pages.begin(), pages.end(), 0);
    for (std::size_t i = pages.size(); i > 1; --i) {  // shuffled, as a real block table
      std::swap(pages[i - 1], pages[rng.next_u32() % i]);
    }
  }

  KvHeadSource<const KV> source(std::int32_t head) const {
    KvHeadSource<const KV> src;
    src.block_stride = std::int64_t{num_kv_heads} * block_size * head_dim;
    src.token_stride = head_dim;
    src.k = k.data() + std::int64_t{head} * block_size * head_dim;
    src.v = v.data() + std::int64_t{head} * block_size * head_dim;
    src.pages = pages.data();
    src.block_size = block_size;
    src.num_kv_heads = num_kv_heads;
    src.head = head;
    return src;
  }
};

/// The lines of the K and V rows of tokens [begin, end) (brute force, token by token).
template <class KV>
void expected_lines(const KvHeadSource<const KV>& src, std::int64_t begin, std::int64_t end,
                    std::int32_t head_dim, std::set<std::uintptr_t>& k_lines,
                    std::set<std::uintptr_t>& v_lines) {
  for (std::int64_t t = begin; t < end; ++t) {
    const std::int64_t off =
        src.pages[t / src.block_size] * src.block_stride + (t % src.block_size) * src.token_stride;
    const KV* k = src.k + off;
    const KV* v = src.v + off;
    for (std::uintptr_t l = line_of(k); l <= line_of(k + head_dim - 1); ++l) k_lines.insert(l);
    for (std::uintptr_t l = line_of(v); l <= line_of(v + head_dim - 1); ++l) v_lines.insert(l);
  }
}

template <class KV>
void check_walks_exactly_the_tile(std::int32_t block_size, std::int32_t head_dim, Rng& rng) {
  const std::int32_t heads = 3;
  Pool<KV> pool(block_size, heads, head_dim, 40 / block_size + 4, rng);
  const std::int64_t seq_len =
      std::int64_t{pool.num_blocks - 1} * block_size + 1 + rng.next_u32() % block_size;
  for (int trial = 0; trial < 50; ++trial) {
    const auto head = static_cast<std::int32_t>(rng.next_u32() % heads);
    const auto src = pool.source(head);
    const std::int64_t begin = rng.next_u32() % (seq_len + 4);  // past the end sometimes
    const std::int64_t end = std::min<std::int64_t>(seq_len, begin + detail::kTileTokens);

    SpreadPrefetcher<const KV> pf;
    pf.start(src, begin, seq_len, std::int64_t{sizeof(KV)} * head_dim);
    std::set<std::uintptr_t> k_want, v_want, got;
    expected_lines(src, begin, end, head_dim, k_want, v_want);
    std::set<std::uintptr_t> want = k_want;
    want.insert(v_want.begin(), v_want.end());
    std::int64_t walked = 0;
    const auto record = [&](const char* line) {
      ++walked;
      got.insert(line_of(line));
    };
    // In uneven steps, as the kernel's quota does; in place, or (as the kernels' loops do) on a
    // copied cursor walked a few times and stored back.
    while (!pf.done()) {
      if (rng.next_u32() % 2 == 0) {
        pf.walk(1 + rng.next_u32() % 3, record);
      } else {
        auto cursor = pf.cursor();
        for (std::uint32_t i = rng.next_u32() % 4; i > 0; --i) {
          pf.walk(cursor, 1 + rng.next_u32() % 3, record);
        }
        pf.resume(cursor);
      }
    }
    // pf.lines counts steps of one K and one V line: walking one step at a time takes that many.
    SpreadPrefetcher<const KV> one_by_one;
    one_by_one.start(src, begin, seq_len, std::int64_t{sizeof(KV)} * head_dim);
    std::int64_t steps = 0;
    for (; !one_by_one.done(); ++steps) {
      one_by_one.walk(1, [](const char*) {});
    }
    INFO("block_size " << block_size << " head_dim " << head_dim << " begin " << begin);
    CHECK(got == want);
    CHECK(walked == static_cast<std::int64_t>(want.size()));  // no line twice
    CHECK(steps == pf.lines);
    if (begin >= seq_len) CHECK(pf.lines == 0);
  }
}

}  // namespace

TEST_CASE("SpreadPrefetcher: spread prefetch walks exactly the lines of the future tile",
          "[attention]") {
  Rng rng(2024);
  for (const std::int32_t block_size : {1, 3, 8, 16, 32}) {
    for (const std::int32_t head_dim : {64, 72, 80, 128}) {
      check_walks_exactly_the_tile<float16>(block_size, head_dim, rng);
      check_walks_exactly_the_tile<float>(block_size, head_dim, rng);
      check_walks_exactly_the_tile<std::int8_t>(block_size, head_dim, rng);
    }
  }
}

TEST_CASE("SpreadPrefetcher: spread prefetch of an empty range walks nothing", "[attention]") {
  Rng rng(7);
  Pool<float16> pool(16, 2, 128, 4, rng);
  SpreadPrefetcher<const float16> pf;
  pf.start(pool.source(1), 64, 64, 256);
  std::int64_t walked = 0;
  pf.walk(1000, [&](const char*) { ++walked; });
  CHECK(pf.lines == 0);
  CHECK(walked == 0);
}
