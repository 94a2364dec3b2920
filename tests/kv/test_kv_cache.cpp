// SPDX-License-Identifier: Apache-2.0
// Tests for kv/kv_cache.hpp: KVCache against a brute-force per-layer token list (chunked appends,
// per-head spans, gather, views, truncate, clear, byte counts), its errors with state unchanged,
// and a small random transformer decoded with and without the cache (same logits and tokens; K/V
// projections P + 64 versus the triangular number).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/attention/reference.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/kv_cache.hpp>
#include <span>
#include <string>
#include <tests/support/error_code.hpp>
#include <vector>

using inferkit::Error;
using inferkit::ErrorCode;
using inferkit::KVCache;
using inferkit::Rng;

using inferkit::test::code_of;

namespace {

#if defined(INFERKIT_TEST_SANITIZED) && INFERKIT_TEST_SANITIZED
constexpr int kTrials = 5;
#else
constexpr int kTrials = 40;
#endif

std::size_t sz(std::int64_t n) { return static_cast<std::size_t>(n); }

template <class T>
std::vector<T> random_values(Rng& rng, std::int64_t n) {
  std::vector<T> x(sz(n));
  for (auto& e : x) e = static_cast<T>(rng.uniform_double() * 2.0 - 1.0);
  return x;
}

// Brute-force model of the cache: per layer, the token-major K and V appended so far.
template <class T>
struct ModelCache {
  std::vector<std::vector<T>> k, v;  // [layer] -> [len][kv_heads][head_dim]
};

// Every observable of `cache` equals the brute-force model.
template <class T>
void require_matches(const KVCache<T>& cache, const ModelCache<T>& model) {
  const int hkv = cache.num_kv_heads(), d = cache.head_dim();
  std::size_t used_tokens = 0;
  for (int l = 0; l < cache.num_layers(); ++l) {
    const auto& mk = model.k[sz(l)];
    const auto& mv = model.v[sz(l)];
    const int len = static_cast<int>(mk.size() / sz(hkv * d));
    used_tokens += sz(len);
    REQUIRE(cache.length(l) == len);
    std::vector<T> gk(mk.size()), gv(mv.size());
    cache.gather(l, len, gk, gv);
    REQUIRE(gk == mk);
    REQUIRE(gv == mv);
    const auto view = cache.layer_view(l);
    REQUIRE(view.length_tokens == len);
    for (int h = 0; h < hkv; ++h) {
      const auto kh = cache.k_head(l, h);
      const auto vh = cache.v_head(l, h);
      REQUIRE(kh.size() == sz(len * d));
      REQUIRE(vh.size() == sz(len * d));
      for (int t = 0; t < len; ++t) {
        for (int e = 0; e < d; ++e) {
          const std::size_t m = sz((t * hkv + h) * d + e);
          REQUIRE(kh[sz(t * d + e)] == mk[m]);
          REQUIRE(vh[sz(t * d + e)] == mv[m]);
          REQUIRE(view.k[view.offset(h, t) + e] == mk[m]);
          REQUIRE(view.v[view.offset(h, t) + e] == mv[m]);
        }
      }
    }
  }
  REQUIRE(cache.bytes_used() == 2 * used_tokens * sz(hkv * d) * sizeof(T));
}

template <class T>
void random_appends_match_model(std::uint64_t seed) {
  Rng rng(seed);
  for (int trial = 0; trial < kTrials; ++trial) {
    const int layers = 1 + static_cast<int>(rng.below(3));
    const int hkv = 1 + static_cast<int>(rng.below(4));
    const int d = 1 + static_cast<int>(rng.below(20));
    const int cap = 1 + static_cast<int>(rng.below(40));
    KVCache<T> cache(layers, hkv, d, cap);
    ModelCache<T> model{std::vector<std::vector<T>>(sz(layers)),
                        std::vector<std::vector<T>>(sz(layers))};
    REQUIRE(cache.bytes_allocated() == 2 * sz(layers) * sz(hkv) * sz(cap) * sz(d) * sizeof(T));
    for (int op = 0; op < 30; ++op) {
      const int l = static_cast<int>(rng.below(static_cast<std::uint32_t>(layers)));
      const int n = static_cast<int>(rng.below(6));  // 0 (no-op) .. 5, 1 = decode
      const auto k = random_values<T>(rng, n * hkv * d);
      const auto v = random_values<T>(rng, n * hkv * d);
      if (cache.length(l) + n <= cap) {
        cache.append(l, k, v, n);
        model.k[sz(l)].insert(model.k[sz(l)].end(), k.begin(), k.end());
        model.v[sz(l)].insert(model.v[sz(l)].end(), v.begin(), v.end());
      } else {
        REQUIRE(code_of([&] { cache.append(l, k, v, n); }) == ErrorCode::kOutOfRange);
      }
      if (rng.below(10) == 0) {  // roll back a few positions (rejected speculative tokens)
        const int keep =
            static_cast<int>(rng.below(static_cast<std::uint32_t>(cache.length(l) + 1)));
        cache.truncate(l, keep);
        model.k[sz(l)].resize(sz(keep * hkv * d));
        model.v[sz(l)].resize(sz(keep * hkv * d));
      }
      require_matches(cache, model);
    }
  }
}

}  // namespace

TEST_CASE("KVCache: random chunked appends match a brute-force model for float", "[kv][kv_cache]") {
  random_appends_match_model<float>(101);
}

TEST_CASE("KVCache: random chunked appends match a brute-force model for double",
          "[kv][kv_cache]") {
  random_appends_match_model<double>(202);
}

TEST_CASE("KVCache: stores one head's positions contiguously", "[kv][kv_cache]") {
  // Layout per layer [num_kv_heads][capacity][head_dim]: head 1 of layer 1 starts at
  // (1 * heads + 1) * capacity * head_dim elements into the K storage.
  KVCache<float> cache(2, 2, 3, 4);
  const std::vector<float> k{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // [2 tokens][2 heads][3]
  const std::vector<float> v{-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12};
  cache.append(1, k, v, 2);
  const auto view0 = cache.layer_view(0);
  const auto view1 = cache.layer_view(1);
  CHECK(view1.k - view0.k == 2 * 4 * 3);
  CHECK(view1.offset(1, 0) == 4 * 3);
  CHECK(view1.offset(0, 1) == 3);
  CHECK(std::vector<float>(view1.k + view1.offset(1, 0), view1.k + view1.offset(1, 0) + 6) ==
        std::vector<float>{4, 5, 6, 10, 11, 12});
  const auto kh = cache.k_head(1, 0);
  CHECK(std::vector<float>(kh.begin(), kh.end()) == std::vector<float>{1, 2, 3, 7, 8, 9});
  const auto vh = cache.v_head(1, 1);
  CHECK(std::vector<float>(vh.begin(), vh.end()) == std::vector<float>{-4, -5, -6, -10, -11, -12});
  CHECK(cache.length(0) == 0);
  CHECK(cache.k_head(0, 1).empty());
}

TEST_CASE("KVCache: stores KV heads only so GQA shrinks it by the group size", "[kv][kv_cache]") {
  // 32 query heads: MHA stores 32 heads, GQA groups 4 and 8 store 8 and 4.
  for (const int group : {1, 4, 8}) {
    KVCache<float> cache(2, 32 / group, 64, 16);
    CHECK(cache.bytes_allocated() == sz(2) * 2 * sz(32 / group) * 16 * 64 * sizeof(float));
    CHECK(cache.token_elems() == (32 / group) * 64);
  }
}

TEST_CASE("KVCache: filling exactly to capacity works and one more token throws",
          "[kv][kv_cache]") {
  Rng rng(7);
  const int hkv = 2, d = 4, cap = 8;
  KVCache<float> cache(3, hkv, d, cap);
  const auto k = random_values<float>(rng, cap * hkv * d);
  const auto v = random_values<float>(rng, cap * hkv * d);
  cache.append(2, k, v, cap);  // one full prefill
  CHECK(cache.length(2) == cap);
  CHECK(cache.bytes_used() == 2 * sz(cap * hkv * d) * sizeof(float));
  const std::vector<float> one(sz(hkv * d), 9.0f);
  std::string msg;
  CHECK(code_of([&] { cache.append(2, one, one, 1); }, &msg) == ErrorCode::kOutOfRange);
  CHECK_THAT(msg, Catch::Contains("layer 2") && Catch::Contains("length 8") &&
                      Catch::Contains("capacity_tokens = 8"));
  // Unchanged: length, contents, bytes used; other layers still accept tokens.
  CHECK(cache.length(2) == cap);
  std::vector<float> gk(k.size()), gv(v.size());
  cache.gather(2, cap, gk, gv);
  CHECK(gk == k);
  CHECK(gv == v);
  cache.append(0, one, one, 1);
  CHECK(cache.length(0) == 1);
  SECTION("a chunk that would cross capacity is rejected whole") {
    KVCache<float> small(1, hkv, d, 4);
    small.append(0, std::span(k).first(sz(3 * hkv * d)), std::span(v).first(sz(3 * hkv * d)), 3);
    CHECK(code_of([&] {
            small.append(0, std::span(k).first(sz(2 * hkv * d)),
                         std::span(v).first(sz(2 * hkv * d)), 2);
          }) == ErrorCode::kOutOfRange);
    CHECK(small.length(0) == 3);
  }
}

TEST_CASE("KVCache: bad arguments throw and leave the cache unchanged", "[kv][kv_cache]") {
  KVCache<float> cache(2, 2, 4, 8);
  const std::vector<float> tok(8, 1.0f);
  cache.append(0, tok, tok, 1);
  std::string msg;
  SECTION("bad layer") {
    CHECK(code_of([&] { cache.append(2, tok, tok, 1); }, &msg) == ErrorCode::kOutOfRange);
    CHECK_THAT(msg, Catch::Contains("layer = 2"));
    CHECK(code_of([&] { cache.append(-1, tok, tok, 1); }) == ErrorCode::kOutOfRange);
    CHECK(code_of([&] { (void)cache.length(5); }) == ErrorCode::kOutOfRange);
    CHECK(code_of([&] { (void)cache.k_head(2, 0); }) == ErrorCode::kOutOfRange);
    CHECK(code_of([&] { (void)cache.layer_view(-1); }) == ErrorCode::kOutOfRange);
    CHECK(code_of([&] { cache.truncate(3, 0); }) == ErrorCode::kOutOfRange);
  }
  SECTION("bad head") {
    CHECK(code_of([&] { (void)cache.v_head(0, 2); }, &msg) == ErrorCode::kOutOfRange);
    CHECK_THAT(msg, Catch::Contains("head = 2"));
  }
  SECTION("bad chunk sizes") {
    CHECK(code_of([&] { cache.append(0, std::span(tok).first(7), tok, 1); }, &msg) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("k_chunk.size() = 7"));
    CHECK(code_of([&] { cache.append(0, tok, std::span(tok).first(4), 1); }, &msg) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("v_chunk.size() = 4"));
    CHECK(code_of([&] { cache.append(0, tok, tok, 2); }) == ErrorCode::kInvalidArgument);
    CHECK(code_of([&] { cache.append(0, {}, {}, -1); }, &msg) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("n = -1"));
  }
  SECTION("bad gather and truncate") {
    std::vector<float> out(16);
    CHECK(code_of([&] { cache.gather(0, 2, out, out); }) == ErrorCode::kOutOfRange);
    CHECK(code_of([&] { cache.gather(0, 1, out, std::span(out).first(8)); }, &msg) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("k_out.size() = 16"));
    CHECK(code_of([&] { cache.truncate(0, 2); }) == ErrorCode::kOutOfRange);
    CHECK(code_of([&] { cache.truncate(0, -1); }) == ErrorCode::kOutOfRange);
  }
  CHECK(cache.length(0) == 1);
  CHECK(cache.length(1) == 0);
  const auto kh = cache.k_head(0, 1);
  CHECK(std::vector<float>(kh.begin(), kh.end()) == std::vector<float>(4, 1.0f));
}

TEST_CASE("KVCache: a chunk viewing the cache itself is read as it was before the append",
          "[kv][kv_cache]") {
  KVCache<float> cache(1, 1, 2, 4);
  const std::vector<float> first{1, 2};
  cache.append(0, first, first, 1);
  // Positions 0 and 1 of the storage (1 unwritten: zeros), appended at positions 1 and 2: the
  // second token must read position 1 before the first token overwrites it.
  const inferkit::KVCacheLayerView<float> view = cache.layer_view(0);
  cache.append(0, std::span<const float>(view.k, 4), std::span<const float>(view.v, 4), 2);
  const auto kh = cache.k_head(0, 0);
  CHECK(std::vector<float>(kh.begin(), kh.end()) == std::vector<float>{1, 2, 1, 2, 0, 0});
  SECTION("gathering into the cache's own storage is refused") {
    // The cache hands out read-only views; a caller who casts that away still cannot corrupt it.
    std::span<float> own(const_cast<float*>(view.k) + 2, 4);  // NOLINT: the misuse under test
    std::vector<float> out(4);
    CHECK(code_of([&] { cache.gather(0, 2, own, out); }) == ErrorCode::kInvalidArgument);
    CHECK(code_of([&] { cache.gather(0, 2, out, own); }) == ErrorCode::kInvalidArgument);
    const auto again = cache.k_head(0, 0);
    CHECK(std::vector<float>(again.begin(), again.end()) == std::vector<float>{1, 2, 1, 2, 0, 0});
  }
}

TEST_CASE("KVCache: constructor rejects bad sizes", "[kv][kv_cache]") {
  std::string msg;
  CHECK(code_of([] { KVCache<float>(0, 1, 1, 1); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("num_layers"));
  CHECK(code_of([] { KVCache<float>(1, 0, 1, 1); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("num_kv_heads"));
  CHECK(code_of([] { KVCache<float>(1, 1, -3, 1); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("head_dim"));
  CHECK(code_of([] { KVCache<float>(1, 1, 1, 0); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("capacity_tokens"));
  // 2^30 of everything overflows 64-bit sizes; it must throw before allocating.
  const std::int32_t big = 1 << 30;
  CHECK(code_of([&] { KVCache<float>(big, big, big, big); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("size_t"));
}

TEST_CASE("KVCache: clear empties every layer and the cache is reusable", "[kv][kv_cache]") {
  KVCache<double> cache(2, 1, 2, 3);
  const std::vector<double> a{1, 2, 3, 4}, b{5, 6};
  cache.append(0, a, a, 2);
  cache.append(1, b, b, 1);
  CHECK(cache.bytes_used() == 2 * 3 * 2 * sizeof(double));
  const std::size_t allocated = cache.bytes_allocated();
  cache.clear();
  CHECK(cache.length(0) == 0);
  CHECK(cache.length(1) == 0);
  CHECK(cache.bytes_used() == 0);
  CHECK(cache.bytes_allocated() == allocated);
  cache.append(0, b, b, 1);
  const auto kh = cache.k_head(0, 0);
  CHECK(std::vector<double>(kh.begin(), kh.end()) == b);
}

// ---------------------------------------------------------------------------------------------
// A small random transformer decoded with and without the KV cache.

namespace {

// Two layers of pre-norm attention (4 query heads, 2 KV heads, head_dim 16) plus a ReLU MLP, a
// learned position embedding, an embedding table and an output head over a 48-token vocabulary.
// Float weights and activations, as a real model would have; attention is reference_attention.
class TinyTransformer {
 public:
  static constexpr int kVocab = 48, kModel = 32, kQHeads = 4, kKVHeads = 2, kHeadDim = 16;
  static constexpr int kLayers = 2, kMlp = 64, kMaxPositions = 80;
  static constexpr int kQDim = kQHeads * kHeadDim, kKVDim = kKVHeads * kHeadDim;

  explicit TinyTransformer(std::uint64_t seed) : rng_(seed) {
    embed_ = init(kVocab * kModel, 1.0);
    pos_ = init(kMaxPositions * kModel, 0.5);
    for (int l = 0; l < kLayers; ++l) {
      wq_.push_back(init(kModel * kQDim, 1.0 / std::sqrt(double(kModel))));
      wk_.push_back(init(kModel * kKVDim, 1.0 / std::sqrt(double(kModel))));
      wv_.push_back(init(kModel * kKVDim, 1.0 / std::sqrt(double(kModel))));
      wo_.push_back(init(kQDim * kModel, 1.0 / std::sqrt(double(kQDim))));
      w1_.push_back(init(kModel * kMlp, 1.0 / std::sqrt(double(kModel))));
      w2_.push_back(init(kMlp * kModel, 1.0 / std::sqrt(double(kMlp))));
    }
    wout_ = init(kModel * kVocab, 1.0 / std::sqrt(double(kModel)));
  }

  /// Token-level K/V projections done per layer (one count = K and V of one token in one layer).
  std::vector<long> kv_projections = std::vector<long>(kLayers, 0);

  /// Runs `tokens` at positions [first_pos, first_pos + n) and returns their logits [n][vocab].
  /// With a cache, the new tokens' K/V are appended and attention reads the whole cache; without,
  /// `first_pos` must be 0 and K/V come from the tokens given (the full sequence).
  std::vector<float> forward(const std::vector<int>& tokens, int first_pos, KVCache<float>* cache) {
    const int n = static_cast<int>(tokens.size());
    std::vector<float> x(sz(n * kModel));
    for (int t = 0; t < n; ++t) {
      for (int e = 0; e < kModel; ++e) {
        x[sz(t * kModel + e)] =
            embed_[sz(tokens[sz(t)] * kModel + e)] + pos_[sz((first_pos + t) * kModel + e)];
      }
    }
    for (int l = 0; l < kLayers; ++l) {
      const std::vector<float> h = rms_norm(x, n);
      const std::vector<float> q = matmul(h, n, kModel, wq_[sz(l)], kQDim);
      std::vector<float> k = matmul(h, n, kModel, wk_[sz(l)], kKVDim);
      std::vector<float> v = matmul(h, n, kModel, wv_[sz(l)], kKVDim);
      kv_projections[sz(l)] += n;
      int n_kv = n;
      if (cache != nullptr) {
        cache->append(l, k, v, n);
        n_kv = cache->length(l);
        k.resize(sz(n_kv * kKVDim));
        v.resize(sz(n_kv * kKVDim));
        cache->gather(l, n_kv, k, v);
      }
      std::vector<double> attn(sz(n * kQDim));
      inferkit::reference_attention<float>(q, k, v, {n, n_kv, kQHeads, kKVHeads, kHeadDim},
                                           inferkit::AttentionParams{}, attn);
      const std::vector<float> attn_f(attn.begin(), attn.end());
      add(x, matmul(attn_f, n, kQDim, wo_[sz(l)], kModel));
      std::vector<float> hidden = matmul(rms_norm(x, n), n, kModel, w1_[sz(l)], kMlp);
      for (float& e : hidden) e = std::max(e, 0.0f);
      add(x, matmul(hidden, n, kMlp, w2_[sz(l)], kModel));
    }
    return matmul(rms_norm(x, n), n, kModel, wout_, kVocab);
  }

 private:
  std::vector<float> init(int count, double scale) {
    std::vector<float> w(sz(count));
    for (float& e : w) e = static_cast<float>((rng_.uniform_double() * 2.0 - 1.0) * scale);
    return w;
  }
  static std::vector<float> matmul(const std::vector<float>& a, int rows, int inner,
                                   const std::vector<float>& b, int cols) {
    std::vector<float> c(sz(rows * cols), 0.0f);
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < inner; ++i) {
        const float a_ri = a[sz(r * inner + i)];
        for (int j = 0; j < cols; ++j) c[sz(r * cols + j)] += a_ri * b[sz(i * cols + j)];
      }
    }
    return c;
  }
  static std::vector<float> rms_norm(const std::vector<float>& x, int rows) {
    std::vector<float> y(x.size());
    for (int r = 0; r < rows; ++r) {
      float ss = 0.0f;
      for (int e = 0; e < kModel; ++e) ss += x[sz(r * kModel + e)] * x[sz(r * kModel + e)];
      const float inv = 1.0f / std::sqrt(ss / kModel + 1e-6f);
      for (int e = 0; e < kModel; ++e) y[sz(r * kModel + e)] = x[sz(r * kModel + e)] * inv;
    }
    return y;
  }
  static void add(std::vector<float>& x, const std::vector<float>& y) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  }

  Rng rng_;
  std::vector<float> embed_, pos_, wout_;
  std::vector<std::vector<float>> wq_, wk_, wv_, wo_, w1_, w2_;
};

int argmax(std::span<const float> logits) {
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::span<const float> row(const std::vector<float>& logits, int r) {
  return std::span<const float>(logits).subspan(sz(r * TinyTransformer::kVocab),
                                                sz(TinyTransformer::kVocab));
}

}  // namespace

TEST_CASE(
    "KVCache: greedy decode of a random transformer matches recomputation with P + 64 "
    "K/V projections",
    "[kv][kv_cache]") {
  // Prefill P = 8 prompt tokens, then 64 decode steps, each feeding back the last generated token.
  // Positions 0 .. P + 63 each need K/V once. With the cache every position is projected once per
  // layer: P + 64 = 72. Without it every step recomputes the whole sequence; stepping the prompt in
  // too (sequence lengths 1 .. P + 64) costs the triangular number T(72) = 72 * 73 / 2 = 2628.
  constexpr int kPrompt = 8, kDecode = 64, kTotal = kPrompt + kDecode;
  Rng prompt_rng(99);
  std::vector<int> prompt;
  for (int i = 0; i < kPrompt; ++i) {
    prompt.push_back(static_cast<int>(prompt_rng.below(TinyTransformer::kVocab)));
  }

  // (a) No cache: step s (s = 1 .. kTotal) runs the whole sequence of length s; its last row's
  // logits choose the next token (teacher-forced while still inside the prompt).
  TinyTransformer plain(2024);
  std::vector<int> seq_plain = prompt;
  std::vector<std::vector<float>> logits_plain;  // [step] last-row logits
  for (int s = 1; s <= kTotal; ++s) {
    const std::vector<int> prefix(seq_plain.begin(), seq_plain.begin() + s);
    const std::vector<float> logits = plain.forward(prefix, 0, nullptr);
    logits_plain.emplace_back(row(logits, s - 1).begin(), row(logits, s - 1).end());
    if (s >= kPrompt) seq_plain.push_back(argmax(logits_plain.back()));
  }

  // (b) Cache, prompt stepped token by token; (c) cache, prompt prefilled as one chunk.
  for (const bool chunked_prefill : {false, true}) {
    INFO("chunked prefill " << chunked_prefill);
    TinyTransformer cached(2024);
    KVCache<float> cache(TinyTransformer::kLayers, TinyTransformer::kKVHeads,
                         TinyTransformer::kHeadDim, kTotal);
    std::vector<int> seq = prompt;
    std::vector<std::vector<float>> logits_cached;
    int pos = 0;
    if (chunked_prefill) {
      const std::vector<float> logits = cached.forward(prompt, 0, &cache);
      for (int r = 0; r < kPrompt; ++r)
        logits_cached.emplace_back(row(logits, r).begin(), row(logits, r).end());
      seq.push_back(argmax(logits_cached.back()));
      pos = kPrompt;
    }
    for (; pos < kTotal; ++pos) {
      const std::vector<float> logits = cached.forward({seq[sz(pos)]}, pos, &cache);
      logits_cached.emplace_back(logits.begin(), logits.end());
      if (pos + 1 >= kPrompt) seq.push_back(argmax(logits_cached.back()));
    }

    REQUIRE(logits_cached.size() == logits_plain.size());
    double max_diff = 0.0;
    for (std::size_t s = 0; s < logits_plain.size(); ++s) {
      for (int j = 0; j < TinyTransformer::kVocab; ++j) {
        max_diff =
            std::max(max_diff, double(std::abs(logits_cached[s][sz(j)] - logits_plain[s][sz(j)])));
      }
    }
    CHECK(max_diff <= 1e-5);
    REQUIRE(seq.size() == sz(kTotal + 1));  // prompt + 65 generated (one per step from P on)
    CHECK(seq == seq_plain);
    for (int l = 0; l < TinyTransformer::kLayers; ++l) {
      CHECK(cached.kv_projections[sz(l)] == kPrompt + kDecode);
      CHECK(cache.length(l) == kTotal);
    }
    CHECK(cache.bytes_used() == cache.bytes_allocated());
  }
  for (int l = 0; l < TinyTransformer::kLayers; ++l) {
    CHECK(plain.kv_projections[sz(l)] == kTotal * (kTotal + 1) / 2);
  }
  // The generated text is not degenerate (the test would be weak if every token were the same).
  const std::vector<int> generated(seq_plain.begin() + kPrompt, seq_plain.end());
  std::vector<int> distinct = generated;
  std::sort(distinct.begin(), distinct.end());
  CHECK(std::unique(distinct.begin(), distinct.end()) - distinct.begin() >= 4);
}
