// SPDX-License-Identifier: Apache-2.0
// The prefill kernel on tensor cores (FlashAttention-2 shape, mma.sync m16n8k16, fp16/bf16,
// sm_80+): a CTA takes 64 query rows of one (sequence, KV head) — GQA heads packed into the rows,
// so a K/V tile is loaded once for the whole group — and one KV chunk, which cp.async streams in
// double-buffered tiles into XOR-swizzled shared memory. Each warp owns 16 rows: S = Q K^T, the
// causal / window / custom-mask / soft-cap logits, an online softmax in fp32 registers, and
// O += P V with P reused from the S accumulators as the A operand.
#pragma once

#if !defined(__CUDACC__)
#  error "inferkit/attention/cuda/detail/prefill_kernel.cuh is CUDA code: compile it with nvcc"
#endif

#include <cstdint>
#include <inferkit/attention/attention_plan.hpp>
#include <inferkit/attention/cuda/detail/decode_kernel.cuh>
#include <inferkit/attention/cuda/detail/device_ops.cuh>
#include <inferkit/attention/cuda/detail/kernel_args.cuh>
#include <inferkit/attention/detail/kv_element_math.hpp>
#include <inferkit/attention/detail/softmax_state.hpp>
#include <limits>

namespace inferkit::detail::cuda {

/// Compile-time shape of the prefill kernel.
template <int kHeadDim>
struct PrefillConfig {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kWarps;                  ///< query rows per CTA
  static constexpr int kKvTile = kHeadDim <= 128 ? 64 : 16;  ///< tokens per K/V tile
  static constexpr int kChunks = kHeadDim / 8;               ///< 16-byte chunks per row
  static constexpr int kSTiles = kKvTile / 8;                ///< n-tiles of S per warp
  static constexpr int kOTiles = kHeadDim / 8;               ///< n-tiles of O per warp
  /// Dynamic shared memory: Q tile, then two K and two V tiles, 16-bit elements.
  static constexpr int kSmemBytes = (kRows + 4 * kKvTile) * kHeadDim * 2;
  static_assert(kChunks % 8 == 0, "the swizzle needs rows of a multiple of 8 chunks");
};

/// Causal / window / chunk / custom-mask visibility of key `key` to one row (query position
/// `pos`, mask row `mask_row`, nullptr without a custom mask).
__device__ __forceinline__ bool prefill_visible(const AttentionParams& params, std::int64_t pos,
                                                std::int64_t key, std::int64_t lo, std::int64_t hi,
                                                const std::uint8_t* mask_row) {
  return key >= lo && key < hi && params.visible(pos, key) &&
         (mask_row == nullptr || mask_row[key] != 0);
}

/// Grid: (plan.num_items, num_kv_heads); block: kThreads; dynamic shared memory kSmemBytes.
/// plan.rows_per_block must be kRows. `mask_begin[s]` is the first custom-mask byte of sequence
/// s of the launch (see PagedPrefillArgs::custom_mask).
template <class KV, class QO, int kHeadDim>
__global__ void __launch_bounds__(PrefillConfig<kHeadDim>::kThreads)
    paged_prefill_kernel(const __grid_constant__ AttentionKernelArgs<KV, QO> a,
                         const __grid_constant__ AttentionPlan plan,
                         const __grid_constant__ MaskPlan mask_plan) {
  using C = PrefillConfig<kHeadDim>;
  extern __shared__ uint4 smem[];
  uint4* q_tile = smem;                                    // [kRows][kChunks] swizzled
  uint4* k_tiles = q_tile + C::kRows * C::kChunks;         // [2][kKvTile][kChunks]
  uint4* v_tiles = k_tiles + 2 * C::kKvTile * C::kChunks;  // [2][kKvTile][kChunks]
  const auto at = [](uint4* tile, int row, int chunk) {
    return tile + row * C::kChunks + swizzled_chunk(row, chunk);
  };

  const std::int32_t item = static_cast<std::int32_t>(blockIdx.x);
  const std::int32_t kv_head = static_cast<std::int32_t>(blockIdx.y);
  const ItemRange ir = resolve_item(a, plan, item);
  const WorkItem w = ir.item;
  const std::int32_t s = ir.seq;
  const std::int32_t row0 = ir.row0;
  const std::int32_t rows = ir.rows;
  const std::int64_t kv_len = ir.kv_len;
  const std::int64_t pos0 = ir.pos0;
  const std::int64_t lo = ir.lo;
  const std::int64_t hi = ir.hi;

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;   // fragment row group
  const int t4 = lane % 4;  // thread in group

  // Q rows (converted to KV's 16-bit type); padding rows are zero.
  for (int v = tid; v < C::kRows * C::kChunks; v += C::kThreads) {
    const int r = v / C::kChunks;
    const int c = v % C::kChunks;
    uint4 packed = make_uint4(0, 0, 0, 0);
    if (r < rows) {
      float x[8];
      load_row_chunk<8>(a.q + a.q_offset(s, kv_head, row0 + r) + c * 8, x);
      packed = make_uint4(pack2<KV>(x[0], x[1]), pack2<KV>(x[2], x[3]), pack2<KV>(x[4], x[5]),
                          pack2<KV>(x[6], x[7]));
    }
    *at(q_tile, r, c) = packed;
  }

  const auto load_kv = [&](int buf, std::int64_t t0) {
    uint4* kb = k_tiles + buf * C::kKvTile * C::kChunks;
    uint4* vb = v_tiles + buf * C::kKvTile * C::kChunks;
    for (int v = tid; v < C::kKvTile * C::kChunks; v += C::kThreads) {
      const int j = v / C::kChunks;
      const int c = v % C::kChunks;
      const std::int64_t p = t0 + j;
      const bool ok = p < hi;  // zero-filled past the chunk: P = 0 must meet V = 0, not NaN
      const std::int64_t off = ok ? token_address(a.kv, a.pages, s, kv_head, p).offset : 0;
      cp_async_16(at(kb, j, c), a.kv.k + off + c * 8, ok);
      cp_async_16(at(vb, j, c), a.kv.v + off + c * 8, ok);
    }
  };

  // This thread's two rows (g and g + 8 of its warp's 16): positions and mask rows.
  std::int64_t pos[2];
  const std::uint8_t* mask_row[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = row0 + warp * 16 + g + 8 * h;  // row of the sequence
    pos[h] = pos0 + r / a.group;
    mask_row[h] = a.custom_mask != nullptr
                      ? a.custom_mask + mask_plan.begin[w.seq] + std::int64_t{r / a.group} * kv_len
                      : nullptr;
  }

  float o[C::kOTiles][4];
#pragma unroll
  for (int i = 0; i < C::kOTiles; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  SoftmaxState state[2];
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const float cap = a.params.logit_soft_cap;

  const int num_tiles = static_cast<int>((hi - lo + C::kKvTile - 1) / C::kKvTile);
  if (num_tiles > 0) load_kv(0, lo);
  cp_async_commit();
  for (int t = 0; t < num_tiles; ++t) {
    __syncthreads();  // every warp is done with tile t - 1, whose buffer is reloaded next
    if (t + 1 < num_tiles) load_kv((t + 1) % 2, lo + std::int64_t{t + 1} * C::kKvTile);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // tile t (and the Q tile) visible to every warp
    uint4* kb = k_tiles + (t % 2) * C::kKvTile * C::kChunks;
    uint4* vb = v_tiles + (t % 2) * C::kKvTile * C::kChunks;
    const std::int64_t t0 = lo + std::int64_t{t} * C::kKvTile;

    // S = Q K^T for this warp's 16 rows and the tile's kKvTile keys.
    float sc[C::kSTiles][4];
#pragma unroll
    for (int i = 0; i < C::kSTiles; ++i) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      std::uint32_t qa[4];
      ldmatrix_x4(qa, at(q_tile, warp * 16 + lane % 16, 2 * kk + lane / 16));
#pragma unroll
      for (int np = 0; np < C::kSTiles / 2; ++np) {
        std::uint32_t kb4[4];
        ldmatrix_x4(kb4, at(kb, np * 16 + lane % 8 + (lane / 16) * 8, 2 * kk + (lane / 8) % 2));
        mma_16x8x16<KV>(sc[2 * np], qa, kb4[0], kb4[1]);
        mma_16x8x16<KV>(sc[2 * np + 1], qa, kb4[2], kb4[3]);
      }
    }

    // Logits, masks, and the online softmax of the thread's two rows (a row's 4 threads share
    // its max through two shuffles; each keeps a partial sum, added up at the end).
    float row_max[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int i = 0; i < C::kSTiles; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        const std::int64_t key = t0 + i * 8 + 2 * t4 + e % 2;
        const bool ok = prefill_visible(a.params, pos[h], key, lo, hi, mask_row[h]);
        sc[i][e] = ok ? logit_log2(sc[i][e], a.sm_scale, cap) : kNegInf;
        row_max[h] = fmaxf(row_max[h], sc[i][e]);
      }
    }
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xFFFFFFFFu, row_max[h], 1));
      row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xFFFFFFFFu, row_max[h], 2));
      alpha[h] = state[h].rescale(row_max[h]);
    }
#pragma unroll
    for (int i = 0; i < C::kOTiles; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }
#pragma unroll
    for (int i = 0; i < C::kSTiles; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[i][e] = state[e / 2].weight(sc[i][e]);
    }

    // O += P V: P (the S accumulators, rounded to KV's type) is the A operand as it lies.
#pragma unroll
    for (int kk = 0; kk < C::kKvTile / 16; ++kk) {
      const std::uint32_t pa[4] = {pack2<KV>(sc[2 * kk][0], sc[2 * kk][1]),
                                   pack2<KV>(sc[2 * kk][2], sc[2 * kk][3]),
                                   pack2<KV>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                                   pack2<KV>(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < C::kOTiles / 2; ++dp) {
        std::uint32_t vb4[4];
        ldmatrix_x4_trans(vb4,
                          at(vb, kk * 16 + lane % 8 + ((lane / 8) % 2) * 8, 2 * dp + lane / 16));
        mma_16x8x16<KV>(o[2 * dp], pa, vb4[0], vb4[1]);
        mma_16x8x16<KV>(o[2 * dp + 1], pa, vb4[2], vb4[3]);
      }
    }
  }
  cp_async_wait<0>();

  // Row sums over the 4 threads of a row, then normalized rows to out or the partials.
  const bool split = plan.chunks[w.seq] > 1;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    state[h].sum += __shfl_xor_sync(0xFFFFFFFFu, state[h].sum, 1);
    state[h].sum += __shfl_xor_sync(0xFFFFFFFFu, state[h].sum, 2);
    const int r = warp * 16 + g + 8 * h;  // row of the block
    if (r >= rows) continue;
    const float inv = state[h].inverse_sum();
    const std::int64_t prow =
        (std::int64_t{kv_head} * plan.num_items + item) * plan.rows_per_block + r;
    if (split) {
      float* dst = a.partial_out + prow * kHeadDim;
#pragma unroll
      for (int i = 0; i < C::kOTiles; ++i) {
        dst[i * 8 + 2 * t4] = o[i][2 * h] * inv;
        dst[i * 8 + 2 * t4 + 1] = o[i][2 * h + 1] * inv;
      }
      if (t4 == 0) a.partial_lse[prow] = state[h].lse();
    } else {
      QO* dst = a.out + a.row_offset(s, kv_head, row0 + r);
#pragma unroll
      for (int i = 0; i < C::kOTiles; ++i) {
        dst[i * 8 + 2 * t4] = from_f32<QO>(o[i][2 * h] * inv);
        dst[i * 8 + 2 * t4 + 1] = from_f32<QO>(o[i][2 * h + 1] * inv);
      }
      if (t4 == 0 && a.lse != nullptr) a.lse[a.lse_index(s, kv_head, row0 + r)] = state[h].lse();
    }
  }
}

}  // namespace inferkit::detail::cuda
