// SPDX-License-Identifier: Apache-2.0
// Tests for kv/paged_kv_cache.hpp: append through slot mappings then gather matches the input
// within each storage type's error bound (fp32 exact, fp16/bf16 rounding, fp8 block scale,
// int8/int4 per-token scales); fp16 / bf16 input, packed or read in place from a fused QKV
// buffer through a row stride, stores the bits of its fp32 conversion in every storage type;
// the view layout; copy-on-write through copy_blocks; recycled blocks; padding slots; and bad
// arguments (row strides included) leaving the storage unchanged.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace inferkit;

namespace {

std::vector<float> random_values(Rng& rng, std::size_t n, float magnitude) {
  std::vector<float> x(n);
  for (float& v : x) v = (2.0f * rng.uniform() - 1.0f) * magnitude;
  return x;
}

// The bound on |stored - original| for element e of token position p, head h.
template <class T>
float error_bound(const PagedKVView<const T>& view, bool is_k, BlockId block, std::int32_t h,
                  std::int32_t slot, float x) {
  const float* scale = is_k ? view.k_scale : view.v_scale;
  constexpr KVQuantization kScheme = KVStorageTraits<T>::kScheme;
  if constexpr (std::is_same_v<T, float>) {
    return 0.0f;
  } else if constexpr (std::is_same_v<T, float16>) {
    return 0x1p-11f * std::fabs(x) + 0x1p-25f;
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return 0x1p-8f * std::fabs(x);
  } else if constexpr (kScheme == KVQuantization::kFp8BlockScale) {
    const float s = scale[std::int64_t{block} * view.num_kv_heads + h];
    const bool e4m3 = std::is_same_v<T, float8_e4m3>;
    // Initial rounding plus the subnormal rounding of each power-of-two rescale (geometric).
    return (e4m3 ? 0x1p-4f : 0x1p-3f) * std::fabs(x) + (e4m3 ? 0x1p-9f : 0x1p-16f) * s;
  } else {  // int8 / int4: half a step of the token's scale
    return 0.5f * scale[view.token_scale_index(block, h, slot)] * (1.0f + 1e-4f) + 1e-6f;
  }
}

// Appends `n` random tokens to `table` in chunks, then checks gather against the inputs.
template <class T>
void check_round_trip(std::int32_t num_kv_heads, std::int32_t head_dim, std::uint64_t seed) {
  const PagedKVCacheShape shape{2, 24, 16, num_kv_heads, head_dim};
  PagedKVCache<T> cache(shape);
  BlockAllocator allocator(shape.num_blocks, shape.block_size);
  Rng rng(seed);
  const std::size_t per_token = static_cast<std::size_t>(num_kv_heads) * head_dim;
  std::vector<BlockCopy> copies;
  for (std::int64_t len : {std::int64_t{1}, std::int64_t{16}, std::int64_t{53}}) {
    BlockTable table(shape.block_size);
    std::vector<std::vector<float>> k_ref(2), v_ref(2);
    std::int64_t done = 0;
    while (done < len) {
      // A prefill chunk, then decode steps of one token with a growing magnitude (fp8 rescale).
      const std::int64_t chunk = done == 0 ? std::min<std::int64_t>(len, 7) : 1;
      std::vector<std::int64_t> slots(static_cast<std::size_t>(chunk));
      REQUIRE(table.append_tokens(allocator, chunk, slots, copies));
      for (std::int32_t layer = 0; layer < 2; ++layer) {
        const float magnitude = 0.5f + static_cast<float>(done);
        const auto k = random_values(rng, slots.size() * per_token, magnitude);
        const auto v = random_values(rng, slots.size() * per_token, 1.0f);
        cache.append(layer, slots, k, v);
        auto& kr = k_ref[static_cast<std::size_t>(layer)];
        auto& vr = v_ref[static_cast<std::size_t>(layer)];
        kr.insert(kr.end(), k.begin(), k.end());
        vr.insert(vr.end(), v.begin(), v.end());
      }
      done += chunk;
    }
    for (std::int32_t layer = 0; layer < 2; ++layer) {
      std::vector<float> k(static_cast<std::size_t>(len) * per_token);
      std::vector<float> v(k.size());
      cache.gather(layer, table, k, v);
      const PagedKVView<const T> view = std::as_const(cache).view(layer);
      const auto& kr = k_ref[static_cast<std::size_t>(layer)];
      const auto& vr = v_ref[static_cast<std::size_t>(layer)];
      for (std::int64_t p = 0; p < len; ++p) {
        const BlockId block = table.blocks()[static_cast<std::size_t>(p / shape.block_size)];
        const auto slot = static_cast<std::int32_t>(p % shape.block_size);
        for (std::int32_t h = 0; h < num_kv_heads; ++h) {
          for (std::int32_t e = 0; e < head_dim; ++e) {
            const std::size_t i = (static_cast<std::size_t>(p) * num_kv_heads + h) * head_dim + e;
            REQUIRE(std::fabs(k[i] - kr[i]) <= error_bound<T>(view, true, block, h, slot, kr[i]));
            REQUIRE(std::fabs(v[i] - vr[i]) <= error_bound<T>(view, false, block, h, slot, vr[i]));
          }
        }
      }
    }
    table.release(allocator);
  }
  CHECK(copies.empty());
}

}  // namespace

TEMPLATE_TEST_CASE("PagedKVCache: append then gather round-trips within the storage type's bound",
                   "[kv][paged_kv_cache]", float, float16, bfloat16, float8_e4m3, float8_e5m2,
                   std::int8_t, std::uint8_t) {
  SECTION("one head of 64") { check_round_trip<TestType>(1, 64, 21); }
  SECTION("four heads of 128") { check_round_trip<TestType>(4, 128, 22); }
  SECTION("eight heads of 64") { check_round_trip<TestType>(8, 64, 23); }
}

// One append large enough to run on threads (kParallelAppendElements) against the same tokens
// appended one call each (serial): every stored element and scale must be the same. `seqs`
// sequences of `tokens` (<= 32) tokens in 2 blocks each, growing magnitudes (fp8 blocks rescale
// as they fill), sequence-major like a chunked prefill or, `interleaved`, position-major like
// stacked decode steps (then an fp8 block has tokens in every thread's chunk of the token list,
// which takes the other thread split). 15 x 22 tokens put the middle of the token list inside
// a block, which moves the 2-thread chunk boundary to that block's end.
template <class T>
void check_large_append_matches_single_tokens(bool interleaved, std::int64_t seqs = 16,
                                              std::int64_t tokens = 20) {
  const PagedKVCacheShape shape{1, 32, 16, 8, 128};
  PagedKVCache<T> big(shape), single(shape);
  Rng rng(77);
  REQUIRE((seqs <= 16 && tokens <= 32));
  const auto per_token = static_cast<std::size_t>(shape.num_kv_heads) * shape.head_dim;
  std::vector<std::int64_t> slots;
  std::vector<float> k, v;
  for (std::int64_t outer = 0; outer < (interleaved ? tokens : seqs); ++outer) {
    for (std::int64_t inner = 0; inner < (interleaved ? seqs : tokens); ++inner) {
      const std::int64_t s = interleaved ? inner : outer;
      const std::int64_t p = interleaved ? outer : inner;
      slots.push_back(s * 2 * shape.block_size + p);
      const auto kt = random_values(rng, per_token, 0.5f + static_cast<float>(p));
      const auto vt = random_values(rng, per_token, 1.0f + 0.25f * static_cast<float>(p));
      k.insert(k.end(), kt.begin(), kt.end());
      v.insert(v.end(), vt.begin(), vt.end());
    }
  }
  REQUIRE(slots.size() * per_token >= (std::size_t{1} << 16));  // the threaded path
  big.append(0, slots, k, v);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    single.append(0, std::span<const std::int64_t>(&slots[i], 1),
                  std::span<const float>(&k[i * per_token], per_token),
                  std::span<const float>(&v[i * per_token], per_token));
  }
  std::vector<BlockId> all(static_cast<std::size_t>(shape.num_blocks));
  for (std::size_t b = 0; b < all.size(); ++b) all[b] = static_cast<BlockId>(b);
  const std::size_t n = all.size() * shape.block_size * per_token;
  std::vector<float> bk(n), bv(n), sk(n), sv(n);
  big.gather(0, all, shape.num_blocks * shape.block_size, bk, bv);
  single.gather(0, all, shape.num_blocks * shape.block_size, sk, sv);
  CHECK(std::memcmp(bk.data(), sk.data(), n * sizeof(float)) == 0);
  CHECK(std::memcmp(bv.data(), sv.data(), n * sizeof(float)) == 0);
}

TEMPLATE_TEST_CASE(
    "PagedKVCache: a large append (split over threads) stores the bits of one-token "
    "appends",
    "[kv][paged_kv_cache]", float, float16, bfloat16, float8_e4m3, float8_e5m2, std::int8_t,
    std::uint8_t) {
  SECTION("sequence-major") { check_large_append_matches_single_tokens<TestType>(false); }
  SECTION("position-major") { check_large_append_matches_single_tokens<TestType>(true); }
  SECTION("sequence-major, the middle token inside a block") {
    check_large_append_matches_single_tokens<TestType>(false, 15, 22);
  }
}

namespace {

// Every stored byte of layer `layer`: K and V pages, then the scales and zero points there are.
template <class T>
std::vector<unsigned char> stored_bytes(const PagedKVCache<T>& cache, std::int32_t layer) {
  const PagedKVView<const T> view = cache.view(layer);
  const auto n = static_cast<std::size_t>(view.block_stride() * view.num_blocks);
  std::vector<unsigned char> bytes;
  const auto add = [&](const void* p, std::size_t count) {
    const auto* b = static_cast<const unsigned char*>(p);
    bytes.insert(bytes.end(), b, b + count);
  };
  add(view.k, n * sizeof(T));
  add(view.v, n * sizeof(T));
  constexpr KVQuantization kScheme = KVStorageTraits<T>::kScheme;
  std::size_t scales = 0;
  if constexpr (kScheme == KVQuantization::kFp8BlockScale) {
    scales =
        static_cast<std::size_t>(view.num_blocks) * static_cast<std::size_t>(view.num_kv_heads);
  } else if constexpr (kScheme != KVQuantization::kNone) {
    scales = static_cast<std::size_t>(view.num_blocks) *
             static_cast<std::size_t>(view.num_kv_heads) *
             static_cast<std::size_t>(view.block_size);
  }
  if (scales != 0) {
    add(view.k_scale, scales * sizeof(float));
    add(view.v_scale, scales * sizeof(float));
  }
  if (view.k_zero != nullptr) {
    add(view.k_zero, scales * sizeof(float));
    add(view.v_zero, scales * sizeof(float));
  }
  return bytes;
}

// The engine's fused QKV layout of `In`: per token num_q_heads q heads, then the k heads, then
// the v heads, random values of growing magnitude (fp8 blocks rescale as they fill).
template <class In>
std::vector<In> fused_qkv(Rng& rng, std::int64_t tokens, std::int64_t row,
                          std::int64_t first_position) {
  std::vector<In> x(static_cast<std::size_t>(tokens * row));
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float magnitude = 0.5f + 0.1f * static_cast<float>(first_position + t);
    for (std::int64_t e = 0; e < row; ++e) {
      x[static_cast<std::size_t>(t * row + e)] = In((2.0f * rng.uniform() - 1.0f) * magnitude);
    }
  }
  return x;
}

// k (or v) of a fused buffer, packed [tokens][kv_heads * head_dim], in `Out`.
template <class Out, class In>
std::vector<Out> packed_part(const std::vector<In>& fused, std::int64_t row, std::int64_t offset,
                             std::int64_t width) {
  std::vector<Out> out;
  for (std::size_t t = 0; t < fused.size() / static_cast<std::size_t>(row); ++t) {
    for (std::int64_t e = 0; e < width; ++e) {
      out.push_back(static_cast<Out>(
          fused[t * static_cast<std::size_t>(row) + static_cast<std::size_t>(offset + e)]));
    }
  }
  return out;
}

// Appends the same tokens to three caches: from fp32 conversions of `In` rows (the reference),
// from packed `In` rows, and from `In` rows read in place from a fused QKV buffer through the
// row stride; all three must hold the same bytes. A prefill chunk, decode steps, a padding slot,
// then a chunk large enough to split over threads, into two layers.
template <class T, class In>
void check_16bit_and_strided_append(std::int32_t kv_heads, std::int32_t head_dim,
                                    std::uint64_t seed) {
  const PagedKVCacheShape shape{2, 40, 16, kv_heads, head_dim};
  PagedKVCache<T> want(shape), packed(shape), strided(shape);
  BlockAllocator allocator(shape.num_blocks, shape.block_size);
  BlockTable table(shape.block_size);
  std::vector<BlockCopy> copies;
  Rng rng(seed);
  constexpr std::int64_t kQHeads = 8;
  const std::int64_t width = std::int64_t{kv_heads} * head_dim;
  const std::int64_t row = kQHeads * head_dim + 2 * width;
  std::int64_t position = 0;
  for (const std::int64_t chunk : {7, 1, 1, 1, 300}) {
    std::vector<std::int64_t> slots(static_cast<std::size_t>(chunk));
    REQUIRE(table.append_tokens(allocator, chunk, slots, copies));
    if (chunk == 7) slots[3] = -1;  // a padding token
    for (std::int32_t layer = 0; layer < 2; ++layer) {
      const std::vector<In> fused = fused_qkv<In>(rng, chunk, row, position);
      const std::int64_t k_at = kQHeads * head_dim;
      const std::int64_t v_at = k_at + width;
      want.append(layer, slots, packed_part<float>(fused, row, k_at, width),
                  packed_part<float>(fused, row, v_at, width));
      packed.append(layer, slots, packed_part<In>(fused, row, k_at, width),
                    packed_part<In>(fused, row, v_at, width));
      // The spans end at their last token's row: the extent the row stride needs, no more.
      const auto extent = static_cast<std::size_t>((chunk - 1) * row + width);
      strided.append(layer, slots, std::span<const In>(fused.data() + k_at, extent),
                     std::span<const In>(fused.data() + v_at, extent), row);
      INFO("chunk " << chunk << " layer " << layer);
      const auto reference = stored_bytes(std::as_const(want), layer);
      CHECK(stored_bytes(std::as_const(packed), layer) == reference);
      CHECK(stored_bytes(std::as_const(strided), layer) == reference);
    }
    position += chunk;
  }
}

}  // namespace

TEMPLATE_TEST_CASE(
    "PagedKVCache: fp16 and bf16 K/V, packed or read in place from a fused QKV buffer, store "
    "the bits of their fp32 conversion",
    "[kv][paged_kv_cache]", float, float16, bfloat16, float8_e4m3, float8_e5m2, std::int8_t,
    std::uint8_t) {
  SECTION("fp16 input, 2 heads of 64") {
    check_16bit_and_strided_append<TestType, float16>(2, 64, 31);
  }
  SECTION("bf16 input, 2 heads of 128") {
    check_16bit_and_strided_append<TestType, bfloat16>(2, 128, 32);
  }
  SECTION("fp16 input, 4 heads of 128") {
    check_16bit_and_strided_append<TestType, float16>(4, 128, 33);
  }
  SECTION("bf16 input, 8 heads of 64") {
    check_16bit_and_strided_append<TestType, bfloat16>(8, 64, 34);
  }
  SECTION("fp32 input read in place, 2 heads of 64") {
    check_16bit_and_strided_append<TestType, float>(2, 64, 35);
  }
}

TEST_CASE("PagedKVCache: the view layout is blocks then heads then slots then head_dim",
          "[kv][paged_kv_cache]") {
  const PagedKVCacheShape shape{3, 5, 4, 2, 8};
  PagedKVCache<float> cache(shape);
  const std::vector<std::int64_t> slots{13, 2};  // block 3 slot 1, block 0 slot 2
  std::vector<float> k(2 * 2 * 8), v(k.size());
  for (std::size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<float>(i);
    v[i] = -static_cast<float>(i);
  }
  cache.append(1, slots, k, v);
  const PagedKVView<float> view = cache.view(1);
  CHECK(view.num_blocks == 5);
  CHECK(view.block_stride() == 2 * 4 * 8);
  CHECK(view.k_scale == nullptr);
  for (std::int32_t t = 0; t < 2; ++t) {
    const auto block = static_cast<std::int32_t>(slots[static_cast<std::size_t>(t)] / 4);
    const auto slot = static_cast<std::int32_t>(slots[static_cast<std::size_t>(t)] % 4);
    for (std::int32_t h = 0; h < 2; ++h) {
      for (std::int32_t e = 0; e < 8; ++e) {
        const float want = static_cast<float>((t * 2 + h) * 8 + e);
        CHECK(view.k[view.offset(block, h, slot) + e] == want);
        CHECK(view.v[view.offset(block, h, slot) + e] == -want);
      }
    }
  }
  // Other layers are untouched.
  const PagedKVView<float> other = cache.view(0);
  CHECK(other.k[other.offset(3, 0, 1)] == 0.0f);
  CHECK(cache.memory_bytes() == 2 * 3 * 5 * 2 * 4 * 8 * 4);
}

TEST_CASE("PagedKVCache: int4 view packs two elements per byte with per-token scale and zero",
          "[kv][paged_kv_cache]") {
  PagedKVCache<std::uint8_t> cache(PagedKVCacheShape{1, 2, 4, 1, 4});
  const std::vector<std::int64_t> slots{5};
  const std::vector<float> k{0.0f, 1.0f, 2.0f, 15.0f};
  cache.append(0, slots, k, k);
  const auto view = cache.view(0);
  CHECK(view.packed_int4);
  CHECK(view.token_stride() == 2);
  const std::int64_t at = view.token_scale_index(1, 0, 1);
  CHECK(view.k_scale[at] == 1.0f);
  CHECK(view.k_zero[at] == 0.0f);
  CHECK(view.k[view.offset(1, 0, 1)] == pack_nibbles(0, 1));
  CHECK(view.k[view.offset(1, 0, 1) + 1] == pack_nibbles(2, 15));
  CHECK_THROWS_AS(PagedKVCache<std::uint8_t>(PagedKVCacheShape{1, 2, 4, 1, 5}), Error);
}

TEMPLATE_TEST_CASE("PagedKVCache: copy-on-write copies used slots and leaves the parent intact",
                   "[kv][paged_kv_cache]", float, float8_e4m3, std::int8_t, std::uint8_t) {
  const PagedKVCacheShape shape{2, 8, 4, 2, 16};
  PagedKVCache<TestType> cache(shape);
  BlockAllocator allocator(shape.num_blocks, shape.block_size);
  Rng rng(31);
  const std::size_t per_token = 2 * 16;
  std::vector<BlockCopy> copies;
  auto append = [&](BlockTable& t, std::int64_t n) {
    std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
    REQUIRE(t.append_tokens(allocator, n, slots, copies));
    cache.copy_blocks(copies);  // before writing the new tokens
    copies.clear();
    for (std::int32_t layer = 0; layer < 2; ++layer) {
      const auto k = random_values(rng, slots.size() * per_token, 3.0f);
      const auto v = random_values(rng, slots.size() * per_token, 3.0f);
      cache.append(layer, slots, k, v);
    }
  };
  auto gather = [&](const BlockTable& t, std::int32_t layer) {
    std::vector<float> k(static_cast<std::size_t>(t.num_tokens()) * per_token);
    std::vector<float> v(k.size());
    cache.gather(layer, t, k, v);
    k.insert(k.end(), v.begin(), v.end());
    return k;
  };
  BlockTable parent(shape.block_size);
  append(parent, 6);
  const auto parent_l0 = gather(parent, 0);
  const auto parent_l1 = gather(parent, 1);
  BlockTable child = parent.fork(allocator);
  append(child, 3);  // copies 2 slots of the shared tail, then writes 3 tokens
  CHECK(gather(parent, 0) == parent_l0);
  CHECK(gather(parent, 1) == parent_l1);
  for (std::int32_t layer = 0; layer < 2; ++layer) {
    const auto c = gather(child, layer);
    const auto& p = layer == 0 ? parent_l0 : parent_l1;
    const std::size_t n = 6 * per_token;  // the shared prefix reads back identically
    const std::size_t child_k = 9 * per_token;
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(c[i] == p[i]);
      REQUIRE(c[child_k + i] == p[n + i]);
    }
  }
  parent.release(allocator);
  child.release(allocator);
}

TEST_CASE("PagedKVCache: a recycled fp8 block starts a fresh scale at slot 0",
          "[kv][paged_kv_cache]") {
  PagedKVCache<float8_e4m3> cache(PagedKVCacheShape{1, 1, 4, 1, 8});
  const std::vector<std::int64_t> slots{0, 1};
  const std::vector<float> big(16, 1000.0f);
  cache.append(0, slots, big, big);
  CHECK(cache.view(0).k_scale[0] >= 1000.0f / 448.0f);
  // The block is freed and reused by a sequence with small values.
  std::vector<float> small(16);
  for (std::size_t i = 0; i < small.size(); ++i) small[i] = 0.001f * static_cast<float>(i + 1);
  cache.append(0, slots, small, small);
  std::vector<float> k(16), v(16);
  const std::vector<BlockId> blocks{0};
  cache.gather(0, blocks, 2, k, v);
  for (std::size_t i = 0; i < small.size(); ++i) {
    CHECK(std::fabs(k[i] - small[i]) <= 0x1p-4f * small[i] + 1e-7f);
  }
  SECTION("a later larger token rescales the earlier slots") {
    const std::vector<std::int64_t> third{2};
    const std::vector<float> large(8, 5.0f);
    cache.append(0, third, large, large);
    std::vector<float> k3(24), v3(24);
    cache.gather(0, blocks, 3, k3, v3);
    const float s = cache.view(0).k_scale[0];
    for (std::size_t i = 0; i < 16; ++i) {
      CHECK(std::fabs(k3[i] - small[i]) <= 0x1p-4f * small[i] + 0x1p-9f * s);
    }
    for (std::size_t i = 16; i < 24; ++i) CHECK(k3[i] == 5.0f);
  }
}

TEST_CASE("PagedKVCache: padding slots are skipped and unquantized storage copies elements",
          "[kv][paged_kv_cache]") {
  PagedKVCache<float16> cache(PagedKVCacheShape{1, 2, 2, 1, 4});
  const std::vector<std::int64_t> slots{-1, 3};
  std::vector<float16> k(8), v(8);
  for (std::size_t i = 0; i < 8; ++i) {
    k[i] = float16(static_cast<float>(i));
    v[i] = float16(-static_cast<float>(i));
  }
  cache.append_elements(0, slots, k, v);
  const auto view = cache.view(0);
  for (std::int32_t e = 0; e < 4; ++e) {
    CHECK(static_cast<float>(view.k[view.offset(1, 0, 1) + e]) == static_cast<float>(4 + e));
    CHECK(static_cast<float>(view.v[view.offset(1, 0, 1) + e]) == -static_cast<float>(4 + e));
    CHECK(static_cast<float>(view.k[view.offset(0, 0, 0) + e]) == 0.0f);
  }
}

TEST_CASE("PagedKVCache: copy_blocks validates every copy before running any",
          "[kv][paged_kv_cache]") {
  PagedKVCache<float> cache(PagedKVCacheShape{2, 4, 4, 1, 8});
  Rng rng(5);
  const std::vector<std::int64_t> slots{0, 1, 2, 3};
  for (std::int32_t layer = 0; layer < 2; ++layer) {
    const auto kv = random_values(rng, 4 * 8, 1.0f);
    cache.append(layer, slots, kv, kv);
  }
  auto raw = [&] {
    std::vector<float> bytes;
    for (std::int32_t layer = 0; layer < 2; ++layer) {
      const auto view = std::as_const(cache).view(layer);
      const auto n = static_cast<std::size_t>(view.block_stride() * view.num_blocks);
      bytes.insert(bytes.end(), view.k, view.k + n);
      bytes.insert(bytes.end(), view.v, view.v + n);
    }
    return bytes;
  };
  const auto before = raw();
  const std::vector<BlockCopy> bad_id{{0, 1, 4}, {0, 9, 1}};
  CHECK_THROWS_AS(cache.copy_blocks(bad_id), Error);
  const std::vector<BlockCopy> bad_slots{{0, 1, 4}, {0, 2, 5}};
  CHECK_THROWS_AS(cache.copy_blocks(bad_slots), Error);
  CHECK(raw() == before);  // the valid first copy did not run
  const std::vector<BlockCopy> good{{0, 1, 4}};
  cache.copy_blocks(good);
  CHECK(raw() != before);
}

TEST_CASE("PagedKVCache: K/V viewing the cache itself are read as they were before the append",
          "[kv][paged_kv_cache]") {
  const PagedKVCacheShape shape{1, 2, 4, 1, 8};
  const std::vector<std::int64_t> first{0};
  const std::vector<std::int64_t> next{1, 2};
  std::vector<float> k0(8), v0(8);
  for (std::size_t e = 0; e < 8; ++e) {
    k0[e] = static_cast<float>(e + 1);
    v0[e] = -static_cast<float>(e + 1);
  }
  // Slots 0 and 1 of block 0 (1 unwritten: zeros), appended at slots 1 and 2: the second token
  // must read slot 1 before the first token overwrites it.
  auto expect = [&](auto& cache) {
    std::vector<float> k(24), v(24);
    const std::vector<BlockId> blocks{0};
    cache.gather(0, blocks, 3, k, v);
    for (std::size_t e = 0; e < 8; ++e) {
      CHECK(k[e] == k0[e]);
      CHECK(k[8 + e] == k0[e]);
      CHECK(k[16 + e] == 0.0f);
      CHECK(v[8 + e] == v0[e]);
      CHECK(v[16 + e] == 0.0f);
    }
  };
  SECTION("append from float") {
    PagedKVCache<float> cache(shape);
    cache.append(0, first, k0, v0);
    const auto view = cache.view(0);
    cache.append(0, next, std::span<const float>(view.k, 16), std::span<const float>(view.v, 16));
    expect(cache);
    SECTION("gathering into the cache's own storage is refused") {
      std::vector<float> out(16);
      const std::vector<BlockId> blocks{0};
      CHECK_THROWS_AS(cache.gather(0, blocks, 2, std::span<float>(view.k + 8, 16), out), Error);
      CHECK_THROWS_AS(cache.gather(0, blocks, 2, out, std::span<float>(view.v, 16)), Error);
      expect(cache);
    }
  }
  SECTION("append_elements") {
    PagedKVCache<float16> cache(shape);
    cache.append(0, first, k0, v0);
    const auto view = cache.view(0);
    cache.append_elements(0, next, std::span<const float16>(view.k, 16),
                          std::span<const float16>(view.v, 16));
    expect(cache);
  }
}

TEST_CASE("PagedKVCache: bad arguments throw and leave the storage unchanged",
          "[kv][paged_kv_cache]") {
  const PagedKVCacheShape shape{2, 4, 4, 2, 8};
  PagedKVCache<std::int8_t> cache(shape);
  Rng rng(3);
  const std::vector<std::int64_t> ok_slots{0, 5};
  const auto kv = random_values(rng, 2 * 2 * 8, 1.0f);
  cache.append(0, ok_slots, kv, kv);
  auto raw = [&] {
    const auto view = std::as_const(cache).view(0);
    const auto n = static_cast<std::size_t>(view.block_stride() * view.num_blocks);
    std::vector<std::int8_t> bytes(view.k, view.k + n);
    bytes.insert(bytes.end(), view.v, view.v + n);
    for (std::size_t i = 0; i < 4 * 2 * 4; ++i) {
      bytes.push_back(static_cast<std::int8_t>(view.k_scale[i] * 100.0f));
    }
    return bytes;
  };
  const auto before = raw();
  auto expect = [&](ErrorCode code, auto&& f) {
    try {
      f();
      FAIL("expected inferkit::Error");
    } catch (const Error& e) {
      CHECK(e.code() == code);
    }
    CHECK(raw() == before);
  };
  const std::vector<std::int64_t> bad_slots{1, 16};  // the second is out of range
  expect(ErrorCode::kOutOfRange, [&] { cache.append(0, bad_slots, kv, kv); });
  expect(ErrorCode::kOutOfRange, [&] { cache.append(2, ok_slots, kv, kv); });
  const std::vector<float> short_kv(kv.begin(), kv.end() - 1);
  expect(ErrorCode::kInvalidArgument, [&] { cache.append(0, ok_slots, short_kv, kv); });
  expect(ErrorCode::kInvalidArgument, [&] { cache.append(0, ok_slots, kv, short_kv); });
  expect(ErrorCode::kOutOfRange, [&] { cache.copy_block(0, 4, 1); });
  expect(ErrorCode::kOutOfRange, [&] { cache.copy_block(0, 1, 5); });
  std::vector<float> k(2 * 2 * 8), v(k.size());
  const std::vector<BlockId> blocks{0};
  expect(ErrorCode::kOutOfRange, [&] { cache.gather(0, blocks, 5, k, v); });
  const std::vector<BlockId> bad_blocks{7};
  expect(ErrorCode::kOutOfRange, [&] { cache.gather(0, bad_blocks, 2, k, v); });
  expect(ErrorCode::kInvalidArgument, [&] { cache.gather(0, blocks, 1, k, v); });
  CHECK_THROWS_AS(PagedKVCache<float>(PagedKVCacheShape{0, 1, 1, 1, 1}), Error);
  CHECK_THROWS_AS(PagedKVCache<float>(PagedKVCacheShape{1, 1, 0, 1, 1}), Error);
  // Row strides: below a packed row, or spans that stop before their last token's row.
  const auto kv16 = std::vector<float16>(kv.size(), float16(0.5f));
  std::string message;
  expect(ErrorCode::kInvalidArgument, [&] {
    try {
      cache.append(0, ok_slots, kv, kv, 15);
    } catch (const Error& e) {
      message = e.what();
      throw;
    }
  });
  CHECK_THAT(message, Catch::Contains("row_stride = 15") && Catch::Contains("= 16"));
  expect(ErrorCode::kInvalidArgument, [&] { cache.append(0, ok_slots, kv16, kv16, -16); });
  const std::vector<bfloat16> strided(16 + 20, bfloat16(0.25f));  // 2 rows 20 apart: 36
  expect(ErrorCode::kInvalidArgument, [&] {
    try {
      cache.append(0, ok_slots, std::span<const bfloat16>(strided).first(35), strided, 20);
    } catch (const Error& e) {
      message = e.what();
      throw;
    }
  });
  CHECK_THAT(message, Catch::Contains("k.size() = 35") && Catch::Contains("row_stride = 20"));
  expect(ErrorCode::kInvalidArgument, [&] {
    cache.append(0, ok_slots, strided, std::span<const bfloat16>(strided).first(35), 20);
  });
  expect(ErrorCode::kOutOfRange, [&] { cache.append(0, bad_slots, strided, strided, 20); });
  cache.append(0, ok_slots, strided, strided, 20);  // the exact extent is enough
  CHECK(raw() != before);
}
