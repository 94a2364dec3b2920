// SPDX-License-Identifier: Apache-2.0
// The CPU attention inner kernel: a block of query rows (the query heads of one GQA group, times
// a few query tokens) runs an online softmax over a range of one sequence's paged K/V for one KV
// head. K/V are walked along the page table 16 tokens at a time, converted in bulk to fp32
// scratch (prefetching pages ahead, since hardware prefetchers cannot follow a page table), and
// each tile is used by every row of the block, so each page is read once per group.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/attention/cpu/detail/kv_head_source.hpp>
#include <inferkit/attention/cpu/detail/simd.hpp>
#include <inferkit/attention/cpu/detail/spread_prefetcher.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <limits>
#include <type_traits>
#include <vector>

// Silences g++ 12's false uninitialized warnings from AVX-512 intrinsics (see config.hpp).
INFERKIT_SIMD_WARNINGS_BEGIN

namespace inferkit::detail {

/// A block of query rows: row r is query token t = r / group, group member g = r % group. Row
/// (t, g) reads q + t * q_token_stride + g * head_dim, and writes out/lse likewise.
struct QueryRowBlock {
  std::int32_t num_tokens = 0;
  std::int32_t group = 1;
  const float* q = nullptr;
  std::int64_t q_token_stride = 0;
  std::int64_t first_position = 0;     ///< position of token 0; token t is at first_position + t
  const std::uint8_t* mask = nullptr;  ///< token t's row: mask + t * mask_stride ([kv_len]); opt.
  std::int64_t mask_stride = 0;
  float* out = nullptr;
  std::int64_t out_token_stride = 0;
  float* lse = nullptr;  ///< optional; row (t, g) at lse + t * lse_token_stride + g
  std::int64_t lse_token_stride = 0;

  [[nodiscard]] std::int32_t num_rows() const noexcept { return num_tokens * group; }
};

/// Largest row count that takes the direct (register) path; see attend_rows.
inline constexpr std::int32_t kMaxDirectRows = 8;

/// Index into a scratch vector, from an offset computed in 64 bits.
constexpr std::size_t scratch_index(std::int64_t i) noexcept { return static_cast<std::size_t>(i); }

/// Per-thread scratch, sized for `rows` rows of `padded_dim` floats; reused across work items.
struct AttentionScratch {
  std::vector<float> q, o, p, acc, k_tile, v_tile, row_max, row_sum, alpha;
  bool rescale = false;  ///< some row's alpha != 1 in the current tile (o must be scaled)

  void reserve(std::int32_t rows, std::int32_t padded_dim) {
    const auto r = static_cast<std::size_t>(rows);
    const auto d = static_cast<std::size_t>(padded_dim);
    q.resize(r * d);
    o.resize(r * d);
    p.resize(r * kSimdLanes);
    row_max.resize(r);
    row_sum.resize(r * kSimdLanes);  // lane-partial sums: reduced once, at the end
    alpha.resize(r);
    // Direct path: lane-partial dot products of up to kMaxDirectRows rows.
    acc.resize(static_cast<std::size_t>(std::min(rows, kMaxDirectRows)) * kSimdLanes * kSimdLanes);
    // Scratch path: fp32 tiles, zeroed so that token rows never written hold finite values.
    k_tile.assign(kSimdLanes * d, 0.0f);
    v_tile.assign(kSimdLanes * d, 0.0f);
  }
};

/// Converts tokens [tok0, tok0 + count) (count <= 16) of `src` to fp32 rows of `padded_dim`
/// floats in k_tile / v_tile, applying quantization scales. Only valid tokens are read.
template <class Simd, int kHeadDim, class KV>
inline void load_kv_tile(const KvHeadSource<KV>& src, std::int64_t tok0, std::int32_t count,
                         std::int32_t head_dim, std::int32_t padded_dim, float* k_tile,
                         float* v_tile) noexcept {
  const std::int32_t dim = kHeadDim > 0 ? kHeadDim : head_dim;
  const std::int32_t chunks = (dim + kSimdLanes - 1) / kSimdLanes;
  std::int64_t page = tok0 / src.block_size;
  auto slot = static_cast<std::int32_t>(tok0 - page * src.block_size);
  for (std::int32_t j = 0; j < count; ++j) {
    const std::int32_t block = src.pages[page];
    const std::int64_t off = block * src.block_stride + slot * src.token_stride;
    const KV* k_row = src.k + off;
    const KV* v_row = src.v + off;
    float* k_out = k_tile + static_cast<std::ptrdiff_t>(j) * padded_dim;
    float* v_out = v_tile + static_cast<std::ptrdiff_t>(j) * padded_dim;
    if (src.scale_mode == KvScaleMode::kNone) {
      for (std::int32_t c = 0; c < chunks; ++c) {
        const int n = std::min(kSimdLanes, dim - c * kSimdLanes);
        const std::ptrdiff_t d0 = std::ptrdiff_t{c} * kSimdLanes;
        Simd::store(k_out + d0, Simd::load_kv(k_row + d0, n));
        Simd::store(v_out + d0, Simd::load_kv(v_row + d0, n));
      }
    } else {
      const std::int64_t si = src.scale_index(block, slot);
      const auto ks = Simd::set1(src.k_scale != nullptr ? src.k_scale[si] : 1.0f);
      const auto vs = Simd::set1(src.v_scale != nullptr ? src.v_scale[si] : 1.0f);
      for (std::int32_t c = 0; c < chunks; ++c) {
        const int n = std::min(kSimdLanes, dim - c * kSimdLanes);
        const std::ptrdiff_t d0 = std::ptrdiff_t{c} * kSimdLanes;
        Simd::store(k_out + d0, Simd::mul(Simd::load_kv(k_row + d0, n), ks));
        Simd::store(v_out + d0, Simd::mul(Simd::load_kv(v_row + d0, n), vs));
      }
    }
    if (++slot == src.block_size) {
      slot = 0;
      ++page;
    }
  }
}

/// Bit j set when key tok0 + j (j < count) is visible to the query at `position`.
inline std::uint32_t visible_lanes(const AttentionParams& params, std::int64_t position,
                                   std::int64_t tok0, std::int32_t count,
                                   const std::uint8_t* mask_row) noexcept {
  std::uint32_t keep = count >= kSimdLanes ? 0xFFFFu : (1u << count) - 1u;
  if (params.causal) {
    const std::int64_t n = std::clamp<std::int64_t>(position - tok0 + 1, 0, kSimdLanes);
    keep &= n >= kSimdLanes ? 0xFFFFu : (1u << n) - 1u;
  }
  if (params.window_left >= 0) {
    const std::int64_t first =
        std::clamp<std::int64_t>(position - params.window_left - tok0, 0, kSimdLanes);
    keep &= first >= kSimdLanes ? 0u : ~((1u << first) - 1u);
  }
  if (mask_row != nullptr && keep != 0) {
    for (std::int32_t j = 0; j < count; ++j) {
      if (mask_row[tok0 + j] == 0) keep &= ~(1u << j);
    }
  }
  return keep;
}

/// PV update for rows [r0, r0 + kRows) and chunks [c0, c0 + kChunks): o = o * alpha + P V.
template <class Simd, int kRows, int kChunks>
inline void pv_block(AttentionScratch& s, std::int32_t r0, std::int32_t c0, std::int32_t count,
                     std::int32_t padded_dim) noexcept {
  using V = typename Simd::V;
  V acc[kRows][kChunks];
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    const V a = Simd::set1(s.alpha[scratch_index(r0 + r)]);
    INFERKIT_UNROLL for (int c = 0; c < kChunks; ++c) {
      acc[r][c] = Simd::mul(Simd::load(&s.o[scratch_index(std::int64_t{r0 + r} * padded_dim +
                                                          std::int64_t{c0 + c} * kSimdLanes)]),
                            a);
    }
  }
  for (std::int32_t j = 0; j < count; ++j) {
    V v[kChunks];
    INFERKIT_UNROLL for (int c = 0; c < kChunks; ++c) {
      v[c] = Simd::load(&s.v_tile[scratch_index(std::int64_t{j} * padded_dim +
                                                std::int64_t{c0 + c} * kSimdLanes)]);
    }
    INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
      const V p = Simd::set1(s.p[scratch_index(std::int64_t{r0 + r} * kSimdLanes + j)]);
      INFERKIT_UNROLL for (int c = 0; c < kChunks; ++c) acc[r][c] = Simd::fma(p, v[c], acc[r][c]);
    }
  }
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    INFERKIT_UNROLL for (int c = 0; c < kChunks; ++c) {
      Simd::store(&s.o[scratch_index(std::int64_t{r0 + r} * padded_dim +
                                     std::int64_t{c0 + c} * kSimdLanes)],
                  acc[r][c]);
    }
  }
}

template <class Simd, int kRows>
inline void pv_rows(AttentionScratch& s, std::int32_t r0, std::int32_t chunks, std::int32_t count,
                    std::int32_t padded_dim) noexcept {
  std::int32_t c = 0;
  for (; c + 2 <= chunks; c += 2) pv_block<Simd, kRows, 2>(s, r0, c, count, padded_dim);
  if (c < chunks) pv_block<Simd, kRows, 1>(s, r0, c, count, padded_dim);
}

/// Loads 16 stored elements (or `n` < 16, zero-filled) as floats.
template <class Simd, int kHeadDim, class KV>
INFERKIT_FORCEINLINE typename Simd::V load_chunk(const KV* p, std::int32_t n) noexcept {
  if constexpr (kHeadDim > 0 && kHeadDim % kSimdLanes == 0) {
    (void)n;
    return Simd::load_kv(p, kSimdLanes);
  } else {
    return Simd::load_kv(p, n);
  }
}

/// Direct QK for kRows rows: dot products of every row with tokens [j0, j0 + kTok), reading
/// and converting each K row once for all rows; writes the lane-partial sums to acc (laid out
/// [kRows][16 tokens][16 lanes]) for a later 16-way horizontal reduction.
template <class Simd, int kHeadDim, int kRows, int kTok, class KV>
INFERKIT_FORCEINLINE void qk_direct(const float* q, std::int32_t padded, std::int32_t dim,
                                    const TileRows<KV>& tr, std::int32_t j0, float* acc_out,
                                    SpreadPrefetcher<KV>& pf, std::int64_t pf_lines) noexcept {
  using V = typename Simd::V;
  const std::int32_t chunks = padded / kSimdLanes;
  V acc[kRows][kTok];
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    INFERKIT_UNROLL for (int t = 0; t < kTok; ++t) acc[r][t] = Simd::zero();
  }
  for (std::int32_t c = 0; c < chunks; ++c) {
    pf.issue(pf_lines);
    const std::int32_t n = dim - c * kSimdLanes;
    V k[kTok];
    INFERKIT_UNROLL for (int t = 0; t < kTok; ++t) {
      k[t] = load_chunk<Simd, kHeadDim>(tr.k[j0 + t] + c * kSimdLanes, n);
    }
    INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
      const V qv = Simd::load(q + std::ptrdiff_t{r} * padded + std::ptrdiff_t{c} * kSimdLanes);
      INFERKIT_UNROLL for (int t = 0; t < kTok; ++t) acc[r][t] = Simd::fma(qv, k[t], acc[r][t]);
    }
  }
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    INFERKIT_UNROLL for (int t = 0; t < kTok; ++t) {
      Simd::store(acc_out + std::ptrdiff_t{r * kSimdLanes + j0 + t} * kSimdLanes, acc[r][t]);
    }
  }
}

/// Direct PV for kRows rows and chunks [c0, c0 + kCh): o = o * alpha + sum_j p_j v_j, reading
/// and converting each V row chunk once for all rows. Issues `pf_lines` line pairs of the spread
/// prefetch per token.
template <class Simd, int kHeadDim, int kRows, int kCh, class KV>
INFERKIT_FORCEINLINE void pv_direct(AttentionScratch& s, std::int32_t padded, std::int32_t dim,
                                    const TileRows<KV>& tr, std::int32_t c0, std::int32_t count,
                                    SpreadPrefetcher<KV>& pf, std::int64_t pf_lines) noexcept {
  using V = typename Simd::V;
  V acc[kRows][kCh];
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    INFERKIT_UNROLL for (int c = 0; c < kCh; ++c) {
      acc[r][c] = Simd::load(
          &s.o[scratch_index(std::int64_t{r} * padded + std::int64_t{c0 + c} * kSimdLanes)]);
    }
  }
  if (s.rescale) {  // rare once the running max settles
    INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
      const V a = Simd::set1(s.alpha[static_cast<std::size_t>(r)]);
      INFERKIT_UNROLL for (int c = 0; c < kCh; ++c) acc[r][c] = Simd::mul(acc[r][c], a);
    }
  }
  for (std::int32_t j = 0; j < count; ++j) {
    pf.issue(pf_lines);
    V v[kCh];
    INFERKIT_UNROLL for (int c = 0; c < kCh; ++c) {
      v[c] =
          load_chunk<Simd, kHeadDim>(tr.v[j] + (c0 + c) * kSimdLanes, dim - (c0 + c) * kSimdLanes);
    }
    INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
      const V p = Simd::set1(s.p[scratch_index(std::int64_t{r} * kSimdLanes + j)]);
      INFERKIT_UNROLL for (int c = 0; c < kCh; ++c) acc[r][c] = Simd::fma(p, v[c], acc[r][c]);
    }
  }
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    INFERKIT_UNROLL for (int c = 0; c < kCh; ++c) {
      Simd::store(&s.o[scratch_index(std::int64_t{r} * padded + std::int64_t{c0 + c} * kSimdLanes)],
                  acc[r][c]);
    }
  }
}

/// Online-softmax update of row r with this tile's scores: writes p (times `v_scale` lanes
/// when given) and alpha, updates the running max and sum.
template <class Simd>
INFERKIT_FORCEINLINE void softmax_update(AttentionScratch& s, std::int32_t r,
                                         typename Simd::V scores, std::uint32_t keep, float cap,
                                         const float* v_scale) noexcept {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const auto ri = static_cast<std::size_t>(r);
  float* p = &s.p[ri * kSimdLanes];
  if (keep == 0) {  // nothing visible in this tile: state unchanged
    std::fill_n(p, kSimdLanes, 0.0f);
    s.alpha[ri] = 1.0f;
    return;
  }
  if (cap > 0.0f) {
    Simd::store(p, scores);
    for (int j = 0; j < kSimdLanes; ++j) p[j] = cap * std::tanh(p[j] / cap);
    scores = Simd::load(p);
  }
  scores = Simd::keep_or(scores, keep, kNegInf);
  const float m_old = s.row_max[ri];
  // After the first tiles the running max rarely moves: one compare settles that without the
  // horizontal max, and keeps it off the path from the scores to exp (same bits either way).
  const float m_new =
      Simd::any_greater(scores, m_old) ? std::max(m_old, Simd::reduce_max(scores)) : m_old;
  const float alpha = m_old == m_new ? 1.0f : (m_old == kNegInf ? 0.0f : std::exp(m_old - m_new));
  typename Simd::V pv = Simd::exp_shifted(scores, m_new, keep);
  float* sum = &s.row_sum[ri * kSimdLanes];
  Simd::store(sum, alpha == 1.0f ? Simd::add(Simd::load(sum), pv)
                                 : Simd::fma(Simd::load(sum), Simd::set1(alpha), pv));
  s.row_max[ri] = m_new;
  s.alpha[ri] = alpha;
  if (alpha != 1.0f) s.rescale = true;
  if (v_scale != nullptr) pv = Simd::mul(pv, Simd::load(v_scale));
  Simd::store(p, pv);
}

/// Attends the rows of `rows` to keys [kv_begin, kv_end) of `src` (positions are token indices
/// in the sequence) and writes normalized outputs and natural-log LSEs. A row that sees no key
/// gets out = 0, lse = -inf. `kHeadDim` = 0: runtime head_dim. `kRows` > 0: exactly that many
/// rows, K/V converted in registers and shared by all rows (decode); 0: any number of rows,
/// each K/V tile converted once to fp32 scratch (prefill).
template <class Simd, int kHeadDim, int kRows, class KV>
void attend_rows_impl(const QueryRowBlock& rows, const KvHeadSource<KV>& src, std::int64_t kv_begin,
                      std::int64_t kv_end, std::int32_t head_dim, const AttentionParams& params,
                      std::int32_t prefetch_tokens_ahead, AttentionScratch& s) {
  using V = typename Simd::V;
  const std::int32_t dim = kHeadDim > 0 ? kHeadDim : head_dim;
  const std::int32_t chunks = (dim + kSimdLanes - 1) / kSimdLanes;
  const std::int32_t padded = chunks * kSimdLanes;
  const std::int32_t num_rows = kRows > 0 ? kRows : rows.num_rows();
  // The caller dispatches kHeadDim from head_dim and reserves the scratch for its largest block.
  INFERKIT_ASSERT(kHeadDim == 0 || kHeadDim == head_dim);
  INFERKIT_ASSERT(s.q.size() >=
                  static_cast<std::size_t>(num_rows) * static_cast<std::size_t>(padded));
  INFERKIT_ASSERT(kRows == 0 ||
                  s.acc.size() >= static_cast<std::size_t>(num_rows) * kSimdLanes * kSimdLanes);
  const float scale = params.resolved_scale(dim);
  const float cap = params.logit_soft_cap;
  const bool scaled = src.scale_mode != KvScaleMode::kNone;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  // Scaled queries in padded rows (zero tails), zero outputs.
  for (std::int32_t r = 0; r < num_rows; ++r) {
    const std::int32_t t = r / rows.group;
    const std::int32_t g = r % rows.group;
    const float* q = rows.q + t * rows.q_token_stride + std::int64_t{g} * dim;
    float* qs = &s.q[scratch_index(r) * scratch_index(padded)];
    for (std::int32_t d = 0; d < dim; ++d) qs[d] = q[d] * scale;
    for (std::int32_t d = dim; d < padded; ++d) qs[d] = 0.0f;
    std::fill_n(&s.o[scratch_index(r) * scratch_index(padded)], padded, 0.0f);
    s.row_max[scratch_index(r)] = kNegInf;
    std::fill_n(&s.row_sum[scratch_index(r) * kSimdLanes], kSimdLanes, 0.0f);
  }
  TileRows<KV> tr;
  SpreadPrefetcher<KV> pf;
  const std::int64_t row_bytes = static_cast<std::int64_t>(sizeof(KV)) * dim;
  if (prefetch_tokens_ahead > 0) {
    prefetch_tokens(pf, src, kv_begin,
                    std::min<std::int64_t>(kv_begin + prefetch_tokens_ahead, kv_end), row_bytes);
  }
  // Keys of this tile visible to row r (its query token's position, causal/window, mask).
  const auto visible = [&](std::int32_t r, std::int64_t tok0, std::int32_t count) {
    const std::int32_t t = r / rows.group;
    const std::uint8_t* mask_row =
        rows.mask != nullptr ? rows.mask + t * rows.mask_stride : nullptr;
    return visible_lanes(params, rows.first_position + t, tok0, count, mask_row);
  };
  for (std::int64_t tok0 = kv_begin; tok0 < kv_end; tok0 += kSimdLanes) {
    const auto count = static_cast<std::int32_t>(std::min<std::int64_t>(kSimdLanes, kv_end - tok0));
    if constexpr (kRows > 0) {
      // Register tiles: kRows x kTok QK accumulators plus kTok converted K chunks, and kRows x
      // kCh PV accumulators plus kCh V chunks, within the 32 vector registers (8 rows: 24 + 3;
      // measured 6% faster than 8 x 2 tiles, which spend a load of q or p per 2 FMAs).
      constexpr int kCh = kRows <= 4 ? 4 : 3;
      constexpr int kTok = kRows <= 2 ? 8 : (kRows == 8 ? 3 : 16 / kRows);
      // The tile prefetch_tokens_ahead tokens ahead is prefetched over this tile's QK and PV
      // loops: each of their `steps` iterations (counted exactly) issues pf_lines of its K/V
      // line pairs, which rounds up, so the whole tile is issued.
      const std::int32_t rest = chunks % kCh;
      const std::int32_t pv_passes = chunks / kCh + (rest >= 2 ? rest - 1 : rest);
      const std::int32_t steps = (count / kTok + count % kTok) * chunks + pv_passes * count;
      if (prefetch_tokens_ahead > 0) pf.start(src, tok0 + prefetch_tokens_ahead, kv_end, row_bytes);
      const std::int64_t pf_lines = (pf.lines + steps - 1) / steps;
      tr.gather(src, tok0, count);
      std::int32_t j = 0;
      for (; j + kTok <= count; j += kTok) {
        qk_direct<Simd, kHeadDim, kRows, kTok>(s.q.data(), padded, dim, tr, j, s.acc.data(), pf,
                                               pf_lines);
      }
      for (; j < count; ++j) {
        qk_direct<Simd, kHeadDim, kRows, 1>(s.q.data(), padded, dim, tr, j, s.acc.data(), pf,
                                            pf_lines);
      }
      s.rescale = false;
      for (std::int32_t r = 0; r < num_rows; ++r) {
        float* acc = &s.acc[scratch_index(r) * kSimdLanes * kSimdLanes];
        std::fill(acc + std::ptrdiff_t{count} * kSimdLanes,
                  acc + std::ptrdiff_t{kSimdLanes} * kSimdLanes, 0.0f);
        V parts[kSimdLanes];
        INFERKIT_UNROLL for (int t = 0; t < kSimdLanes; ++t) {
          parts[t] = Simd::load(acc + std::ptrdiff_t{t} * kSimdLanes);
        }
        V scores = Simd::reduce16(parts);
        if (scaled) scores = Simd::mul(scores, Simd::load(tr.k_scale));
        softmax_update<Simd>(s, r, scores, visible(r, tok0, count), cap,
                             scaled ? tr.v_scale : nullptr);
      }
      // Passes of kCh chunks, then one of 2 if at least 2 are left, then single chunks:
      // pv_passes counts them for the prefetch quota.
      std::int32_t c = 0;
      for (; c + kCh <= chunks; c += kCh) {
        pv_direct<Simd, kHeadDim, kRows, kCh>(s, padded, dim, tr, c, count, pf, pf_lines);
      }
      if (c + 2 <= chunks) {
        pv_direct<Simd, kHeadDim, kRows, 2>(s, padded, dim, tr, c, count, pf, pf_lines);
        c += 2;
      }
      for (; c < chunks; ++c) {
        pv_direct<Simd, kHeadDim, kRows, 1>(s, padded, dim, tr, c, count, pf, pf_lines);
      }
    } else {
      if (prefetch_tokens_ahead > 0) {
        const std::int64_t pf_tok = tok0 + prefetch_tokens_ahead;
        prefetch_tokens(pf, src, pf_tok, std::min<std::int64_t>(pf_tok + kSimdLanes, kv_end),
                        row_bytes);
      }
      load_kv_tile<Simd, kHeadDim>(src, tok0, count, dim, padded, s.k_tile.data(), s.v_tile.data());
      for (std::int32_t r = 0; r < num_rows; ++r) {
        // S[j] = q_r . k_j for the 16 tokens: 16 accumulators, one horizontal reduction.
        V acc[kSimdLanes];
        INFERKIT_UNROLL for (auto& a : acc) a = Simd::zero();
        const float* qs = &s.q[scratch_index(r) * scratch_index(padded)];
        for (std::int32_t c = 0; c < chunks; ++c) {
          const V qv = Simd::load(qs + std::ptrdiff_t{c} * kSimdLanes);
          INFERKIT_UNROLL for (int j = 0; j < kSimdLanes; ++j) {
            acc[j] = Simd::fma(qv,
                               Simd::load(&s.k_tile[scratch_index(j) * scratch_index(padded) +
                                                    scratch_index(c) * kSimdLanes]),
                               acc[j]);
          }
        }
        softmax_update<Simd>(s, r, Simd::reduce16(acc), visible(r, tok0, count), cap, nullptr);
      }
      std::int32_t r = 0;
      for (; r + 4 <= num_rows; r += 4) pv_rows<Simd, 4>(s, r, chunks, count, padded);
      for (; r < num_rows; ++r) pv_rows<Simd, 1>(s, r, chunks, count, padded);
    }
  }

  for (std::int32_t r = 0; r < num_rows; ++r) {
    const std::int32_t t = r / rows.group;
    const std::int32_t g = r % rows.group;
    float* out = rows.out + t * rows.out_token_stride + std::int64_t{g} * dim;
    const float sum = Simd::reduce_add(Simd::load(&s.row_sum[scratch_index(r) * kSimdLanes]));
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const float* o = &s.o[scratch_index(r) * scratch_index(padded)];
    for (std::int32_t d = 0; d < dim; ++d) out[d] = o[d] * inv;
    if (rows.lse != nullptr) {
      rows.lse[t * rows.lse_token_stride + g] =
          sum > 0.0f ? s.row_max[scratch_index(r)] + std::log(sum) : kNegInf;
    }
  }
}

/// Attends a block of rows (see attend_rows_impl): 1, 2, 4 or 8 rows take the direct
/// (decode) path, other counts the fp32-scratch (prefill) path.
template <class Simd, int kHeadDim, class KV>
void attend_rows(const QueryRowBlock& rows, const KvHeadSource<KV>& src, std::int64_t kv_begin,
                 std::int64_t kv_end, std::int32_t head_dim, const AttentionParams& params,
                 std::int32_t prefetch_tokens_ahead, AttentionScratch& s) {
  switch (rows.num_rows()) {
    case 1:
      return attend_rows_impl<Simd, kHeadDim, 1>(rows, src, kv_begin, kv_end, head_dim, params,
                                                 prefetch_tokens_ahead, s);
    case 2:
      return attend_rows_impl<Simd, kHeadDim, 2>(rows, src, kv_begin, kv_end, head_dim, params,
                                                 prefetch_tokens_ahead, s);
    case 4:
      return attend_rows_impl<Simd, kHeadDim, 4>(rows, src, kv_begin, kv_end, head_dim, params,
                                                 prefetch_tokens_ahead, s);
    case 8:
      return attend_rows_impl<Simd, kHeadDim, 8>(rows, src, kv_begin, kv_end, head_dim, params,
                                                 prefetch_tokens_ahead, s);
    default:
      return attend_rows_impl<Simd, kHeadDim, 0>(rows, src, kv_begin, kv_end, head_dim, params,
                                                 prefetch_tokens_ahead, s);
  }
}

}  // namespace inferkit::detail

INFERKIT_SIMD_WARNINGS_END
