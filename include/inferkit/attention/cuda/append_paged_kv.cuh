// SPDX-License-Identifier: Apache-2.0
// append_paged_kv on CUDA: writes a step's new K/V rows into their page slots (the slot mapping
// BlockTable::append_tokens produces), converting to fp16/bf16, or quantizing to fp8 with the
// CPU PagedKVCache's per-(block, head) power-of-two scale: writing slot 0 starts a block afresh,
// a later token that needs a larger scale rescales the block's earlier slots. The fp8 path runs
// each run of consecutive tokens in one block on one warp, in token order, so its codes and
// scales are bit-identical to the CPU's for the same appends.
// Threads: a launcher without host state, callable from any host thread; appends that write the
// same blocks (or their fp8 scales) must be ordered by the caller (one stream, or events).
#pragma once

#if !defined(__CUDACC__)
#  error "inferkit/attention/cuda/append_paged_kv.cuh is CUDA code: compile this file with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstdint>
#include <inferkit/attention/attention.hpp>
#include <inferkit/attention/cuda/detail/device_ops.cuh>
#include <inferkit/core/backend.hpp>
#include <inferkit/core/cuda/cuda_check.cuh>
#include <inferkit/core/error.hpp>
#include <inferkit/kv/kv_quantization.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <type_traits>

namespace inferkit::detail::cuda {

inline constexpr int kAppendThreads = 256;

/// 16-bit KV: one thread per 8 elements of one (token, head) row.
template <class KV, class In>
__global__ void __launch_bounds__(kAppendThreads)
    append_kv16_kernel(PagedKVView<KV> kv, const std::int64_t* slots, std::int32_t num_tokens,
                       const In* k, const In* v) {
  const std::int64_t per_token = std::int64_t{kv.num_kv_heads} * kv.head_dim / 8;
  const std::int64_t i = std::int64_t{blockIdx.x} * kAppendThreads + threadIdx.x;
  if (i >= per_token * num_tokens) return;
  const std::int64_t token = i / per_token;
  const std::int64_t slot = slots[token];
  if (slot < 0) return;  // padding token
  const std::int64_t rest = i % per_token;
  const auto head = static_cast<std::int32_t>(rest / (kv.head_dim / 8));
  const auto chunk = static_cast<std::int32_t>(rest % (kv.head_dim / 8));
  const std::int64_t dst = kv.offset(static_cast<std::int32_t>(slot / kv.block_size), head,
                                     static_cast<std::int32_t>(slot % kv.block_size)) +
                           chunk * 8;
  const std::int64_t src = (token * kv.num_kv_heads + head) * kv.head_dim + chunk * 8;
  for (int t = 0; t < 2; ++t) {
    const In* in = (t == 0 ? k : v) + src;
    KV* out = (t == 0 ? kv.k : kv.v) + dst;
    uint4 packed;
    std::uint32_t* words = &packed.x;
#pragma unroll
    for (int e = 0; e < 4; ++e) words[e] = pack2<KV>(to_f32(in[2 * e]), to_f32(in[2 * e + 1]));
    *reinterpret_cast<uint4*>(out) = packed;
  }
}

/// fp8 KV: one warp per (token that starts a run of consecutive slots in one block, head).
template <class KV, class In>
__global__ void __launch_bounds__(kAppendThreads)
    append_fp8_kernel(PagedKVView<KV> kv, const std::int64_t* slots, std::int32_t num_tokens,
                      const In* k, const In* v) {
  const std::int64_t warp = (std::int64_t{blockIdx.x} * kAppendThreads + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= std::int64_t{num_tokens} * kv.num_kv_heads) return;
  const auto first = static_cast<std::int32_t>(warp / kv.num_kv_heads);
  const auto head = static_cast<std::int32_t>(warp % kv.num_kv_heads);
  const auto same_run = [&](std::int32_t i) {  // token i continues token i - 1's run
    return i > 0 && slots[i] >= 0 && slots[i - 1] >= 0 && slots[i] == slots[i - 1] + 1 &&
           slots[i] / kv.block_size == slots[i - 1] / kv.block_size;
  };
  if (slots[first] < 0 || same_run(first)) return;
  constexpr float kMax = KVStorageTraits<KV>::kMaxFinite;
  const std::int32_t dim = kv.head_dim;
  const auto block = static_cast<std::int32_t>(slots[first] / kv.block_size);
  for (int t = 0; t < 2; ++t) {
    const In* in = t == 0 ? k : v;
    KV* pages = t == 0 ? kv.k : kv.v;
    float* scale = const_cast<float*>(t == 0 ? kv.k_scale : kv.v_scale) +
                   std::int64_t{block} * kv.num_kv_heads + head;
    float current = *scale;
    for (std::int32_t i = first; i < num_tokens && (i == first || same_run(i)); ++i) {
      const auto slot = static_cast<std::int32_t>(slots[i] % kv.block_size);
      const In* x = in + (std::int64_t{i} * kv.num_kv_heads + head) * dim;
      float amax = 0.0f;
      for (std::int32_t d = lane; d < dim; d += 32) amax = fmaxf(amax, fabsf(to_f32(x[d])));
#pragma unroll
      for (int off = 16; off >= 1; off /= 2) {
        amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
      }
      if (slot == 0) current = 0.0f;
      const float need = fp8_block_scale(amax, kMax);
      const float use = need > current ? need : current;
      KV* page = pages + kv.offset(block, head, 0);
      if (slot > 0 && use != current && current != 0.0f) {
        const float ratio = current / use;
        for (std::int32_t e = lane; e < slot * dim; e += 32) {
          page[e] = KV(static_cast<float>(page[e]) * ratio);
        }
      }
      const float inv = use == 0.0f ? 0.0f : 1.0f / use;
      for (std::int32_t d = lane; d < dim; d += 32) {
        page[std::int64_t{slot} * dim + d] = KV(to_f32(x[d]) * inv);
      }
      current = use;
      __syncwarp();  // this token's codes are visible to the lanes that may rescale them next
    }
    if (lane == 0) *scale = current;
  }
}

}  // namespace inferkit::detail::cuda

namespace inferkit {

/// Writes `num_tokens` new tokens' K and V (`k`, `v`: [num_tokens][num_kv_heads][head_dim] of
/// `In` = float, float16 or bfloat16, device memory) into the pages of `kv` (device) at
/// `slot_mapping[i]` (device, -1 skips a padding token). KV float16/bfloat16 store the rounded
/// values; fp8 e4m3/e5m2 quantize with the CPU PagedKVCache's block-scale rule and write the
/// scales `kv.k_scale` / `kv.v_scale` point to (they must be writable device memory).
/// Precondition: the tokens a call writes into one block are consecutive in the call and in
/// slot order (as BlockTable::append_tokens gives them). head_dim must be a multiple of 8.
/// Asynchronous on `backend.stream`. Throws `Error{kInvalidArgument}` for bad sizes or missing
/// fp8 scales, `Error{kCuda}` if the launch fails.
template <class KV, class In>
void append_paged_kv(cuda backend, const PagedKVView<KV>& kv, const std::int64_t* slot_mapping,
                     std::int32_t num_tokens, const In* k, const In* v) {
  static_assert(
      std::is_same_v<In, float> || std::is_same_v<In, float16> || std::is_same_v<In, bfloat16>,
      "append_paged_kv reads float, float16 or bfloat16 K/V");
  constexpr bool kFp8 = std::is_same_v<KV, float8_e4m3> || std::is_same_v<KV, float8_e5m2>;
  static_assert(kFp8 || std::is_same_v<KV, float16> || std::is_same_v<KV, bfloat16>,
                "CUDA append_paged_kv writes float16, bfloat16, float8_e4m3 or float8_e5m2 KV");
  check_arg(num_tokens >= 0, ErrorCode::kInvalidArgument, "num_tokens", num_tokens,
            "must be >=", 0);
  check_arg(kv.head_dim >= 8 && kv.head_dim % 8 == 0, ErrorCode::kInvalidArgument, "kv.head_dim",
            kv.head_dim, "must be a positive multiple of", 8);
  if (num_tokens == 0) return;
  detail::check_pointer(slot_mapping != nullptr && k != nullptr && v != nullptr, "slot_mapping/k/v",
                        "must point to num_tokens rows in device memory");
  if constexpr (kFp8) {
    detail::check_pointer(kv.k_scale != nullptr && kv.v_scale != nullptr, "kv.k_scale/v_scale",
                          "must point to the fp8 block scales");
    const std::int64_t threads = std::int64_t{num_tokens} * kv.num_kv_heads * 32;
    const auto blocks = static_cast<unsigned>((threads + detail::cuda::kAppendThreads - 1) /
                                              detail::cuda::kAppendThreads);
    detail::cuda::append_fp8_kernel<KV, In>
        <<<blocks, detail::cuda::kAppendThreads, 0, backend.stream>>>(kv, slot_mapping, num_tokens,
                                                                      k, v);
  } else {
    const std::int64_t threads = std::int64_t{num_tokens} * kv.num_kv_heads * kv.head_dim / 8;
    const auto blocks = static_cast<unsigned>((threads + detail::cuda::kAppendThreads - 1) /
                                              detail::cuda::kAppendThreads);
    detail::cuda::append_kv16_kernel<KV, In>
        <<<blocks, detail::cuda::kAppendThreads, 0, backend.stream>>>(kv, slot_mapping, num_tokens,
                                                                      k, v);
  }
  detail::check_launch("append_paged_kv");
}

}  // namespace inferkit
