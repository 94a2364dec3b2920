// SPDX-License-Identifier: Apache-2.0
// The linear-layer kernels of one instruction set. No include guard: each linear_simd_<isa>.hpp
// includes this file once, inside its target region, with INFERKIT_LINEAR_ISA (the namespace,
// which already holds that path's SIMD policy `Simd`) defined; it undefines it at the end.
//
// The reduction order is the contract that makes the result batch-invariant: y[t][r] is the sum
// over 16 lanes, lane i accumulating w[16j + i] * x[16j + i] for j = 0, 1, … in order by fused
// multiply-add from 0 (a row's last partial vector padded with w = x = 0), then the lanes added
// as ((i, i+8), then (i, i+4), (i, i+2), (i, i+1)). Both paths below (fused and panel) and every
// tile shape compute exactly that, each (row, token) inside one call, so y does not depend on n,
// on the other tokens or on how rows are split among threads. No OpenMP here: clang does not give
// OpenMP's outlined functions the region's target.
#if !defined(INFERKIT_LINEAR_ISA)
#  error "linear_kernels-inl.hpp is included by linear_simd_<isa>.hpp, once per instruction set"
#endif

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {
namespace INFERKIT_LINEAR_ISA {

using V = Simd::V;

/// Quantized block types: units of 32 values in two vectors (elements 0-15, then 16-31); float
/// types: units of 16 values in one vector.
template <GgmlType kType>
inline constexpr bool kBlockType =
    kType == GgmlType::kQ4_0 || kType == GgmlType::kQ4_1 || kType == GgmlType::kQ8_0;
template <GgmlType kType>
inline constexpr int kUnitVectors = kBlockType<kType> ? 2 : 1;
template <GgmlType kType>
inline constexpr std::int64_t kUnitValues = 16 * kUnitVectors<kType>;
template <GgmlType kType>
inline constexpr std::int64_t kUnitBytes = ggml_type_layout(kType)->block_bytes*(kBlockType<kType>
                                                                                     ? 1
                                                                                     : 16);

/// Calls `f(std::integral_constant<GgmlType, type>{})`: one kernel instantiation per type.
template <class F>
INFERKIT_FORCEINLINE void visit_type(GgmlType type, F&& f) {
  switch (type) {
    case GgmlType::kQ4_0:
      return f(std::integral_constant<GgmlType, GgmlType::kQ4_0>{});
    case GgmlType::kQ4_1:
      return f(std::integral_constant<GgmlType, GgmlType::kQ4_1>{});
    case GgmlType::kQ8_0:
      return f(std::integral_constant<GgmlType, GgmlType::kQ8_0>{});
    case GgmlType::kF16:
      return f(std::integral_constant<GgmlType, GgmlType::kF16>{});
    case GgmlType::kBF16:
      return f(std::integral_constant<GgmlType, GgmlType::kBF16>{});
    case GgmlType::kF32:
      return f(std::integral_constant<GgmlType, GgmlType::kF32>{});
  }
}

template <GgmlType kType>
inline constexpr int kScales = kType == GgmlType::kQ4_1 ? 2 : (kBlockType<kType> ? 1 : 0);
/// Floats a unit takes in a scale array (at least one, so float types can share the code).
template <GgmlType kType>
inline constexpr int kScaleSlots = kType == GgmlType::kQ4_1 ? 2 : 1;

/// Units per scale pass: the fp32 scales of up to 8 rows x 64 blocks sit in 4 KiB of stack.
inline constexpr std::int64_t kSegmentUnits = 64;

/// The fp32 block scales (d, then m for Q4_1) of units [u0, u0 + count) of the rows `w`, at
/// out[(r * count + u) * kScales + s]. Converted 16 at a time, so the unit loops broadcast them
/// from memory instead of converting each one through the shuffle port. The scale loads also
/// touch every line of the segment first, so its quant bytes are in flight before they are used.
template <GgmlType kType, int kRows>
INFERKIT_FORCEINLINE void load_scales(const std::byte* const (&w)[kRows], std::int64_t u0,
                                      std::int64_t count, float* out) noexcept {
  if constexpr (kBlockType<kType>) {
    // A block's scales are its first 2 bytes (4: d then m), copied as one word.
    constexpr std::size_t kWord = 2 * kScales<kType>;
    std::uint16_t halves[kRows * kSegmentUnits * kScales<kType>];
    auto* dst = reinterpret_cast<std::byte*>(halves);
    INFERKIT_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const std::byte* block = w[r] + u0 * kUnitBytes<kType>;
      std::int64_t u = 0;
      for (; u + 4 <= count; u += 4) {
        INFERKIT_UNROLL
        for (int k = 0; k < 4; ++k) {
          std::memcpy(dst + static_cast<std::size_t>(u + k) * kWord,
                      block + (u + k) * kUnitBytes<kType>, kWord);
        }
      }
      for (; u < count; ++u) {
        std::memcpy(dst + static_cast<std::size_t>(u) * kWord, block + u * kUnitBytes<kType>,
                    kWord);
      }
      dst += static_cast<std::size_t>(count) * kWord;
    }
    Simd::halfs_to_floats(halves, out, static_cast<int>(kRows * count * kScales<kType>));
  }
}

/// The 32 weights of a Q4_0 / Q4_1 block (quants at qs): (q - 8) d, exact, or q d + m, one FMA.
/// S is the policy (a parameter, so that only policies with kQ4Lookup need q4_lookup).
template <GgmlType kType, class S>
INFERKIT_FORCEINLINE void decode_q4(const std::byte* qs, V d, V m, V* w) noexcept {
  if constexpr (S::kQ4Lookup) {
    S::q4_lookup(
        qs, kType == GgmlType::kQ4_0 ? S::mul(S::q4_0_levels(), d) : S::fma(S::q4_1_levels(), d, m),
        w[0], w[1]);
  } else {
    S::nibbles(qs, w[0], w[1]);
    for (int v = 0; v < 2; ++v) {
      w[v] =
          kType == GgmlType::kQ4_0 ? S::mul(S::add(w[v], S::set1(-8.0f)), d) : S::fma(w[v], d, m);
    }
  }
}

/// The fp32 weights of one unit at `p` with its fp32 scales `scale`: w = (q - 8) d (Q4_0),
/// q d + m by one FMA (Q4_1), q d (Q8_0), the exact value (F16, BF16, F32).
template <GgmlType kType>
INFERKIT_FORCEINLINE void decode_unit(const std::byte* p, const float* scale, V* w) noexcept {
  if constexpr (kType == GgmlType::kQ4_0 || kType == GgmlType::kQ4_1) {
    const V m = kType == GgmlType::kQ4_0 ? Simd::zero() : Simd::set1(scale[1]);
    decode_q4<kType, Simd>(p + 2 * kScales<kType>, Simd::set1(scale[0]), m, w);
  } else if constexpr (kType == GgmlType::kQ8_0) {
    const V d = Simd::set1(scale[0]);
    w[0] = Simd::mul(Simd::int8s(p + 2), d);
    w[1] = Simd::mul(Simd::int8s(p + 18), d);
  } else if constexpr (kType == GgmlType::kF16) {
    w[0] = Simd::halfs(p);
  } else if constexpr (kType == GgmlType::kBF16) {
    w[0] = Simd::bhalfs(p);
  } else {
    w[0] = Simd::floats(p);
  }
}

/// The last `count` (1-15) values of a float-type row at `p`, zero-padded to a vector.
template <GgmlType kType>
INFERKIT_FORCEINLINE V decode_tail(const std::byte* p, int count) noexcept {
  if constexpr (kType == GgmlType::kF16) {
    return Simd::halfs_partial(p, count);
  } else if constexpr (kType == GgmlType::kBF16) {
    return Simd::bhalfs_partial(p, count);
  } else {
    return Simd::floats_partial(p, count);
  }
}

/// out[i] = Simd::hsum(acc[i]) for i < kCount, 16 at a time where the policy can (the same
/// additions, shuffled so that 16 sums share each add instruction).
template <int kCount>
INFERKIT_FORCEINLINE void hsum_n(const V* acc, float* out) noexcept {
  int i = 0;
  if constexpr (Simd::kBatchedHsum) {
    for (; i + 16 <= kCount; i += 16) Simd::hsum16(acc + i, out + i);
    if (kCount - i >= 8) {
      V padded[16];
      float sums[16];
      for (int k = 0; k < 16; ++k) padded[k] = i + k < kCount ? acc[i + k] : Simd::zero();
      Simd::hsum16(padded, sums);
      for (int k = 0; i + k < kCount; ++k) out[i + k] = sums[k];
      i = kCount;
    }
  }
  for (; i < kCount; ++i) out[i] = Simd::hsum(acc[i]);
}

/// Writes the lane sums of a kRows x kTokens accumulator tile for rows r0.. and tokens t0..,
/// skipping the clamped duplicates past the last row or token.
template <int kRows, int kTokens>
INFERKIT_FORCEINLINE void store_tile(const LinearJob& job, std::int64_t r0, std::int64_t t0,
                                     const V (&acc)[kRows][kTokens]) noexcept {
  float sums[kRows * kTokens];
  hsum_n<kRows * kTokens>(&acc[0][0], sums);
  INFERKIT_UNROLL
  for (int t = 0; t < kTokens; ++t) {
    if (t0 + t >= job.n) break;
    float* y = job.y + (t0 + t) * job.rows + r0;
    INFERKIT_UNROLL
    for (int r = 0; r < kRows; ++r) {
      if (r0 + r < job.rows) y[r] = sums[r * kTokens + t];
    }
  }
}

/// A tile's activation rows for tokens t0.. (past the last token: the last one again, computed
/// and never stored) and its zeroed accumulators.
template <int kRows, int kTokens>
INFERKIT_FORCEINLINE void start_tile(const LinearJob& job, std::int64_t t0,
                                     const float* (&x)[kTokens],
                                     V (&acc)[kRows][kTokens]) noexcept {
  INFERKIT_UNROLL
  for (int t = 0; t < kTokens; ++t) {
    x[t] = job.x + (t0 + t < job.n ? t0 + t : job.n - 1) * job.cols;
  }
  INFERKIT_UNROLL
  for (int r = 0; r < kRows; ++r) {
    INFERKIT_UNROLL
    for (int t = 0; t < kTokens; ++t) acc[r][t] = Simd::zero();
  }
}

/// Rows r0..r0+kRows-1 x tokens t0..t0+kTokens-1, decoding each weight unit in registers once
/// for all kTokens tokens. Rows and tokens past the end repeat the last one (and are not stored).
/// The tile after the next (rows are consecutive: 2 kRows rows on) is prefetched, a share of it
/// at each unit step.
template <GgmlType kType, int kRows, int kTokens>
inline void fused_tile(const LinearJob& job, std::int64_t r0, std::int64_t t0) noexcept {
  const std::byte* w[kRows];
  INFERKIT_UNROLL
  for (int r = 0; r < kRows; ++r) {
    w[r] = job.w + (r0 + r < job.rows ? r0 + r : job.rows - 1) * job.row_bytes;
  }
  const float* x[kTokens];
  V acc[kRows][kTokens];
  start_tile(job, t0, x, acc);
  constexpr int kVectors = kUnitVectors<kType>;
  constexpr int kS = kScaleSlots<kType>;
  const std::int64_t units = job.cols / kUnitValues<kType>;
  std::int64_t ahead = (r0 + std::int64_t{2} * kRows) * job.row_bytes;
  const std::int64_t ahead_end = job.rows * job.row_bytes;
  const std::int64_t ahead_step = (kRows * job.row_bytes / (units > 0 ? units : 1) + 63) / 64 * 64;
  float scales[kRows * kSegmentUnits * kS];
  for (std::int64_t u0 = 0; u0 < units; u0 += kSegmentUnits) {
    const std::int64_t count = units - u0 < kSegmentUnits ? units - u0 : kSegmentUnits;
    load_scales<kType, kRows>(w, u0, count, scales);
    for (std::int64_t u = 0; u < count; ++u) {
      for (std::int64_t b = 0; b < ahead_step && ahead < ahead_end; b += 64, ahead += 64) {
        Simd::prefetch(job.w + ahead);
      }
      const std::int64_t e = (u0 + u) * kUnitValues<kType>;
      V xv[kTokens][kVectors];
      INFERKIT_UNROLL
      for (int t = 0; t < kTokens; ++t) {
        INFERKIT_UNROLL
        for (int v = 0; v < kVectors; ++v) xv[t][v] = Simd::load(x[t] + e + 16 * v);
      }
      INFERKIT_UNROLL
      for (int r = 0; r < kRows; ++r) {
        V wv[kVectors];
        decode_unit<kType>(w[r] + (u0 + u) * kUnitBytes<kType>, scales + (r * count + u) * kS, wv);
        INFERKIT_UNROLL
        for (int t = 0; t < kTokens; ++t) {
          INFERKIT_UNROLL
          for (int v = 0; v < kVectors; ++v) acc[r][t] = Simd::fma(wv[v], xv[t][v], acc[r][t]);
        }
      }
    }
  }
  if constexpr (!kBlockType<kType>) {
    const auto rem = static_cast<int>(job.cols - units * 16);
    if (rem > 0) {
      V xv[kTokens];
      INFERKIT_UNROLL
      for (int t = 0; t < kTokens; ++t) xv[t] = Simd::load_partial(x[t] + units * 16, rem);
      INFERKIT_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const V wv = decode_tail<kType>(w[r] + units * kUnitBytes<kType>, rem);
        INFERKIT_UNROLL
        for (int t = 0; t < kTokens; ++t) acc[r][t] = Simd::fma(wv, xv[t], acc[r][t]);
      }
    }
  }
  store_tile<kRows, kTokens>(job, r0, t0, acc);
}

/// Decodes one row of `cols` values to fp32 at `out`: exactly `cols` floats, or with `padded`,
/// zeros after them up to whole vectors.
template <GgmlType kType>
inline void decode_row(const std::byte* row, std::int64_t cols, float* out, bool padded) noexcept {
  constexpr int kVectors = kUnitVectors<kType>;
  constexpr int kS = kScaleSlots<kType>;
  const std::byte* const rows[1] = {row};
  const std::int64_t units = cols / kUnitValues<kType>;
  float scales[kSegmentUnits * kS];
  for (std::int64_t u0 = 0; u0 < units; u0 += kSegmentUnits) {
    const std::int64_t count = units - u0 < kSegmentUnits ? units - u0 : kSegmentUnits;
    load_scales<kType, 1>(rows, u0, count, scales);
    for (std::int64_t u = 0; u < count; ++u) {
      V wv[kVectors];
      decode_unit<kType>(row + (u0 + u) * kUnitBytes<kType>, scales + u * kS, wv);
      INFERKIT_UNROLL
      for (int v = 0; v < kVectors; ++v) {
        Simd::store(out + (u0 + u) * kUnitValues<kType> + 16 * v, wv[v]);
      }
    }
  }
  if constexpr (!kBlockType<kType>) {
    const auto rem = static_cast<int>(cols - units * 16);
    if (rem > 0) {
      const V tail = decode_tail<kType>(row + units * kUnitBytes<kType>, rem);
      if (padded) {
        Simd::store(out + units * 16, tail);
      } else {
        float bounce[16];
        Simd::store(bounce, tail);
        std::memcpy(out + units * 16, bounce, static_cast<std::size_t>(rem) * sizeof(float));
      }
    }
  }
}

/// kRows x kTokens outputs from fp32 weight rows `w` (`stride` floats apart, `valid` of them
/// real: later ones repeat the last) for rows r0.. and tokens t0..: each weight vector is loaded
/// once for kTokens tokens, each activation vector once for kRows rows.
template <int kRows, int kTokens>
inline void panel_tile(const float* w, std::int64_t stride, std::int64_t valid,
                       const LinearJob& job, std::int64_t r0, std::int64_t t0) noexcept {
  const float* wr[kRows];
  INFERKIT_UNROLL
  for (int r = 0; r < kRows; ++r) wr[r] = w + (r < valid ? r : valid - 1) * stride;
  const float* x[kTokens];
  V acc[kRows][kTokens];
  start_tile(job, t0, x, acc);
  const std::int64_t chunks = job.cols / 16;
  for (std::int64_t j = 0; j < chunks; ++j) {
    V wv[kRows];
    INFERKIT_UNROLL
    for (int r = 0; r < kRows; ++r) wv[r] = Simd::load(wr[r] + 16 * j);
    INFERKIT_UNROLL
    for (int t = 0; t < kTokens; ++t) {
      const V xv = Simd::load(x[t] + 16 * j);
      INFERKIT_UNROLL
      for (int r = 0; r < kRows; ++r) acc[r][t] = Simd::fma(wv[r], xv, acc[r][t]);
    }
  }
  const auto rem = static_cast<int>(job.cols - chunks * 16);
  if (rem > 0) {
    V wv[kRows];
    INFERKIT_UNROLL
    for (int r = 0; r < kRows; ++r) wv[r] = Simd::load_partial(wr[r] + 16 * chunks, rem);
    INFERKIT_UNROLL
    for (int t = 0; t < kTokens; ++t) {
      const V xv = Simd::load_partial(x[t] + 16 * chunks, rem);
      INFERKIT_UNROLL
      for (int r = 0; r < kRows; ++r) acc[r][t] = Simd::fma(wv[r], xv, acc[r][t]);
    }
  }
  store_tile<kRows, kTokens>(job, r0, t0, acc);
}

/// Rows [r0, r1) of the job, all tokens. `scratch` holds linear_scratch_floats(job) floats.
template <GgmlType kType>
inline void linear_rows_of(const LinearJob& job, std::int64_t r0, std::int64_t r1,
                           float* scratch) noexcept {
  // store_tile writes every computed row below job.rows, so a tile must never reach into the
  // next thread's rows (which start at a multiple of kLinearPanelRows).
  static_assert(kLinearPanelRows % Simd::kFusedRows == 0 && Simd::kFusedRows % 2 == 0 &&
                    kLinearPanelRows % Simd::kTileRows == 0,
                "register tiles must divide kLinearPanelRows");
  if (job.n == 1) {
    for (std::int64_t r = r0; r < r1; r += Simd::kFusedRows) {
      fused_tile<kType, Simd::kFusedRows, 1>(job, r, 0);
    }
    return;
  }
  if (job.n <= kLinearFusedMaxTokens) {
    constexpr int kRows = Simd::kFusedRows / 2;
    for (std::int64_t r = r0; r < r1; r += kRows) fused_tile<kType, kRows, 2>(job, r, 0);
    return;
  }
  // Tokens in blocks whose activations stay in L2 next to the panel; each block decodes the
  // panels again (cheap next to the block's multiply-adds).
  const std::int64_t block_tokens = linear_token_block(job.cols, Simd::kTileTokens);
  for (std::int64_t t0 = 0; t0 < job.n; t0 += block_tokens) {
    const std::int64_t t1 = job.n - t0 < block_tokens ? job.n : t0 + block_tokens;
    for (std::int64_t p = r0; p < r1; p += kLinearPanelRows) {
      const std::int64_t count = r1 - p < kLinearPanelRows ? r1 - p : kLinearPanelRows;
      const float* panel = nullptr;
      std::int64_t stride = 0;
      if constexpr (kType == GgmlType::kF32) {
        // fp32 rows are already what a decoded panel holds (rows are not padded: the tail is
        // read with a partial load, which gives the same zero lanes).
        panel = reinterpret_cast<const float*>(job.w + p * job.row_bytes);
        stride = job.cols;
      } else {
        stride = linear_panel_stride(job.cols);
        for (std::int64_t r = 0; r < count; ++r) {
          decode_row<kType>(job.w + (p + r) * job.row_bytes, job.cols, scratch + r * stride, true);
        }
        panel = scratch;
      }
      for (std::int64_t t = t0; t < t1; t += Simd::kTileTokens) {
        for (std::int64_t r = 0; r < count; r += Simd::kTileRows) {
          panel_tile<Simd::kTileRows, Simd::kTileTokens>(panel + r * stride, stride, count - r, job,
                                                         p + r, t);
        }
      }
    }
  }
}

/// The entry point of this path: rows [r0, r1) of `job` for every token.
inline void linear_rows(const LinearJob& job, std::int64_t r0, std::int64_t r1,
                        float* scratch) noexcept {
  visit_type(job.type,
             [&](auto type) { linear_rows_of<decltype(type)::value>(job, r0, r1, scratch); });
}

/// `cols` fp32 values of one row of `type` at `row` into `out` (the weights the kernels use).
inline void dequantize(GgmlType type, const std::byte* row, std::int64_t cols,
                       float* out) noexcept {
  visit_type(type, [&](auto t) { decode_row<decltype(t)::value>(row, cols, out, false); });
}

}  // namespace INFERKIT_LINEAR_ISA
}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

#undef INFERKIT_LINEAR_ISA
