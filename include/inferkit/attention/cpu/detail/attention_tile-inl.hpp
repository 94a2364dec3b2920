// SPDX-License-Identifier: Apache-2.0
// The CPU attention tile kernel for one instruction set. No include guard: attention_tile.hpp
// includes this file once per path, inside that path's target region, with INFERKIT_TILE_ISA
// (the namespace: avx512, avx2, neon, baseline), INFERKIT_TILE_SIMD (its SIMD policy) and
// INFERKIT_TILE_CPU_ISA (its CpuIsa enumerator) defined; it undefines them at the end.
//
// K/V are walked along the page table 16 tokens at a time. Decode blocks (1, 2, 4 or 8 rows)
// convert each K/V chunk in registers once for all rows of the block (so each page is read once
// per GQA group) in register tiles the policy sizes for its register file; the tile one ahead is
// prefetched between the FMAs (hardware prefetchers cannot follow a page table). Other blocks
// (prefill) convert each tile once to fp32 scratch. No OpenMP here (see core/config.hpp).
// Included from attention_tile.hpp only, after everything below is declared.
// NOLINTBEGIN(bugprone-macro-parentheses)
// Register-tile offsets are products of small compile-time lane and tile counts (at most a few
// hundred floats), which cannot overflow int before the widening to ptrdiff_t.
// NOLINTBEGIN(bugprone-implicit-widening-of-multiplication-result)
#if !defined(INFERKIT_TILE_ISA) || !defined(INFERKIT_TILE_SIMD) || !defined(INFERKIT_TILE_CPU_ISA)
#  error "attention_tile-inl.hpp is included by attention_tile.hpp, once per instruction set"
#endif

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {
namespace INFERKIT_TILE_ISA {

using Simd = INFERKIT_TILE_SIMD;
using V = Simd::V;
/// Floats per vector, and vectors per 16-token row of scores.
inline constexpr int kLanes = Simd::kLanes;
inline constexpr int kScoreVectors = kTileTokens / kLanes;
static_assert(kTileTokens % kLanes == 0 && Simd::kPrefillTokens % kLanes == 0);

/// Vector chunks of kLanes dims covering `dim`.
constexpr std::int32_t chunks_of(std::int32_t dim) noexcept { return (dim + kLanes - 1) / kLanes; }

/// Converts tokens [tok0, tok0 + count) (count <= 16) of `src` to fp32 rows of `padded_dim`
/// floats in k_tile / v_tile, applying quantization scales (and int4 zero points). Only valid
/// tokens are read.
template <int kHeadDim, class KV>
inline void load_kv_tile(const KvHeadSource<KV>& src, std::int64_t tok0, std::int32_t count,
                         std::int32_t head_dim, std::int32_t padded_dim, float* k_tile,
                         float* v_tile) noexcept {
  const std::int32_t dim = kHeadDim > 0 ? kHeadDim : head_dim;
  const std::int32_t chunks = chunks_of(dim);
  std::int64_t page = tok0 / src.block_size;
  auto slot = static_cast<std::int32_t>(tok0 - page * src.block_size);
  for (std::int32_t j = 0; j < count; ++j) {
    const std::int32_t block = src.pages[page];
    const std::int64_t off = block * src.block_stride + slot * src.token_stride;
    const KV* k_row = src.k + off;
    const KV* v_row = src.v + off;
    float* k_out = k_tile + static_cast<std::ptrdiff_t>(j) * padded_dim;
    float* v_out = v_tile + static_cast<std::ptrdiff_t>(j) * padded_dim;
    const bool scaled = src.scale_mode != KvScaleMode::kNone;
    const std::int64_t si = scaled ? src.scale_index(block, slot) : 0;
    const V ks = Simd::set1(scaled && src.k_scale != nullptr ? src.k_scale[si] : 1.0f);
    const V vs = Simd::set1(scaled && src.v_scale != nullptr ? src.v_scale[si] : 1.0f);
    V k_offsets = Simd::zero();  // packed int4: what each nibble becomes before the scale
    V v_offsets = Simd::zero();
    if constexpr (is_packed_int4_v<KV>) {
      k_offsets = Simd::int4_offsets(src.k_zero[si]);
      v_offsets = Simd::int4_offsets(src.v_zero[si]);
    }
    for (std::int32_t c = 0; c < chunks; ++c) {
      const int n = std::min(kLanes, dim - c * kLanes);
      const std::ptrdiff_t d0 = std::ptrdiff_t{c} * kLanes;
      V kv;
      V vv;
      if constexpr (is_packed_int4_v<KV>) {  // nibble - zero, exact in float
        kv = Simd::load_int4(k_row + kv_elements<KV>(d0), n, k_offsets);
        vv = Simd::load_int4(v_row + kv_elements<KV>(d0), n, v_offsets);
      } else {
        kv = Simd::load_kv(k_row + d0, n);
        vv = Simd::load_kv(v_row + d0, n);
      }
      Simd::store(k_out + d0, scaled ? Simd::mul(kv, ks) : kv);
      Simd::store(v_out + d0, scaled ? Simd::mul(vv, vs) : vv);
    }
    if (++slot == src.block_size) {
      slot = 0;
      ++page;
    }
  }
}

/// PV update for rows [r0, r0 + kRows) and chunks [c0, c0 + kChunks) from the fp32 V tile:
/// o = o * alpha + P V. kMasked: a row skips the keys it does not see (s.keep).
template <int kRows, int kChunks, bool kMasked>
inline void pv_block(AttentionScratch& s, std::int32_t r0, std::int32_t c0, std::int32_t count,
                     std::int32_t padded_dim) noexcept {
  V acc[kRows][kChunks];
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    const V a = Simd::set1(s.alpha[scratch_index(r0 + r)]);
    INFERKIT_UNROLL for (int c = 0; c < kChunks; ++c) {
      acc[r][c] = Simd::mul(Simd::load(&s.o[scratch_index(std::int64_t{r0 + r} * padded_dim +
                                                          std::int64_t{c0 + c} * kLanes)]),
                            a);
    }
  }
  for (std::int32_t j = 0; j < count; ++j) {
    V v[kChunks];
    INFERKIT_UNROLL for (int c = 0; c < kChunks; ++c) {
      v[c] = Simd::load(
          &s.v_tile[scratch_index(std::int64_t{j} * padded_dim + std::int64_t{c0 + c} * kLanes)]);
    }
    INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
      if (kMasked && !sees(s.keep[scratch_index(r0 + r)], j)) continue;
      const V p = Simd::set1(s.p[scratch_index(std::int64_t{r0 + r} * kTileTokens + j)]);
      INFERKIT_UNROLL for (int c = 0; c < kChunks; ++c) acc[r][c] = Simd::fma(p, v[c], acc[r][c]);
    }
  }
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    INFERKIT_UNROLL for (int c = 0; c < kChunks; ++c) {
      Simd::store(
          &s.o[scratch_index(std::int64_t{r0 + r} * padded_dim + std::int64_t{c0 + c} * kLanes)],
          acc[r][c]);
    }
  }
}

template <int kRows, bool kMasked>
inline void pv_rows(AttentionScratch& s, std::int32_t r0, std::int32_t chunks, std::int32_t count,
                    std::int32_t padded_dim) noexcept {
  std::int32_t c = 0;
  for (; c + 2 <= chunks; c += 2) pv_block<kRows, 2, kMasked>(s, r0, c, count, padded_dim);
  if (c < chunks) pv_block<kRows, 1, kMasked>(s, r0, c, count, padded_dim);
}

/// pv_rows of a block of rows that does not see some key of the tile, out of line: rare (a causal
/// diagonal), so it should not weigh on the code around the common case.
template <int kRows>
[[gnu::noinline]] void pv_rows_masked(AttentionScratch& s, std::int32_t r0, std::int32_t chunks,
                                      std::int32_t count, std::int32_t padded_dim) noexcept {
  pv_rows<kRows, true>(s, r0, chunks, count, padded_dim);
}

/// PV update of every row from the fp32 V tile (see pv_block). p is 0 at a key a row does not
/// see, but 0 x a NaN or infinite V would still reach the row: blocks of rows where some row
/// does not see some key of the tile (s.keep) skip those (row, key) pairs. On a causal diagonal
/// those are only the rows whose positions fall inside the tile.
INFERKIT_FORCEINLINE void pv_all_rows(AttentionScratch& s, std::int32_t num_rows,
                                      std::int32_t chunks, std::int32_t count,
                                      std::int32_t padded_dim) noexcept {
  const std::uint32_t all = all_keys(count);
  const auto see_all = [&](std::int32_t r0, std::int32_t n) {
    return std::all_of(&s.keep[scratch_index(r0)], &s.keep[scratch_index(r0)] + n,
                       [all](std::uint32_t keep) { return keep == all; });
  };
  std::int32_t r = 0;
  for (; r + 4 <= num_rows; r += 4) {
    if (see_all(r, 4)) {
      pv_rows<4, false>(s, r, chunks, count, padded_dim);
    } else {
      pv_rows_masked<4>(s, r, chunks, count, padded_dim);
    }
  }
  for (; r < num_rows; ++r) {
    if (see_all(r, 1)) {
      pv_rows<1, false>(s, r, chunks, count, padded_dim);
    } else {
      pv_rows_masked<1>(s, r, chunks, count, padded_dim);
    }
  }
}

/// Whether tiles of KV may take the policy's raw e4m3 loads (when they hold no NaN code).
template <class KV>
inline constexpr bool kRawE4m3 =
    std::is_same_v<std::remove_const_t<KV>, float8_e4m3>&& Simd::kRawE4m3;

/// The policy's raw e4m3 loads, named through a template parameter so that policies without
/// them (kRawE4m3 false) are never asked for them.
template <class Policy, int kHeadDim>
INFERKIT_FORCEINLINE typename Policy::V load_e4m3_raw(const float8_e4m3* p,
                                                      std::int32_t n) noexcept {
  if constexpr (kHeadDim > 0 && kHeadDim % Policy::kLanes == 0) {
    (void)n;
    return Policy::load_e4m3_raw_full(p);
  } else {
    return Policy::load_e4m3_raw(p, n);
  }
}

/// Whether the e4m3 tile `tr` takes the raw loads: when none of its K/V rows holds a NaN code
/// (nearly always), with the loads' divisor then folded into its per-token scales.
template <class Policy, class KV>
INFERKIT_FORCEINLINE bool take_raw_e4m3(TileRows<KV>& tr, std::int32_t count,
                                        std::int32_t dim) noexcept {
  if (Policy::any_e4m3_nan(tr.k, tr.v, count, dim)) return false;
  for (int j = 0; j < kTileTokens; ++j) {
    tr.k_scale[j] *= Policy::kE4m3RawDivisor;
    tr.v_scale[j] *= Policy::kE4m3RawDivisor;
  }
  return true;
}

/// Loads kLanes stored elements (or `n` < kLanes, zero-filled) as floats. kRaw: e4m3 through the
/// raw loads (value / Simd::kE4m3RawDivisor, NaN codes not handled), for tiles without NaN codes.
/// Packed int4: nibble - zero, through the token's `int4_offsets` (unused otherwise).
template <int kHeadDim, bool kRaw, class KV>
INFERKIT_FORCEINLINE V load_chunk(const KV* p, std::int32_t n, V int4_offsets) noexcept {
  if constexpr (is_packed_int4_v<KV>) {
    return Simd::load_int4(p, n, int4_offsets);
  } else if constexpr (kRaw) {
    return load_e4m3_raw<Simd, kHeadDim>(p, n);
  } else if constexpr (kHeadDim > 0 && kHeadDim % kLanes == 0) {
    (void)n;
    return Simd::load_kv_full(p);
  } else {
    (void)int4_offsets;
    return Simd::load_kv(p, n);
  }
}

/// Direct QK for kRows rows: dot products of every row with tokens [j0, j0 + kTok), reading
/// and converting each K row once for all rows; writes the lane-partial sums to acc (laid out
/// [kRows][16 tokens][kLanes]) for a later horizontal reduction.
template <int kHeadDim, int kRows, int kTok, bool kRaw, class KV>
INFERKIT_FORCEINLINE void qk_direct(const float* q, std::int32_t padded, std::int32_t dim,
                                    std::int32_t chunks, const TileRows<KV>& tr, std::int32_t j0,
                                    float* acc_out, SpreadPrefetcher<KV>& pf,
                                    std::int64_t pf_lines) noexcept {
  V acc[kRows][kTok];
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    INFERKIT_UNROLL for (int t = 0; t < kTok; ++t) acc[r][t] = Simd::zero();
  }
  V offsets[kTok];  // packed int4: each token's zero point (lanes >= n: q is 0 there)
  INFERKIT_UNROLL for (int t = 0; t < kTok; ++t) {
    if constexpr (TileRows<KV>::kZeroPoints) {
      offsets[t] = Simd::int4_offsets(tr.k_zero[j0 + t]);
    } else {
      offsets[t] = Simd::zero();
    }
  }
  auto cur = pf.cursor();
  for (std::int32_t c = 0; c < chunks; ++c) {
    pf.issue(cur, pf_lines);
    const std::int32_t n = dim - c * kLanes;
    V k[kTok];
    INFERKIT_UNROLL for (int t = 0; t < kTok; ++t) {
      k[t] = load_chunk<kHeadDim, kRaw>(tr.k[j0 + t] + kv_elements<KV>(c * kLanes), n, offsets[t]);
    }
    INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
      const V qv = Simd::load(q + std::ptrdiff_t{r} * padded + std::ptrdiff_t{c} * kLanes);
      INFERKIT_UNROLL for (int t = 0; t < kTok; ++t) acc[r][t] = Simd::fma(qv, k[t], acc[r][t]);
    }
  }
  pf.resume(cur);
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    INFERKIT_UNROLL for (int t = 0; t < kTok; ++t) {
      Simd::store(acc_out + std::ptrdiff_t{r * kTileTokens + j0 + t} * kLanes, acc[r][t]);
    }
  }
}

/// Direct PV for kRows rows and chunks [c0, c0 + kCh): o = o * alpha + sum_j p_j v_j, reading
/// and converting each V row chunk once for all rows. Issues `pf_lines` line pairs of the spread
/// prefetch per token. kMasked: row r skips the keys it does not see (keep[r]).
template <int kHeadDim, int kRows, int kCh, bool kRaw, bool kMasked, class KV>
INFERKIT_FORCEINLINE void pv_direct(AttentionScratch& s, std::int32_t padded, std::int32_t dim,
                                    const TileRows<KV>& tr, std::int32_t c0, std::int32_t count,
                                    const std::uint32_t* keep, SpreadPrefetcher<KV>& pf,
                                    std::int64_t pf_lines) noexcept {
  V acc[kRows][kCh];
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    INFERKIT_UNROLL for (int c = 0; c < kCh; ++c) {
      acc[r][c] =
          Simd::load(&s.o[scratch_index(std::int64_t{r} * padded + std::int64_t{c0 + c} * kLanes)]);
    }
  }
  if (s.rescale) {  // rare once the running max settles
    INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
      const V a = Simd::set1(s.alpha[static_cast<std::size_t>(r)]);
      INFERKIT_UNROLL for (int c = 0; c < kCh; ++c) acc[r][c] = Simd::mul(acc[r][c], a);
    }
  }
  auto cur = pf.cursor();
  for (std::int32_t j = 0; j < count; ++j) {
    pf.issue(cur, pf_lines);
    V offsets = Simd::zero();
    if constexpr (TileRows<KV>::kZeroPoints) offsets = Simd::int4_offsets(tr.v_zero[j]);
    V v[kCh];
    INFERKIT_UNROLL for (int c = 0; c < kCh; ++c) {
      v[c] = load_chunk<kHeadDim, kRaw>(tr.v[j] + kv_elements<KV>((c0 + c) * kLanes),
                                        dim - (c0 + c) * kLanes, offsets);
    }
    INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
      if (kMasked && !sees(keep[r], j)) continue;
      const V p = Simd::set1(s.p[scratch_index(std::int64_t{r} * kTileTokens + j)]);
      INFERKIT_UNROLL for (int c = 0; c < kCh; ++c) acc[r][c] = Simd::fma(p, v[c], acc[r][c]);
    }
  }
  pf.resume(cur);
  INFERKIT_UNROLL for (int r = 0; r < kRows; ++r) {
    INFERKIT_UNROLL for (int c = 0; c < kCh; ++c) {
      Simd::store(&s.o[scratch_index(std::int64_t{r} * padded + std::int64_t{c0 + c} * kLanes)],
                  acc[r][c]);
    }
  }
}

/// Online-softmax update of row r with this tile's 16 scores (kScoreVectors vectors): writes p
/// (times the `v_scale` lanes when given) and alpha, updates the running max and sum.
INFERKIT_FORCEINLINE void softmax_update(AttentionScratch& s, std::int32_t r, V* scores,
                                         std::uint32_t keep, float cap,
                                         const float* v_scale) noexcept {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr std::uint32_t kVectorBits = (1u << kLanes) - 1u;
  const auto ri = static_cast<std::size_t>(r);
  float* p = &s.p[ri * kTileTokens];
  if (keep == 0) {  // nothing visible in this tile: state unchanged
    std::fill_n(p, kTileTokens, 0.0f);
    s.alpha[ri] = 1.0f;
    return;
  }
  if (cap > 0.0f) {
    INFERKIT_UNROLL for (int i = 0; i < kScoreVectors; ++i) Simd::store(p + i * kLanes, scores[i]);
    for (int j = 0; j < kTileTokens; ++j) p[j] = cap * std::tanh(p[j] / cap);
    INFERKIT_UNROLL for (int i = 0; i < kScoreVectors; ++i) scores[i] = Simd::load(p + i * kLanes);
  }
  const float m_old = s.row_max[ri];
  bool grows = false;
  INFERKIT_UNROLL for (int i = 0; i < kScoreVectors; ++i) {
    scores[i] = Simd::keep_or(scores[i], (keep >> (i * kLanes)) & kVectorBits, kNegInf);
    grows = grows || Simd::any_greater(scores[i], m_old);
  }
  // After the first tiles the running max rarely moves: one compare settles that without the
  // horizontal max, and keeps it off the path from the scores to exp (same bits either way).
  float m_new = m_old;
  if (grows) {
    INFERKIT_UNROLL for (int i = 0; i < kScoreVectors; ++i) {
      m_new = std::max(m_new, Simd::reduce_max(scores[i]));
    }
  }
  const float alpha = m_old == m_new ? 1.0f : (m_old == kNegInf ? 0.0f : std::exp(m_old - m_new));
  float* sum = &s.row_sum[ri * kTileTokens];
  INFERKIT_UNROLL for (int i = 0; i < kScoreVectors; ++i) {
    V pv = Simd::exp_shifted(scores[i], m_new, (keep >> (i * kLanes)) & kVectorBits);
    const V old = Simd::load(sum + i * kLanes);
    Simd::store(sum + i * kLanes,
                alpha == 1.0f ? Simd::add(old, pv) : Simd::fma(old, Simd::set1(alpha), pv));
    if (v_scale != nullptr) pv = Simd::mul(pv, Simd::load(v_scale + i * kLanes));
    Simd::store(p + i * kLanes, pv);
  }
  s.row_max[ri] = m_new;
  s.alpha[ri] = alpha;
  if (alpha != 1.0f) s.rescale = true;
}

/// One 16-token tile of the direct (decode) path and what its loops need.
template <class KV>
struct DirectTile {
  const TileRows<KV>& tr;
  std::int32_t count;  ///< tokens in the tile (<= 16)
  std::int32_t dim;
  std::int32_t chunks;
  std::int32_t padded;
  float cap;
  bool scaled;
  const std::uint32_t* keep;  ///< per row: the tile's keys it sees
  bool masked;                ///< some row does not see some key of the tile
};

/// The PV passes of one direct tile: kCh chunks a pass, then one of 2 if at least 2 are left,
/// then single chunks (attend_rows_impl's pv_passes counts them for the prefetch quota).
template <int kHeadDim, int kRows, bool kRaw, bool kMasked, class KV>
INFERKIT_FORCEINLINE void pv_tile(const DirectTile<KV>& t, AttentionScratch& s,
                                  SpreadPrefetcher<KV>& pf, std::int64_t pf_lines) noexcept {
  constexpr int kCh = Simd::pv_chunks(kRows);
  std::int32_t c = 0;
  for (; c + kCh <= t.chunks; c += kCh) {
    pv_direct<kHeadDim, kRows, kCh, kRaw, kMasked>(s, t.padded, t.dim, t.tr, c, t.count, t.keep, pf,
                                                   pf_lines);
  }
  if (c + 2 <= t.chunks) {
    pv_direct<kHeadDim, kRows, 2, kRaw, kMasked>(s, t.padded, t.dim, t.tr, c, t.count, t.keep, pf,
                                                 pf_lines);
    c += 2;
  }
  for (; c < t.chunks; ++c) {
    pv_direct<kHeadDim, kRows, 1, kRaw, kMasked>(s, t.padded, t.dim, t.tr, c, t.count, t.keep, pf,
                                                 pf_lines);
  }
}

/// QK, online softmax and PV of one tile for kRows rows, K/V converted in registers (through the
/// raw e4m3 loads when kRaw): the tile-loop body of attend_rows_impl's direct path.
template <int kHeadDim, int kRows, bool kRaw, class KV>
INFERKIT_FORCEINLINE void decode_tile(const DirectTile<KV>& tile, AttentionScratch& s,
                                      SpreadPrefetcher<KV>& pf, std::int64_t pf_lines) noexcept {
  constexpr int kTok = Simd::qk_tokens(kRows);
  const TileRows<KV>& tr = tile.tr;
  const std::int32_t count = tile.count;
  const std::int32_t dim = tile.dim;
  const std::int32_t chunks = tile.chunks;
  const std::int32_t padded = tile.padded;
  std::int32_t j = 0;
  for (; j + kTok <= count; j += kTok) {
    qk_direct<kHeadDim, kRows, kTok, kRaw>(s.q.data(), padded, dim, chunks, tr, j, s.acc.data(), pf,
                                           pf_lines);
  }
  for (; j < count; ++j) {
    qk_direct<kHeadDim, kRows, 1, kRaw>(s.q.data(), padded, dim, chunks, tr, j, s.acc.data(), pf,
                                        pf_lines);
  }
  s.rescale = false;
  for (std::int32_t r = 0; r < kRows; ++r) {
    float* acc = &s.acc[scratch_index(r) * kTileTokens * kLanes];
    std::fill(acc + std::ptrdiff_t{count} * kLanes, acc + std::ptrdiff_t{kTileTokens} * kLanes,
              0.0f);
    V scores[kScoreVectors];
    INFERKIT_UNROLL for (int i = 0; i < kScoreVectors; ++i) {
      V parts[kLanes];
      INFERKIT_UNROLL for (int t = 0; t < kLanes; ++t) {
        parts[t] = Simd::load(acc + std::ptrdiff_t{i * kLanes + t} * kLanes);
      }
      scores[i] = Simd::reduce_lanes(parts);
      if (tile.scaled) scores[i] = Simd::mul(scores[i], Simd::load(tr.k_scale + i * kLanes));
    }
    softmax_update(s, r, scores, tile.keep[r], tile.cap, tile.scaled ? tr.v_scale : nullptr);
  }
  // p is 0 at a key a row does not see, but 0 x a NaN or infinite V would still reach the row:
  // tiles where some row does not see some key skip those (row, key) pairs.
  if (tile.masked) {
    pv_tile<kHeadDim, kRows, kRaw, true>(tile, s, pf, pf_lines);
  } else {
    pv_tile<kHeadDim, kRows, kRaw, false>(tile, s, pf, pf_lines);
  }
}

/// Attends the rows of `rows` to keys [kv_begin, kv_end) of `src` (positions are token indices
/// in the sequence) and writes normalized outputs and natural-log LSEs. A row that sees no key
/// gets out = 0, lse = -inf. `kHeadDim` = 0: runtime head_dim. `kRows` > 0: exactly that many
/// rows, K/V converted in registers and shared by all rows (decode); 0: any number of rows,
/// each K/V tile converted once to fp32 scratch (prefill).
template <int kHeadDim, int kRows, class KV>
void attend_rows_impl(const QueryRowBlock& rows, const KvHeadSource<KV>& src, std::int64_t kv_begin,
                      std::int64_t kv_end, std::int32_t head_dim, const AttentionParams& params,
                      std::int32_t prefetch_tokens_ahead, AttentionScratch& s) {
  const std::int32_t dim = kHeadDim > 0 ? kHeadDim : head_dim;
  const std::int32_t chunks = chunks_of(dim);
  const std::int32_t padded = padded_head_dim(dim);
  // The rows computed: kRows on the direct path, which may exceed the block's rows (3 rows run
  // as 4, 5 to 7 as 8: direct_path_rows), the extra ones with q = 0 and no output.
  const std::int32_t num_rows = kRows > 0 ? kRows : rows.num_rows();
  const std::int32_t real_rows = rows.num_rows();
  // The caller dispatches kHeadDim from head_dim and reserves the scratch for its largest block.
  INFERKIT_ASSERT(kHeadDim == 0 || kHeadDim == head_dim);
  INFERKIT_ASSERT(real_rows <= num_rows);
  INFERKIT_ASSERT(s.q.size() >=
                  static_cast<std::size_t>(num_rows) * static_cast<std::size_t>(padded));
  INFERKIT_ASSERT(kRows == 0 ||
                  s.acc.size() >= static_cast<std::size_t>(num_rows) * kTileTokens * kLanes);
  const float scale = params.resolved_scale(dim);
  const float cap = params.logit_soft_cap;
  const bool scaled = src.scale_mode != KvScaleMode::kNone;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  // Scaled queries in padded rows (zero tails), zero outputs.
  const std::int64_t q_head_stride = rows.q_head_stride != 0 ? rows.q_head_stride : dim;
  for (std::int32_t r = 0; r < num_rows; ++r) {
    float* qs = &s.q[scratch_index(r) * scratch_index(padded)];
    if (r < real_rows) {
      const std::int32_t t = r / rows.group;
      const std::int32_t g = r % rows.group;
      const float* q = rows.q + t * rows.q_token_stride + g * q_head_stride;
      for (std::int32_t d = 0; d < dim; ++d) qs[d] = q[d] * scale;
      for (std::int32_t d = dim; d < padded; ++d) qs[d] = 0.0f;
    } else {
      std::fill_n(qs, padded, 0.0f);
    }
    std::fill_n(&s.o[scratch_index(r) * scratch_index(padded)], padded, 0.0f);
    s.row_max[scratch_index(r)] = kNegInf;
    std::fill_n(&s.row_sum[scratch_index(r) * kTileTokens], kTileTokens, 0.0f);
  }
  TileRows<KV> tr;
  SpreadPrefetcher<KV> pf;
  const std::int64_t row_bytes = static_cast<std::int64_t>(sizeof(KV)) * kv_elements<KV>(dim);
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
  for (std::int64_t tok0 = kv_begin; tok0 < kv_end; tok0 += kTileTokens) {
    const auto count =
        static_cast<std::int32_t>(std::min<std::int64_t>(kTileTokens, kv_end - tok0));
    if constexpr (kRows > 0) {
      // Register tiles of the policy's shape: kRows x kTok QK accumulators plus kTok converted
      // K chunks, and kRows x kCh PV accumulators plus kCh V chunks.
      constexpr int kCh = Simd::pv_chunks(kRows);
      constexpr int kTok = Simd::qk_tokens(kRows);
      // The tile prefetch_tokens_ahead tokens ahead is prefetched over this tile's QK and PV
      // loops: each of their `steps` iterations (counted exactly) issues pf_lines of its K/V
      // line pairs, which rounds up, so the whole tile is issued.
      const std::int32_t rest = chunks % kCh;
      const std::int32_t pv_passes = chunks / kCh + (rest >= 2 ? rest - 1 : rest);
      const std::int32_t steps = (count / kTok + count % kTok) * chunks + pv_passes * count;
      if (prefetch_tokens_ahead > 0) pf.start(src, tok0 + prefetch_tokens_ahead, kv_end, row_bytes);
      const std::int64_t pf_lines = (pf.lines + steps - 1) / steps;
      tr.gather(src, tok0, count);
      std::uint32_t keep[kRows];
      bool masked = false;
      for (std::int32_t r = 0; r < kRows; ++r) {
        // A padding row sees what the last real row sees (its mask row, past the block's
        // tokens, is not read), so that it never turns an unmasked tile into a masked one.
        keep[r] = r < real_rows || r == 0 ? visible(r, tok0, count) : keep[r - 1];
        masked = masked || keep[r] != all_keys(count);
      }
      bool raw = false;
      if constexpr (kRawE4m3<KV>) raw = take_raw_e4m3<Simd>(tr, count, dim);
      const DirectTile<KV> tile{tr, count, dim, chunks, padded, cap, scaled, keep, masked};
      if (raw) {
        decode_tile<kHeadDim, kRows, kRawE4m3<KV>>(tile, s, pf, pf_lines);
      } else {
        decode_tile<kHeadDim, kRows, false>(tile, s, pf, pf_lines);
      }
    } else {
      if (prefetch_tokens_ahead > 0) {
        const std::int64_t pf_tok = tok0 + prefetch_tokens_ahead;
        prefetch_tokens(pf, src, pf_tok, std::min<std::int64_t>(pf_tok + kTileTokens, kv_end),
                        row_bytes);
      }
      load_kv_tile<kHeadDim>(src, tok0, count, dim, padded, s.k_tile.data(), s.v_tile.data());
      constexpr int kGroup = Simd::kPrefillTokens;
      for (std::int32_t r = 0; r < num_rows; ++r) {
        // S[j] = q_r . k_j, kGroup tokens at a time: kGroup accumulators, then reductions.
        const float* qs = &s.q[scratch_index(r) * scratch_index(padded)];
        V scores[kScoreVectors];
        INFERKIT_UNROLL for (int g0 = 0; g0 < kTileTokens; g0 += kGroup) {
          V acc[kGroup];
          INFERKIT_UNROLL for (auto& a : acc) a = Simd::zero();
          for (std::int32_t c = 0; c < chunks; ++c) {
            const V qv = Simd::load(qs + std::ptrdiff_t{c} * kLanes);
            INFERKIT_UNROLL for (int j = 0; j < kGroup; ++j) {
              acc[j] =
                  Simd::fma(qv,
                            Simd::load(&s.k_tile[scratch_index(g0 + j) * scratch_index(padded) +
                                                 scratch_index(c) * kLanes]),
                            acc[j]);
            }
          }
          INFERKIT_UNROLL for (int i = 0; i < kGroup / kLanes; ++i) {
            scores[g0 / kLanes + i] = Simd::reduce_lanes(acc + i * kLanes);
          }
        }
        s.keep[scratch_index(r)] = visible(r, tok0, count);
        softmax_update(s, r, scores, s.keep[scratch_index(r)], cap, nullptr);
      }
      pv_all_rows(s, num_rows, chunks, count, padded);
    }
  }

  for (std::int32_t r = 0; r < real_rows; ++r) {
    const std::int32_t t = r / rows.group;
    const std::int32_t g = r % rows.group;
    float* out = rows.out + t * rows.out_token_stride + std::int64_t{g} * dim;
    float sum = 0.0f;
    INFERKIT_UNROLL for (int i = 0; i < kScoreVectors; ++i) {
      sum += Simd::reduce_add(
          Simd::load(&s.row_sum[scratch_index(std::int64_t{r} * kTileTokens + i * kLanes)]));
    }
    // sum is exactly 0 for a row that sees no key; a NaN sum (a NaN key) stays NaN in both.
    const bool empty = sum == 0.0f;
    const float inv = empty ? 0.0f : 1.0f / sum;
    const float* o = &s.o[scratch_index(r) * scratch_index(padded)];
    for (std::int32_t d = 0; d < dim; ++d) out[d] = o[d] * inv;
    if (rows.lse != nullptr) {
      rows.lse[t * rows.lse_token_stride + g] =
          empty ? kNegInf : s.row_max[scratch_index(r)] + std::log(sum);
    }
  }
}

/// This path's entry points (a type, so tests and the driver can name a path as a template
/// argument).
struct IsaKernels {
  using Policy = Simd;
  static constexpr CpuIsa kIsa = CpuIsa::INFERKIT_TILE_CPU_ISA;

  /// Attends a block of rows (see attend_rows_impl): up to 8 rows take the direct (decode)
  /// path, as direct_path_rows() rows; more take the fp32-scratch (prefill) path.
  template <int kHeadDim, class KV>
  static void attend_rows(const QueryRowBlock& rows, const KvHeadSource<KV>& src,
                          std::int64_t kv_begin, std::int64_t kv_end, std::int32_t head_dim,
                          const AttentionParams& params, std::int32_t prefetch_tokens_ahead,
                          AttentionScratch& s) {
    switch (direct_path_rows(rows.num_rows())) {
      case 1:
        return attend_rows_impl<kHeadDim, 1>(rows, src, kv_begin, kv_end, head_dim, params,
                                             prefetch_tokens_ahead, s);
      case 2:
        return attend_rows_impl<kHeadDim, 2>(rows, src, kv_begin, kv_end, head_dim, params,
                                             prefetch_tokens_ahead, s);
      case 4:
        return attend_rows_impl<kHeadDim, 4>(rows, src, kv_begin, kv_end, head_dim, params,
                                             prefetch_tokens_ahead, s);
      case 8:
        return attend_rows_impl<kHeadDim, 8>(rows, src, kv_begin, kv_end, head_dim, params,
                                             prefetch_tokens_ahead, s);
      default:
        return attend_rows_impl<kHeadDim, 0>(rows, src, kv_begin, kv_end, head_dim, params,
                                             prefetch_tokens_ahead, s);
    }
  }
};

}  // namespace INFERKIT_TILE_ISA
}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

#undef INFERKIT_TILE_ISA
#undef INFERKIT_TILE_SIMD
#undef INFERKIT_TILE_CPU_ISA
// NOLINTEND(bugprone-implicit-widening-of-multiplication-result)
// NOLINTEND(bugprone-macro-parentheses)
