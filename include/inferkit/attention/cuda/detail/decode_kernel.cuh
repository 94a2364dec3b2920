// SPDX-License-Identifier: Apache-2.0
// The split-KV decode kernel (flash-decoding) on CUDA cores, fp32 math: one CTA per (work item,
// KV head) walks its KV chunk in tiles that cp.async streams into shared memory three deep.
// Every query row of the GQA group (times q_per_seq) is a "team" of threads that reads the same
// tile, so each K/V byte leaves global memory once per group; when the block has fewer rows than
// teams, the spare teams take other tokens of the tile (slices), merged at the end. Each team
// lane owns one 16-byte vector of the head (8 bytes, 16 dims, of packed int4, so that a 64-dim
// head still spreads over 4 lanes); a row's dot product is a shuffle sum over its team.
#pragma once

#if !defined(__CUDACC__)
#  error "inferkit/attention/cuda/detail/decode_kernel.cuh is CUDA code: compile it with nvcc"
#endif

#include <cstdint>
#include <inferkit/attention/attention_plan.hpp>
#include <inferkit/attention/cuda/detail/device_ops.cuh>
#include <inferkit/attention/cuda/detail/kernel_args.cuh>
#include <inferkit/attention/detail/kv_element_math.hpp>
#include <inferkit/attention/detail/softmax_state.hpp>
#include <limits>
#include <type_traits>

namespace inferkit::detail::cuda {

/// Compile-time shape of the decode kernel for one KV type and head size.
template <class KV, int kHeadDim>
struct DecodeConfig {
  /// Packed int4 (std::uint8_t): two dims a byte, a scale and a zero point per token and head.
  static constexpr bool kPackedInt4 = std::is_same_v<KV, std::uint8_t>;
  /// Bytes of one token's head.
  static constexpr int kRowBytes =
      kPackedInt4 ? kHeadDim / 2 : kHeadDim * static_cast<int>(sizeof(KV));
  static constexpr int kRowVectors = kRowBytes / 16;  ///< 16-byte copies per row
  /// Elements each lane of a team owns: one 16-byte vector, or 8 bytes of packed int4.
  static constexpr int kVec = kPackedInt4 ? 16 : 16 / static_cast<int>(sizeof(KV));
  static constexpr int kDimLanes = kHeadDim / kVec;  ///< threads that share one row's head
  static constexpr int kTeams = 8;                   ///< query rows (or token slices) per CTA
  static constexpr int kThreads = kTeams * kDimLanes;
  /// Tokens per tile: 4 KiB of K (and of V) per stage.
  static constexpr int kTileTokens = 4096 / kRowBytes;
  static constexpr int kStages = 3;       ///< tiles in flight
  static constexpr int kGroupTokens = 4;  ///< logits per softmax rescale of a team
  /// Zero points kept per stage: one per token for packed int4, none otherwise.
  static constexpr int kZeroTokens = kPackedInt4 ? kTileTokens : 1;
  static_assert(kDimLanes >= 4 && kDimLanes <= 32 && kHeadDim % kVec == 0 && kRowBytes % 16 == 0);
};

/// The `kVec` elements lane `lane` of a team owns in a row of a shared tile, as floats: widened
/// 16-byte vectors, or packed int4 codes minus the token's zero point `zero`.
template <class C, class KV>
__device__ __forceinline__ void lane_to_float(const uint4* row, int lane, float zero, float* out) {
  if constexpr (C::kPackedInt4) {
    const uint2 w = reinterpret_cast<const uint2*>(row)[lane];
    int4x8_to_float(w.x, zero, out);
    int4x8_to_float(w.y, zero, out + 8);
  } else {
    (void)zero;
    vec16_to_float<KV>(row[lane], out);
  }
}

/// Sum of `x` over the `kLanes` lanes of a team (aligned lane groups of a warp).
template <int kLanes>
__device__ __forceinline__ float team_sum(float x, unsigned mask) {
#pragma unroll
  for (int offset = kLanes / 2; offset >= 1; offset /= 2) x += __shfl_xor_sync(mask, x, offset);
  return x;
}

/// Elements of q/out per 32-bit word, element `j` of word `w` as a float, and a word of them.
template <class QO>
inline constexpr int kPerWord = 4 / static_cast<int>(sizeof(QO));
template <class QO>
__device__ __forceinline__ float word_element(std::uint32_t w, int j) {
  if constexpr (std::is_same_v<QO, float>) {
    return __uint_as_float(w);
  } else {
    return to_f32(QO::from_bits(static_cast<std::uint16_t>(w >> (16 * j))));
  }
}
template <class QO>
__device__ __forceinline__ std::uint32_t to_word(const float* x, float factor) {
  if constexpr (std::is_same_v<QO, float>) {
    return __float_as_uint(x[0] * factor);
  } else {
    return std::uint32_t{from_f32<QO>(x[0] * factor).bits} |
           (std::uint32_t{from_f32<QO>(x[1] * factor).bits} << 16);
  }
}

/// `N` consecutive elements of q/out (16-byte aligned) as floats, and back (times `factor`), in
/// 16-byte accesses; no local array has its address taken, so nothing lands in local memory.
template <int N, class QO>
__device__ __forceinline__ void load_row_chunk(const QO* p, float* out) {
  static_assert((N * sizeof(QO)) % 16 == 0);
  constexpr int kPer = kPerWord<QO>;
  const auto* v = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < N / (4 * kPer); ++i) {
    const uint4 w = v[i];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      out[(4 * i + 0) * kPer + j] = word_element<QO>(w.x, j);
      out[(4 * i + 1) * kPer + j] = word_element<QO>(w.y, j);
      out[(4 * i + 2) * kPer + j] = word_element<QO>(w.z, j);
      out[(4 * i + 3) * kPer + j] = word_element<QO>(w.w, j);
    }
  }
}
template <int N, class QO>
__device__ __forceinline__ void store_row_chunk(QO* p, const float* x, float factor) {
  constexpr int kPer = kPerWord<QO>;
  auto* v = reinterpret_cast<uint4*>(p);
#pragma unroll
  for (int i = 0; i < N / (4 * kPer); ++i) {
    const float* xi = x + 4 * i * kPer;
    v[i] = make_uint4(to_word<QO>(xi, factor), to_word<QO>(xi + kPer, factor),
                      to_word<QO>(xi + 2 * kPer, factor), to_word<QO>(xi + 3 * kPer, factor));
  }
}

/// Grid: (plan.num_items, num_kv_heads); block: DecodeConfig::kThreads. plan.rows_per_block
/// must be DecodeConfig::kTeams. Writes `out`/`lse` for unsplit sequences, the partial buffers
/// for split ones (merged by merge_chunks_kernel).
template <class KV, class QO, int kHeadDim>
__global__ void __launch_bounds__(DecodeConfig<KV, kHeadDim>::kThreads, 1)
    paged_decode_kernel(const __grid_constant__ AttentionKernelArgs<KV, QO> a,
                        const __grid_constant__ AttentionPlan plan) {
  using C = DecodeConfig<KV, kHeadDim>;
  constexpr int kVec = C::kVec;
  __shared__ alignas(16) uint4 k_tile[C::kStages][C::kTileTokens][C::kRowVectors];
  __shared__ alignas(16) uint4 v_tile[C::kStages][C::kTileTokens][C::kRowVectors];
  // sm_scale x page scale x fold (int4: x the token's scale)
  __shared__ float k_factor[C::kStages][C::kTileTokens];
  __shared__ float v_factor[C::kStages][C::kTileTokens];
  __shared__ float k_zero[C::kStages][C::kZeroTokens];  // packed int4: the token's zero points
  __shared__ float v_zero[C::kStages][C::kZeroTokens];
  __shared__ float slice_o[C::kTeams][kHeadDim];
  __shared__ float slice_max[C::kTeams];
  __shared__ float slice_sum[C::kTeams];

  const std::int32_t item = static_cast<std::int32_t>(blockIdx.x);
  const std::int32_t kv_head = static_cast<std::int32_t>(blockIdx.y);
  const ItemRange ir = resolve_item(a, plan, item);
  const WorkItem w = ir.item;
  const std::int32_t s = ir.seq;
  const std::int32_t row0 = ir.row0;
  const std::int32_t rows = ir.rows;
  const std::int64_t pos0 = ir.pos0;
  const std::int64_t lo = ir.lo;
  const std::int64_t hi = ir.hi;

  // Team layout: team = row + rows * slice; lane = which 16-byte vector of the head.
  const int tid = static_cast<int>(threadIdx.x);
  const int team = tid / C::kDimLanes;
  const int lane = tid % C::kDimLanes;
  const int slices = C::kTeams / rows;
  const bool active = team < rows * slices;
  const int row = team % rows;
  const int slice = team / rows;
  const std::int64_t pos = pos0 + (row0 + row) / a.group;
  const unsigned team_mask = C::kDimLanes == 32 ? 0xFFFFFFFFu
                                                : ((1u << C::kDimLanes) - 1u)
                                                      << ((tid % 32) / C::kDimLanes * C::kDimLanes);

  float q[kVec];
  float o[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) o[e] = 0.0f;
  if (active) {
    load_row_chunk<kVec>(a.q + a.q_offset(s, kv_head, row0 + row) + lane * kVec, q);
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) q[e] = 0.0f;
  }
  SoftmaxState state;

  // Tile `t` (tokens lo + t * kTileTokens ...) into stage buffer `buf`; slots past `hi` are
  // zero-filled and never read, so unwritten page slots never reach the math.
  constexpr int kPer16 = 16 / static_cast<int>(sizeof(KV));  // stored elements per 16 bytes
  const auto load_tile = [&](int buf, std::int64_t t0) {
    for (int v = tid; v < C::kTileTokens * C::kRowVectors; v += C::kThreads) {
      const int j = v / C::kRowVectors;
      const int c = v % C::kRowVectors;
      const std::int64_t p = t0 + j;
      const bool ok = p < hi;
      const TokenAddress at = ok ? token_address(a.kv, a.pages, s, kv_head, p) : TokenAddress{};
      cp_async_16(&k_tile[buf][j][c], a.kv.k + at.offset + c * kPer16, ok);
      cp_async_16(&v_tile[buf][j][c], a.kv.v + at.offset + c * kPer16, ok);
      if (c != 0) continue;
      if constexpr (C::kPackedInt4) {
        const auto slot = static_cast<std::int32_t>(p % a.kv.block_size);
        const std::int64_t si = ok ? a.kv.token_scale_index(at.block, kv_head, slot) : 0;
        k_factor[buf][j] = ok ? a.sm_scale * a.kv.k_scale[si] : 0.0f;
        v_factor[buf][j] = ok ? a.kv.v_scale[si] : 0.0f;
        k_zero[buf][j] = ok ? a.kv.k_zero[si] : 0.0f;
        v_zero[buf][j] = ok ? a.kv.v_zero[si] : 0.0f;
      } else {
        const std::int32_t heads = a.kv.num_kv_heads;
        k_factor[buf][j] =
            ok ? a.sm_scale * page_scale<KV>(a.kv.k_scale, at.block, heads, kv_head) : 0.0f;
        v_factor[buf][j] = ok ? page_scale<KV>(a.kv.v_scale, at.block, heads, kv_head) : 0.0f;
      }
    }
  };

  const int num_tiles = static_cast<int>((hi - lo + C::kTileTokens - 1) / C::kTileTokens);
#pragma unroll
  for (int t = 0; t < C::kStages - 1; ++t) {
    if (t < num_tiles) load_tile(t, lo + std::int64_t{t} * C::kTileTokens);
    cp_async_commit();
  }
  const float cap = a.params.logit_soft_cap;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int t = 0; t < num_tiles; ++t) {
    cp_async_wait<C::kStages - 2>();  // this thread's copies of tile t have landed
    __syncthreads();                  // everyone's have, and tile t - 1's buffer is free
    const int next = t + C::kStages - 1;
    if (next < num_tiles) load_tile(next % C::kStages, lo + std::int64_t{next} * C::kTileTokens);
    cp_async_commit();

    const int buf = t % C::kStages;
    const std::int64_t t0 = lo + std::int64_t{t} * C::kTileTokens;
    const int count = static_cast<int>(min(std::int64_t{C::kTileTokens}, hi - t0));
    if (!active) continue;
    for (int j0 = slice; j0 < count; j0 += slices * C::kGroupTokens) {
      float logit[C::kGroupTokens];
      float group_max = kNegInf;
#pragma unroll
      for (int i = 0; i < C::kGroupTokens; ++i) {
        const int j = j0 + i * slices;
        logit[i] = kNegInf;
        if (j < count && a.params.visible(pos, t0 + j)) {  // uniform over the team
          float k[kVec];
          lane_to_float<C, KV>(k_tile[buf][j], lane, C::kPackedInt4 ? k_zero[buf][j] : 0.0f, k);
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < kVec; ++e) dot = fmaf(q[e], k[e], dot);
          dot = team_sum<C::kDimLanes>(dot, team_mask);
          logit[i] = logit_log2(dot, k_factor[buf][j], cap);
          group_max = fmaxf(group_max, logit[i]);
        }
      }
      const float alpha = state.rescale(group_max);
#pragma unroll
      for (int e = 0; e < kVec; ++e) o[e] *= alpha;
#pragma unroll
      for (int i = 0; i < C::kGroupTokens; ++i) {
        const float p = state.weight(logit[i]);
        if (p != 0.0f) {  // masked tokens (p = 0) are never read: their slots may hold NaN
          const int j = j0 + i * slices;
          float v[kVec];
          lane_to_float<C, KV>(v_tile[buf][j], lane, C::kPackedInt4 ? v_zero[buf][j] : 0.0f, v);
          const float pv = p * v_factor[buf][j];
#pragma unroll
          for (int e = 0; e < kVec; ++e) o[e] = fmaf(pv, v[e], o[e]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Merge the token slices of each row (slice 0 keeps the result), then write.
  if (active) {
    slice_max[team] = state.max;
    slice_sum[team] = state.sum;
#pragma unroll
    for (int e = 0; e < kVec; ++e) slice_o[team][lane * kVec + e] = o[e];
  }
  __syncthreads();
  if (!active || slice != 0) return;
  for (int sl = 1; sl < slices; ++sl) {
    const int other = sl * rows + row;
    const SoftmaxState::Factors f = state.merge(SoftmaxState{slice_max[other], slice_sum[other]});
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      o[e] = o[e] * f.self + slice_o[other][lane * kVec + e] * f.other;
    }
  }
  const float inv = state.inverse_sum();
  if (plan.chunks[w.seq] == 1) {
    store_row_chunk<kVec>(a.out + a.row_offset(s, kv_head, row0 + row) + lane * kVec, o, inv);
    if (a.lse != nullptr && lane == 0) a.lse[a.lse_index(s, kv_head, row0 + row)] = state.lse();
  } else {
    const std::int64_t prow =
        (std::int64_t{kv_head} * plan.num_items + item) * plan.rows_per_block + row;
    store_row_chunk<kVec>(a.partial_out + prow * kHeadDim + lane * kVec, o, inv);
    if (lane == 0) a.partial_lse[prow] = state.lse();
  }
}

}  // namespace inferkit::detail::cuda
